//! Nodes that leave or break: an agent stopped with SIGTERM hands its tasks back at once
//! (no attempt spent, no wait for the silence timeout), and an agent whose tasks cannot
//! find `slotmarket-task` neither fails the jobs nor keeps getting work.

use std::time::{Duration, Instant};

use crate::support::{
    TestCluster, agent, assert_completed, connected, sleepers, submit, wait_finished, wait_until,
};

/// The master's silence timeout in these tests: long, so waiting for it would show.
const AGENT_TIMEOUT_MS: u64 = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agents_tasks_run_elsewhere_at_once_without_spending_attempts() {
    let mut cluster =
        TestCluster::start_with(&[agent("node-1", 4, 1), agent("node-2", 4, 1)], AGENT_TIMEOUT_MS).await;
    let client = cluster.client("alice").await;
    let admin = cluster.client("admin").await;
    let job = submit(&client, &sleepers("sleepers", 4, 3.0)).await;
    wait_until(
        || async { connected(&admin).await.iter().any(|n| n.node == "node-2" && n.map_used == 2) },
        "node-2 to run two tasks",
    )
    .await;

    let stopped = Instant::now();
    cluster.stop_agent("node-2");
    // Forgotten as soon as it disconnects, not after the silence timeout.
    wait_until(
        || async { admin.nodes().await.is_ok_and(|nodes| nodes.iter().all(|n| n.node != "node-2")) },
        "node-2 to be forgotten",
    )
    .await;
    assert!(stopped.elapsed() < Duration::from_millis(AGENT_TIMEOUT_MS / 2), "{:?}", stopped.elapsed());

    let finished = wait_finished(&client, job).await;
    let took = stopped.elapsed();
    assert_completed(&cluster, &finished);
    let stage = &finished.stages[0];
    assert_eq!((stage.completed, stage.failed_attempts), (4, 0), "{stage:?}");
    // The handed-back tasks ran 3 s on node-1 straight away.
    assert!(took < Duration::from_millis(AGENT_TIMEOUT_MS * 3 / 4), "the job took {took:?} after SIGTERM");
    let master_log = cluster.log_tail("master");
    assert!(master_log.contains("agent leaving"), "{master_log}");
    client.close().await;
    admin.close().await;
}

/// A MapReduce pi job: `maps` quick map tasks and one reduce, all run by `slotmarket-task`.
fn pi(name: &str, maps: u32) -> String {
    format!(
        r#"
name = "{name}"
[[stage]]
name = "map"
tasks = {maps}
slot = "map"
command = "slotmarket-task pi map --samples 200000 --task {{task}} --job-dir {{job_dir}} --seed 3"
[[stage]]
name = "reduce"
tasks = 1
slot = "reduce"
after = ["map"]
command = "slotmarket-task pi reduce --maps {{tasks.map}} --job-dir {{job_dir}}"
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_the_task_binary_fails_no_job_and_is_quarantined() {
    let cluster = TestCluster::start(&[
        agent("bad", 2, 1).without_task_binary(),
        agent("good-1", 2, 1),
        agent("good-2", 2, 1),
    ])
    .await;
    let client = cluster.client("alice").await;
    let mut jobs = Vec::new();
    for i in 0..3 {
        jobs.push(submit(&client, &pi(&format!("pi-{i}"), 6)).await);
    }
    for job in jobs {
        let finished = wait_finished(&client, job).await;
        assert_completed(&cluster, &finished);
        assert_eq!(finished.summary.tasks_completed, 7);
    }

    let nodes = cluster.nodes_json();
    let all = nodes["nodes"].as_array().expect("nodes array");
    let bad = all.iter().find(|n| n["node"] == "bad").expect("bad is listed");
    assert_eq!(bad["state"], "quarantined", "{nodes}");
    let reason = bad["quarantine_reason"].as_str().expect("a quarantine reason");
    assert!(reason.contains("exit code 127") && reason.contains("slotmarket-task"), "{reason}");
    for good in all.iter().filter(|n| n["node"] != "bad") {
        assert_eq!(good["state"], "connected", "{nodes}");
    }
    client.close().await;
}
