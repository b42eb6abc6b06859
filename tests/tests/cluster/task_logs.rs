//! `slotmarket status JOB --tasks` and `slotmarket logs` against a real cluster: the
//! master relays a task's stdout and stderr from the agent that ran it, to the job's
//! owner only.

use serde_json::Value;

use crate::support::{TestCluster, WAIT, agent, binary};

/// Runs `slotmarket ARGS` as `user` (with `--json` when `args` start with it, else as a
/// person would); asserts the exit code; returns stdout and stderr.
async fn cli(cluster: &TestCluster, user: &str, args: &[&str], code: i32) -> (String, String) {
    let mut command = tokio::process::Command::new(binary("slotmarket"));
    command
        .args(["--master", &cluster.addr.to_string(), "--identity", user])
        .arg("--cert-dir")
        .arg(cluster.dir.path().join("pki"))
        .args(args)
        .env_remove("SLOTMARKET_CONFIG")
        .env("XDG_CONFIG_HOME", cluster.dir.path())
        .kill_on_drop(true);
    let out =
        tokio::time::timeout(WAIT, command.output()).await.expect("slotmarket timed out").expect("run it");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "slotmarket {args:?} as {user}: {stdout} {stderr}");
    (stdout, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_log_is_read_back_by_its_owner_and_refused_to_another_user() {
    let cluster = TestCluster::start(&[agent("node-1", 2, 1)]).await;
    let script = "echo \"hello from task $0\"; echo \"warning $0\" >&2; [ \"$0\" = 1 ] && exit 4; exit 0";
    let args =
        ["--json", "run", "--tasks", "2", "--name", "echoes", "--wait", "--", "sh", "-c", script, "{task}"];
    let (out, _) = cli(&cluster, "alice", &args, 1).await;
    let done: Value = serde_json::from_str(&out).unwrap();
    let job = done["status"]["id"].as_str().expect("job id").to_string();

    // Every task, with its node, container, attempts, times and exit code.
    let (out, _) = cli(&cluster, "alice", &["--json", "status", &job, "--tasks"], 0).await;
    let status: Value = serde_json::from_str(&out).unwrap();
    let tasks = status["tasks"].as_array().expect("tasks in --json");
    assert_eq!(tasks.len(), 2, "{status}");
    let first = &tasks[0];
    assert_eq!((first["index"].as_u64(), first["state"].as_str()), (Some(0), Some("completed")), "{status}");
    assert_eq!((first["node"].as_str(), first["exit_code"].as_i64()), (Some("node-1"), Some(0)), "{status}");
    assert!(first["container"].as_str().is_some_and(|c| c.starts_with('c')), "{status}");
    assert!(first["started_ms"].as_u64() <= first["finished_ms"].as_u64(), "{status}");
    let second = &tasks[1];
    assert_eq!(
        (second["state"].as_str(), second["exit_code"].as_i64()),
        (Some("failed"), Some(4)),
        "{status}"
    );
    assert!(second["attempts"].as_u64().is_some_and(|a| a >= 1), "{status}");
    let (table, _) = cli(&cluster, "alice", &["status", &job, "--tasks"], 0).await;
    assert!(table.contains("task") && table.contains("node-1") && table.contains("failed"), "{table}");

    // The logs, read back through the master.
    let stage = done["status"]["stages"][0]["name"].as_str().unwrap_or("main").to_string();
    let (out, _) = cli(&cluster, "alice", &["logs", &job], 0).await;
    assert_eq!(out, "hello from task 0\n");
    let (out, _) = cli(&cluster, "alice", &["logs", &job, &format!("{stage}:1"), "--stderr"], 0).await;
    assert_eq!(out, "warning 1\n");
    // --follow of an ended task prints it all and returns.
    let (out, _) = cli(&cluster, "alice", &["logs", &job, &format!("{stage}:1"), "--follow"], 0).await;
    assert_eq!(out, "hello from task 1\n");
    let (_, err) = cli(&cluster, "alice", &["logs", &job, &format!("{stage}:5")], 1).await;
    assert!(err.contains("has tasks 0 to 1"), "{err}");

    let (out, _) = cli(&cluster, "alice", &["--json", "logs", &job, "--stderr"], 0).await;
    let log: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (log["stream"].as_str(), log["text"].as_str()),
        (Some("stderr"), Some("warning 0\n")),
        "{log}"
    );

    // Another user sees neither, exactly as for a job that does not exist.
    let (_, err) = cli(&cluster, "bob", &["logs", &job], 1).await;
    assert!(err.contains(&format!("no job {job}")), "{err}");
    assert!(!err.contains("hello"), "{err}");
    let (_, err) = cli(&cluster, "bob", &["status", &job, "--tasks"], 1).await;
    assert!(!err.contains("node-1"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_follow_prints_what_a_running_task_writes_until_it_ends() {
    let cluster = TestCluster::start(&[agent("node-1", 1, 1)]).await;
    let args = ["--json", "run", "--name", "slow", "--", "sh", "-c", "echo one; sleep 2; echo two"];
    let (out, _) = cli(&cluster, "alice", &args, 0).await;
    let submitted: Value = serde_json::from_str(&out).unwrap();
    let job = submitted["job"].as_str().expect("job id").to_string();
    // Wait until its task runs, so the follow starts mid-run.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (out, _) = cli(&cluster, "alice", &["--json", "status", &job, "--tasks"], 0).await;
        let status: Value = serde_json::from_str(&out).unwrap();
        if status["tasks"][0]["state"] == "running" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never ran: {status}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let started = std::time::Instant::now();
    let (out, _) = cli(&cluster, "alice", &["logs", &job, "--follow"], 0).await;
    assert_eq!(out, "one\ntwo\n");
    // It waited for the second line rather than stopping at the first read.
    assert!(started.elapsed() >= std::time::Duration::from_millis(500), "{:?}", started.elapsed());
}
