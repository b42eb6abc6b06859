//! Failure scenarios: retries, kills, stale reports and agents that go silent.

use std::time::Duration;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::AttemptId;
use slotmarket_common::protocol::JobState;

use super::builders::JobBuilder;
use super::env::TestEnv;
use crate::core::{CoreConfig, Persist};

#[test]
fn a_failing_task_is_retried_until_max_attempts_then_the_job_fails() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    let job = env.submit(JobBuilder::maps(2).max_attempts(3).build());
    let l = env.take_launches(2);
    let (mut failing, other) = (l[0].clone(), l[1].clone());
    env.start(other.container);
    for attempt in 1..3 {
        assert_eq!(failing.attempt, AttemptId(attempt));
        env.run_to(failing.container, ContainerState::Failed);
        let retry = env.take_launches(1).remove(0);
        assert_eq!(retry.task, failing.task);
        assert!(retry.container > failing.container, "a retry gets a new container");
        failing = retry;
    }
    assert_eq!(env.status(job).stages[0].failed_attempts, 2);
    env.take_persists();

    env.run_to(failing.container, ContainerState::Failed);
    let kills = env.take_kills(1);
    assert_eq!((kills[0].1, kills[0].2.as_str()), (other.container, "job failed"));
    let status = env.status(job);
    assert_eq!(status.summary.state, JobState::Failed);
    let message = status.message.expect("a failure message");
    assert!(message.contains("j1.s0.t0") && message.contains("exit code 1"), "{message}");
    let persisted = env.take_persists();
    assert!(persisted.iter().any(|p| matches!(p, Persist::JobState { state: JobState::Failed, .. })));

    // The kill lands: the slot is freed, nothing runs again.
    env.report(other.container, ContainerState::Killed);
    assert_eq!(env.core.view().nodes()[0].map_used, 0);
    assert_eq!(env.status(job).stages[0].running, 0);
    env.assert_no_commands();
}

#[test]
fn a_killed_report_requeues_without_using_up_an_attempt() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(1).max_attempts(1).build());
    let first = env.take_launches(1).remove(0);
    env.run_to(first.container, ContainerState::Killed);
    let second = env.take_launches(1).remove(0);
    assert_eq!((second.task, second.attempt), (first.task, AttemptId(2)));
    assert_eq!(env.status(job).stages[0].failed_attempts, 1);
    env.run_to(second.container, ContainerState::Killed);
    let third = env.take_launches(1).remove(0);
    env.finish(third.container);
    assert_eq!(env.core.view().job_state(job), Some(JobState::Completed));
    env.assert_no_commands();
}

#[test]
fn stale_and_misdirected_reports_are_ignored() {
    let mut env = TestEnv::new();
    let n1 = env.join_agent("n1", 1, 0);
    let n2 = env.join_agent("n2", 0, 0);
    let job = env.submit(JobBuilder::maps(1).build());
    let old = env.take_launches(1).remove(0);
    env.run_to(old.container, ContainerState::Killed);
    let new = env.take_launches(1).remove(0);
    env.take_persists();
    env.take_changed();
    let before = env.status(job);

    // The old container is gone: a late report about it changes nothing.
    let late = env.report_of(old.container, ContainerState::Completed);
    env.report_raw(n1, late);
    // Right container, but the attempt of the killed one.
    let mut stale = env.report_of(new.container, ContainerState::Acquired);
    stale.attempt = old.attempt;
    env.report_raw(n1, stale);
    // Right container and attempt, from an agent that does not hold it.
    env.report_raw(n2, env.report_of(new.container, ContainerState::Acquired));
    // A transition the lifecycle does not allow (Allocated straight to Completed).
    env.report(new.container, ContainerState::Completed);
    // A duplicate of the current state.
    env.report(new.container, ContainerState::Allocated);

    assert_eq!(env.core.view().ignored_reports(), 5);
    assert_eq!(env.status(job), before);
    assert!(env.take_persists().is_empty(), "ignored reports are not stored");
    assert!(env.take_changed().is_empty());
    env.finish(new.container);
    assert_eq!(env.core.view().job_state(job), Some(JobState::Completed));
    env.assert_no_commands();
}

#[test]
fn a_silent_agent_is_lost_and_its_tasks_run_elsewhere() {
    let mut env = TestEnv::new();
    let n1 = env.join_agent("n1", 1, 0);
    let n2 = env.join_agent("n2", 2, 0);
    let job = env.submit(JobBuilder::maps(2).max_attempts(1).build());
    let launches = env.take_launches_on(2);
    let on_n1 = launches.iter().find(|(a, _)| *a == n1).expect("one on n1").1.clone();
    env.start(on_n1.container);
    let joined = env.now;

    env.advance(6);
    env.heartbeat("n2");
    assert_eq!(env.core.next_wakeup(), Some(joined + Duration::from_millis(10_001)));
    env.advance(4);
    env.tick();
    env.assert_no_commands();

    env.advance_ms(1);
    env.tick();
    let kills = env.take_kills(1);
    assert_eq!((kills[0].0, kills[0].1), (n1, on_n1.container));
    assert_eq!(env.take_drops(1), vec![n1]);
    let rerun = env.take_launches_on(1).remove(0);
    assert_eq!((rerun.0, rerun.1.task, rerun.1.attempt), (n2, on_n1.task, AttemptId(2)));
    let status = env.status(job);
    assert_eq!((status.summary.state, status.stages[0].failed_attempts), (JobState::Running, 1));
    assert_eq!(env.core.view().nodes().len(), 1);
    env.assert_no_commands();
}

#[test]
fn a_disconnected_agent_gets_no_launches_and_is_lost_quietly() {
    let config = CoreConfig { agent_timeout: Duration::from_secs(30), ..CoreConfig::default() };
    let mut env = TestEnv::with_config(config);
    env.join_agent("n1", 1, 0);
    let n2 = env.join_agent("n2", 1, 0);
    env.submit(JobBuilder::maps(1).build());
    let first = env.take_launches_on(1).remove(0);
    assert_eq!(first.0, env.agent("n1"));
    env.disconnect("n1");
    env.submit(JobBuilder::maps(2).build());
    assert_eq!(env.take_launches_on(1)[0].0, n2);

    env.advance(31);
    env.heartbeat("n2");
    env.tick();
    // Lost while disconnected: nothing to kill or drop; its task waits for a slot.
    env.assert_no_commands();
    let node = env.core.view().nodes().remove(0);
    assert_eq!((node.agent, node.map_used), (n2, 1));
    assert_eq!(env.core.view().all_jobs(&super::env::alice())[0].tasks_running, 0);
}

#[test]
fn next_wakeup_follows_the_quietest_agent() {
    let mut env = TestEnv::new();
    assert_eq!(env.core.next_wakeup(), None);
    env.join_agent("n1", 1, 0);
    let t0 = env.now;
    env.advance(3);
    env.join_agent("n2", 1, 0);
    assert_eq!(env.core.next_wakeup(), Some(t0 + Duration::from_millis(10_001)));
    env.advance(3);
    env.heartbeat("n1");
    assert_eq!(env.core.next_wakeup(), Some(t0 + Duration::from_millis(13_001)));
}
