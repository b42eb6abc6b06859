//! Task limits at submit (per job, per account over unfinished jobs) and what an ended
//! job keeps: its counts, not its per-task records.

use slotmarket_common::container::ContainerState;
use slotmarket_common::protocol::{ErrorKind, JobState, Response};

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob};
use crate::core::CoreConfig;

fn limited(per_job: u64, per_account: u64) -> TestEnv {
    TestEnv::with_config(CoreConfig {
        max_tasks_per_job: per_job,
        max_queued_tasks_per_account: per_account,
        ..CoreConfig::default()
    })
}

fn refusal(response: Response) -> String {
    match response {
        Response::Error(e) => {
            assert_eq!(e.kind, ErrorKind::BadRequest, "{e:?}");
            e.message
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_job_over_max_tasks_per_job_is_refused_naming_the_limit() {
    let mut env = limited(100, 1000);
    let message = refusal(env.submit_as(alice(), JobBuilder::map_reduce(90, 11).build()));
    assert_eq!(
        message,
        "the job has 101 tasks, over the master's max_tasks_per_job of 100; split it into smaller jobs"
    );
    assert!(env.take_persists().is_empty(), "nothing stored for a refused job");
    env.submit(JobBuilder::map_reduce(90, 10).build());
}

#[test]
fn the_default_per_job_limit_refuses_a_64_by_100000_spec() {
    let mut env = TestEnv::new();
    let mut spec = JobBuilder::maps(100_000).build();
    let stage = spec.stages[0].clone();
    spec.stages = (0..64)
        .map(|i| slotmarket_common::spec::StageSpec { name: format!("s{i}"), ..stage.clone() })
        .collect();
    let message = refusal(env.submit_as(alice(), spec));
    assert!(message.contains("6400000 tasks, over the master's max_tasks_per_job of 100000"), "{message}");
}

#[test]
fn an_account_over_its_queued_tasks_is_refused_until_its_jobs_end() {
    let mut env = limited(100, 150);
    env.join_agent("n1", 1, 0);
    let first = env.submit(JobBuilder::maps(100).build());
    let message = refusal(env.submit_as(alice(), JobBuilder::maps(51).build()));
    assert_eq!(
        message,
        "account alice already has 100 tasks in unfinished jobs; 51 more would pass the master's \
         max_queued_tasks_per_account of 150; wait for jobs to finish or cancel some"
    );
    // Exactly at the limit is fine, and other accounts have their own.
    env.submit(JobBuilder::maps(50).build());
    assert!(matches!(env.submit_as(bob(), JobBuilder::maps(100).build()), Response::Submitted { .. }));
    assert!(refusal(env.submit_as(alice(), JobBuilder::maps(1).build())).contains("already has 150 tasks"));

    // Cancelling returns the room at once, before the kill is confirmed.
    env.take_launches(1);
    env.cancel_as(alice(), first);
    env.take_kills(1);
    let third = env.submit(JobBuilder::maps(100).build());
    assert_eq!(env.status(third).summary.state, JobState::Pending);
    assert!(refusal(env.submit_as(alice(), JobBuilder::maps(1).build())).contains("already has 150 tasks"));
}

#[test]
fn an_ended_job_keeps_its_counts_but_not_its_task_records() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    let job = env.submit(JobBuilder::maps(1000).build());
    let launches = env.take_launches(2);
    env.run_to(launches[0].container, ContainerState::Completed);
    env.take_launches(1);
    env.cancel_as(alice(), job);
    let status = env.status(job);
    assert_eq!(status.summary.state, JobState::Cancelled);
    assert_eq!((status.stages[0].tasks, status.stages[0].completed), (1000, 1));
    assert_eq!(status.summary.tasks_total, 1000);
    let kept = env.core.state().jobs[&job].stages[0].tasks.capacity();
    assert_eq!(kept, 0, "the per-task records of an ended job are freed");
}
