//! `CoreView`: read-only answers to status, listing and node queries, with the access
//! rule that users see only their own jobs and admins see every job.

use slotmarket_common::ids::JobId;
#[cfg(test)]
use slotmarket_common::protocol::JobState;
use std::ops::Bound;

use slotmarket_common::protocol::{
    ErrorKind, ErrorReply, JobHistory, JobStatus, JobSummary, JobsQuery, NodeSummary, StageStatus,
};

use super::Caller;
use super::reactor::may_see;
use super::state::{Job, State, kind_ix};
use slotmarket_common::spec::SlotKind;

/// A borrowed, read-only look at the core.
#[derive(Clone, Copy, Debug)]
pub struct CoreView<'a> {
    state: &'a State,
}

impl<'a> CoreView<'a> {
    pub(crate) fn new(state: &'a State) -> CoreView<'a> {
        CoreView { state }
    }

    /// One job in detail: `NotFound` if there is no such job, `Forbidden` if the caller
    /// may not act for its owner.
    pub fn job_status(&self, job: JobId, caller: &Caller) -> Result<JobStatus, ErrorReply> {
        let j = self
            .state
            .jobs
            .get(&job)
            .ok_or_else(|| ErrorReply::new(ErrorKind::NotFound, format!("no job {job}")))?;
        if !may_see(caller, j) {
            let message = format!("{caller} may not see {job}, which belongs to {}", j.owner);
            return Err(ErrorReply::new(ErrorKind::Forbidden, message));
        }
        Ok(status(j))
    }

    /// Whether the core still holds `job` (ended jobs leave after their retention).
    pub fn has_job(&self, job: JobId) -> bool {
        self.state.jobs.contains_key(&job)
    }

    /// The jobs in memory that `query` selects and the caller may see, in the query's
    /// order from its cursor on. Ended jobs past their retention are not here: the server
    /// merges these with the store's.
    pub fn jobs<'q>(
        &self,
        caller: &'q Caller,
        query: &'q JobsQuery,
    ) -> impl Iterator<Item = JobSummary> + use<'a, 'q> {
        let range = match (query.after, query.newest_first) {
            (Some(after), false) => (Bound::Excluded(after), Bound::Unbounded),
            (Some(after), true) => (Bound::Unbounded, Bound::Excluded(after)),
            (None, _) => (Bound::Unbounded, Bound::Unbounded),
        };
        let jobs = self.state.jobs.range(range);
        let ordered: Box<dyn Iterator<Item = _>> =
            if query.newest_first { Box::new(jobs.rev()) } else { Box::new(jobs) };
        ordered.map(|(_, j)| j).filter(move |j| selects(query, caller, j)).map(summary)
    }

    /// The newest recorded runs the caller may see (all for admins; a user's own
    /// account's otherwise), of one name or every name, at most `limit`.
    pub fn history(&self, caller: &Caller, name: Option<&str>, limit: usize) -> Vec<JobHistory> {
        let mut runs: Vec<&JobHistory> = match name {
            Some(name) => self.state.history.runs(name).collect(),
            None => self.state.history.all().collect(),
        };
        runs.retain(|r| caller.may_act_for(&r.account));
        runs.sort_by_key(|r| std::cmp::Reverse((r.finished, r.job)));
        runs.into_iter().take(limit).cloned().collect()
    }

    /// Every agent registration, by id.
    pub fn nodes(&self) -> Vec<NodeSummary> {
        let map = kind_ix(SlotKind::Map);
        let reduce = kind_ix(SlotKind::Reduce);
        self.state
            .agents
            .iter()
            .map(|(&agent, a)| NodeSummary {
                agent,
                node: a.node.to_string(),
                connected: a.connected,
                map_slots: a.offered[map],
                map_used: a.used[map],
                reduce_slots: a.offered[reduce],
                reduce_used: a.used[reduce],
                last_seen: a.last_seen,
            })
            .collect()
    }

    /// Every job in memory the caller may see, oldest first.
    #[cfg(test)]
    pub(crate) fn all_jobs(&self, caller: &Caller) -> Vec<JobSummary> {
        let query = JobsQuery { newest_first: false, ..JobsQuery::default() };
        self.jobs(caller, &query).collect()
    }

    /// A job's state, without access checks.
    #[cfg(test)]
    pub(crate) fn job_state(&self, job: JobId) -> Option<JobState> {
        self.state.jobs.get(&job).map(|j| j.state)
    }

    /// Container reports dropped by fencing since start (wrong agent, stale attempt,
    /// unknown container, refused transition); the server logs it when it grows.
    pub fn ignored_reports(&self) -> u64 {
        self.state.ignored_reports
    }
}

/// Whether a listing `query` by `caller` includes `j`.
fn selects(query: &JobsQuery, caller: &Caller, j: &Job) -> bool {
    may_see(caller, j)
        && (query.states.is_empty() || query.states.contains(&j.state))
        && query.account.as_ref().is_none_or(|a| *a == j.account)
}

fn summary(j: &Job) -> JobSummary {
    JobSummary {
        id: j.id,
        name: j.spec.name.clone(),
        account: j.account.clone(),
        state: j.state,
        submitted: j.submitted,
        started: j.started,
        finished: j.finished,
        tasks_total: j.total(),
        tasks_completed: j.completed,
        tasks_running: j.live_total(),
        owner: j.owner.clone(),
        deadline: j.deadline,
    }
}

fn status(j: &Job) -> JobStatus {
    let ended = j.state.is_terminal();
    let stages = j
        .spec
        .stages
        .iter()
        .zip(&j.stages)
        .map(|(spec, stage)| {
            let tasks = stage.tasks.len() as u32;
            // Pending tasks of an ended job were dropped; they are not waiting for anything.
            let pending = if ended { 0 } else { tasks - stage.completed - stage.live };
            StageStatus {
                name: spec.name.clone(),
                slot: spec.slot,
                tasks,
                pending,
                running: stage.live,
                completed: stage.completed,
                failed_attempts: stage.failed_attempts,
            }
        })
        .collect();
    JobStatus { summary: summary(j), stages, message: j.message.clone() }
}
