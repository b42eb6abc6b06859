//! Jobs that run after other jobs (held pending, released when those complete, failed
//! when one does not) and time limits (tasks killed and the job failed once it has run
//! that long, counted from its first task's start, across a restart too).

use std::time::Duration;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{ErrorKind, JobState, Response};
use slotmarket_common::spec::{JobSpec, TimeLimit};
use slotmarket_common::time::Timestamp;

use super::builders::{JobBuilder, recovered};
use super::env::{TestEnv, bob};
use crate::core::CoreConfig;

fn after(jobs: &[JobId]) -> JobSpec {
    let mut spec = JobBuilder::maps(1).name("downstream").build();
    spec.after = jobs.to_vec();
    spec
}

fn limited(secs: u64) -> JobSpec {
    let mut spec = JobBuilder::maps(2).name("limited").build();
    spec.time_limit = Some(TimeLimit(Duration::from_secs(secs)));
    spec
}

#[test]
fn a_job_after_others_waits_until_all_of_them_completed() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 3, 0);
    let first = env.submit(JobBuilder::maps(1).build());
    let second = env.submit(JobBuilder::maps(1).build());
    let [a, b] = env.take_launches(2).try_into().unwrap();
    let waiting = env.submit(after(&[first, second]));
    // A free slot, and still nothing for the held job.
    env.assert_no_commands();
    assert_eq!(env.status(waiting).summary.state, JobState::Pending);

    env.finish(a.container);
    env.assert_no_commands();
    env.finish(b.container);
    let [launch] = env.take_launches(1).try_into().unwrap();
    assert_eq!(launch.task.job, waiting);
    assert!(env.take_changed().contains(&waiting));
    env.finish(launch.container);
    assert_eq!(env.status(waiting).summary.state, JobState::Completed);
    env.take_persists();
    env.take_changed();
    env.assert_no_commands();
}

#[test]
fn a_job_after_one_that_fails_or_is_cancelled_fails_saying_which() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let upstream = env.submit(JobBuilder::maps(1).build());
    let middle = env.submit(after(&[upstream]));
    let last = env.submit(after(&[middle]));
    let [running] = env.take_launches(1).try_into().unwrap();
    assert!(matches!(env.cancel_as(super::env::alice(), upstream), Response::Cancelled { .. }));
    env.take_kills(1);
    env.report(running.container, ContainerState::Killed);
    let status = env.status(middle);
    assert_eq!(status.summary.state, JobState::Failed);
    assert_eq!(status.message.as_deref(), Some("job j1 it runs after cancelled"));
    // The chain fails through: `last` waited for `middle`.
    assert_eq!(env.status(last).message.as_deref(), Some("job j2 it runs after failed"));

    // Submitted after its upstream already failed: admitted, and failed at once.
    let late = env.submit(after(&[middle]));
    assert_eq!(env.status(late).summary.state, JobState::Failed);
    // After one that already completed: runs at once.
    let done = env.submit(JobBuilder::maps(1).build());
    let [l] = env.take_launches(1).try_into().unwrap();
    env.finish(l.container);
    env.submit(after(&[done]));
    env.take_launches(1);
}

#[test]
fn after_must_name_a_job_the_submitter_may_see() {
    let mut env = TestEnv::new();
    let alices = env.submit(JobBuilder::maps(1).build());
    for (spec, who) in [(after(&[alices]), bob()), (after(&[JobId(99)]), super::env::alice())] {
        match env.submit_as(who, spec) {
            Response::Error(e) => {
                assert_eq!(e.kind, ErrorKind::BadRequest);
                assert!(e.message.starts_with("after: no job j"), "{}", e.message);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn a_recovered_job_waits_only_for_recovered_unended_jobs() {
    let mut env = TestEnv::new();
    // j1 ended before the restart (not recovered): it completed. j2 still runs.
    env.recover(recovered(2, JobBuilder::maps(1).build(), JobState::Pending));
    let mut spec = after(&[JobId(1), JobId(2)]);
    spec.name = "held".into();
    env.recover(recovered(3, spec, JobState::Pending));
    env.join_agent("n1", 2, 0);
    let [l] = env.take_launches(1).try_into().unwrap();
    assert_eq!(l.task.job, JobId(2));
    env.finish(l.container);
    let [l] = env.take_launches(1).try_into().unwrap();
    assert_eq!(l.task.job, JobId(3));
}

#[test]
fn a_time_limit_kills_the_tasks_and_fails_the_job_from_its_start() {
    // Agents that never fall silent, so only the time limit acts on the clock.
    let mut env = TestEnv::with_config(CoreConfig { agent_timeout: Duration::MAX, ..CoreConfig::default() });
    env.join_agent("n1", 1, 0);
    let job = env.submit(limited(60));
    // The clock starts when the first task runs (30 s after it was placed), not at submit.
    let [first] = env.take_launches(1).try_into().unwrap();
    assert_eq!(env.core.state().waits.next_expiry(), None);
    env.advance(30);
    env.start(first.container);
    let expiry = env.now + Duration::from_secs(60);
    assert_eq!(env.core.state().waits.next_expiry(), Some(expiry));
    assert!(env.core.next_wakeup().is_some_and(|at| at <= expiry));
    env.advance(59);
    env.tick();
    env.assert_no_commands();
    env.advance(1);
    env.tick();
    let [(_, killed, why)] = env.take_kills(1).try_into().unwrap();
    assert_eq!(killed, first.container);
    assert!(why.contains("failed"), "{why}");
    let status = env.status(job);
    assert_eq!(status.summary.state, JobState::Failed);
    assert_eq!(status.message.as_deref(), Some("time limit 1m reached; its running tasks were killed"));
    assert_eq!(env.core.state().waits.next_expiry(), None);
}

#[test]
fn a_job_that_ends_in_time_leaves_no_limit_behind() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    let job = env.submit(limited(60));
    let launches = env.take_launches(2);
    for launch in &launches {
        env.finish(launch.container);
    }
    assert_eq!(env.status(job).summary.state, JobState::Completed);
    env.advance(61);
    env.tick();
    assert_eq!(env.status(job).summary.state, JobState::Completed);
}

#[test]
fn a_recovered_job_keeps_counting_from_its_stored_start() {
    let mut env = TestEnv::new();
    let mut stored = recovered(4, limited(60), JobState::Running);
    stored.started = Some(Timestamp(env.now.0 - 50_000));
    env.recover(stored);
    assert_eq!(env.core.next_wakeup(), Some(Timestamp(env.now.0 + 10_000)));
    env.advance(10);
    env.tick();
    assert_eq!(env.status(JobId(4)).summary.state, JobState::Failed);
}
