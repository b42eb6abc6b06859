//! Node scenarios: agents that leave, admins draining nodes, retries that avoid the node
//! a task failed on, and quarantine of nodes whose tasks keep failing fast.

use std::time::Duration;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::AttemptId;
use slotmarket_common::protocol::{DrainCause, ErrorKind, JobState, Response};

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, root};
use crate::core::{CoreConfig, NodeHealth};

#[test]
fn a_leaving_agents_tasks_run_elsewhere_at_once_and_count_no_failure() {
    let mut env = TestEnv::new();
    let n1 = env.join_agent("n1", 2, 0);
    let n2 = env.join_agent("n2", 4, 0);
    let job = env.submit(JobBuilder::maps(4).max_attempts(1).build());
    let launches = env.take_launches_on(4);
    for (_, launch) in &launches {
        env.start(launch.container);
    }
    let on_n1: Vec<_> = launches.iter().filter(|(a, _)| *a == n1).map(|(_, l)| l.clone()).collect();
    assert_eq!(on_n1.len(), 2, "{launches:#?}");

    env.leave("n1");
    // No kill: the agent kills its own tasks. Their tasks start on n2 in the same step.
    let reruns = env.take_launches_on(2);
    assert!(reruns.iter().all(|(a, l)| *a == n2 && l.attempt == AttemptId(2)), "{reruns:#?}");
    let mut rerun_tasks: Vec<_> = reruns.iter().map(|(_, l)| l.task).collect();
    rerun_tasks.sort();
    assert_eq!(rerun_tasks, on_n1.iter().map(|l| l.task).collect::<Vec<_>>());
    assert_eq!(env.status(job).stages[0].failed_attempts, 0);
    let node = env.core.view().nodes().into_iter().find(|n| n.agent == n1).expect("n1 listed");
    assert_eq!((node.draining, node.map_used), (Some(DrainCause::Leaving), 0));

    // Its kills are reported afterwards: late, ignored, still not counted.
    for launch in &on_n1 {
        env.report(launch.container, ContainerState::Killed);
    }
    assert_eq!(env.core.view().ignored_reports(), 2);
    // A new job does not go to the leaving agent.
    env.submit(JobBuilder::maps(1).build());
    env.assert_no_commands();

    // It disconnects and is forgotten at once, with no timeout to wait for.
    env.disconnect("n1");
    assert_eq!(env.core.view().nodes().iter().map(|n| n.agent).collect::<Vec<_>>(), vec![n2]);
    assert_eq!(env.core.next_wakeup(), Some(env.now + Duration::from_millis(10_001)));
    for (_, launch) in launches.iter().filter(|(a, _)| *a == n2).chain(&reruns) {
        env.finish(launch.container);
    }
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    assert_eq!(env.status(job).stages[0].failed_attempts, 0);
    // The waiting job gets the freed slot on n2.
    assert_eq!(env.take_launches_on(1)[0].0, n2);
    env.assert_no_commands();
}

#[test]
fn an_admin_drained_node_gets_no_new_work_and_its_running_tasks_finish() {
    let mut env = TestEnv::new();
    let n1 = env.join_agent("n1", 1, 0);
    let n2 = env.join_agent("n2", 1, 0);
    let job = env.submit(JobBuilder::maps(3).build());
    let first = env.take_launches_on(2);
    let on_n1 = first.iter().find(|(a, _)| *a == n1).expect("one on n1").1.clone();

    let refused = env.drain_as(alice(), "n1", true);
    assert!(matches!(refused, Response::Error(ref e) if e.kind == ErrorKind::Forbidden), "{refused:?}");
    let unknown = env.drain_as(root(), "n9", true);
    assert!(matches!(unknown, Response::Error(ref e) if e.kind == ErrorKind::NotFound), "{unknown:?}");
    let Response::Node(node) = env.drain_as(root(), "n1", true) else { panic!("no node reply") };
    assert_eq!((node.agent, node.draining, node.map_used), (n1, Some(DrainCause::Admin), 1));

    // Its running task is not killed; it completes, and the third task waits for n2.
    env.finish(on_n1.container);
    env.assert_no_commands();
    let on_n2 = first.iter().find(|(a, _)| *a == n2).expect("one on n2").1.clone();
    env.finish(on_n2.container);
    let third = env.take_launches_on(1).remove(0);
    assert_eq!(third.0, n2);

    // A new registration of the drained node is drained too, until an admin undrains it.
    env.join_agent("n1", 1, 0);
    assert_eq!(env.take_drops(1), vec![n1]);
    let n1_again = env.agent("n1");
    env.submit(JobBuilder::maps(1).build());
    env.assert_no_commands();
    let Response::Node(node) = env.drain_as(root(), "n1", false) else { panic!("no node reply") };
    assert_eq!((node.agent, node.draining), (n1_again, None));
    assert_eq!(env.take_launches_on(1)[0].0, n1_again);
    env.finish(third.1.container);
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    env.assert_no_commands();
}

