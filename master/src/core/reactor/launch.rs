//! Carrying out a policy's decisions: preemptions become kills, assignments become
//! containers (`Persist` of the `Allocated` state, then `Launch`). Decisions that no longer
//! fit the state (no free slot, no ready task) are skipped, so a policy cannot corrupt it.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AttemptId, ContainerId, TaskId};
use slotmarket_common::protocol::{ContainerReport, Launch};
use slotmarket_common::spec::TaskVars;

use super::reserve::Gate;
use super::{Ctx, placement, reports};
use crate::core::command::{Command, Persist};
use crate::core::policy::{Assignment, Decisions, Posting, Preemption};
use crate::core::state::{ContainerRec, Holder, Job, State, TaskPhase};

/// Applies ledger postings first (so the entries precede what they paid for), then
/// preemptions (they free nothing until the agent confirms), then assignments in the
/// order the policy gave them, refusing those that would eat into a reservation held for
/// other jobs. Hands back the emptied assignment buffer (see `Policy::recycle`).
pub(crate) fn apply_decisions(state: &mut State, cx: &mut Ctx, decisions: Decisions) -> Vec<Assignment> {
    let Decisions { mut assignments, preemptions, reservations, postings } = decisions;
    for posting in postings {
        post(state, cx, posting);
    }
    for preemption in preemptions {
        preempt(state, cx, preemption);
    }
    let mut gate = Gate::open(state, reservations);
    // Each launch is a `Persist` and a `Launch`.
    cx.reserve(2 * assignments.len());
    for assignment in assignments.drain(..) {
        if gate.as_ref().is_none_or(|g| g.allows(assignment.job, assignment.kind)) {
            launch(state, cx, assignment, gate.as_mut());
        }
    }
    assignments
}

/// Writes one posting to the ledger and the store. Postings to accounts that were never
/// created, and charges on an empty balance, are dropped: nothing is metered there.
fn post(state: &mut State, cx: &mut Ctx, posting: Posting) {
    let entry = match posting {
        Posting::Charge { account, amount, reason } => {
            state.accounts.charge_up_to(&account, amount, reason, cx.now).ok().flatten()
        }
        Posting::Income { account, amount, reason } => {
            state.accounts.credit_income(&account, amount, reason, cx.now).ok()
        }
    };
    if let Some(entry) = entry {
        cx.persist(Persist::Ledger(entry));
    }
}

/// Kills a live container so its slot can go elsewhere; its task is requeued without
/// counting an attempt once the agent reports `Killed`.
fn preempt(state: &mut State, cx: &mut Ctx, p: Preemption) {
    let Some(rec) = state.containers.get_mut(&p.container) else { return };
    let Holder::Agent(agent) = rec.holder else { return };
    if rec.draining || rec.kill_sent || !state.agents.get(&agent).is_some_and(|a| a.connected) {
        return;
    }
    rec.kill_sent = true;
    cx.push(Command::Kill { agent, container: p.container, reason: p.reason });
}

/// Starts the next ready task of the assignment's job and kind on its agent (or, for a
/// retry, on another; see `placement`).
fn launch(state: &mut State, cx: &mut Ctx, a: Assignment, gate: Option<&mut Gate>) {
    let Some((task, agent)) = placement::place(state, cx, a.job, a.kind, a.agent) else { return };
    // Placement may hand the slot to another job (a retry waiting for other nodes); that
    // job must be allowed the slot too.
    if let Some(gate) = gate {
        if task.job != a.job && !gate.allows(task.job, a.kind) {
            state.requeue(task);
            return;
        }
        gate.took(task.job, a.kind);
    }
    // Only the store's write names the node (placement checked that the agent is there).
    let node = if cx.persists_all() {
        let Some(agent) = state.agents.get(&agent) else { return };
        Some(agent.node.clone())
    } else {
        None
    };
    let container = state.alloc_container();
    let Some(job) = state.jobs.get_mut(&task.job) else { return };
    let Some(kind) = job.stages.get(task.stage.0 as usize).map(|stage| stage.kind) else { return };
    let Some(t) = job.task_mut(task) else { return };
    let attempt = AttemptId(t.attempt.0 + 1);
    t.attempt = attempt;
    job.set_phase(task, TaskPhase::Live(container));
    let job_started = job.started.is_some();
    if let Some(node) = node {
        let report = ContainerReport {
            container,
            task,
            attempt,
            state: ContainerState::Allocated,
            at: cx.now,
            exit_code: None,
            message: None,
        };
        cx.persist(Persist::Container { node, report });
    }
    // Built inside the command: a `Launch` built apart was copied twice on its way in.
    cx.push(Command::Launch { agent, launch: build_launch(job, task, attempt, container) });
    cx.changed(task.job);
    let holder = Holder::Agent(agent);
    // A start the core implies is written here, in the record's one look-up; the rest of
    // it waits for the end of the step (`start_launched`).
    let implied = cx.implied_starts.is_some();
    let entered = if implied { ContainerState::Running } else { ContainerState::Allocated };
    let rec = ContainerRec::new(task, attempt, kind, holder, (entered, cx.now));
    state.attach(container, rec);
    if implied {
        reports::launched_running(state, cx, agent, (container, task, attempt), job_started);
    }
}

/// The launch message for one attempt of `task`, a task of `job` (so its stage exists):
/// the stage's command template and its values.
fn build_launch(job: &Job, task: TaskId, attempt: AttemptId, container: ContainerId) -> Launch {
    let stage = &job.stages[task.stage.0 as usize];
    Launch {
        container,
        task,
        attempt,
        slot: stage.kind,
        command: stage.command.clone(),
        vars: TaskVars {
            job: task.job,
            stage: stage.name.clone(),
            task: task.index,
            tasks: job.stage_size(task.stage.0 as usize),
            attempt,
            input: job.spec.input.clone(),
            stage_tasks: job.stage_tasks.clone(),
        },
        account: job.account_name.clone(),
    }
}
