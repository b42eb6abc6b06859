//! What Slurm and HyperQueue users expect of the command line, against a real cluster:
//! `run` of a command line without a spec file, `wait` and `run --wait` following jobs
//! across a master killed and restarted, time limits, `--after`, and where the client
//! config is found.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use serde_json::Value;
use slotmarket_common::protocol::JobState;

use crate::support::{TestCluster, WAIT, agent, binary, sleepers, status, submit, wait_running};

/// Runs `slotmarket --json ARGS` as alice; asserts the exit code and parses stdout.
async fn json(cluster: &TestCluster, args: &[&str], code: i32) -> Value {
    let out = cluster.cli("alice", args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "slotmarket {args:?}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_submits_an_array_from_a_command_line_and_waits_for_it() {
    let cluster = TestCluster::start(&[agent("node-1", 2, 1)]).await;
    let out = cluster.dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let target = out.join("task-{task} of {tasks}").display().to_string();
    // Argv words, not a shell line: the space in the file name and the braces of awk's
    // program stay data; `{task}` and `{tasks}` are substituted per task.
    let args = ["run", "--tasks", "3", "--name", "array", "--wait", "--", "awk", "BEGIN { exit 0 }"];
    let done = json(&cluster, &args, 0).await;
    assert_eq!(
        (done["status"]["state"].as_str(), done["status"]["name"].as_str()),
        (Some("completed"), Some("array"))
    );
    assert_eq!(done["status"]["tasks_total"], 3);

    let args = ["run", "--tasks", "3", "--wait", "--", "sh", "-c", "echo \"$0\" > \"$1\"", "{task}", &target];
    let done = json(&cluster, &args, 0).await;
    assert_eq!(done["status"]["name"], "sh");
    for task in 0..3 {
        let file = out.join(format!("task-{task} of 3"));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(text, format!("{task}\n"));
    }

    // A failing command fails the job, and `--wait` exits 1 saying so.
    let failed = json(&cluster, &["run", "--wait", "--", "false"], 1).await;
    assert_eq!(failed["status"]["state"], "failed");
    // Without --wait: just the id.
    let submitted = json(&cluster, &["run", "--slot", "reduce", "--", "true"], 0).await;
    assert!(submitted["job"].as_str().is_some_and(|id| id.starts_with('j')), "{submitted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_follows_jobs_across_a_master_restart() {
    let mut cluster = TestCluster::start_with(&[agent("node-1", 2, 1)], 15_000).await;
    let client = cluster.client("alice").await;
    let first = submit(&client, &sleepers("first", 1, 1.0)).await;
    let second = submit(&client, &sleepers("second", 1, 8.0)).await;
    wait_running(&client, second, 1).await;
    client.close().await;

    let mut wait = tokio::process::Command::new(binary("slotmarket"));
    wait.args(["--json", "--master", &cluster.addr.to_string(), "--identity", "alice"])
        .arg("--cert-dir")
        .arg(cluster.dir.path().join("pki"))
        .args(["wait", &first.to_string(), &second.to_string()])
        .env_remove("SLOTMARKET_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let waiting = wait.spawn().expect("spawn slotmarket wait");
    // Let it attach, then take the master away under it.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    cluster.restart_master().await;

    let out = tokio::time::timeout(WAIT, waiting.wait_with_output()).await.expect("wait timed out").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("lost the master") && stderr.contains("reconnected"), "{stderr}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let states: Vec<&str> =
        answer["jobs"].as_array().unwrap().iter().filter_map(|j| j["state"].as_str()).collect();
    assert_eq!(states, ["completed", "completed"]);
    let client = cluster.client("alice").await;
    assert_eq!(status(&client, second).await.summary.state, JobState::Completed);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_wait_follows_its_job_across_a_master_restart() {
    let mut cluster = TestCluster::start_with(&[agent("node-1", 1, 0)], 15_000).await;
    let mut run = tokio::process::Command::new(binary("slotmarket"));
    run.args(["--json", "--master", &cluster.addr.to_string(), "--identity", "alice"])
        .arg("--cert-dir")
        .arg(cluster.dir.path().join("pki"))
        .args(["run", "--name", "survivor", "--wait", "--", "sleep", "6"])
        .env_remove("SLOTMARKET_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let running = run.spawn().expect("spawn slotmarket run --wait");
    // Let it submit and attach (its task starts at once on the idle agent), then take
    // the master away under it.
    tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
    cluster.restart_master().await;

    let out = tokio::time::timeout(WAIT, running.wait_with_output()).await.expect("run timed out").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("lost the master") && stderr.contains("reconnected"), "{stderr}");
    // Not a terminal: plain progress lines, no cursor movement.
    assert!(stderr.contains("running: 0/1 tasks done, 1 running") && !stderr.contains('\x1b'), "{stderr}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (answer["status"]["state"].as_str(), answer["status"]["name"].as_str()),
        (Some("completed"), Some("survivor"))
    );
    // One job, run once: the restarted master adopted the task instead of rerunning it.
    let tasks = json(&cluster, &["status", answer["job"].as_str().unwrap(), "--tasks"], 0).await;
    assert_eq!(tasks["tasks"][0]["attempts"], 1, "{tasks}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_limit_kills_the_tasks_and_fails_the_job() {
    let cluster = TestCluster::start(&[agent("node-1", 2, 1)]).await;
    let args = ["run", "--tasks", "2", "--time-limit", "2s", "--wait", "--", "sleep", "30"];
    let started = std::time::Instant::now();
    let ended = json(&cluster, &args, 1).await;
    let took = started.elapsed();
    assert_eq!(ended["status"]["state"], "failed");
    let message = ended["status"]["message"].as_str().unwrap_or_default();
    assert_eq!(message, "time limit 2s reached; its running tasks were killed");
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
    // The master logs why the job ended, without colour codes in a file.
    let log = std::fs::read_to_string(cluster.dir.path().join("master.log")).unwrap();
    let ended = log.lines().find(|l| l.contains("job ended") && l.contains("time limit 2s reached"));
    assert!(ended.is_some_and(|line| line.contains("WARN")), "no warning for the job's end in:\n{log}");
    assert!(!log.contains('\x1b'), "colour codes in the master's log file");
    // The sleeps were killed, not left running.
    crate::support::wait_for(|| cluster.processes_inside().is_empty().then_some(()), "killed tasks to exit")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_holds_a_job_until_its_upstream_completes_fails_it_when_that_fails_and_queue_says_why() {
    let cluster = TestCluster::start(&[agent("node-1", 2, 1)]).await;
    let upstream = json(&cluster, &["run", "--", "sleep", "2"], 0).await;
    let upstream = upstream["job"].as_str().unwrap().to_string();
    let down = json(&cluster, &["run", "--after", &upstream, "--wait", "--", "true"], 0).await;
    let first = json(&cluster, &["status", &upstream], 0).await;
    let finished = first["finished_ms"].as_u64().unwrap();
    assert!(down["status"]["started_ms"].as_u64().unwrap() >= finished, "{down} started before {first}");

    let failing = json(&cluster, &["run", "--", "sh", "-c", "sleep 1; exit 3"], 0).await;
    let failing = failing["job"].as_str().unwrap().to_string();
    let held = json(&cluster, &["run", "--after", &failing, "--wait", "--", "true"], 1).await;
    assert_eq!(held["status"]["state"], "failed");
    let message = held["status"]["message"].as_str().unwrap_or_default();
    assert_eq!(message, format!("job {failing} it runs after failed"));
    assert_eq!(held["status"]["started_ms"], Value::Null, "{held}");

    // Cancelling every pending job of one's own: the held job goes, the others' stay.
    let blocker = json(&cluster, &["run", "--", "sleep", "30"], 0).await;
    let blocker = blocker["job"].as_str().unwrap().to_string();
    let client = cluster.client("alice").await;
    let blocker_id = slotmarket_common::ids::JobId(blocker[1..].parse().unwrap());
    wait_running(&client, blocker_id, 1).await;
    client.close().await;
    let held = json(&cluster, &["run", "--after", &blocker, "--", "true"], 0).await;
    // The queue names why it waits.
    let queue = json(&cluster, &["queue"], 0).await;
    let held_id = held["job"].as_str().unwrap();
    let row = queue["jobs"].as_array().unwrap().iter().find(|j| j["job"] == held_id).cloned();
    let row = row.unwrap_or_else(|| panic!("{held_id} not queued: {queue}"));
    assert_eq!(
        (row["reason"].as_str(), row["waiting_for"].clone()),
        (Some("dependency"), serde_json::json!([blocker]))
    );
    let cancelled = json(&cluster, &["cancel", "--all", "--state", "pending"], 0).await;
    let ids: Vec<&str> =
        cancelled["jobs"].as_array().unwrap().iter().filter_map(|j| j["job"].as_str()).collect();
    assert_eq!(ids, [held["job"].as_str().unwrap()]);
    let both = json(&cluster, &["cancel", &blocker, held["job"].as_str().unwrap()], 0).await;
    let states: Vec<&str> =
        both["jobs"].as_array().unwrap().iter().filter_map(|j| j["state"].as_str()).collect();
    assert_eq!(states, ["cancelled", "cancelled"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_config_is_found_in_xdg_config_home_before_home() {
    let cluster = TestCluster::start(&[agent("node-1", 1, 0)]).await;
    let write = |dir: &std::path::Path, master: &str, identity: &str| {
        let dir = dir.join("slotmarket");
        std::fs::create_dir_all(&dir).unwrap();
        let pki = cluster.dir.path().join("pki");
        let text =
            format!("master = \"{master}\"\ncert_dir = \"{}\"\nidentity = \"{identity}\"\n", pki.display());
        std::fs::write(dir.join("config.toml"), text).unwrap();
    };
    let xdg = cluster.dir.path().join("xdg");
    let home = cluster.dir.path().join("home");
    write(&xdg, &cluster.addr.to_string(), "alice");
    // ~/.config would send it nowhere: it must not be read while XDG_CONFIG_HOME has one.
    write(&home.join(".config"), "127.0.0.1:1", "bob");
    let run = |xdg: Option<&std::path::Path>, args: &[&str]| {
        let mut command = std::process::Command::new(binary("slotmarket"));
        command.args(args).env_remove("SLOTMARKET_CONFIG").env_remove("SLOTMARKET_MASTER");
        command.env_remove("SLOTMARKET_IDENTITY").env_remove("SLOTMARKET_CERT_DIR").env("HOME", &home);
        match xdg {
            Some(dir) => command.env("XDG_CONFIG_HOME", dir),
            None => command.env_remove("XDG_CONFIG_HOME"),
        };
        command.output().expect("run slotmarket")
    };
    let run_env = |xdg: Option<&std::path::Path>, config: &std::path::Path, args: &[&str]| {
        let mut command = std::process::Command::new(binary("slotmarket"));
        command.args(args).env("SLOTMARKET_CONFIG", config).env_remove("SLOTMARKET_MASTER");
        command.env_remove("SLOTMARKET_IDENTITY").env_remove("SLOTMARKET_CERT_DIR").env("HOME", &home);
        if let Some(dir) = xdg {
            command.env("XDG_CONFIG_HOME", dir);
        }
        command.output().expect("run slotmarket")
    };
    let out = run(Some(&xdg), &["--json", "run", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = job["job"].as_str().unwrap();
    let status: Value = serde_json::from_slice(&run(Some(&xdg), &["--json", "status", id]).stdout).unwrap();
    assert_eq!(status["owner"], "alice", "the XDG config's identity was used");
    // A flag still beats the file.
    let out = run(Some(&xdg), &["--json", "--identity", "admin", "status", id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A file named with --config or SLOTMARKET_CONFIG is read instead of the search's.
    let named = cluster.dir.path().join("named");
    write(&named, &cluster.addr.to_string(), "bob");
    let named = named.join("slotmarket").join("config.toml");
    write(&xdg, "127.0.0.1:1", "alice");
    let named_flag = named.display().to_string();
    let out = run(Some(&xdg), &["--json", "--config", &named_flag, "run", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = run_env(Some(&xdg), &named, &["--json", "status", job["job"].as_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["owner"], "bob", "the named config's identity was used");
    // Without XDG_CONFIG_HOME: ~/.config/slotmarket/config.toml, whose master is not there.
    let out = run(None, &["nodes"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("127.0.0.1:1"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_leaves_early_ends_the_cli_quietly_not_with_a_panic() {
    let cluster = TestCluster::start_with(&[agent("node-1", 2, 1)], 15_000).await;
    let mut jobs = std::process::Command::new(binary("slotmarket"));
    jobs.args(["--json", "--master", &cluster.addr.to_string(), "--identity", "alice"])
        .arg("--cert-dir")
        .arg(cluster.dir.path().join("pki"))
        .arg("nodes")
        .env_remove("SLOTMARKET_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = jobs.spawn().expect("spawn slotmarket nodes");
    // The reader leaves before the answer arrives, as `| head -0` would.
    drop(child.stdout.take());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}: {stderr}", out.status);
}

/// The `slotmarket` binary is linked statically where the toolchain allows (cli/build.rs):
/// glibc's static resolver must still turn a host name into the master's address, and an
/// unknown name must still fail with the resolver's answer, not a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reaches_the_master_by_host_name() {
    let cluster = TestCluster::start_with(&[agent("node-1", 2, 1)], 15_000).await;
    let by_name = |host: &str| {
        std::process::Command::new(binary("slotmarket"))
            .args(["--json", "--master", &format!("{host}:{}", cluster.addr.port()), "--identity", "admin"])
            .arg("--cert-dir")
            .arg(cluster.dir.path().join("pki"))
            .arg("nodes")
            .env_remove("SLOTMARKET_CONFIG")
            .env("XDG_CONFIG_HOME", cluster.dir.path())
            .output()
            .expect("run slotmarket nodes")
    };
    let out = by_name("localhost");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let nodes: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    assert_eq!(nodes["nodes"][0]["node"], "node-1", "{nodes}");

    let out = by_name("no-such-host.invalid");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("resolving master address \"no-such-host.invalid:"), "{stderr}");
}