#[test]
fn a_failed_task_retries_on_another_node_and_waits_for_one_if_needed() {
    let mut env = TestEnv::new();
    let n1 = env.join_agent("n1", 1, 0);
    let n2 = env.join_agent("n2", 1, 0);
    let job = env.submit(JobBuilder::maps(3).build());
    let first = env.take_launches_on(2);
    assert_eq!((first[0].0, first[1].0), (n1, n2));
    let (t0, t1) = (first[0].1.clone(), first[1].1.clone());
    env.start(t1.container);

    // t0 fails on n1; n1's slot goes to the fresh t2, not back to t0.
    env.run_to(t0.container, ContainerState::Failed);
    let next = env.take_launches_on(1).remove(0);
    assert_eq!(next.0, n1);
    assert_ne!(next.1.task, t0.task);
    // t2 fails on n1 as well; both retries wait for n2 rather than go back to n1.
    env.run_to(next.1.container, ContainerState::Failed);
    env.assert_no_commands();
    env.finish(t1.container);
    let retry = env.take_launches_on(1).remove(0);
    assert_eq!((retry.0, retry.1.task, retry.1.attempt), (n2, t0.task, AttemptId(2)));
    env.finish(retry.1.container);
    let retry = env.take_launches_on(1).remove(0);
    assert_eq!((retry.0, retry.1.task), (n2, next.1.task));
    env.finish(retry.1.container);
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    env.assert_no_commands();
}

#[test]
fn a_retry_offered_the_node_it_failed_on_moves_to_a_free_one() {
    let mut env = TestEnv::new();
    let n1 = env.join_agent("n1", 1, 0);
    let n2 = env.join_agent("n2", 1, 0);
    env.submit(JobBuilder::maps(1).build());
    let first = env.take_launches_on(1).remove(0);
    assert_eq!(first.0, n1);
    // Both nodes are free; FIFO offers n1 first, the retry takes n2.
    env.run_to(first.1.container, ContainerState::Failed);
    let retry = env.take_launches_on(1).remove(0);
    assert_eq!((retry.0, retry.1.attempt), (n2, AttemptId(2)));
    // Failed on every node: it may run anywhere again.
    env.run_to(retry.1.container, ContainerState::Failed);
    let third = env.take_launches_on(1).remove(0);
    assert_eq!((third.0, third.1.attempt), (n1, AttemptId(3)));
    env.assert_no_commands();
}

#[test]
fn the_last_failure_names_the_node_and_what_the_agent_said() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(1).max_attempts(1).build());
    let launch = env.take_launches(1).remove(0);
    let mut failed = env.report_of(launch.container, ContainerState::Failed);
    failed.exit_code = Some(127);
    failed.message = Some("stderr: sh: 1: slotmarket-task: not found".into());
    env.start(launch.container);
    env.report_raw(env.agent("n1"), failed);
    let message = env.status(job).message.expect("a failure message");
    assert_eq!(
        message,
        "task j1.s0.t0 failed 1 of 1 attempts; the last, on node n1, ended with exit code 127: \
         stderr: sh: 1: slotmarket-task: not found"
    );
}

fn quarantine_env() -> TestEnv {
    let node_health = NodeHealth {
        fast_failures: 3,
        fast_failure_within: Duration::from_secs(2),
        quarantine_for: Duration::from_secs(60),
        retry_elsewhere: true,
    };
    // No loss by silence: the test waits out a quarantine without heartbeats.
    let config = CoreConfig { node_health, agent_timeout: Duration::MAX, ..CoreConfig::default() };
    let mut env = TestEnv::with_config(config);
    env.join_agent("bad", 2, 0);
    env.join_agent("good", 2, 0);
    env
}

