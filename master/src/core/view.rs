//! `CoreView`: read-only answers to status, listing and node queries, with the access
//! rule that users see only their own jobs and admins see every job.

use slotmarket_common::ids::JobId;
#[cfg(test)]
use slotmarket_common::protocol::JobState;
use slotmarket_common::protocol::{ErrorKind, ErrorReply, JobStatus, JobSummary, NodeSummary, StageStatus};

use super::Caller;
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
        if !caller.may_act_for(&j.account) {
            let message = format!("{caller} may not see {job}, which belongs to {}", j.account);
            return Err(ErrorReply::new(ErrorKind::Forbidden, message));
        }
        Ok(status(j))
    }

    /// The caller's jobs (every job for admins), oldest first.
    pub fn jobs(&self, caller: &Caller) -> Vec<JobSummary> {
        self.state.jobs.values().filter(|j| caller.may_act_for(&j.account)).map(summary).collect()
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
            let tasks = spec.tasks;
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
