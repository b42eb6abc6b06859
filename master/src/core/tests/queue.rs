//! The queue view: jobs with pending tasks in the policy's order, each with why it waits
//! (dependency, barrier, priority, resources), names shown only to those who may see them.

use std::time::Duration;

use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobState, WaitReason};
use slotmarket_common::spec::DeadlineSpec;

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob, root};
use crate::core::policy::Edf;

#[test]
fn each_pending_job_says_why_it_waits_in_fifo_order() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 1);
    let running = env.submit(JobBuilder::maps(1).name("running").build());
    let staged = env.submit(JobBuilder::map_reduce(1, 1).name("staged").build());
    for launch in env.take_launches(2) {
        env.start(launch.container);
    }
    let first_waiting = env.submit(JobBuilder::maps(2).name("first").build());
    let behind = match env.submit_as(bob(), JobBuilder::maps(1).name("bobs").build()) {
        slotmarket_common::protocol::Response::Submitted { job } => job,
        other => panic!("{other:?}"),
    };
    let mut held = JobBuilder::maps(1).name("held").build();
    held.after = vec![first_waiting];
    let held = env.submit(held);
    env.assert_no_commands();

    let queue = env.core.queue(&alice());
    assert_eq!(queue.policy, "fifo");
    let rows: Vec<(JobId, WaitReason, u32, u32)> =
        queue.entries.iter().map(|e| (e.job, e.reason, e.pending_map, e.pending_reduce)).collect();
    // `running` has nothing pending; `staged` waits for its map (reduce slot is free).
    assert_eq!(
        rows,
        vec![
            (staged, WaitReason::Barrier, 0, 1),
            (first_waiting, WaitReason::Resources, 2, 0),
            (behind, WaitReason::Priority, 1, 0),
            (held, WaitReason::Dependency, 1, 0),
        ]
    );
    assert!(!rows.iter().any(|r| r.0 == running));
    assert_eq!(queue.entries[0].state, JobState::Running);
    assert_eq!(queue.entries[3].waiting_for, vec![first_waiting]);
    // Alice sees her own names, not bob's; an admin sees all.
    assert_eq!(queue.entries[1].name.as_deref(), Some("first"));
    assert_eq!((queue.entries[2].name.as_deref(), queue.entries[2].owner.as_ref()), (None, None));
    assert_eq!(env.core.queue(&root()).entries[2].name.as_deref(), Some("bobs"));
}

#[test]
fn edf_lists_deadline_jobs_first_by_deadline() {
    let mut env = TestEnv::with_policy(Box::new(Edf::default()));
    env.join_agent("n1", 1, 0);
    env.submit(JobBuilder::maps(1).build());
    env.take_launches(1);
    let best_effort = env.submit(JobBuilder::maps(1).build());
    let mut due = |minutes: u64| {
        let mut spec = JobBuilder::maps(1).build();
        spec.deadline = Some(DeadlineSpec::In(Duration::from_secs(minutes * 60)));
        env.submit(spec)
    };
    let late = due(10);
    let early = due(5);
    let order: Vec<JobId> = env.core.queue(&alice()).entries.iter().map(|e| e.job).collect();
    assert_eq!(order, vec![early, late, best_effort]);
    let reasons: Vec<WaitReason> = env.core.queue(&alice()).entries.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, vec![WaitReason::Resources, WaitReason::Priority, WaitReason::Priority]);
}