#[test]
fn a_node_whose_tasks_of_several_jobs_fail_fast_is_quarantined_for_a_while() {
    let mut env = quarantine_env();
    let (bad, good) = (env.agent("bad"), env.agent("good"));
    let a = env.submit(JobBuilder::maps(3).build());
    let b = env.submit(JobBuilder::maps(3).build());
    let launches = env.take_launches_on(4);
    let on_bad: Vec<_> = launches.iter().filter(|(x, _)| *x == bad).map(|(_, l)| l.clone()).collect();
    assert!(on_bad.iter().all(|l| l.task.job == a), "{launches:#?}");
    // Two of a's tasks fail fast on `bad`: a streak of one job only.
    for launch in &on_bad {
        env.run_to(launch.container, ContainerState::Failed);
    }
    // Its free slots go to a's fresh task and then to b (a's retries wait for `good`).
    let next = env.take_launches_on(2);
    assert!(next.iter().all(|(x, _)| *x == bad), "{next:#?}");
    assert!(next.iter().any(|(_, l)| l.task.job == b), "{next:#?}");
    let node = env.core.view().nodes().remove(0);
    assert_eq!(node.quarantine, None);
    env.run_to(next[0].1.container, ContainerState::Failed);
    let node = env.core.view().nodes().remove(0);
    let quarantine = node.quarantine.expect("bad is quarantined");
    assert_eq!(quarantine.until, env.now + Duration::from_secs(60));
    assert!(
        quarantine.reason.contains("3 tasks of several jobs") && quarantine.reason.contains("exit code 1")
    );
    env.assert_no_commands();

    // Quarantined: its running task finishes, but it gets nothing new.
    env.finish(next[1].1.container);
    env.assert_no_commands();
    let on_good: Vec<_> = launches.iter().filter(|(x, _)| *x == good).map(|(_, l)| l.clone()).collect();
    env.finish(on_good[0].container);
    assert_eq!(env.take_launches_on(1)[0].0, good);
    assert_eq!(env.core.next_wakeup(), Some(quarantine.until));

    env.advance(60);
    env.tick();
    assert_eq!(env.core.view().nodes()[0].quarantine, None);
    // The retries waiting for `good` still keep off `bad`; a new job's tasks may use it.
    env.assert_no_commands();
    env.submit(JobBuilder::maps(2).build());
    let fresh = env.take_launches_on(2);
    assert!(fresh.iter().all(|(x, _)| *x == bad), "{fresh:#?}");
    assert_eq!(env.status(a).summary.state, JobState::Running);
}

#[test]
fn one_broken_job_failing_fast_everywhere_quarantines_no_node() {
    let mut env = quarantine_env();
    let job = env.submit(JobBuilder::maps(4).max_attempts(4).build());
    for _ in 0..12 {
        let launches = env.take_all_launches();
        if launches.is_empty() {
            break;
        }
        for launch in launches {
            env.run_to(launch.container, ContainerState::Failed);
        }
    }
    assert_eq!(env.status(job).summary.state, JobState::Failed);
    assert!(env.core.view().nodes().iter().all(|n| n.quarantine.is_none()));
}

#[test]
fn undrain_lifts_a_quarantine_and_slow_failures_do_not_count() {
    let mut env = quarantine_env();
    let bad = env.agent("bad");
    env.submit(JobBuilder::maps(2).build());
    env.submit(JobBuilder::maps(2).build());
    let launches = env.take_launches_on(4);
    let on_bad: Vec<_> = launches.iter().filter(|(x, _)| *x == bad).map(|(_, l)| l.clone()).collect();
    // A task that ran for longer than `fast_failure_within` before failing says nothing.
    env.start(on_bad[0].container);
    env.advance(3);
    env.report(on_bad[0].container, ContainerState::Failed);
    assert_eq!(env.core.state().agents[&bad].streak.count, 0);
    env.run_to(on_bad[1].container, ContainerState::Failed);
    assert_eq!(env.core.state().agents[&bad].streak.count, 1);

    let Response::Node(node) = env.drain_as(root(), "bad", false) else { panic!("no node reply") };
    assert_eq!((node.draining, node.quarantine), (None, None));
    assert_eq!(env.core.state().agents[&bad].streak.count, 0);
}
