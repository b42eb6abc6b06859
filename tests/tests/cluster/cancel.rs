//! Cancelling a job kills its running task processes; none remain afterwards.

use slotmarket_common::protocol::JobState;

use crate::support::{TestCluster, agent, sleepers, status, submit, wait_running, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_running_processes() {
    let cluster = TestCluster::start(&[agent("node-1", 2, 1), agent("node-2", 2, 1)]).await;
    let client = cluster.client("alice").await;
    let job = submit(&client, &sleepers("long-sleepers", 4, 60.0)).await;
    wait_running(&client, job, 4).await;
    wait_until(|| async { cluster.processes_inside().len() >= 4 }, "four sleeper processes").await;

    // Another user may not cancel it.
    let bob = cluster.client("bob").await;
    assert!(bob.cancel(job).await.is_err());

    assert_eq!(client.cancel(job).await.expect("cancel"), JobState::Cancelled);
    wait_until(|| async { cluster.processes_inside().is_empty() }, "task processes to be gone").await;
    let after = status(&client, job).await;
    assert_eq!(after.summary.state, JobState::Cancelled);
    // The slots are freed.
    wait_running(&client, job, 0).await;
    client.close().await;
    bob.close().await;
}
