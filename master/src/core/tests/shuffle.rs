//! Clusters without a shared data directory: where a stage's outputs are (`Locate`),
//! and the re-run of completed maps whose outputs were lost with a local-mode agent.

use std::collections::BTreeSet;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AgentId, JobId};
use slotmarket_common::protocol::{JobState, Launch, StageOutputs};

use super::builders::JobBuilder;
use super::env::TestEnv;
use crate::core::Persist;

/// The holders' node names of `outputs`, per task (`None`: not held by a local agent).
fn holders(outputs: &StageOutputs) -> Vec<Option<&str>> {
    let name = |i: &Option<u32>| i.map(|i| outputs.holders[i as usize].node.as_str());
    outputs.task_holder.iter().map(name).collect()
}

/// A local-mode cluster (n1, n2 with two map slots each, only n2 with reduce slots), a
/// map-reduce job of four maps and two reduces, every map completed (two on each node),
/// and the reduces running on n2. Returns the job and the running reduces.
fn maps_done_reduces_running(env: &mut TestEnv, local: bool) -> (JobId, Vec<Launch>) {
    if local {
        env.set_local("n1", "disk-1");
        env.set_local("n2", "disk-2");
    }
    env.join_agent("n1", 2, 0);
    env.join_agent("n2", 2, 2);
    let job = env.submit(JobBuilder::map_reduce(4, 2).build());
    for launch in env.take_launches(4) {
        env.finish(launch.container);
    }
    let reduces = env.take_launches_on(2);
    assert!(reduces.iter().all(|(a, _)| *a == env.agent("n2")), "{reduces:#?}");
    let reduces: Vec<Launch> = reduces.into_iter().map(|(_, l)| l).collect();
    for launch in &reduces {
        env.start(launch.container);
    }
    env.take_persists();
    (job, reduces)
}

/// Lets n1 pass the agent timeout while `alive` keeps beating, then ticks: n1 is lost
/// (and dropped, in case it still listens).
fn lose_n1_by_silence(env: &mut TestEnv, alive: &str) {
    let n1 = env.agent("n1");
    env.advance(6);
    env.heartbeat(alive);
    env.advance(6);
    env.heartbeat(alive);
    env.tick();
    assert_eq!(env.take_drops(1), vec![n1]);
}

