//! The history of ended jobs the core keeps in memory: the latest runs of each job name,
//! bounded per name and in names, for estimators (MRM) and profiles (Jockey). The store
//! keeps the same bound on disk; the core rebuilds this from it at start-up.

use std::collections::{BTreeMap, VecDeque};

use slotmarket_common::protocol::{JobHistory, StageHistory};
use slotmarket_common::time::Timestamp;

use super::state::{Job, kind_ix};
use slotmarket_common::spec::SlotKind;

/// How much history to keep.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct HistoryLimits {
    /// Runs kept per job name, newest first; 0 keeps no history at all.
    pub per_name: usize,
    /// Job names kept; past this the name first recorded longest ago is forgotten.
    pub names: usize,
}

impl Default for HistoryLimits {
    fn default() -> HistoryLimits {
        HistoryLimits { per_name: 20, names: 10_000 }
    }
}

/// Recent runs by job name.
#[derive(Debug, Default)]
pub(crate) struct History {
    limits: HistoryLimits,
    /// Runs per name, oldest first.
    by_name: BTreeMap<String, VecDeque<JobHistory>>,
    /// Names in the order they were first recorded, to forget the oldest.
    order: VecDeque<String>,
}

impl History {
    /// An empty history bounded by `limits`.
    pub(crate) fn new(limits: HistoryLimits) -> History {
        History { limits, ..History::default() }
    }

    /// The bound in force.
    pub(crate) fn limits(&self) -> HistoryLimits {
        self.limits
    }

    /// Adds a run, dropping the oldest of its name and the oldest name past the bounds.
    pub(crate) fn record(&mut self, run: JobHistory) {
        if self.limits.per_name == 0 || self.limits.names == 0 {
            return;
        }
        let runs = match self.by_name.get_mut(&run.name) {
            Some(runs) => runs,
            None => {
                if self.order.len() >= self.limits.names {
                    if let Some(oldest) = self.order.pop_front() {
                        self.by_name.remove(&oldest);
                    }
                }
                self.order.push_back(run.name.clone());
                self.by_name.entry(run.name.clone()).or_default()
            }
        };
        runs.push_back(run);
        while runs.len() > self.limits.per_name {
            runs.pop_front();
        }
    }

    /// The kept runs of `name`, oldest first.
    pub(crate) fn runs(&self, name: &str) -> impl Iterator<Item = &JobHistory> {
        self.by_name.get(name).into_iter().flatten()
    }

    /// Every kept run, by name then oldest first.
    pub(crate) fn all(&self) -> impl Iterator<Item = &JobHistory> {
        self.by_name.values().flatten()
    }
}

/// The history record of `job`, which ended at `finished`.
pub(crate) fn record_of(job: &Job, finished: Timestamp) -> JobHistory {
    let stages = job
        .spec
        .stages
        .iter()
        .zip(&job.stages)
        .map(|(spec, stage)| StageHistory {
            name: spec.name.clone(),
            slot: spec.slot,
            run_ms: stage.tasks.iter().map(|t| t.run_ms).collect(),
            attempts: stage.tasks.iter().map(|t| t.attempt.0).collect(),
        })
        .collect();
    JobHistory {
        job: job.id,
        name: job.spec.name.clone(),
        account: job.account.clone(),
        class: job.spec.class,
        state: job.state,
        submitted: job.submitted,
        started: job.started,
        finished,
        deadline: job.deadline,
        input_bytes: job.spec.input_bytes,
        slot_ms: [job.slot_ms[kind_ix(SlotKind::Map)], job.slot_ms[kind_ix(SlotKind::Reduce)]],
        stages,
    }
}

/// For tests: a completed run of job `job` named `name`, alice's, submitted at 0 and
/// finished at 1 ms, with no stages; tests override the fields they are about.
#[cfg(test)]
pub(crate) fn completed_run(job: u64, name: &str) -> JobHistory {
    use slotmarket_common::ids::{AccountId, JobId};
    use slotmarket_common::protocol::JobState;
    JobHistory {
        job: JobId(job),
        name: name.into(),
        account: AccountId("alice".into()),
        class: None,
        state: JobState::Completed,
        submitted: Timestamp(0),
        started: None,
        finished: Timestamp(1),
        deadline: None,
        input_bytes: None,
        slot_ms: [0, 0],
        stages: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(job: u64, name: &str) -> JobHistory {
        JobHistory { finished: Timestamp(job), ..completed_run(job, name) }
    }

    fn jobs_of(history: &History, name: &str) -> Vec<u64> {
        history.runs(name).map(|r| r.job.0).collect()
    }

    #[test]
    fn each_name_keeps_its_newest_runs() {
        let mut history = History::new(HistoryLimits { per_name: 2, names: 10 });
        for (job, name) in [(1, "wc"), (2, "sort"), (3, "wc"), (4, "wc")] {
            history.record(run(job, name));
        }
        assert_eq!(jobs_of(&history, "wc"), vec![3, 4]);
        assert_eq!(jobs_of(&history, "sort"), vec![2]);
        assert_eq!(history.all().count(), 3);
    }

    #[test]
    fn past_the_name_bound_the_first_recorded_name_goes() {
        let mut history = History::new(HistoryLimits { per_name: 5, names: 2 });
        for (job, name) in [(1, "a"), (2, "b"), (3, "a"), (4, "c")] {
            history.record(run(job, name));
        }
        assert_eq!(jobs_of(&history, "a"), Vec::<u64>::new());
        assert_eq!(jobs_of(&history, "b"), vec![2]);
        assert_eq!(jobs_of(&history, "c"), vec![4]);
    }

    #[test]
    fn a_zero_bound_keeps_nothing() {
        let mut history = History::new(HistoryLimits { per_name: 0, names: 10 });
        history.record(run(1, "a"));
        assert_eq!(history.all().count(), 0);
    }
}
