//! Deadlines that move while a job runs: `SetDeadline` is answered with the new deadline,
//! shown by `status`, survives a `kill -9` of the master, and only the job's owner (or an
//! admin) may move it.

use slotmarket_common::protocol::JobState;
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use crate::support::{TestCluster, agent, status, wait_finished};

const SPEC: &str = r#"
name = "moving"
deadline = "+2h"
[[stage]]
name = "sleep"
tasks = 1
slot = "map"
command = "sleep 30"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_deadline_is_answered_shown_and_survives_a_master_kill() {
    let mut cluster = TestCluster::start(&[agent("node-1", 1, 1)]).await;
    let alice = cluster.client("alice").await;
    let job = alice.submit(JobSpec::from_toml(SPEC).expect("spec")).await.expect("submit");
    let first = status(&alice, job).await.summary.deadline.expect("a deadline");
    let moved = Timestamp(first.0 - 3_600_000);
    assert_eq!(alice.set_deadline(job, Some(moved)).await.expect("move"), Some(moved));
    assert_eq!(status(&alice, job).await.summary.deadline, Some(moved));

    let bob = cluster.client("bob").await;
    let refused = bob.set_deadline(job, None).await.expect_err("bob may not");
    assert!(refused.to_string().contains(&format!("no job {job}")), "{refused}");
    bob.close().await;
    alice.close().await;

    cluster.restart_master().await;
    let alice = cluster.client("alice").await;
    assert_eq!(status(&alice, job).await.summary.deadline, Some(moved));
    assert_eq!(alice.set_deadline(job, None).await.expect("clear"), None);
    assert_eq!(status(&alice, job).await.summary.deadline, None);
    alice.cancel(job).await.expect("cancel");
    assert_eq!(wait_finished(&alice, job).await.summary.state, JobState::Cancelled);
    let ended = alice.set_deadline(job, Some(moved)).await.expect_err("an ended job's deadline stays");
    assert!(ended.to_string().contains("can no longer change"), "{ended}");
    alice.close().await;
}
