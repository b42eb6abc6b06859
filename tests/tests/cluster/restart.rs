//! A master killed mid-job and restarted on the same data directory recovers its jobs;
//! the agents reconnect and their running tasks are adopted rather than re-run.

use slotmarket_common::protocol::JobState;

use crate::support::{
    TestCluster, agent, assert_completed, sleepers, status, submit, wait_finished, wait_reported_running,
};

/// A second stage, run once every sleeper has completed.
const AFTER: &str = r#"
[[stage]]
name = "after"
tasks = 1
slot = "reduce"
after = ["sleep"]
command = "true"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_master_adopts_running_tasks() {
    // Recovered containers wait this long for their agent to come back; reconnecting
    // takes a few seconds of backoff.
    let mut cluster = TestCluster::start_with(&[agent("node-1", 2, 1), agent("node-2", 2, 1)], 15_000).await;
    let client = cluster.client("alice").await;
    let job = submit(&client, &format!("{}{AFTER}", sleepers("survivors", 4, 4.0))).await;
    // Running on the agents, not only launched: a launch the killed master had not yet
    // sent is re-run after recovery, which is not what this test is about.
    wait_reported_running(&client, job, 4).await;
    client.close().await;

    cluster.restart_master().await;
    let client = cluster.client("alice").await;
    let recovered = status(&client, job).await;
    assert!(!recovered.summary.state.is_terminal(), "{recovered:?}");

    let finished = wait_finished(&client, job).await;
    assert_completed(&cluster, &finished);
    assert_eq!(finished.stages[0].completed, 4);
    assert_eq!(finished.stages[0].failed_attempts, 0, "running tasks were re-run: {finished:?}");

    // Ids continue after the recovered ones.
    let next = submit(
        &client,
        "name = \"after\"\n[[stage]]\nname = \"a\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"",
    )
    .await;
    assert!(next > job);
    assert_eq!(wait_finished(&client, next).await.summary.state, JobState::Completed);
    client.close().await;
}
