//! Reconnects and restarts: agents re-registering with live containers, and jobs
//! recovered from the store whose containers are adopted or, after the timeout, re-run.

use std::time::Duration;

use slotmarket_common::container::ContainerState::*;
use slotmarket_common::ids::{AttemptId, ContainerId, JobId};
use slotmarket_common::protocol::JobState;

use super::builders::{JobBuilder, recovered, report, task};
use super::env::{TestEnv, alice};
use crate::core::Persist;

#[test]
fn a_reconnecting_agent_keeps_its_running_containers() {
    let mut env = TestEnv::new();
    let old = env.join_agent("n1", 2, 0);
    let job = env.submit(JobBuilder::maps(3).build());
    let l = env.take_launches(2);
    env.start(l[0].container);
    env.start(l[1].container);
    env.disconnect("n1");

    // Back with the first container still running, the second gone, and one unknown.
    let kept = env.report_of(l[0].container, Running);
    let unknown = report(99, task(job, 0, 2), 1, Running, env.now);
    let new = env.join_agent_with("n1", 2, 0, vec![kept, unknown]);
    assert_eq!(env.take_kills(1), vec![(new, ContainerId(99), "unknown to the master".into())]);
    assert!(env.take_drops(0).is_empty(), "the old registration was already disconnected");
    // The unknown container holds the second slot until the agent says it is gone, so
    // nothing is launched into a slot the agent cannot give.
    env.take_launches_on(0);
    env.report_raw(new, report(99, task(job, 0, 2), 1, Killed, env.now));
    let rerun = env.take_launches_on(1).remove(0);
    assert_eq!((rerun.0, rerun.1.task, rerun.1.attempt), (new, l[1].task, AttemptId(2)));
    let nodes = env.core.view().nodes();
    assert_eq!((nodes.len(), nodes[0].agent, nodes[0].map_used), (1, new, 2));
    assert_ne!(old, new);

    // Reports about the adopted container now come from the new registration.
    env.report(l[0].container, Completed);
    assert_eq!(env.take_launches_on(1)[0].0, new);
    assert_eq!(env.status(job).stages[0].failed_attempts, 1);
    env.assert_no_commands();
}

#[test]
fn a_new_registration_drops_the_old_one_if_it_is_still_connected() {
    let mut env = TestEnv::new();
    let old = env.join_agent("n1", 1, 0);
    env.submit(JobBuilder::maps(1).build());
    let l = env.take_launches(1);
    env.start(l[0].container);
    let live = env.report_of(l[0].container, Running);
    env.join_agent_with("n1", 1, 0, vec![live]);
    assert_eq!(env.take_drops(1), vec![old]);
    env.assert_no_commands();
}

#[test]
fn an_adopted_container_may_be_several_states_ahead() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(1).build());
    let l = env.take_launches(1);
    env.disconnect("n1");
    // It ran and finished while the agent was away; it still lists it as its latest state.
    let done = env.report_of(l[0].container, Completed);
    env.join_agent_with("n1", 1, 0, vec![done]);
    assert_eq!(env.core.view().job_state(job), Some(JobState::Completed));
    env.assert_no_commands();
}

#[test]
fn a_task_that_finished_while_its_agent_was_away_is_not_run_again() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    let job = env.submit(JobBuilder::maps(2).build());
    let l = env.take_launches(2);
    env.start(l[0].container);
    env.start(l[1].container);
    env.disconnect("n1");
    // One task completed and one is still running; the agent lists both.
    let done = env.report_of(l[0].container, Completed);
    let running = env.report_of(l[1].container, Running);
    env.join_agent_with("n1", 2, 0, vec![running, done]);
    env.take_persists();
    let status = env.status(job);
    assert_eq!((status.stages[0].completed, status.stages[0].failed_attempts), (1, 0));
    env.report(l[1].container, Completed);
    assert_eq!(env.core.view().job_state(job), Some(JobState::Completed));
    env.take_persists();
    env.take_changed();
    env.assert_no_commands();
}

#[test]
fn a_finished_container_the_master_no_longer_knows_is_left_alone() {
    let mut env = TestEnv::new();
    let job = env.submit(JobBuilder::maps(1).build());
    let stale = report(42, task(job, 0, 0), 1, Completed, env.now);
    env.join_agent_with("n1", 1, 0, vec![stale]);
    // No kill for something that already ended, and its slot is free for the real task.
    env.take_kills(0);
    assert_eq!(env.take_launches(1)[0].task, task(job, 0, 0));
}

/// A map-reduce job (3 maps, 1 reduce) stored before a restart: t0 completed on n1,
/// t1 running on n1, t2 failed once on n2 and running again (attempt 2) on n2.
fn stored_job() -> crate::core::RecoveredJob {
    let mut job = recovered(7, JobBuilder::map_reduce(3, 1).build(), JobState::Running);
    let j = JobId(7);
    let at = slotmarket_common::time::Timestamp::from_secs(5);
    job.started = Some(at);
    job.containers = vec![
        ("n1".into(), report(10, task(j, 0, 0), 1, Completed, at)),
        ("n1".into(), report(11, task(j, 0, 1), 1, Running, at)),
        ("n2".into(), report(12, task(j, 0, 2), 1, Failed, at)),
        ("n2".into(), report(13, task(j, 0, 2), 2, Acquired, at)),
    ];
    job
}

