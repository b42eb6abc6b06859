//! Job-level handlers: submit and cancel requests, and the transitions of a job's life
//! (started, completed, failed, cancelled) that other handlers trigger.

use slotmarket_common::identity::Role;
use slotmarket_common::ids::{AccountId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{ErrorKind, JobState, Response};
use slotmarket_common::spec::{JobSpec, validate};
use slotmarket_common::time::Timestamp;

use super::{Ctx, waits};
use crate::core::command::{Command, KillReason, Persist};
use crate::core::history;
use crate::core::refusals::{check_deadline_ahead, deadline_of_ended_job};
use crate::core::state::{Holder, Job, State, TaskPhase};
use crate::core::view::no_such_job;
use crate::core::{Caller, RequestId};

/// Admits a valid job from a user or admin: `Persist(JobAdmitted)` then `Reply{Submitted}`,
/// so the acknowledgement follows the durable write; scheduling happens after.
pub(super) fn on_job_submitted(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    spec: JobSpec,
) {
    let account = match check_submit(state, cx, caller, &spec) {
        Ok(account) => account,
        Err((kind, message)) => return reply_error(cx, request, kind, message),
    };
    let deadline = spec.deadline.map(|d| d.resolve(cx.now));
    if let Some(Err(refusal)) = deadline.map(|at| check_deadline_ahead(at, cx.now)) {
        return cx.reply(request, Response::Error(refusal));
    }
    let job = admit(state, cx, caller, account, spec, deadline);
    cx.reply(request, Response::Submitted { job });
}

/// Whether `caller` may submit `spec`: their role, the spec, the account and the task
/// limits. Answers the account the job runs on, or the error to reply with.
pub(crate) fn check_submit(
    state: &State,
    cx: &Ctx,
    caller: &Caller,
    spec: &JobSpec,
) -> Result<AccountId, (ErrorKind, String)> {
    if !matches!(caller.role, Role::User | Role::Admin) {
        let message = format!("{caller} may not submit jobs; use a user or admin certificate");
        return Err((ErrorKind::Forbidden, message));
    }
    validate(spec).map_err(|e| (ErrorKind::BadRequest, e.to_string()))?;
    let account = spec.account.as_ref().map_or_else(|| caller.account(), |a| AccountId(a.clone()));
    if !state.accounts.may_submit_to(caller, &account) {
        let message = format!(
            "{caller} may not submit to account {account}; submit to your own or one you are a member of"
        );
        return Err((ErrorKind::Forbidden, message));
    }
    waits::check_after(state, caller, spec).map_err(|message| (ErrorKind::BadRequest, message))?;
    check_task_limits(state, cx, &account, spec).map_err(|message| (ErrorKind::BadRequest, message))?;
    Ok(account)
}

/// Admits a checked job with `deadline`: stores it (`Persist(JobAdmitted)`), adds it to
/// the state and releases its first stages. The caller replies.
pub(crate) fn admit(
    state: &mut State,
    cx: &mut Ctx,
    caller: &Caller,
    account: AccountId,
    spec: JobSpec,
    deadline: Option<Timestamp>,
) -> JobId {
    let job = state.alloc_job();
    let owner = caller.account();
    let submitted = cx.now;
    // The store's write needs its own copy of the spec; a driver without a store does
    // not pay for one.
    if cx.persists_all() {
        let (account, owner, spec) = (account.clone(), owner.clone(), Box::new(spec.clone()));
        cx.persist(Persist::JobAdmitted { job, account, owner, spec, submitted, deadline });
    }
    let mut j = Job::new(job, account, spec, submitted);
    (j.owner, j.deadline) = (owner, deadline);
    state.insert_job(j);
    waits::hold_or_release(state, cx, job);
    job
}

/// Cancels a job the caller may act for: kills its live containers, drops its pending
/// tasks and replies with the state it ends in (an ended job keeps its state). Another
/// account's job answers as an unknown id does.
pub(super) fn on_job_cancel_requested(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    job: JobId,
) {
    let Some(j) = state.jobs.get(&job).filter(|j| may_see(caller, j)) else {
        let response = Response::Error(no_such_job(job));
        return cx.reply(request, response);
    };
    if !j.state.is_terminal() {
        let message = format!("cancelled by {caller}");
        end_job(state, cx, job, JobState::Cancelled, Some(message), KillReason::Cancelled);
    }
    let now_state = state.jobs.get(&job).map_or(JobState::Cancelled, |j| j.state);
    cx.reply(request, Response::Cancelled { job, state: now_state });
}

/// Moves (or drops) a job's deadline: only for a job that has not ended, and only by
/// someone who may see it. Durable before it is acknowledged.
pub(super) fn on_deadline_set_requested(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    job: JobId,
    deadline: Option<Timestamp>,
) {
    let Some(j) = state.jobs.get_mut(&job).filter(|j| may_see(caller, j)) else {
        let response = Response::Error(no_such_job(job));
        return cx.reply(request, response);
    };
    if j.state.is_terminal() {
        return cx.reply(request, Response::Error(deadline_of_ended_job(job, j.state)));
    }
    j.deadline = deadline;
    cx.persist(Persist::Deadline { job, deadline });
    cx.changed(job);
    cx.reply(request, Response::DeadlineSet { job, deadline });
}

/// Refuses a job that would pass the master's task limits, naming the limit: its tasks
/// cost memory until it ends, so neither one job nor one account may take without bound.
fn check_task_limits(state: &State, cx: &Ctx, account: &AccountId, spec: &JobSpec) -> Result<(), String> {
    let tasks = spec.total_tasks();
    let limits = cx.task_limits;
    if tasks > limits.per_job {
        return Err(format!(
            "the job has {tasks} tasks, over the master's max_tasks_per_job of {}; split it into smaller jobs",
            limits.per_job
        ));
    }
    let queued = state.active_tasks_of(account);
    if queued.saturating_add(tasks) > limits.per_account {
        return Err(format!(
            "account {account} already has {queued} tasks in unfinished jobs; {tasks} more would pass the \
             master's max_queued_tasks_per_account of {}; wait for jobs to finish or cancel some",
            limits.per_account
        ));
    }
    Ok(())
}

fn reply_error(cx: &mut Ctx, request: RequestId, kind: ErrorKind, message: String) {
    cx.reply(request, Response::error(kind, message));
}

/// Records that a task of job `j` started running (the first time only) and answers
/// whether its time limit must start now, which the caller does with
/// `waits::start_time_limit` once it lets go of the job. Every report of a running or
/// completed task comes here, so the job is looked up once, by the caller.
// Inlined: every completion asks, and all but a job's first find it started.
#[inline]
pub(super) fn start(j: &mut Job, cx: &mut Ctx) -> bool {
    if j.started.is_some() || j.state.is_terminal() {
        return false;
    }
    j.started = Some(cx.now);
    j.state = JobState::Running;
    let tasks_completed = j.completed;
    cx.persist(Persist::JobState {
        job: j.id,
        state: JobState::Running,
        at: cx.now,
        message: None,
        tasks_completed,
    });
    cx.changed(j.id);
    j.spec.time_limit.is_some()
}

/// Completes the job if its last task just completed.
pub(super) fn complete_if_done(state: &mut State, cx: &mut Ctx, job: JobId) {
    if state.jobs.get(&job).is_some_and(all_done) {
        complete(state, cx, job);
    }
}

/// Whether every task of a job that has not ended has completed.
pub(super) fn all_done(j: &Job) -> bool {
    !j.state.is_terminal() && j.completed == j.total()
}

/// Ends a job whose every task completed (see [`all_done`]).
pub(super) fn complete(state: &mut State, cx: &mut Ctx, job: JobId) {
    // Every task completed, so nothing is live and the kill reason goes unused.
    end_job(state, cx, job, JobState::Completed, None, KillReason::JobEnded);
}

/// Ends a job in the terminal state `to`. Its live containers are detached from their
/// tasks: those on agents keep their slots until the agent confirms the kill sent here
/// (with `kill_reason`); recovered ones not yet adopted are forgotten, so if their node
/// shows up listing them they are unknown and get killed then.
pub(super) fn end_job(
    state: &mut State,
    cx: &mut Ctx,
    job: JobId,
    to: JobState,
    message: Option<String>,
    kill_reason: KillReason,
) {
    let Some(j) = state.jobs.get(&job) else { return };
    for (task, container) in live_tasks(j) {
        if let Some(j) = state.jobs.get_mut(&job) {
            j.set_phase(task, TaskPhase::Pending);
        }
        drain(state, cx, container, kill_reason);
    }
    state.clear_ready(job);
    let Some(j) = state.jobs.get_mut(&job) else { return };
    j.state = to;
    j.finished = Some(cx.now);
    j.message.clone_from(&message);
    let tasks_completed = j.completed;
    cx.persist(Persist::JobState { job, state: to, at: cx.now, message, tasks_completed });
    let keep_per_name = state.history.limits().per_name;
    if keep_per_name > 0 {
        let record = history::record_of(j, cx.now);
        if cx.persists.history() {
            state.history.record(record.clone());
            cx.persist(Persist::History { record: Box::new(record), keep_per_name });
        } else {
            state.history.record(record);
        }
    }
    cx.changed(job);
    state.deactivate(job);
    retire(state, cx, job);
    waits::job_ended(state, cx, job, to);
}

/// Keeps an ended job for status and watches until the retention passes, or drops it
/// now when there is none. Draining containers of a dropped job keep their records;
/// reports about them find no job and just free their slots.
pub(super) fn retire(state: &mut State, cx: &Ctx, job: JobId) {
    if cx.retention.is_zero() {
        state.jobs.remove(&job);
    } else {
        state.ended.push_back((cx.now + cx.retention, job));
    }
}

/// Drops the ended jobs whose retention has passed.
pub(super) fn drop_expired(state: &mut State, now: Timestamp) {
    while let Some(&(at, job)) = state.ended.front() {
        if at > now {
            break;
        }
        state.ended.pop_front();
        state.jobs.remove(&job);
    }
}

/// Whether `caller` may see and act on `job`: admins, and the user who submitted it.
pub(crate) fn may_see(caller: &Caller, job: &Job) -> bool {
    caller.may_act_for(&job.owner)
}

/// Every task of `job` that has a live container.
fn live_tasks(job: &Job) -> Vec<(TaskId, ContainerId)> {
    let mut live = Vec::new();
    for (s, stage) in job.stages.iter().enumerate() {
        if stage.live == 0 {
            continue;
        }
        for (i, task) in stage.tasks.iter().enumerate() {
            if let TaskPhase::Live(c) = task.phase {
                live.push((TaskId { job: job.id, stage: StageId(s as u32), index: i as u32 }, c));
            }
        }
    }
    live
}

/// Turns a live container into a draining one (kill sent if its agent is connected) or,
/// for an unadopted orphan, forgets it.
pub(super) fn drain(state: &mut State, cx: &mut Ctx, container: ContainerId, reason: KillReason) {
    let Some(rec) = state.containers.get_mut(&container) else { return };
    match rec.holder {
        Holder::Agent(agent) => {
            rec.draining = true;
            let connected = state.agents.get(&agent).is_some_and(|a| a.connected);
            if connected && !rec.kill_sent {
                rec.kill_sent = true;
                cx.push(Command::Kill { agent, container, reason });
            }
        }
        Holder::Orphan { .. } => {
            state.detach(container);
        }
    }
}
