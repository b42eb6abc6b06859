//! `TestCluster`: a real `slotmarket-master` and real `slotmarket-agent` processes on
//! loopback, with certificates in a temporary directory. Every process is started in
//! its own process group and killed when the cluster is dropped; every wait is bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slotmarket_agent::containment::{Containment, ContainmentMode};
use slotmarket_common::client::Client;
use slotmarket_common::identity::Role;
use slotmarket_common::ids::JobId;
use slotmarket_common::pki::{self, TlsFiles};
use slotmarket_common::process_group::ProcessGroup;
use slotmarket_common::protocol::{JobState, JobStatus, NodeSummary};
use slotmarket_common::spec::JobSpec;

/// Longest any single wait in these tests may take.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A binary built next to the test executable (`cargo build` puts them there).
pub(crate) fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let dir = exe.parent().and_then(Path::parent).expect("target directory");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build` before `cargo test` (see README)",
        path.display()
    );
    path
}

/// One agent to start: its node name and slot counts.
pub(crate) struct AgentSpec {
    pub(crate) name: &'static str,
    pub(crate) map_slots: u32,
    pub(crate) reduce_slots: u32,
    /// Run it as a broken node would be: `slotmarket-task` is not on its tasks' `PATH`.
    pub(crate) without_task_binary: bool,
}

pub(crate) const fn agent(name: &'static str, map_slots: u32, reduce_slots: u32) -> AgentSpec {
    AgentSpec { name, map_slots, reduce_slots, without_task_binary: false }
}

impl AgentSpec {
    /// The same agent, started so that its tasks cannot find `slotmarket-task`.
    pub(crate) const fn without_task_binary(self) -> AgentSpec {
        AgentSpec { without_task_binary: true, ..self }
    }
}

pub(crate) struct TestCluster {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) addr: std::net::SocketAddr,
    agent_timeout_ms: u64,
    master: Option<Child>,
    agents: BTreeMap<String, Child>,
    /// Every agent name started, for the cleanup of their cgroups.
    agent_names: BTreeSet<String>,
}

impl TestCluster {
    /// Makes certificates, starts the master on a free loopback port and the agents, and
    /// waits until every agent is registered.
    pub(crate) async fn start(agents: &[AgentSpec]) -> TestCluster {
        TestCluster::start_with(agents, 2000).await
    }

    /// Like [`start`](TestCluster::start) with the master's agent timeout given.
    pub(crate) async fn start_with(agents: &[AgentSpec], agent_timeout_ms: u64) -> TestCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki_dir = dir.path().join("pki");
        pki::init(&pki_dir, &[]).expect("pki init");
        pki::issue(&pki_dir, Role::User, "alice").expect("issue alice");
        pki::issue(&pki_dir, Role::User, "bob").expect("issue bob");
        let unbound = "127.0.0.1:0".parse().expect("address");
        let mut cluster = TestCluster {
            dir,
            addr: unbound,
            agent_timeout_ms,
            master: None,
            agents: BTreeMap::new(),
            agent_names: BTreeSet::new(),
        };
        cluster.start_master().await;
        for spec in agents {
            cluster.start_agent(spec);
        }
        let expected = agents.len();
        let admin = cluster.client("admin").await;
        wait_until(|| async { connected(&admin).await.len() == expected }, "agents to register").await;
        admin.close().await;
        cluster
    }

    /// Starts the master on the cluster's address (a free port the first time) and waits
    /// until it listens.
    async fn start_master(&mut self) {
        self.start_master_with(&[]).await;
    }

    /// The master's command line, with `extra` flags after the usual ones.
    pub(crate) fn master_command(&self, extra: &[&str]) -> Command {
        let mut command = Command::new(binary("slotmarket-master"));
        command
            .args(["--listen", &self.addr.to_string(), "--heartbeat-interval-ms", "250"])
            .args(["--agent-timeout-ms", &self.agent_timeout_ms.to_string()])
            .arg("--data-dir")
            .arg(self.master_dir())
            .arg("--cert-dir")
            .arg(self.dir.path().join("pki"))
            .args(extra);
        command
    }

    /// The master's data directory.
    pub(crate) fn master_dir(&self) -> PathBuf {
        self.dir.path().join("master")
    }

    /// Like [`start_master`](TestCluster::start_master) with `extra` flags.
    async fn start_master_with(&mut self, extra: &[&str]) {
        let addr_file = self.master_dir().join("master.addr");
        let _ = std::fs::remove_file(&addr_file);
        let master = spawn_logged(&mut self.master_command(extra), &self.dir.path().join("master.log"));
        self.master = Some(master);
        wait_for(|| std::fs::read_to_string(&addr_file).ok().filter(|s| s.ends_with('\n')), "master.addr")
            .await;
        self.addr =
            std::fs::read_to_string(&addr_file).expect("read addr").trim().parse().expect("socket address");
    }

    /// SIGKILLs the master and starts it again on the same address and data directory.
    pub(crate) async fn restart_master(&mut self) {
        self.restart_master_with(&[]).await;
    }

    /// Like [`restart_master`](TestCluster::restart_master) with `extra` flags.
    pub(crate) async fn restart_master_with(&mut self, extra: &[&str]) {
        self.kill_master();
        let previous = self.dir.path().join("master.log");
        let _ = std::fs::rename(&previous, self.dir.path().join("master.before-restart.log"));
        self.start_master_with(extra).await;
    }

    /// SIGKILLs the master (if it runs) and waits for it.
    pub(crate) fn kill_master(&mut self) {
        if let Some(mut master) = self.master.take() {
            let _ = master.kill();
            let _ = master.wait();
        }
    }

    /// Starts one agent process (issuing its certificate if needed) on the shared data
    /// directory.
    pub(crate) fn start_agent(&mut self, spec: &AgentSpec) {
        let shared = self.shared_dir();
        self.start_agent_with(spec, &shared, &[]);
    }

    /// Starts one agent with `data_dir` as its data directory and `settings` (lines of
    /// `agent.toml`) in a config file of its own.
    pub(crate) fn start_agent_with(&mut self, spec: &AgentSpec, data_dir: &Path, settings: &[&str]) {
        let config = self.dir.path().join(format!("{}.toml", spec.name));
        std::fs::write(&config, settings.join("\n")).expect("write agent.toml");
        let pki_dir = self.dir.path().join("pki");
        if !pki_dir.join(format!("{}.pem", spec.name)).exists() {
            pki::issue(&pki_dir, Role::Agent, spec.name).expect("issue agent cert");
        }
        let mut command = Command::new(self.agent_binary(spec.without_task_binary));
        if spec.without_task_binary {
            command.env("PATH", "/usr/bin:/bin");
        }
        let child = spawn_logged(
            command
                .args(["--master", &self.addr.to_string(), "--name", spec.name, "--kill-grace-ms", "500"])
                .args([
                    "--map-slots",
                    &spec.map_slots.to_string(),
                    "--reduce-slots",
                    &spec.reduce_slots.to_string(),
                ])
                .arg("--cert-dir")
                .arg(&pki_dir)
                .arg("--work-dir")
                .arg(self.dir.path().join("agents").join(spec.name))
                .arg("--data-dir")
                .arg(data_dir)
                .arg("--config")
                .arg(&config),
            &self.dir.path().join(format!("{}.log", spec.name)),
        );
        self.agents.insert(spec.name.to_string(), child);
        self.agent_names.insert(spec.name.to_string());
    }

    /// The agent executable to run. The agent puts its own directory in front of its
    /// tasks' `PATH`, so an agent that must not find `slotmarket-task` runs from a copy in
    /// a directory of its own (a symlink would resolve back to the build directory).
    fn agent_binary(&self, without_task_binary: bool) -> PathBuf {
        let built = binary("slotmarket-agent");
        if !without_task_binary {
            return built;
        }
        let bare = self.dir.path().join("bare-bin");
        let copy = bare.join("slotmarket-agent");
        if !copy.exists() {
            std::fs::create_dir_all(&bare).expect("bare-bin dir");
            std::fs::copy(&built, &copy).expect("copy slotmarket-agent");
        }
        copy
    }

    /// Starts the master and `agents` in local data mode, each with its own data
    /// directory ([`local_data_dir`](TestCluster::local_data_dir)) and a shuffle service
    /// on a free loopback port, and waits until every agent is registered.
    pub(crate) async fn start_local(agents: &[AgentSpec]) -> TestCluster {
        let mut cluster = TestCluster::start(&[]).await;
        for spec in agents {
            cluster.start_local_agent(spec);
        }
        let admin = cluster.client("admin").await;
        let expected = agents.len();
        wait_until(|| async { connected(&admin).await.len() == expected }, "local agents to register").await;
        admin.close().await;
        cluster
    }

    /// Starts one agent in local data mode on its own data directory (also after it was
    /// killed: the directory, and the outputs in it, stay).
    pub(crate) fn start_local_agent(&mut self, spec: &AgentSpec) {
        let data_dir = self.local_data_dir(spec.name);
        let settings = ["data_mode = \"local\"", "shuffle_listen = \"127.0.0.1:0\""];
        self.start_agent_with(spec, &data_dir, &settings);
    }

    /// The data directory of the local-mode agent `name`.
    pub(crate) fn local_data_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join("local").join(name)
    }

    /// A job's directory on the local-mode agent `name`.
    pub(crate) fn local_job_dir(&self, name: &str, job: JobId) -> PathBuf {
        self.local_data_dir(name).join("jobs").join(job.to_string())
    }

    /// The agents' shared data directory; job `j` writes under `jobs/j`.
    pub(crate) fn shared_dir(&self) -> PathBuf {
        self.dir.path().join("shared")
    }

    /// A job's directory in the shared data directory.
    pub(crate) fn job_dir(&self, job: JobId) -> PathBuf {
        self.shared_dir().join("jobs").join(job.to_string())
    }

    /// The certificate files of `identity`.
    pub(crate) fn tls(&self, identity: &str) -> TlsFiles {
        TlsFiles::in_dir(&self.dir.path().join("pki"), identity)
    }

    /// A connected client acting as `identity`.
    pub(crate) async fn client(&self, identity: &str) -> Client {
        tokio::time::timeout(WAIT, Client::connect(self.addr, "localhost", &self.tls(identity)))
            .await
            .expect("connect timed out")
            .expect("connect")
    }

    /// The pid of a running agent's process.
    pub(crate) fn agent_pid(&self, name: &str) -> u32 {
        self.agents.get(name).expect("no such agent").id()
    }

    /// SIGKILLs an agent process (its tasks die with it through PDEATHSIG).
    pub(crate) fn kill_agent(&mut self, name: &str) {
        let mut child = self.agents.remove(name).expect("no such agent");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops an agent as an operator would, with SIGTERM, and waits (bounded) for it to exit.
    pub(crate) fn stop_agent(&mut self, name: &str) {
        let mut child = self.agents.remove(name).expect("no such agent");
        let pid = libc::pid_t::try_from(child.id()).expect("pid");
        // SAFETY: signalling a child we started and have not reaped yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM to {name}");
        let deadline = Instant::now() + Duration::from_secs(15);
        while child.try_wait().expect("wait for agent").is_none() {
            assert!(Instant::now() < deadline, "{name} did not exit within 15 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `slotmarket --json ARGS` as `identity` against the cluster's master, bounded by
    /// [`WAIT`], ignoring any client config the environment names or the user keeps.
    pub(crate) async fn cli(&self, identity: &str, args: &[&str]) -> std::process::Output {
        let mut command = tokio::process::Command::new(binary("slotmarket"));
        command
            .args(["--json", "--master", &self.addr.to_string(), "--identity", identity])
            .arg("--cert-dir")
            .arg(self.dir.path().join("pki"))
            .args(args)
            .env_remove("SLOTMARKET_CONFIG")
            // No per-user client config from the machine running the tests.
            .env("XDG_CONFIG_HOME", self.dir.path())
            .kill_on_drop(true);
        tokio::time::timeout(WAIT, command.output())
            .await
            .expect("slotmarket timed out")
            .expect("run slotmarket")
    }

    /// `slotmarket nodes --json` as the admin, parsed.
    pub(crate) fn nodes_json(&self) -> serde_json::Value {
        let output = Command::new(binary("slotmarket"))
            .args(["nodes", "--json", "--master", &self.addr.to_string(), "--identity", "admin"])
            .arg("--cert-dir")
            .arg(self.dir.path().join("pki"))
            .output()
            .expect("run slotmarket nodes");
        assert!(
            output.status.success(),
            "slotmarket nodes failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("nodes --json prints JSON")
    }

    /// Whether `pid` is a live process (not gone, not a zombie left for init to reap).
    pub(crate) fn alive(pid: u32) -> bool {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
        stat.rsplit_once(')').is_some_and(|(_, rest)| rest.split_whitespace().next() != Some("Z"))
    }

    /// Processes whose working directory lies inside this cluster's temp dir: task
    /// processes run in container directories under it.
    pub(crate) fn processes_inside(&self) -> Vec<u32> {
        let root = self.dir.path().canonicalize().expect("canonical temp dir");
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) {
                if cwd.starts_with(&root) && pid != std::process::id() && TestCluster::alive(pid) {
                    pids.push(pid);
                }
            }
        }
        pids
    }

    /// Copies every process log out of the temp dir (which is about to go) for a look
    /// at a failed test.
    fn keep_logs(&self) {
        let kept = std::env::temp_dir().join(format!("slotmarket-test-logs-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&kept);
        for entry in std::fs::read_dir(self.dir.path()).into_iter().flatten().flatten() {
            if entry.path().extension().is_some_and(|e| e == "log") {
                let _ = std::fs::copy(entry.path(), kept.join(entry.file_name()));
            }
        }
        eprintln!("process logs kept in {}", kept.display());
    }

    /// The last lines of a process's log, for failure messages.
    pub(crate) fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.keep_logs();
        }
        let children = self.agents.values_mut().chain(self.master.as_mut());
        for child in children {
            // Each child leads its own process group: signal the whole group.
            if let Some(group) = ProcessGroup::led_by(child.id()) {
                let _ = group.signal(libc::SIGKILL);
            }
            let _ = child.wait();
        }
        // A SIGKILLed agent leaves its tasks' processes (and cgroups) behind: sweep them as a
        // restarted agent would, so no test leaves a process running.
        for name in &self.agent_names {
            let work_dir = self.dir.path().join("agents").join(name);
            if let Ok(containment) = Containment::new(ContainmentMode::Auto, name, &work_dir) {
                containment.sweep_leftovers();
                containment.release();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.processes_inside().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn spawn_logged(command: &mut Command, log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file");
    use std::os::unix::process::CommandExt;
    command
        .env("RUST_LOG", "info,slotmarket=debug")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .expect("spawn")
}

/// Polls `probe` every 50 ms until it yields a value; panics after [`WAIT`].
pub(crate) async fn wait_for<T>(mut probe: impl FnMut() -> Option<T>, what: &str) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls an async condition every 100 ms; panics after [`WAIT`].
pub(crate) async fn wait_until<F, Fut>(mut condition: F, what: &str)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Connected agents as the master reports them.
pub(crate) async fn connected(client: &Client) -> Vec<NodeSummary> {
    match client.nodes().await {
        Ok(nodes) => nodes.into_iter().filter(|n| n.connected).collect(),
        Err(_) => Vec::new(),
    }
}

/// A job spec of one map stage: `tasks` tasks that each sleep `secs` seconds.
pub(crate) fn sleepers(name: &str, tasks: u32, secs: f64) -> String {
    format!(
        r#"
name = "{name}"
[[stage]]
name = "sleep"
tasks = {tasks}
slot = "map"
command = "sleep {secs}"
"#
    )
}

/// Submits a TOML job spec and returns its id.
pub(crate) async fn submit(client: &Client, toml: &str) -> JobId {
    let spec = JobSpec::from_toml(toml).expect("valid spec");
    client.submit(spec).await.expect("submit")
}

/// A job's current status.
pub(crate) async fn status(client: &Client, job: JobId) -> JobStatus {
    client.status(job).await.expect("status")
}

/// Waits until exactly `n` of the job's tasks are running.
pub(crate) async fn wait_running(client: &Client, job: JobId, n: u64) {
    let what = format!("{n} running tasks of {job}");
    wait_until(|| async { status(client, job).await.summary.tasks_running == n }, &what).await;
}

/// Waits until agents have reported `n` of the job's tasks running. A task counts in
/// `tasks_running` from its launch, before its agent has it: a master killed then can
/// lose the launch, and its recovery rightly re-runs the task.
pub(crate) async fn wait_reported_running(client: &Client, job: JobId, n: usize) {
    let what = format!("{n} tasks of {job} reported running");
    wait_until(
        || async {
            let tasks = client.tasks(job).await.expect("tasks");
            tasks.tasks.iter().filter(|t| t.state == "running").count() == n
        },
        &what,
    )
    .await;
}

/// Waits until the job has ended and returns its final status.
pub(crate) async fn wait_finished(client: &Client, job: JobId) -> JobStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = status(client, job).await;
        if status.summary.state.is_terminal() {
            return status;
        }
        assert!(Instant::now() < deadline, "job {job} did not finish: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts a job completed, printing the logs if not.
pub(crate) fn assert_completed(cluster: &TestCluster, status: &JobStatus) {
    assert_eq!(
        status.summary.state,
        JobState::Completed,
        "job ended {:?}: {:?}\nmaster log:\n{}",
        status.summary.state,
        status.message,
        cluster.log_tail("master")
    );
}
