//! Rebuilding a job from the store after a master restart: completed tasks stay
//! completed, containers that were live become orphans waiting for their node's agent to
//! adopt them, everything else runs again. Id counters continue above what was stored.

use std::collections::BTreeMap;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{ContainerReport, EntryKind, JobState};
use slotmarket_common::spec::validate;
use slotmarket_common::time::Timestamp;

use super::agents::silence_deadline;
use super::{Ctx, jobs, outputs, waits};
use crate::core::command::KillReason;
use crate::core::event::{RecoveredJob, StoreRecovery};
use crate::core::state::{ContainerRec, Holder, Job, State, TaskPhase};

/// Restores one stored job. A job id seen before is a duplicate replay and is ignored.
/// The price `job` paid for its deadline, read from its account's ledger (replayed
/// before the jobs): the purchase entry was stored in the job's admission transaction.
fn purchase_of(state: &State, account: &AccountId, job: JobId) -> Option<(Credits, Credits)> {
    let entries = state.accounts.get(account)?.entries();
    entries.iter().rev().find_map(|e| match e.kind {
        EntryKind::DeadlinePurchase { job: j, .. } if j == job => {
            let paid = e.amount.checked_neg()?;
            Some((paid, paid))
        }
        _ => None,
    })
}

pub(super) fn on_job_recovered(state: &mut State, cx: &mut Ctx, stored: RecoveredJob) {
    let id = stored.id;
    if state.jobs.contains_key(&id) {
        return;
    }
    state.next_job = state.next_job.max(id.0 + 1);
    let max_container = stored.containers.iter().map(|(_, r)| r.container.0).max().unwrap_or(0);
    state.next_container = state.next_container.max(max_container + 1);

    let purchase = purchase_of(state, &stored.account, id);
    let mut job = Job::new(id, stored.account, stored.spec, stored.submitted);
    (job.owner, job.deadline, job.started) = (stored.owner, stored.deadline, stored.started);
    job.purchase = purchase;
    if stored.state.is_terminal() {
        (job.finished, job.message) = (stored.finished, stored.message);
    }
    job.state = match stored.state {
        JobState::Pending | JobState::Running if stored.started.is_some() => JobState::Running,
        JobState::Pending | JobState::Running => JobState::Pending,
        ended => ended,
    };
    let deadline = silence_deadline(cx.now, cx.agent_timeout);
    let live = restore_tasks(&mut job, stored.containers);
    let orphans = orphans(&mut job, live, deadline);
    let spec_problem = validate(&job.spec).err();
    let ended = job.state.is_terminal();
    state.insert_job(job);
    if ended {
        return jobs::retire(state, cx, id);
    }
    for (container, rec) in orphans {
        state.attach(container, rec);
    }
    if let Some(problem) = spec_problem {
        let message = format!("its stored spec is no longer valid: {problem}");
        return fail_unless_ended(state, cx, id, message);
    }
    if let Some(started) = state.jobs.get(&id).and_then(|j| j.started) {
        // The limit counts from the stored start: a restart does not reset it.
        waits::start_time_limit(state, id, started);
    }
    waits::hold_recovered(state, id);
    outputs::await_holders_of(state, id, deadline);
    settle(state, cx, id);
}

/// Takes the id counters and history the store kept: ids continue above every id ever
/// stored, so none is reused, and estimators see past runs.
pub(super) fn on_store_recovered(state: &mut State, recovery: StoreRecovery) {
    state.next_job = state.next_job.max(recovery.next_job.0);
    state.next_container = state.next_container.max(recovery.next_container.0);
    for run in recovery.history {
        state.history.record(run);
    }
    state.local_nodes.extend(recovery.local_nodes);
}

/// A container that was live when the master stopped: its node and last report.
type LiveAtStop = BTreeMap<TaskId, (ContainerId, String, ContainerReport)>;

/// Replays container outcomes (one last report per container, see
/// [`RecoveredJob::containers`]) onto the job's tasks (completions, failures, attempt
/// numbers) and returns the containers that were still live, per task.
fn restore_tasks(job: &mut Job, containers: Vec<(String, ContainerReport)>) -> LiveAtStop {
    let mut live: LiveAtStop = BTreeMap::new();
    for (node, report) in containers {
        let (container, task) = (report.container, report.task);
        if task.job != job.id {
            continue;
        }
        let Some(stage) = job.stages.get_mut(task.stage.0 as usize) else { continue };
        let Some(t) = stage.tasks.get_mut(task.index as usize) else { continue };
        t.attempt = t.attempt.max(report.attempt);
        match report.state {
            ContainerState::Completed => {
                // The node's agent says on registering whether it keeps its own disk
                // (then this is where the task's output is).
                t.output_on = Some(node.as_str().into());
                job.set_phase(task, TaskPhase::Completed);
            }
            ContainerState::Failed => {
                t.failures += 1;
                stage.failed_attempts += 1;
            }
            // A completed container whose output was lost (`Persist::OutputsLost`) keeps
            // its exit code 0: the task ran again, but no attempt failed.
            ContainerState::Killed if report.exit_code == Some(0) => {}
            ContainerState::Killed => stage.failed_attempts += 1,
            ContainerState::Allocated | ContainerState::Acquired | ContainerState::Running => {
                live.insert(task, (container, node, report));
            }
            ContainerState::New | ContainerState::Reserved => {}
        }
    }
    live
}

/// Orphan records for the live containers of each task's latest attempt, which wait for
/// their node until `deadline`. Ended jobs get none: their containers are killed if seen.
fn orphans(job: &mut Job, live: LiveAtStop, deadline: Timestamp) -> Vec<(ContainerId, ContainerRec)> {
    if job.state.is_terminal() {
        return Vec::new();
    }
    let mut orphans = Vec::new();
    for (task, (container, node, report)) in live {
        let current =
            job.task(task).is_some_and(|t| t.attempt == report.attempt && t.phase == TaskPhase::Pending);
        if !current {
            continue;
        }
        let Some(kind) = job.stages.get(task.stage.0 as usize).map(|s| s.kind) else { continue };
        job.set_phase(task, TaskPhase::Live(container));
        let holder = Holder::Orphan { node, deadline };
        let entered = (report.state, report.at);
        orphans.push((container, ContainerRec::new(task, report.attempt, kind, holder, entered)));
    }
    orphans
}

/// Finishes what the store may not have recorded before the restart: a job whose tasks
/// all completed, or one with a task that used up its attempts.
fn settle(state: &mut State, cx: &mut Ctx, id: JobId) {
    let Some(job) = state.jobs.get(&id) else { return };
    let max = job.spec.max_attempts();
    let exhausted = job.stages.iter().enumerate().find_map(|(s, stage)| {
        let (i, t) = stage
            .tasks
            .iter()
            .enumerate()
            .find(|(_, t)| t.failures >= max && t.phase == TaskPhase::Pending)?;
        Some((TaskId { job: id, stage: StageId(s as u32), index: i as u32 }, t.failures))
    });
    match exhausted {
        Some((task, failures)) => {
            let message = format!("task {task} failed {failures} of {max} attempts");
            fail_unless_ended(state, cx, id, message);
        }
        None => jobs::complete_if_done(state, cx, id),
    }
}

fn fail_unless_ended(state: &mut State, cx: &mut Ctx, id: JobId, message: String) {
    if state.jobs.get(&id).is_some_and(|j| !j.state.is_terminal()) {
        jobs::end_job(state, cx, id, JobState::Failed, Some(message), KillReason::JobFailed);
    }
}
