//! Container reports: fencing (right agent, current attempt, allowed transition), and what
//! each accepted transition, or the loss of a container, does to its task and job.

use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::time::Duration;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AgentId, AttemptId, ContainerId, TaskId};
use slotmarket_common::protocol::{ContainerReport, DrainCause, JobState};

use super::agents::release_stray;
use super::{Ctx, health, jobs, waits};
use crate::core::command::{Command, KillReason, Persist};
use crate::core::state::{ContainerRec, Holder, Job, State, TaskPhase, kind_ix};

/// Applies the reports an agent sent, oldest first, ignoring any that fail the fence.
pub(crate) fn on_container_reports(
    state: &mut State,
    cx: &mut Ctx,
    agent: AgentId,
    reports: impl ExactSizeIterator<Item = ContainerReport>,
) {
    let Some(a) = state.agents.get_mut(&agent) else {
        state.ignored_reports += reports.len() as u64;
        return;
    };
    a.last_seen = cx.now;
    // The fence makes this agent the holder of every report applied, so its node name
    // is looked up once per batch; it is lent, not cloned, per report (the reference
    // count's atomic updates were a third of this function's time in the simulator).
    let node = a.node.clone();
    for report in reports {
        // The fence, the transition's record and, for a terminal state, the record's
        // removal share one look-up of the container (a look-up each was two hashings
        // and probes per report, millions of them in the simulator). The table's order
        // is not relied on (see `SchedView::live_unordered`), so the entry's room for
        // an unknown container does not matter.
        let recorded = match state.containers.entry(report.container) {
            Entry::Occupied(mut entry) if passes_fence(entry.get(), agent, &report, cx.one_start_report) => {
                let recorded = record(entry.get_mut(), &report);
                let removed = report.state.is_terminal().then(|| entry.remove());
                Some((recorded, removed))
            }
            _ => None,
        };
        match recorded {
            Some((recorded, removed)) => carry_on(state, cx, report, &node, recorded, removed),
            None if !release_stray(state, agent, &report) => state.ignored_reports += 1,
            None => {}
        }
    }
}

/// A container a step launched and started at once (see `StartReports::Implied`), with
/// its task and attempt, on its agent.
pub(crate) type ImpliedStart = (AgentId, ContainerId, TaskId, AttemptId);

/// What `agent`'s `Running` report for `container`, just launched and recorded as running,
/// would do at once: the agent was heard from now. The rest of the report — the write, when
/// every write is wanted, and the job's start, when it has not started — waits for the end
/// of the step (`start_launched`), so the launch is listed only when there is such a rest
/// (`job_started`: whether its job had started before this step). Listing every launch and
/// starting each at the end was a fifth of a launch's cost in the simulator.
pub(super) fn launched_running(
    state: &mut State,
    cx: &mut Ctx,
    agent: AgentId,
    (container, task, attempt): (ContainerId, TaskId, AttemptId),
    job_started: bool,
) {
    if let Some(a) = state.agents.get_mut(&agent) {
        a.last_seen = cx.now;
    }
    let persists_all = cx.persists_all();
    if let Some(starts) = cx.implied_starts.as_mut().filter(|_| persists_all || !job_started) {
        starts.push((agent, container, task, attempt));
    }
}

/// Finishes the starts of the containers the step launched (see
/// [`launched_running`]), as their agents' `Running` reports at this instant would:
/// agents in id order, each agent's containers in launch order, as the simulator's
/// report batches came. Does nothing unless the core implies starts.
pub(crate) fn start_launched(state: &mut State, cx: &mut Ctx) {
    // Most steps list none: their jobs had started.
    let Some(starts) = cx.implied_starts.as_mut().filter(|starts| !starts.is_empty()) else { return };
    let mut starts = std::mem::take(starts);
    // Stable, so each agent's starts keep their order; usually one launch: sorted.
    if !starts.is_sorted_by_key(|(agent, ..)| *agent) {
        starts.sort_by_key(|(agent, ..)| *agent);
    }
    for (agent, container, task, attempt) in starts.drain(..) {
        start(state, cx, agent, container, (task, attempt));
    }
    cx.implied_starts = Some(starts);
}

