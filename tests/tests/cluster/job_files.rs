//! `slotmarket fetch` and job directory cleanup against a real cluster: a job's outputs
//! come back through the master to its owner only, `slotmarket cleanup` removes its
//! directory and its containers' directories from the agents, and a master with a short
//! `[cleanup] retain_s` removes an ended job's directory by itself. A container directory
//! removed that way and lent to a later task (agents with cgroups) holds nothing of the
//! first.

use std::path::Path;

use serde_json::Value;

use crate::support::{TestCluster, agent, wait_for};

/// Every task `t` writes `out/part-t` (and a file outside `out` that must not be fetched).
const WRITER: &str = "mkdir -p \"$SLOTMARKET_JOB_DIR/out\" && printf 'part %s\\n' \"$0\" > \"$SLOTMARKET_JOB_DIR/out/part-$0\" \
                      && echo scratch > \"$SLOTMARKET_JOB_DIR/scratch-$0\"";

/// Runs the writer job as alice with `tasks` tasks to its end; returns its id.
async fn run_writer(cluster: &TestCluster, tasks: u32) -> String {
    let tasks = tasks.to_string();
    let args = ["run", "--tasks", &tasks, "--name", "writer", "--wait", "--", "sh", "-c", WRITER, "{task}"];
    let out = cluster.cli("alice", &args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).expect("run --json");
    done["status"]["id"].as_str().expect("job id").to_string()
}

