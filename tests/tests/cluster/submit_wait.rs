//! `submit --wait` against a real cluster, now one request that submits and follows: it
//! prints the id, then the end, exactly as before (plain and `--json`, one spec and
//! several); several specs get their ids in the order of the files; a long job's id still
//! comes out while the job runs; and a CLI killed while it waits leaves the master
//! serving and the job running to its end. (A master restarted under a waiting CLI:
//! `cli_habits::run_wait_follows_its_job_across_a_master_restart`.)

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::JobState;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{TestCluster, WAIT, agent, binary, wait_finished};

/// `slotmarket [--json] ARGS` as alice against the cluster, not yet started.
fn command(cluster: &TestCluster, json: bool, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary("slotmarket"));
    if json {
        command.arg("--json");
    }
    command
        .args(["--master", &cluster.addr.to_string(), "--identity", "alice"])
        .arg("--cert-dir")
        .arg(cluster.dir.path().join("pki"))
        .args(args)
        .env_remove("SLOTMARKET_CONFIG")
        .env("XDG_CONFIG_HOME", cluster.dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Runs `slotmarket [--json] ARGS`; asserts the exit code; answers stdout.
async fn run(cluster: &TestCluster, json: bool, args: &[&str], code: i32) -> String {
    let out = tokio::time::timeout(WAIT, command(cluster, json, args).output())
        .await
        .expect("slotmarket timed out")
        .expect("run slotmarket");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "slotmarket {args:?}: {stderr}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Writes a one-task spec running `command` as `NAME.toml` in the cluster's directory.
fn spec(cluster: &TestCluster, name: &str, command: &str) -> String {
    let file = cluster.dir.path().join(format!("{name}.toml"));
    let text = format!(
        "name = \"{name}\"\n[[stage]]\nname = \"run\"\ntasks = 1\nslot = \"map\"\ncommand = \"{command}\"\n"
    );
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

/// `jN` parsed.
fn job_id(text: &str) -> JobId {
    let number = text.trim().strip_prefix('j').and_then(|n| n.parse().ok());
    JobId(number.unwrap_or_else(|| panic!("not a job id: {text:?}")))
}

/// `jN completed (+0.0s after submit)` (a failed job adds `: why`): the id and the
/// state, the rest left out.
fn end_line(line: &str) -> (JobId, String) {
    let mut words = line.split_whitespace();
    let job = job_id(words.next().unwrap_or_default());
    let state = words.next().unwrap_or_default().to_string();
    assert!(line.contains(" after submit)"), "{line:?}");
    (job, state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_wait_prints_the_id_then_the_end_plain_and_json_for_one_spec_and_several() {
    let cluster = TestCluster::start(&[agent("node-1", 2, 1)]).await;
    let ok = spec(&cluster, "ok", "true");
    let bad = spec(&cluster, "bad", "false");

    let out = run(&cluster, false, &["submit", "--wait", &ok], 0).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out:?}");
    let job = job_id(lines[0]);
    assert_eq!(end_line(lines[1]), (job, "completed".into()));

    let out = run(&cluster, false, &["submit", "--wait", &bad], 1).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out:?}");
    let (failed, state) = end_line(lines[1]);
    assert_eq!((failed, state.as_str()), (job_id(lines[0]), "failed"));
    assert!(failed > job);

    let answer: Value =
        serde_json::from_str(&run(&cluster, true, &["submit", "--wait", &ok], 0).await).unwrap();
    let id = answer["job"].as_str().unwrap_or_default();
    assert_eq!(answer["status"]["id"].as_str(), Some(id), "{answer}");
    assert_eq!(
        (answer["status"]["state"].as_str(), answer["status"]["name"].as_str()),
        (Some("completed"), Some("ok"))
    );
    assert!(answer.get("purchase").is_none(), "{answer}");

    // Several specs: every id first, in order, then every end in the same order.
    let out = run(&cluster, false, &["submit", "--wait", &ok, &bad, &ok], 1).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out:?}");
    let ids: Vec<JobId> = lines[..3].iter().map(|l| job_id(l)).collect();
    assert!(ids[0] < ids[1] && ids[1] < ids[2], "{ids:?}");
    let ends: Vec<(JobId, String)> = lines[3..].iter().map(|l| end_line(l)).collect();
    let expected = [(ids[0], "completed"), (ids[1], "failed"), (ids[2], "completed")];
    assert_eq!(ends, expected.map(|(job, state)| (job, state.to_string())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_specs_get_their_ids_in_the_order_of_the_files() {
    // No agent: the jobs wait, and only the order of admission is looked at. The specs
    // go out pipelined, one stream each, so their bytes may reach the master out of order.
    let cluster = TestCluster::start(&[]).await;
    let files: Vec<String> = (0..40).map(|i| spec(&cluster, &format!("f{i:02}"), "true")).collect();
    let mut args = vec!["submit"];
    args.extend(files.iter().map(String::as_str));
    let out = run(&cluster, false, &args, 0).await;
    let ids: Vec<JobId> = out.lines().map(job_id).collect();
    assert_eq!(ids.len(), 40, "{out:?}");
    assert!(ids.windows(2).all(|pair| pair[1].0 == pair[0].0 + 1), "{ids:?}");
    let listed: Value =
        serde_json::from_str(&run(&cluster, true, &["jobs", "--limit", "40"], 0).await).unwrap();
    let name_of = |id: JobId| {
        let job =
            listed["jobs"].as_array().unwrap().iter().find(|j| j["id"] == id.to_string()).expect("listed");
        job["name"].as_str().unwrap().to_string()
    };
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(name_of(id), format!("f{i:02}"), "{ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_jobs_id_comes_out_while_it_runs_and_a_killed_waiter_leaves_it_running() {
    let cluster = TestCluster::start(&[agent("node-1", 1, 0)]).await;
    let long = spec(&cluster, "long", "sleep 4");
    let mut waiting =
        command(&cluster, false, &["submit", "--wait", &long]).spawn().expect("spawn submit --wait");
    let stdout = waiting.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    // The id is held only until the admission is durable (the master's lazy sync, 50 ms),
    // not until the job ends 4 s later.
    let first = tokio::time::timeout(Duration::from_millis(2500), lines.next_line()).await;
    let first = first.expect("no id while the job runs").expect("read stdout").expect("a line");
    let job = job_id(&first);

    // The waiter goes away mid-wait: the master keeps serving and the job runs on.
    waiting.start_kill().expect("kill submit --wait");
    let _ = waiting.wait().await;
    let client = cluster.client("alice").await;
    let status = client.status(job).await.expect("status after the waiter was killed");
    assert!(!status.summary.state.is_terminal(), "{:?}", status.summary.state);
    assert_eq!(wait_finished(&client, job).await.summary.state, JobState::Completed);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_waiting_says_the_job_runs_on_and_how_to_follow_or_stop_it() {
    let cluster = TestCluster::start(&[agent("node-1", 1, 0)]).await;
    let long = spec(&cluster, "long", "sleep 4");
    let mut waiting =
        command(&cluster, false, &["submit", "--wait", &long]).spawn().expect("spawn submit --wait");
    let mut lines = BufReader::new(waiting.stdout.take().expect("piped stdout")).lines();
    let first =
        tokio::time::timeout(WAIT, lines.next_line()).await.expect("the id").expect("read").expect("a line");
    let job = job_id(&first);
    let pid = i32::try_from(waiting.id().expect("running")).unwrap();
    // SAFETY: signals a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = tokio::time::timeout(WAIT, waiting.wait_with_output()).await.expect("the CLI ends").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains(&format!("{job} keeps running: `slotmarket wait {job}`")), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
    let client = cluster.client("alice").await;
    assert!(!client.status(job).await.unwrap().summary.state.is_terminal());
    assert_eq!(wait_finished(&client, job).await.summary.state, JobState::Completed);
    client.close().await;
}
