//! A master that lost its database: it refuses to start without `--reinitialize`, and once
//! reinitialized it neither reissues the container ids of its predecessor nor leaks the
//! slots of tasks agents still ran for it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use slotmarket_common::protocol::JobState;

use crate::support::{
    TestCluster, agent, assert_completed, connected, sleepers, submit, wait_finished, wait_for, wait_running,
    wait_until,
};

/// Deletes the master's database (and its WAL files), as a lost disk would.
fn delete_database(cluster: &TestCluster) {
    for file in ["slotmarket.db", "slotmarket.db-wal", "slotmarket.db-shm"] {
        let path = cluster.master_dir().join(file);
        if path.exists() {
            std::fs::remove_file(&path).expect("delete database file");
        }
    }
}

/// Runs the master with `extra` flags until it exits (at most 20 s); returns whether it
/// succeeded and what it wrote to stderr.
fn run_master_to_exit(cluster: &TestCluster, extra: &[&str]) -> (bool, String) {
    let log = cluster.dir.path().join("refused-master.log");
    let err = std::fs::File::create(&log).expect("log file");
    let mut child = cluster
        .master_command(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("spawn master");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for master") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the master did not exit: it started on a data directory with a lost database");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.success(), std::fs::read_to_string(&log).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_refuses_a_lost_database_unless_reinitialized() {
    let mut cluster = TestCluster::start(&[agent("node-1", 1, 0)]).await;
    cluster.kill_master();
    delete_database(&cluster);

    let (succeeded, stderr) = run_master_to_exit(&cluster, &[]);
    assert!(!succeeded, "{stderr}");
    assert!(
        stderr.contains("was used by an earlier master (restart.secret and master.addr exist)"),
        "{stderr}"
    );
    assert!(stderr.contains("is missing or empty"), "{stderr}");
    assert!(stderr.contains("--reinitialize"), "{stderr}");
    // The refusal created no database: a second attempt refuses again.
    assert!(!run_master_to_exit(&cluster, &[]).0);

    // An emptied (zero-length) database is refused the same way.
    std::fs::write(cluster.master_dir().join("slotmarket.db"), b"").expect("truncate");
    assert!(!run_master_to_exit(&cluster, &[]).0);

    cluster.restart_master_with(&["--reinitialize"]).await;
    let client = cluster.client("alice").await;
    let job = submit(&client, &sleepers("fresh", 1, 0.0)).await;
    assert_eq!(wait_finished(&client, job).await.summary.state, JobState::Completed);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reinitialized_master_kills_old_tasks_and_runs_new_jobs() {
    let mut cluster = TestCluster::start(&[agent("node-1", 1, 1)]).await;
    let client = cluster.client("alice").await;
    // One job ends before the loss (the agent remembers its container), one still runs.
    let done = submit(&client, &sleepers("old-done", 1, 0.0)).await;
    assert_completed(&cluster, &wait_finished(&client, done).await);
    let old = submit(&client, &sleepers("old", 1, 120.0)).await;
    wait_running(&client, old, 1).await;
    let old_processes =
        wait_for(|| Some(cluster.processes_inside()).filter(|p| !p.is_empty()), "the old task's processes")
            .await;
    client.close().await;

    cluster.kill_master();
    delete_database(&cluster);
    cluster.restart_master_with(&["--reinitialize"]).await;
    let client = cluster.client("alice").await;
    wait_until(|| async { connected(&client).await.len() == 1 }, "the agent to register again").await;

    // Job ids start again from j1. Before container ids carried the master's epoch, the
    // new j1's first container reused the old j1's id and the agent answered with that
    // container's `Completed`: the job "completed" without running. It must really run,
    // on the map slot the old task holds until the master's kill lands.
    let marker = cluster.shared_dir().join("new-job-ran");
    let spec = format!(
        "name = \"new\"\n[[stage]]\nname = \"touch\"\ntasks = 1\nslot = \"map\"\ncommand = \"touch {}\"\n",
        marker.display()
    );
    let job = submit(&client, &spec).await;
    let finished = wait_finished(&client, job).await;
    assert_completed(&cluster, &finished);
    assert!(marker.exists(), "the new job's task did not run");
    let second = submit(&client, &sleepers("new-2", 1, 0.0)).await;
    assert_completed(&cluster, &wait_finished(&client, second).await);

    wait_for(
        || (!cluster.processes_inside().iter().any(|p| old_processes.contains(p))).then_some(()),
        "the old task to be killed",
    )
    .await;
    wait_until(
        || async { connected(&client).await.iter().all(|n| n.map_used == 0 && n.reduce_used == 0) },
        "every slot to be free",
    )
    .await;
    client.close().await;
}
