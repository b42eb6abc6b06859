//! What a job waits for besides slots: other jobs it runs `after` (held pending until
//! they complete, failed if one does not) and its `time_limit` (its tasks killed and the
//! job failed once it has run that long). The state they need is [`JobWaits`].

use std::collections::{BTreeMap, BTreeSet};

use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::JobState;
use slotmarket_common::spec::{JobSpec, TimeLimit};
use slotmarket_common::time::Timestamp;

use super::{Ctx, jobs};
use crate::core::Caller;
use crate::core::command::KillReason;
use crate::core::state::State;

/// The dependencies and time limits of the jobs that have not ended.
#[derive(Debug, Default)]
pub(crate) struct JobWaits {
    /// For each job still held, the jobs it waits for that have not completed yet.
    pub(crate) blocked: BTreeMap<JobId, BTreeSet<JobId>>,
    /// For each job something waits for, the jobs waiting (the reverse of `blocked`).
    dependents: BTreeMap<JobId, Vec<JobId>>,
    /// When each started job with a time limit runs out, earliest first. Entries of jobs
    /// that ended meanwhile stay until their time and are skipped then.
    time_limits: BTreeSet<(Timestamp, JobId)>,
}

impl JobWaits {
    /// The earliest time limit still to check, for `Core::next_wakeup`.
    pub(crate) fn next_expiry(&self) -> Option<Timestamp> {
        self.time_limits.first().map(|&(at, _)| at)
    }
}

/// Refuses a submit whose `after` names a job the caller cannot see or the master no
/// longer holds in memory (ended longer ago than its retention).
pub(super) fn check_after(state: &State, caller: &Caller, spec: &JobSpec) -> Result<(), String> {
    for dep in &spec.after {
        if !state.jobs.get(dep).is_some_and(|j| jobs::may_see(caller, j)) {
            return Err(format!(
                "after: no job {dep} that you may wait for (ended jobs are only kept for a while; \
                 drop it if it completed long ago)"
            ));
        }
    }
    Ok(())
}

/// Holds a newly admitted job until the jobs it runs after complete, or releases its
/// first stages now; fails it at once if one of them already failed or was cancelled.
pub(super) fn hold_or_release(state: &mut State, cx: &mut Ctx, job: JobId) {
    let Some(j) = state.jobs.get(&job) else { return };
    let mut pending = BTreeSet::new();
    for &dep in &j.spec.after {
        match state.jobs.get(&dep).map(|d| d.state) {
            Some(JobState::Completed) => {}
            Some(ended) if ended.is_terminal() => return fail_for(state, cx, job, dep, ended),
            Some(_) => {
                pending.insert(dep);
            }
            // Checked at submit; gone only if it ended and was dropped in this very step.
            None => return fail_for(state, cx, job, dep, JobState::Failed),
        }
    }
    hold(state, job, pending);
}

/// Holds a recovered job on those of its `after` jobs that were recovered unended. One
/// not recovered had ended before the restart: it completed, since a failure would have
/// failed this job in the same step, durably.
pub(super) fn hold_recovered(state: &mut State, job: JobId) {
    let Some(j) = state.jobs.get(&job) else { return };
    let pending = j
        .spec
        .after
        .iter()
        .copied()
        .filter(|dep| state.jobs.get(dep).is_some_and(|d| !d.state.is_terminal()))
        .collect();
    hold(state, job, pending);
}

fn hold(state: &mut State, job: JobId, pending: BTreeSet<JobId>) {
    if pending.is_empty() {
        return state.release_stages(job);
    }
    for &dep in &pending {
        state.waits.dependents.entry(dep).or_default().push(job);
    }
    state.waits.blocked.insert(job, pending);
}

/// After `job` ended in `to`: releases the jobs it was the last wait of, or fails every
/// job waiting for it when it did not complete. Forgets `job`'s own waits.
pub(super) fn job_ended(state: &mut State, cx: &mut Ctx, job: JobId, to: JobState) {
    if let Some(deps) = state.waits.blocked.remove(&job) {
        for dep in deps {
            if let Some(waiting) = state.waits.dependents.get_mut(&dep) {
                waiting.retain(|&w| w != job);
                if waiting.is_empty() {
                    state.waits.dependents.remove(&dep);
                }
            }
        }
    }
    let Some(waiting) = state.waits.dependents.remove(&job) else { return };
    for dependent in waiting {
        if to != JobState::Completed {
            fail_for(state, cx, dependent, job, to);
            continue;
        }
        let Some(left) = state.waits.blocked.get_mut(&dependent) else { continue };
        left.remove(&job);
        if left.is_empty() {
            state.waits.blocked.remove(&dependent);
            state.release_stages(dependent);
            cx.changed(dependent);
        }
    }
}

fn fail_for(state: &mut State, cx: &mut Ctx, job: JobId, dep: JobId, how: JobState) {
    if state.jobs.get(&job).is_none_or(|j| j.state.is_terminal()) {
        return;
    }
    let message = format!("job {dep} it runs after {}", how.name());
    jobs::end_job(state, cx, job, JobState::Failed, Some(message), KillReason::JobFailed);
}

/// Starts the clock of a job with a time limit that started running at `started`.
pub(super) fn start_time_limit(state: &mut State, job: JobId, started: Timestamp) {
    let Some(limit) = state.jobs.get(&job).and_then(|j| j.spec.time_limit) else { return };
    state.waits.time_limits.insert((started + std::time::Duration::from_millis(limit.millis()), job));
}

/// Fails every running job whose time limit has passed, killing its tasks.
pub(super) fn expire_time_limits(state: &mut State, cx: &mut Ctx) {
    while let Some(&(at, job)) = state.waits.time_limits.first() {
        if at > cx.now {
            break;
        }
        state.waits.time_limits.pop_first();
        let Some(j) = state.jobs.get(&job).filter(|j| !j.state.is_terminal()) else { continue };
        let limit = j.spec.time_limit.map_or_else(String::new, |l: TimeLimit| l.to_string());
        let message = format!("time limit {limit} reached; its running tasks were killed");
        jobs::end_job(state, cx, job, JobState::Failed, Some(message), KillReason::JobFailed);
    }
}
