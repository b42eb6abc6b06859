//! Where a stage's outputs are, for agents without a shared data directory: the answer
//! to an agent's `Locate` (which local-mode agent completed each task of a stage). A
//! task's output is on the node that completed it (`Task::output_on`); whether that node
//! keeps its own disk, and where its shuffle service listens, is what its current
//! registration said.

use std::collections::BTreeMap;

use slotmarket_common::ids::{AgentId, JobId};
use slotmarket_common::protocol::{DataMode, InputHolder, StageOutputs};

use super::state::{State, TaskPhase};

/// Which local-mode agent holds the output of each task of `job`'s stage `stage`, for
/// `agent`, which must run a live container of the job (the consumer fetching inputs).
/// Refused, with a reason the agent logs, for an unknown or ended job, an unknown stage,
/// or an agent that runs nothing of the job.
pub(crate) fn stage_outputs(
    state: &State,
    agent: AgentId,
    job: JobId,
    stage: &str,
) -> Result<StageOutputs, String> {
    let j = state.jobs.get(&job).ok_or_else(|| format!("no job {job}"))?;
    if j.state.is_terminal() {
        return Err(format!("job {job} has ended ({})", j.state));
    }
    let ix = j.spec.stage_index(stage).ok_or_else(|| format!("job {job} has no stage {stage:?}"))?;
    if !runs_a_container_of(state, agent, job) {
        return Err(format!("agent {agent} runs no container of job {job}"));
    }
    let mut outputs = StageOutputs::default();
    let mut index_of: BTreeMap<&str, u32> = BTreeMap::new();
    for task in &j.stages[ix].tasks {
        let node = task.output_on.as_deref().filter(|_| task.phase == TaskPhase::Completed);
        let holder = node.and_then(|node| {
            if let Some(&i) = index_of.get(node) {
                return Some(i);
            }
            let holder = local_holder(state, node)?;
            let i = u32::try_from(outputs.holders.len()).ok()?;
            outputs.holders.push(holder);
            index_of.insert(node, i);
            Some(i)
        });
        outputs.task_holder.push(holder);
    }
    Ok(outputs)
}

/// Whether `agent` holds a live (not draining) container of `job`.
fn runs_a_container_of(state: &State, agent: AgentId, job: JobId) -> bool {
    let Some(a) = state.agents.get(&agent) else { return false };
    a.containers
        .iter()
        .any(|c| state.containers.get(c).is_some_and(|rec| rec.task.job == job && !rec.draining))
}

/// `node`'s shuffle service, if its current registration keeps its own data directory.
/// `None` for a shared-mode node (the output is in the shared directory) and for a node
/// not registered now (after a master restart, until its agent returns).
fn local_holder(state: &State, node: &str) -> Option<InputHolder> {
    let agent = state.agents.get(state.nodes.get(node)?)?;
    match agent.data_mode {
        DataMode::Local { shuffle } => Some(InputHolder { node: node.to_string(), shuffle }),
        DataMode::Shared => None,
    }
}