/// The rest of `agent`'s `Running` report for `container`, launched in this step (see
/// [`launched_running`]; attached in this step, on `agent`, not draining: the fence would
/// pass the report). Building the report and fencing it cost twice as much per start,
/// and looking the record up again a hashed probe more.
fn start(
    state: &mut State,
    cx: &mut Ctx,
    agent: AgentId,
    container: ContainerId,
    (task, attempt): (TaskId, AttemptId),
) {
    let now = cx.now;
    if cx.persists_all() {
        let node = state.holder_node(&Holder::Agent(agent));
        let (exit_code, message) = (None, None);
        let report = ContainerReport {
            container,
            task,
            attempt,
            state: ContainerState::Running,
            at: now,
            exit_code,
            message,
        };
        cx.persist(Persist::Container { node, report });
    }
    task_running(state, cx, task, container);
}

/// A report counts only if `agent` holds the container `rec`, it names the container's
/// task and attempt, and the container may move to the reported state. Anything else is
/// late (an older attempt, a replaced registration) or a duplicate. With
/// `one_start_report`, `Running` may follow `Allocated`: the driver's agents report a
/// start once, for `Acquired` and `Running` at the same instant.
fn passes_fence(
    rec: &ContainerRec,
    agent: AgentId,
    report: &ContainerReport,
    one_start_report: bool,
) -> bool {
    rec.holder == Holder::Agent(agent)
        && rec.task == report.task
        && rec.attempt == report.attempt
        && (rec.state.can_become(report.state)
            || (one_start_report
                && rec.state == ContainerState::Allocated
                && report.state == ContainerState::Running))
}

/// What an accepted transition left on its container record, for the rest of its
/// handling (which needs the whole state, not the record).
struct Recorded {
    /// How long the process had run, if it had started.
    ran_for: Option<Duration>,
    /// Whether the container had not reached `Running` before this report.
    never_ran: bool,
    /// Whether the container's job had ended (only its slot is left to free).
    draining: bool,
    /// The container's task.
    task: TaskId,
    /// The agent that held the container, if an agent did (not an orphan's node): all
    /// the rest of the handling asks of the holder, without cloning it.
    agent: Option<AgentId>,
    /// Milliseconds from its start to this report, if it had started (or starts now).
    run_ms: Option<u64>,
}

/// Moves `rec` to the state `report` gives, noting what the rest of the handling needs.
fn record(rec: &mut ContainerRec, report: &ContainerReport) -> Recorded {
    // A failure before the process ran (spawn error) is as fast as failures come.
    let ran_for = rec.started.map(|since| report.at.saturating_since(since));
    let never_ran = rec.state < ContainerState::Running;
    if report.state == ContainerState::Running {
        rec.started = Some(report.at);
    }
    rec.state = report.state;
    rec.entered = report.at;
    let run_ms = rec.started.map(|s| report.at.0.saturating_sub(s.0));
    Recorded {
        ran_for,
        never_ran,
        draining: rec.draining,
        task: rec.task,
        agent: match rec.holder {
            Holder::Agent(agent) => Some(agent),
            Holder::Orphan { .. } => None,
        },
        run_ms,
    }
}

/// Records an accepted transition of a container held on `node` and persists it; a
/// terminal state frees the slot and decides the task's fate. Containers of ended jobs
/// (draining) only free their slot. Completions and failures also feed the health of
/// the agent that ran them (see `health`).
pub(super) fn apply_transition(state: &mut State, cx: &mut Ctx, report: ContainerReport, node: &Arc<str>) {
    let Some(rec) = state.containers.get_mut(&report.container) else { return };
    let recorded = record(rec, &report);
    carry_on(state, cx, report, node, recorded, None);
}

