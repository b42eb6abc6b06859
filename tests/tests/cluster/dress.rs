//! The `dress` policy on a real master: `slotmarket status` and `slotmarket jobs` show
//! each job's demand class (SD/LD) in `--json`, as the CLI binary prints it; under the
//! default policy there is none. (Their text forms are unit-tested in the CLI crate.)

use serde_json::Value;
use slotmarket_common::protocol::JobState;

use crate::support::{TestCluster, agent, sleepers, submit, wait_finished};

/// `slotmarket --json ARGS` as alice, parsed; fails the test on an error exit.
async fn json(cluster: &TestCluster, args: &[&str]) -> Value {
    let out = cluster.cli("alice", args).await;
    assert!(out.status.success(), "slotmarket {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("slotmarket {args:?} printed no JSON: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_jobs_show_the_demand_class_under_dress() {
    let mut cluster = TestCluster::start(&[agent("n1", 10, 0)]).await;
    let client = cluster.client("alice").await;
    let before = submit(&client, &sleepers("plain", 1, 0.1)).await;
    wait_finished(&client, before).await;
    let plain = json(&cluster, &["status", &before.to_string()]).await;
    assert_eq!(plain["demand_class"], Value::Null, "no class under fifo: {plain}");
    client.close().await;

    // θ = 0.1 of 10 map slots: one task is small-demand, five are large-demand.
    let config = cluster.dir.path().join("dress.toml");
    std::fs::write(&config, "[policy]\nname = \"dress\"\ntheta = 0.1\n").expect("write config");
    let config = config.to_string_lossy().into_owned();
    cluster.restart_master_with(&["--config", &config]).await;
    let client = cluster.client("alice").await;
    let large = submit(&client, &sleepers("wide", 5, 0.2)).await;
    let small = submit(&client, &sleepers("narrow", 1, 0.2)).await;
    for job in [large, small] {
        assert_eq!(wait_finished(&client, job).await.summary.state, JobState::Completed);
    }

    let status = json(&cluster, &["status", &large.to_string()]).await;
    assert_eq!(status["demand_class"], "LD", "{status}");
    let status = json(&cluster, &["status", &small.to_string()]).await;
    assert_eq!(status["demand_class"], "SD", "{status}");
    let listed = json(&cluster, &["jobs", "--all"]).await;
    let classes: Vec<(String, Value)> = listed["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| (j["id"].as_str().unwrap_or_default().to_string(), j["demand_class"].clone()))
        .collect();
    assert!(classes.contains(&(large.to_string(), "LD".into())), "{listed}");
    assert!(classes.contains(&(small.to_string(), "SD".into())), "{listed}");
    assert!(classes.contains(&(before.to_string(), Value::Null)), "scheduled before dress: {listed}");
    client.close().await;
}