/// The container directories under an agent's work directory.
fn containers(cluster: &TestCluster, node: &str) -> usize {
    let dir = cluster.dir.path().join("agents").join(node).join("containers");
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_are_fetched_by_their_owner_and_cleanup_removes_the_jobs_directories() {
    let mut cluster = TestCluster::start(&[agent("node-1", 2, 1), agent("node-2", 2, 1)]).await;
    let job = run_writer(&cluster, 4).await;
    let job_dir = cluster.shared_dir().join("jobs").join(&job);
    assert!(job_dir.join("out/part-3").is_file());

    let into = cluster.dir.path().join("fetched");
    let out = cluster.cli("alice", &["fetch", &job, into.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fetched: Value = serde_json::from_slice(&out.stdout).expect("fetch --json");
    let files = fetched["files"].as_array().expect("files");
    assert_eq!(files.len(), 4, "{fetched}");
    // Both agents share the data directory: one of them serves it all.
    let nodes: std::collections::BTreeSet<_> = files.iter().map(|f| f["node"].as_str().unwrap()).collect();
    assert_eq!(nodes.len(), 1, "{fetched}");
    for task in 0..4 {
        assert_eq!(text(&into.join(format!("part-{task}"))), format!("part {task}\n"));
    }
    assert!(!into.join("scratch-0").exists(), "only --path (out) is fetched");

    // Another user is told the job does not exist.
    let out = cluster.cli("bob", &["fetch", &job, cluster.dir.path().join("bob").to_str().unwrap()]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("no job {job}")), "{out:?}");
    let out = cluster.cli("bob", &["cleanup", &job]).await;
    assert!(!out.status.success());
    assert!(job_dir.exists());

    let before = containers(&cluster, "node-1") + containers(&cluster, "node-2");
    assert!(before >= 4, "{before} container directories");
    let out = cluster.cli("alice", &["cleanup", &job]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).expect("cleanup --json");
    assert_eq!(done[0]["pending_on"].as_array().map(Vec::len), Some(0), "{done}");
    wait_for(|| (!job_dir.exists()).then_some(()), "the job directory to go").await;
    wait_for(
        || (containers(&cluster, "node-1") + containers(&cluster, "node-2") == 0).then_some(()),
        "container dirs",
    )
    .await;
    assert!(cluster.shared_dir().join("jobs").is_dir(), "only the job's directory goes");

    // A master that keeps ended jobs' directories for one second removes them itself.
    let config = cluster.dir.path().join("master-cleanup.toml");
    std::fs::write(&config, "[cleanup]\nretain_s = 1\n").unwrap();
    cluster.restart_master_with(&["--config", config.to_str().unwrap()]).await;
    let kept = run_writer(&cluster, 2).await;
    let kept_dir = cluster.shared_dir().join("jobs").join(&kept);
    wait_for(|| (!kept_dir.exists()).then_some(()), "the retained job directory to go").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_spread_over_local_mode_agents_are_fetched_and_cleaned_up_on_each() {
    let names = ["node-1", "node-2", "node-3"];
    let cluster =
        TestCluster::start_local(&[agent("node-1", 2, 1), agent("node-2", 2, 1), agent("node-3", 2, 1)])
            .await;
    let job = run_writer(&cluster, 6).await;
    let holding: Vec<_> = names
        .iter()
        .filter(|n| cluster.local_data_dir(n).join("jobs").join(&job).join("out").is_dir())
        .collect();
    assert!(!holding.is_empty());

    let into = cluster.dir.path().join("fetched");
    let out = cluster.cli("alice", &["fetch", &job, into.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fetched: Value = serde_json::from_slice(&out.stdout).expect("fetch --json");
    let nodes: std::collections::BTreeSet<_> = fetched["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(nodes.len(), holding.len(), "every agent holding outputs serves its own: {fetched}");
    for task in 0..6 {
        assert_eq!(text(&into.join(format!("part-{task}"))), format!("part {task}\n"));
    }

    let out = cluster.cli("alice", &["cleanup", &job]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in names {
        let dir = cluster.local_data_dir(name).join("jobs").join(&job);
        wait_for(|| (!dir.exists()).then_some(()), "each agent's job directory to go").await;
    }
}

/// Runs `script` as one task of a job of alice's to its end; returns the job id.
async fn run_script(cluster: &TestCluster, script: &str) -> String {
    let out = cluster.cli("alice", &["run", "--name", "reuse", "--wait", "--", "sh", "-c", script]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).expect("run --json");
    done["status"]["id"].as_str().expect("job id").to_string()
}

/// The text of `job`'s first task's stdout (or stderr), through `slotmarket logs`.
async fn log_text(cluster: &TestCluster, job: &str, stderr: bool) -> Result<String, String> {
    let args: &[&str] = if stderr { &["logs", job, "--stderr"] } else { &["logs", job] };
    let out = cluster.cli("alice", args).await;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let log: Value = serde_json::from_slice(&out.stdout).expect("logs --json");
    Ok(log["text"].as_str().expect("text").to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaned_up_containers_directory_lent_again_holds_nothing_of_its_first_task() {
    use std::os::unix::fs::MetadataExt;
    let cluster = TestCluster::start(&[agent("node-1", 1, 1)]).await;
    let node = cluster.dir.path().join("agents").join("node-1");
    let first = run_script(&cluster, "echo secret; echo secret >&2; echo kept > mine.txt").await;
    let first_dir = std::fs::read_dir(node.join("containers")).unwrap().next().unwrap().unwrap().path();
    let inode = std::fs::metadata(&first_dir).unwrap().ino();
    let out = cluster.cli("alice", &["cleanup", &first]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(|| (containers(&cluster, "node-1") == 0).then_some(()), "the container directory to go").await;
    let err = log_text(&cluster, &first, false).await.expect_err("the cleaned job's log is gone");
    assert!(!err.contains("secret"), "{err}");
    let pool = node.join("ready").join("recycled");
    // Two ready directories are kept (one map and one reduce slot) and taken last made
    // first: the recycled one is refilled after the second task starts, the third's.
    let _second = run_script(&cluster, "echo second").await;
    if pool.is_dir() {
        let drained = || std::fs::read_dir(&pool).is_ok_and(|mut d| d.next().is_none()).then_some(());
        wait_for(drained, "the recycled directory to be made ready").await;
    }
    let third = run_script(&cluster, "ls -a; echo fresh").await;
    assert_eq!(log_text(&cluster, &third, false).await.unwrap(), ".\n..\nstderr\nstdout\nfresh\n");
    assert_eq!(log_text(&cluster, &third, true).await.unwrap(), "");
    if pool.is_dir() {
        let reused = std::fs::read_dir(node.join("containers"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|dir| std::fs::metadata(dir).unwrap().ino() == inode);
        let reused = reused.expect("the first container's directory serves a later task");
        assert_eq!(text(&reused.join("stdout")), ".\n..\nstderr\nstdout\nfresh\n");
    }
}