/// The `OutputsLost` writes taken from the env, as (stage name, tasks, node).
fn outputs_lost(env: &mut TestEnv) -> Vec<(String, Vec<u32>, String)> {
    env.take_persists()
        .into_iter()
        .filter_map(|p| match p {
            Persist::OutputsLost { stage_name, tasks, node, .. } => {
                Some((stage_name, tasks, node.to_string()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn locate_names_the_local_agent_that_completed_each_task_and_refuses_strangers() {
    let mut env = TestEnv::new();
    env.set_local("n1", "disk-1");
    env.set_local("n2", "disk-2");
    env.set_local("n4", "disk-4");
    let n1 = env.join_agent("n1", 2, 0);
    let n2 = env.join_agent("n2", 3, 1);
    let shared = env.join_agent("n3", 1, 0);
    let stranger = env.join_agent("n4", 0, 0);
    let job = env.submit(JobBuilder::map_reduce(5, 1).build());
    let maps = env.take_launches_on(5);
    for (_, launch) in &maps[..4] {
        env.finish(launch.container);
    }
    let (running, running_map) = (maps[4].0, maps[4].1.clone());

    let outputs = env.core.view().stage_outputs(running, job, "map").expect("answered");
    let names = holders(&outputs);
    let local_agents: BTreeSet<AgentId> =
        maps[..4].iter().map(|(a, _)| *a).filter(|a| *a != shared).collect();
    assert_eq!(outputs.holders.len(), local_agents.len(), "one holder per node: {outputs:?}");
    for (agent, launch) in &maps[..4] {
        let expected = if *agent == n1 {
            Some("n1")
        } else if *agent == n2 {
            Some("n2")
        } else {
            None
        };
        assert_eq!(names[launch.task.index as usize], expected, "{launch:?} on {agent}");
    }
    assert_eq!(names[running_map.task.index as usize], None, "not completed yet");
    if local_agents.contains(&n1) {
        let n1_shuffle = outputs.holders.iter().find(|h| h.node == "n1").map(|h| h.shuffle);
        assert_eq!(n1_shuffle, Some("127.0.0.1:7000".parse().unwrap()));
    }

    let view = env.core.view();
    assert_eq!(view.stage_outputs(running, job, "nope").unwrap_err(), "job j1 has no stage \"nope\"");
    assert_eq!(view.stage_outputs(running, JobId(99), "map").unwrap_err(), "no job j99");
    let refused = view.stage_outputs(stranger, job, "map").unwrap_err();
    assert_eq!(refused, format!("agent {stranger} runs no container of job j1"));

    // Once every map is done the reduce's own agent asks, and every task has a holder
    // unless the shared-mode agent ran it.
    env.finish(running_map.container);
    let reduce = env.take_launches_on(1);
    assert_eq!(reduce[0].0, n2);
    let outputs = env.core.view().stage_outputs(n2, job, "map").expect("answered");
    let all = holders(&outputs);
    let on_shared = maps.iter().filter(|(a, _)| *a == shared).count();
    assert_eq!(all.iter().filter(|h| h.is_none()).count(), on_shared, "{all:?}");
    assert_eq!(all.len(), 5);
    env.assert_no_commands();
}

#[test]
fn a_lost_local_agents_maps_run_again_and_the_reduces_wait_then_the_job_completes() {
    let mut env = TestEnv::new();
    let (job, reduces) = maps_done_reduces_running(&mut env, true);
    let n2 = env.agent("n2");
    let lost_maps = env.status(job).stages[0].completed;
    assert_eq!(lost_maps, 4);

    lose_n1_by_silence(&mut env, "n2");
    // The running reduces are killed (they would fail fetching) and n1's two maps run
    // again on n2, in the same step.
    let kills = env.take_kills(2);
    assert!(kills.iter().all(|(a, _, why)| *a == n2 && why.contains("inputs were lost")), "{kills:#?}");
    let reruns = env.take_launches_on(2);
    assert!(reruns.iter().all(|(a, l)| *a == n2 && l.task.stage.0 == 0), "{reruns:#?}");
    let lost = outputs_lost(&mut env);
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!((lost[0].0.as_str(), lost[0].1.len(), lost[0].2.as_str()), ("map", 2, "n1"));
    let status = env.status(job);
    assert_eq!((status.stages[0].completed, status.stages[1].completed), (2, 0));
    assert_eq!((status.stages[0].failed_attempts, status.stages[1].failed_attempts), (0, 0));

    // The reduces' kills are confirmed late and ignored; they wait for the maps.
    for launch in &reduces {
        env.report(launch.container, ContainerState::Killed);
    }
    env.assert_no_commands();
    let (_, first) = &reruns[0];
    env.finish(first.container);
    env.assert_no_commands();
    env.finish(reruns[1].1.container);
    let again = env.take_launches_on(2);
    assert!(again.iter().all(|(_, l)| l.task.stage.0 == 1), "{again:#?}");
    let outputs = env.core.view().stage_outputs(n2, job, "map").expect("answered");
    assert_eq!(holders(&outputs), vec![Some("n2"); 4]);
    for (_, launch) in &again {
        env.finish(launch.container);
    }
    let status = env.status(job);
    assert_eq!(status.summary.state, JobState::Completed);
    assert_eq!((status.stages[0].failed_attempts, status.stages[1].failed_attempts), (0, 0));
    env.assert_no_commands();
}

#[test]
fn a_lost_shared_agent_leaves_completed_maps_alone() {
    let mut env = TestEnv::new();
    let (job, reduces) = maps_done_reduces_running(&mut env, false);
    lose_n1_by_silence(&mut env, "n2");
    env.assert_no_commands();
    assert!(outputs_lost(&mut env).is_empty());
    for launch in &reduces {
        env.finish(launch.container);
    }
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    env.assert_no_commands();
}

#[test]
fn a_local_agent_registering_again_with_its_directory_keeps_its_outputs() {
    let mut env = TestEnv::new();
    let (job, reduces) = maps_done_reduces_running(&mut env, true);
    env.disconnect("n1");
    env.advance(3);
    env.join_agent("n1", 2, 0);
    env.assert_no_commands();
    assert!(outputs_lost(&mut env).is_empty());
    let outputs = env.core.view().stage_outputs(env.agent("n2"), job, "map").expect("answered");
    let names = holders(&outputs);
    assert_eq!(names.iter().filter(|h| **h == Some("n1")).count(), 2, "{names:?}");
    assert!(outputs.holders.iter().any(|h| h.node == "n1"), "n1 still holds them: {outputs:?}");
    for launch in &reduces {
        env.finish(launch.container);
    }
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    env.assert_no_commands();
}

#[test]
fn a_local_agent_back_with_a_wiped_directory_has_its_maps_run_again() {
    let mut env = TestEnv::new();
    let (job, reduces) = maps_done_reduces_running(&mut env, true);
    env.disconnect("n1");
    env.advance(3);
    env.set_local("n1", "disk-1-new");
    env.join_agent("n1", 2, 0);
    let kills = env.take_kills(2);
    assert_eq!(
        kills.iter().map(|k| k.1).collect::<Vec<_>>(),
        reduces.iter().map(|l| l.container).collect::<Vec<_>>()
    );
    let reruns = env.take_launches_on(2);
    assert!(reruns.iter().all(|(_, l)| l.task.stage.0 == 0), "{reruns:#?}");
    assert_eq!(outputs_lost(&mut env).len(), 1);
    assert_eq!(env.status(job).stages[0].completed, 2);
    for (_, launch) in &reruns {
        env.finish(launch.container);
    }
    let again = env.take_launches_on(2);
    for (_, launch) in &again {
        env.finish(launch.container);
    }
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    assert_eq!(env.status(job).stages[0].failed_attempts, 0);
    env.assert_no_commands();
}

#[test]
fn a_leaving_local_agents_outputs_run_again_once_it_is_gone() {
    let mut env = TestEnv::new();
    let (job, reduces) = maps_done_reduces_running(&mut env, true);
    env.leave("n1");
    env.assert_no_commands();
    // Its shuffle service goes with it: the maps it ran are needed elsewhere.
    env.disconnect("n1");
    assert_eq!(env.take_kills(2).len(), reduces.len());
    let reruns = env.take_launches_on(2);
    assert!(reruns.iter().all(|(a, l)| *a == env.agent("n2") && l.task.stage.0 == 0), "{reruns:#?}");
    assert_eq!(outputs_lost(&mut env).len(), 1);
    assert_eq!(env.status(job).stages[1].failed_attempts, 0);
    env.assert_no_commands();
}

#[test]
fn outputs_no_later_stage_reads_are_not_run_again() {
    let mut env = TestEnv::new();
    env.set_local("n1", "disk-1");
    env.set_local("n2", "disk-2");
    let n1 = env.join_agent("n1", 2, 0);
    env.join_agent("n2", 2, 0);
    let job = env.submit(JobBuilder::maps(4).build());
    let launches = env.take_launches_on(4);
    for (_, launch) in launches.iter().filter(|(a, _)| *a == n1) {
        env.finish(launch.container);
    }
    env.take_persists();
    // n1's two maps completed: a single-stage job's outputs are its results, which
    // nothing in the job reads, so only n2's running maps matter.
    lose_n1_by_silence(&mut env, "n2");
    env.assert_no_commands();
    assert!(outputs_lost(&mut env).is_empty());
    assert_eq!(env.status(job).stages[0].completed, 2);
    for (_, launch) in launches.iter().filter(|(a, _)| *a != n1) {
        env.finish(launch.container);
    }
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    env.assert_no_commands();
}
