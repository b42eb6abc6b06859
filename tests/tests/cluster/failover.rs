//! Killing an agent mid-job: the master declares it lost after its silence timeout and
//! re-runs its tasks on the surviving agent; the job still completes.

use crate::support::{
    TestCluster, agent, assert_completed, connected, sleepers, status, submit, wait_finished, wait_until,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_a_killed_agent_are_rerun_elsewhere() {
    let mut cluster = TestCluster::start(&[agent("node-1", 2, 1), agent("node-2", 2, 1)]).await;
    let client = cluster.client("alice").await;
    let job = submit(&client, &sleepers("sleepers", 8, 1.5)).await;
    let admin = cluster.client("admin").await;
    wait_until(
        || async { connected(&admin).await.iter().any(|n| n.node == "node-2" && n.map_used > 0) },
        "node-2 to run a task",
    )
    .await;
    cluster.kill_agent("node-2");

    let finished = wait_finished(&client, job).await;
    assert_completed(&cluster, &finished);
    let stage = &finished.stages[0];
    assert_eq!(stage.completed, 8);
    assert!(stage.failed_attempts >= 1, "the lost attempts are counted: {stage:?}");
    let nodes = connected(&admin).await;
    assert_eq!(nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["node-1"]);
    assert_eq!(status(&client, job).await.summary.tasks_running, 0);
    client.close().await;
    admin.close().await;
}