/// [`apply_transition`] after the container's record was updated: persists the
/// transition, frees the slot of a terminal one and decides the task's fate. `removed`:
/// the record of a terminal one if the caller already took it out of the table.
fn carry_on(
    state: &mut State,
    cx: &mut Ctx,
    report: ContainerReport,
    node: &Arc<str>,
    recorded: Recorded,
    removed: Option<ContainerRec>,
) {
    let Recorded { ran_for, never_ran, draining, task, agent, run_ms } = recorded;
    let (container, to) = (report.container, report.state);
    // Only a failure needs the report afterwards (its exit code and message).
    let failure = (to == ContainerState::Failed).then(|| report.clone());
    if cx.persists_all() {
        cx.persist(Persist::Container { node: node.clone(), report });
    }
    match removed {
        Some(rec) => release_removed(state, cx, container, &rec),
        None if to.is_terminal() => {
            release_slot(state, cx, container);
        }
        None => {}
    }
    if let (Some(agent), Some(failed)) = (agent, &failure) {
        let fast = never_ran || ran_for.is_some_and(|d| d <= cx.health.fast_failure_within);
        health::on_task_failed(state, cx, agent, failed, fast);
    } else if let (Some(agent), ContainerState::Completed) = (agent, to) {
        health::on_task_completed(state, agent);
    }
    if draining {
        return;
    }
    // Running and Completed, one per task each, check that the container runs the task's
    // current attempt on their own single look-up of the job.
    match (to, failure) {
        (ContainerState::Running, _) => task_running(state, cx, task, container),
        (ContainerState::Completed, _) => task_completed(state, cx, (task, container), run_ms, node),
        _ if !owns(state, task, container) => {}
        (ContainerState::Failed, Some(report)) => task_failed(state, cx, task, &report, node),
        (ContainerState::Killed, _) => {
            // A task its leaving agent handed back was nobody's failure.
            let counted = !agent.is_some_and(|a| is_leaving(state, a));
            task_interrupted(state, cx, task, counted);
        }
        _ => {}
    }
}

/// Whether `agent` told the master it is leaving.
fn is_leaving(state: &State, agent: AgentId) -> bool {
    state.agents.get(&agent).is_some_and(|a| a.drain == Some(DrainCause::Leaving))
}

/// Gives up on a container the core can no longer reach (its agent was lost or replaced,
/// or it was recovered and nobody adopted it): records it as killed with `why`, kills it
/// (for `kill`'s reason) if that is given and its agent is still connected, and re-runs
/// its task without counting an attempt against `max_attempts`. A container whose agent
/// is leaving is handed back rather than lost: not counted in `failed_attempts` either.
pub(super) fn lose_container(
    state: &mut State,
    cx: &mut Ctx,
    container: ContainerId,
    why: &str,
    kill: Option<KillReason>,
) {
    give_up(state, cx, container, (why, kill), true);
}

/// Like [`lose_container`], but the attempt is never recorded in `failed_attempts`: the
/// container was fine, the master takes it back (its inputs were lost elsewhere).
pub(super) fn requeue_container(
    state: &mut State,
    cx: &mut Ctx,
    container: ContainerId,
    why: &str,
    kill: Option<KillReason>,
) {
    give_up(state, cx, container, (why, kill), false);
}

/// Ends a container the core gives up on and re-runs its task; `countable`: whether the
/// attempt may count in `failed_attempts` (it does unless its agent was leaving).
fn give_up(
    state: &mut State,
    cx: &mut Ctx,
    container: ContainerId,
    (why, kill): (&str, Option<KillReason>),
    countable: bool,
) {
    let Some(rec) = state.containers.get(&container) else { return };
    let node = state.holder_node(&rec.holder);
    let handed_back = matches!(rec.holder, Holder::Agent(a) if is_leaving(state, a));
    let Some(rec) = release_slot(state, cx, container) else { return };
    let report = ContainerReport {
        container,
        task: rec.task,
        attempt: rec.attempt,
        state: ContainerState::Killed,
        at: cx.now,
        exit_code: None,
        message: Some(why.to_string()),
    };
    cx.persist(Persist::Container { node, report });
    if let (Holder::Agent(agent), Some(reason)) = (&rec.holder, kill) {
        if state.agents.get(agent).is_some_and(|a| a.connected) {
            cx.push(Command::Kill { agent: *agent, container, reason });
        }
    }
    if !rec.draining && owns(state, rec.task, container) {
        task_interrupted(state, cx, rec.task, countable && !handed_back);
    }
}

/// Removes a container that ended, adding the time it held its slot to its job's total.
fn release_slot(state: &mut State, cx: &Ctx, container: ContainerId) -> Option<ContainerRec> {
    let rec = state.containers.remove(&container)?;
    release_removed(state, cx, container, &rec);
    Some(rec)
}

/// [`release_slot`] of a container whose record `rec` was already taken out of the table.
fn release_removed(state: &mut State, cx: &Ctx, container: ContainerId, rec: &ContainerRec) {
    state.release_holder(container, rec);
    if let Some(job) = state.jobs.get_mut(&rec.task.job) {
        job.slot_ms[kind_ix(rec.kind)] += cx.now.0.saturating_sub(rec.allocated.0);
    }
}

