//! Where an assignment's task runs. A policy gives a free slot on an agent to a job; the
//! reactor picks the job's first ready task of that kind, except that a task does not
//! retry on a node it already failed on while another node that takes work offers its
//! slot kind. So a bad node cannot burn all of a task's attempts.
//!
//! Decided here rather than in each policy: policies share slots between jobs, and this
//! rule is about tasks and nodes, which they do not see. For an assignment of agent A to
//! job J the reactor takes, in order:
//! 1. J's first ready task that may run on A;
//! 2. else (every ready task of J failed on A) J's first ready task, on another agent
//!    with a free slot that it may run on (the job keeps the slot the policy gave it;
//!    a later assignment that wanted that slot is then skipped, as any that no longer
//!    fits);
//! 3. else the first ready task of the earliest other job that may run on A, so a slot
//!    is not left idle behind retries that wait for other nodes (the one place where the
//!    reactor overrides a policy's choice of job);
//! 4. else nothing: the tasks wait for a node they have not failed on.
//!
//! `NodeHealth::retry_elsewhere` turns this off (the simulator does: its failures strike
//! at random, not by node).

use std::sync::Arc;

use slotmarket_common::ids::{AgentId, JobId, TaskId};
use slotmarket_common::spec::SlotKind;

use super::Ctx;
use crate::core::state::{State, kind_ix};

/// Takes the ready task of `job` that an assignment of `kind` on `agent` should start,
/// with the agent to start it on; `None` if none should start now.
pub(super) fn place(
    state: &mut State,
    cx: &Ctx,
    job: JobId,
    kind: SlotKind,
    agent: AgentId,
) -> Option<(TaskId, AgentId)> {
    if !has_room(state, agent, kind) {
        return None;
    }
    if !cx.health.retry_elsewhere {
        return Some((state.pop_ready(job, kind)?, agent));
    }
    let node = state.agents.get(&agent)?.node.clone();
    let j = state.jobs.get(&job)?;
    let first = *j.ready[kind_ix(kind)].first()?;
    let fits = |key: &(u32, u32)| !avoids(state, failed_on(state, job, *key), kind, &node);
    if fits(&first) {
        // The common case: the first ready task has never failed here.
        return Some((state.pop_ready(job, kind)?, agent));
    }
    if let Some(&key) = j.ready[kind_ix(kind)].iter().find(|key| fits(key)) {
        return Some((state.take_ready(job, kind, key)?, agent));
    }
    let elsewhere = state.free_agents[kind_ix(kind)].iter().copied().find(|&other| {
        state.agents.get(&other).is_some_and(|a| !failed_on(state, job, first).contains(&a.node))
    });
    if let Some(elsewhere) = elsewhere {
        return Some((state.take_ready(job, kind, first)?, elsewhere));
    }
    let (other, key) =
        state.ready_jobs[kind_ix(kind)].iter().filter(|&&other| other != job).find_map(|&other| {
            let ready = &state.jobs.get(&other)?.ready[kind_ix(kind)];
            let key = ready.iter().find(|key| !avoids(state, failed_on(state, other, **key), kind, &node))?;
            Some((other, *key))
        })?;
    Some((state.take_ready(other, kind, key)?, agent))
}

/// Whether `agent` takes work and has a free slot of `kind`.
fn has_room(state: &State, agent: AgentId, kind: SlotKind) -> bool {
    state.agents.get(&agent).is_some_and(|a| a.takes_work() && a.free(kind) > 0)
}

/// The nodes the task at `key` (stage, index) of `job` failed on.
fn failed_on(state: &State, job: JobId, (stage, index): (u32, u32)) -> &[Arc<str>] {
    let nodes = state.jobs.get(&job).and_then(|j| j.failed_on.get(&(stage, index)));
    nodes.map_or(&[], Vec::as_slice)
}

/// Whether a task that failed on `failed_on` should keep off `node`: it failed there, and
/// some agent that takes work offers `kind` on a node it has not failed on (busy or not).
fn avoids(state: &State, failed_on: &[Arc<str>], kind: SlotKind, node: &Arc<str>) -> bool {
    failed_on.contains(node)
        && state
            .agents
            .values()
            .any(|a| a.takes_work() && a.offered[kind_ix(kind)] > 0 && !failed_on.contains(&a.node))
}
