//! Cancelling a job kills its running task processes; none remain afterwards.

use slotmarket_common::protocol::{JobState, Request, Response};

use crate::support::{TestCluster, agent, status, submit, wait_until};

const LONG_SLEEPERS: &str = r#"
name = "long-sleepers"
[[stage]]
name = "sleep"
tasks = 4
slot = "map"
command = "sleep 60"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_running_processes() {
    let cluster = TestCluster::start(&[agent("node-1", 2, 1), agent("node-2", 2, 1)]).await;
    let client = cluster.client("alice").await;
    let job = submit(&client, LONG_SLEEPERS).await;
    wait_until(
        || async {
            status(&client, job).await.summary.tasks_running == 4 && cluster.processes_inside().len() >= 4
        },
        "four running sleepers",
    )
    .await;

    // Another user may not cancel it.
    let bob = cluster.client("bob").await;
    assert!(bob.call(Request::Cancel { job }).await.is_err());

    match client.call(Request::Cancel { job }).await.expect("cancel") {
        Response::Cancelled { state, .. } => assert_eq!(state, JobState::Cancelled),
        other => panic!("unexpected answer: {other:?}"),
    }
    wait_until(|| async { cluster.processes_inside().is_empty() }, "task processes to be gone").await;
    let after = status(&client, job).await;
    assert_eq!(after.summary.state, JobState::Cancelled);
    wait_until(|| async { status(&client, job).await.summary.tasks_running == 0 }, "slots to be freed").await;
    client.close().await;
    bob.close().await;
}