#[test]
fn recovered_containers_are_adopted_when_their_node_returns() {
    let mut env = TestEnv::new();
    env.recover(stored_job());
    let job = JobId(7);
    let status = env.status(job);
    assert_eq!(
        (status.summary.state, status.stages[0].completed, status.stages[0].running),
        (JobState::Running, 1, 2)
    );
    assert_eq!(status.stages[0].failed_attempts, 1);

    let n1 = env.join_agent_with("n1", 2, 1, vec![report(11, task(job, 0, 1), 1, Running, env.now)]);
    let n2 = env.join_agent_with("n2", 1, 0, vec![report(13, task(job, 0, 2), 2, Running, env.now)]);
    env.assert_no_commands();
    env.report_raw(n1, report(11, task(job, 0, 1), 1, Completed, env.now));
    env.report_raw(n2, report(13, task(job, 0, 2), 2, Completed, env.now));
    let reduce = env.take_launches(1).remove(0);
    assert_eq!((reduce.task, reduce.container), (task(job, 1, 0), ContainerId(14)));
    env.finish(reduce.container);
    assert_eq!(env.core.view().job_state(job), Some(JobState::Completed));
    // Ids continue above what was recovered.
    assert_eq!(env.submit(JobBuilder::maps(1).build()), JobId(8));
    assert_eq!(env.take_launches(1)[0].container, ContainerId(15));
    env.assert_no_commands();
}

#[test]
fn recovered_containers_whose_node_never_returns_run_again_after_the_timeout() {
    let mut env = TestEnv::new();
    let recovered_at = env.now;
    env.recover(stored_job());
    let job = JobId(7);
    assert_eq!(env.core.next_wakeup(), Some(recovered_at + Duration::from_millis(10_001)));
    let n3 = env.join_agent("n3", 2, 1);
    env.assert_no_commands();

    env.advance(10);
    env.heartbeat("n3");
    env.advance_ms(1);
    env.take_persists();
    env.tick();
    let mut reruns: Vec<_> =
        env.take_launches_on(2).into_iter().map(|(a, l)| (a, l.task, l.attempt)).collect();
    reruns.sort();
    assert_eq!(reruns, vec![(n3, task(job, 0, 1), AttemptId(2)), (n3, task(job, 0, 2), AttemptId(3))]);
    let lost: Vec<_> = env
        .take_persists()
        .into_iter()
        .filter_map(|p| match p {
            Persist::Container { node, report } if report.state == Killed => {
                Some((node.to_string(), report.container))
            }
            _ => None,
        })
        .collect();
    assert_eq!(lost, vec![("n1".to_string(), ContainerId(11)), ("n2".to_string(), ContainerId(13))]);
    assert_eq!(env.status(job).stages[0].failed_attempts, 3);
    env.assert_no_commands();
}

#[test]
fn a_node_that_returns_without_a_recovered_container_loses_it_at_once() {
    let mut env = TestEnv::new();
    env.recover(stored_job());
    let n1 = env.join_agent("n1", 1, 0);
    let rerun = env.take_launches_on(1).remove(0);
    assert_eq!((rerun.0, rerun.1.task, rerun.1.attempt), (n1, task(JobId(7), 0, 1), AttemptId(2)));
    env.assert_no_commands();
}

#[test]
fn recovered_ended_jobs_are_listed_but_never_run() {
    let mut env = TestEnv::new();
    let mut stored = recovered(3, JobBuilder::maps(2).build(), JobState::Cancelled);
    stored.containers = vec![("n1".into(), report(5, task(JobId(3), 0, 0), 1, Running, env.now))];
    env.recover(stored);
    assert_eq!(env.core.view().all_jobs(&alice())[0].state, JobState::Cancelled);
    let n1 = env.join_agent_with("n1", 2, 0, vec![report(5, task(JobId(3), 0, 0), 1, Running, env.now)]);
    assert_eq!(env.take_kills(1), vec![(n1, ContainerId(5), "unknown to the master".into())]);
    assert_eq!(env.submit(JobBuilder::maps(1).build()), JobId(4));
    assert_eq!(env.take_launches(1)[0].container, ContainerId(6));
    env.assert_no_commands();
}

#[test]
fn a_recovered_job_whose_last_task_had_completed_is_completed() {
    let mut env = TestEnv::new();
    let mut stored = recovered(1, JobBuilder::maps(1).build(), JobState::Running);
    stored.containers = vec![("n1".into(), report(1, task(JobId(1), 0, 0), 1, Completed, env.now))];
    env.recover(stored);
    assert_eq!(env.core.view().job_state(JobId(1)), Some(JobState::Completed));
    let persisted = env.take_persists();
    assert!(
        matches!(
            &persisted[..],
            [
                Persist::JobState { state: JobState::Completed, tasks_completed: 1, .. },
                Persist::History { .. }
            ]
        ),
        "{persisted:?}"
    );
    env.assert_no_commands();
}

#[test]
fn a_container_cancelled_while_its_agent_was_away_is_killed_when_it_returns() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(1).build());
    let l = env.take_launches(1).remove(0);
    env.start(l.container);
    env.disconnect("n1");
    env.cancel_as(alice(), job);
    // Nobody to send the kill to yet; the container keeps its slot.
    env.assert_no_commands();

    let live = env.report_of(l.container, Running);
    let new = env.join_agent_with("n1", 1, 0, vec![live]);
    assert_eq!(env.take_kills(1), vec![(new, l.container, "its job has ended".into())]);
    assert_eq!(env.core.view().nodes()[0].map_used, 1);
    env.report(l.container, Killed);
    assert_eq!(env.core.view().nodes()[0].map_used, 0);
    assert_eq!(env.status(job).summary.state, JobState::Cancelled);
    env.assert_no_commands();
}