/// Whether `container` runs the current attempt of `task`.
fn owns(state: &State, task: TaskId, container: ContainerId) -> bool {
    let phase = state.jobs.get(&task.job).and_then(|j| j.task(task)).map(|t| t.phase);
    phase == Some(TaskPhase::Live(container))
}

/// The job of `task`, if `container` runs the task's current attempt.
fn owned_job(state: &mut State, task: TaskId, container: ContainerId) -> Option<&mut Job> {
    let j = state.jobs.get_mut(&task.job)?;
    (j.task(task)?.phase == TaskPhase::Live(container)).then_some(j)
}

/// The task's process started: its job has started, if it had not.
fn task_running(state: &mut State, cx: &mut Ctx, task: TaskId, container: ContainerId) {
    let Some(j) = owned_job(state, task, container) else { return };
    if jobs::start(j, cx) {
        waits::start_time_limit(state, task.job, cx.now);
    }
}

/// `container` completed `task` if it runs its current attempt; `run_ms`: how long the
/// completing attempt ran, if its start was seen; `node`: where it ran, which holds its
/// output.
fn task_completed(
    state: &mut State,
    cx: &mut Ctx,
    (task, container): (TaskId, ContainerId),
    run_ms: Option<u64>,
    node: &Arc<str>,
) {
    let Some(j) = owned_job(state, task, container) else { return };
    // An adopted container may jump straight to Completed; the job still ran.
    let time_limit = jobs::start(j, cx);
    j.set_phase(task, TaskPhase::Completed);
    if let Some(t) = j.task_mut(task) {
        t.run_ms = run_ms;
        t.output_on = (!node.is_empty()).then(|| node.clone());
    }
    cx.changed(task.job);
    let (stage_done, all_done) = (j.stage_done(task.stage.0 as usize), jobs::all_done(j));
    if time_limit {
        waits::start_time_limit(state, task.job, cx.now);
    }
    if stage_done {
        state.release_stages(task.job);
    }
    if all_done {
        jobs::complete(state, cx, task.job);
    }
}

/// A failed attempt counts against `max_attempts`; the last one fails the job, with a
/// message naming the node it ran on and what the agent said (exit code, stderr tail).
/// The node is remembered so the retry goes elsewhere where it can (see `placement`).
fn task_failed(state: &mut State, cx: &mut Ctx, task: TaskId, report: &ContainerReport, node: &Arc<str>) {
    let Some(j) = state.jobs.get_mut(&task.job) else { return };
    let max = j.spec.max_attempts();
    if let Some(stage) = j.stages.get_mut(task.stage.0 as usize) {
        stage.failed_attempts += 1;
    }
    let Some(t) = j.task_mut(task) else { return };
    t.failures += 1;
    let failures = t.failures;
    if !node.is_empty() {
        let nodes = j.failed_on.entry((task.stage.0, task.index)).or_default();
        if !nodes.contains(node) {
            nodes.push(node.clone());
        }
    }
    cx.changed(task.job);
    if failures < max {
        state.requeue(task);
        return;
    }
    j.set_phase(task, TaskPhase::Pending);
    let how = failure_text(report);
    let message = format!(
        "task {task} failed {failures} of {max} attempts; the last, on node {node}, ended with {how}"
    );
    jobs::end_job(state, cx, task.job, JobState::Failed, Some(message), KillReason::JobFailed);
}

/// How a failed attempt ended, as one phrase: its exit code and the agent's message
/// (which carries the tail of the task's stderr).
pub(super) fn failure_text(report: &ContainerReport) -> String {
    match (report.exit_code, &report.message) {
        (Some(code), Some(message)) => format!("exit code {code}: {message}"),
        (Some(code), None) => format!("exit code {code}"),
        (None, Some(message)) => format!("no exit code ({message})"),
        (None, None) => "no exit code".to_string(),
    }
}

/// Killed or lost: the task runs again; the attempt is not held against it, and is
/// recorded in `failed_attempts` only if `counted` (a hand-back by a leaving agent is not).
fn task_interrupted(state: &mut State, cx: &mut Ctx, task: TaskId, counted: bool) {
    let Some(j) = state.jobs.get_mut(&task.job) else { return };
    if let Some(stage) = j.stages.get_mut(task.stage.0 as usize).filter(|_| counted) {
        stage.failed_attempts += 1;
    }
    cx.changed(task.job);
    state.requeue(task);
}
