//! `edf` scenarios: deadline jobs by deadline ahead of best-effort ones, and no idle slot
//! while best-effort work waits.

use std::time::Duration;

use slotmarket_common::spec::{DeadlineSpec, JobSpec};

use super::builders::JobBuilder;
use super::env::TestEnv;
use crate::core::policy::Edf;

fn due_in(minutes: u64, tasks: u32) -> JobSpec {
    let mut spec = JobBuilder::maps(tasks).build();
    spec.deadline = Some(DeadlineSpec::In(Duration::from_secs(minutes * 60)));
    spec
}

#[test]
fn edf_runs_the_earliest_deadline_first_and_best_effort_after() {
    let mut env = TestEnv::with_policy(Box::new(Edf::default()));
    env.join_agent("n1", 1, 0);
    let best_effort = env.submit(JobBuilder::maps(2).build());
    let first = env.take_launches(1);
    assert_eq!(first[0].task.job, best_effort, "an idle slot goes to best-effort work");
    let late = env.submit(due_in(10, 1));
    let early = env.submit(due_in(5, 1));
    env.assert_no_commands();

    env.finish(first[0].container);
    let next = env.take_launches(1);
    assert_eq!(next[0].task.job, early, "the earlier deadline goes first, though admitted later");
    env.finish(next[0].container);
    let next = env.take_launches(1);
    assert_eq!(next[0].task.job, late);
    env.finish(next[0].container);
    let next = env.take_launches(1);
    assert_eq!((next[0].task.job, next[0].task.index), (best_effort, 1));
    env.finish(next[0].container);
    env.assert_no_commands();
}
