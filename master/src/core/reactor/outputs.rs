//! Outputs lost with a local-mode agent (Hadoop's behaviour). A task's output stays on
//! the node that completed it when that node's agent keeps its own data directory; when
//! the agent is lost (silent past the timeout, gone after leaving) or registers again
//! with another directory, the completed tasks whose outputs a later stage still needs
//! run again: not the whole job, and no failed attempt is counted. The later stages wait
//! for them again, and their running tasks (which would fail fetching) are killed and
//! requeued, again without counting an attempt.

use std::sync::Arc;

use slotmarket_common::ids::{ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::DataMode;

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
