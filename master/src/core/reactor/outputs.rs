//! Outputs lost with a local-mode agent (Hadoop's behaviour). A task's output stays on
//! the node that completed it when that node's agent keeps its own data directory; when
//! the agent is lost (silent past the timeout, gone after leaving) or registers again
//! with another directory, the completed tasks whose outputs a later stage still needs
//! run again: not the whole job, and no failed attempt is counted. The later stages wait
//! for them again, and their running tasks (which would fail fetching) are killed and
//! requeued, again without counting an attempt. The store keeps which nodes are local
//! (`Persist::LocalNode`), so after a master restart a holder that does not come back
//! within the agent timeout, or comes back with another directory, loses them too.

use std::collections::BTreeSet;
use std::sync::Arc;

use slotmarket_common::ids::{ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::DataMode;
use slotmarket_common::time::Timestamp;

use super::Ctx;
use super::reports::requeue_container;
use crate::core::command::{KillReason, Persist};
use crate::core::state::{Agent, State, TaskPhase, kind_ix};

/// Whether replacing registration `old` by the node's current one (if any) loses the
/// outputs `old` held: it kept its own directory, and no registration of the node now
/// offers that same directory in local mode.
pub(super) fn lost_with(state: &State, old: &Agent) -> bool {
    if !matches!(old.data_mode, DataMode::Local { .. }) {
        return false;
    }
    let current = state.nodes.get(&*old.node).and_then(|a| state.agents.get(a));
    !current.is_some_and(|new| {
        matches!(new.data_mode, DataMode::Local { .. }) && new.data_dir_id == old.data_dir_id
    })
}

/// Records how `node` registered (`mode`, `dir_id`) and keeps the store's record of
/// local-mode nodes in step. A node the core held no registration of (the master
/// restarted) that was local with another directory, or is no longer local, has lost the
/// outputs recovery found on it: they run again.
pub(super) fn on_registered(
    state: &mut State,
    cx: &mut Ctx,
    node: &str,
    (mode, dir_id): (&DataMode, &str),
    had_registration: bool,
) {
    state.awaited_holders.remove(node);
    let local = matches!(mode, DataMode::Local { .. });
    let recorded = state.local_nodes.get(node);
    if recorded.map(String::as_str) == local.then_some(dir_id) {
        return;
    }
    if recorded.is_some() && !had_registration {
        rerun_outputs_on(state, cx, &Arc::from(node));
    }
    if local {
        state.local_nodes.insert(node.to_string(), dir_id.to_string());
    } else {
        state.local_nodes.remove(node);
    }
    let dir_id = local.then(|| dir_id.to_string());
    cx.persist(Persist::LocalNode { node: node.to_string(), dir_id });
}

/// After a restart, waits until `deadline` for the local-mode nodes holding outputs of
/// recovered job `job` that have not registered yet.
pub(super) fn await_holders_of(state: &mut State, job: JobId, deadline: Timestamp) {
    let Some(j) = state.jobs.get(&job) else { return };
    let nodes: BTreeSet<Arc<str>> = j
        .stages
        .iter()
        .flat_map(|s| &s.tasks)
        .filter(|t| t.phase == TaskPhase::Completed)
        .filter_map(|t| t.output_on.clone())
        .filter(|node| state.local_nodes.contains_key(&**node) && !state.nodes.contains_key(&**node))
        .collect();
    for node in nodes {
        state.awaited_holders.entry(node).or_insert(deadline);
    }
}

/// Re-runs the outputs of the awaited nodes whose time is up (see [`await_holders_of`]).
pub(super) fn on_tick(state: &mut State, cx: &mut Ctx) {
    let expired: Vec<Arc<str>> =
        state.awaited_holders.iter().filter(|(_, at)| cx.now >= **at).map(|(n, _)| n.clone()).collect();
    for node in expired {
        state.awaited_holders.remove(&node);
        if !state.nodes.contains_key(&*node) {
            rerun_outputs_on(state, cx, &node);
        }
    }
}

/// Re-runs, in every unfinished job, the completed tasks whose output was on `node` and
/// whose stage feeds a later stage not yet completed.
pub(super) fn rerun_outputs_on(state: &mut State, cx: &mut Ctx, node: &Arc<str>) {
    let jobs: Vec<JobId> = state.active.iter().copied().collect();
    for job in jobs {
        let stages = stages_to_rerun(state, job, node);
        for (stage, tasks) in stages {
            rerun_stage(state, cx, job, stage, &tasks, node);
        }
    }
}

/// The stages of `job` with completed tasks whose output was on `node` that a later,
/// unfinished stage still reads, each with those tasks' indices.
fn stages_to_rerun(state: &State, job: JobId, node: &str) -> Vec<(usize, Vec<u32>)> {
    let Some(j) = state.jobs.get(&job) else { return Vec::new() };
    let needed = |ix: usize| {
        j.stages.iter().enumerate().any(|(later, s)| s.after.contains(&ix) && !j.stage_done(later))
    };
    let mut stages = Vec::new();
    for (ix, stage) in j.stages.iter().enumerate() {
        let lost: Vec<u32> = (0..stage.tasks.len() as u32)
            .filter(|&i| {
                let t = &stage.tasks[i as usize];
                t.phase == TaskPhase::Completed && t.output_on.as_deref() == Some(node)
            })
            .collect();
        if !lost.is_empty() && needed(ix) {
            stages.push((ix, lost));
        }
    }
    stages
}

/// Puts `tasks` of `job`'s stage `ix` back to pending, makes every stage that reads it
/// wait again, and kills and requeues those stages' live tasks.
fn rerun_stage(state: &mut State, cx: &mut Ctx, job: JobId, ix: usize, tasks: &[u32], node: &Arc<str>) {
    let Some(j) = state.jobs.get_mut(&job) else { return };
    let stage_name = j.spec.stages.get(ix).map(|s| s.name.clone()).unwrap_or_default();
    let mut consumers_live: Vec<ContainerId> = Vec::new();
    for later in 0..j.stages.len() {
        if !j.stages[later].after.contains(&ix) {
            continue;
        }
        // Its barrier no longer holds: nothing of it is ready or runs until `ix` is done.
        j.stages[later].released = false;
        let k = kind_ix(j.stages[later].kind);
        j.ready[k].retain(|&(s, _)| s as usize != later);
        consumers_live.extend(j.stages[later].tasks.iter().filter_map(|t| match t.phase {
            TaskPhase::Live(c) => Some(c),
            _ => None,
        }));
    }
    let stage_id = StageId(ix as u32);
    for &index in tasks {
        let task = TaskId { job, stage: stage_id, index };
        j.set_phase(task, TaskPhase::Pending);
        if let Some(t) = j.task_mut(task) {
            (t.output_on, t.run_ms) = (None, None);
        }
    }
    cx.changed(job);
    cx.persist(Persist::OutputsLost {
        job,
        stage: stage_id,
        stage_name,
        tasks: tasks.to_vec(),
        node: node.clone(),
        at: cx.now,
    });
    for &index in tasks {
        state.requeue(TaskId { job, stage: stage_id, index });
    }
    let why = format!("its inputs on node {node} were lost; it runs again once they are made again");
    for container in consumers_live {
        requeue_container(state, cx, container, &why, Some(KillReason::InputsLost));
    }
}
