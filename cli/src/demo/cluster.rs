//! The demo's local cluster: a temporary directory with certificates, one master and N
//! agents as separate processes, each in its own process group with its output in log
//! files, and a guard that stops every one of them however the demo ends.
//!
//! Stopping is SIGTERM to each process group, a bounded grace period, then SIGKILL.
//! [`Cluster::shutdown`] does it on the normal paths; `Drop` does the same for every path
//! that skipped it (errors, panics), so no process is left behind.

use std::ffi::OsString;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use slotmarket_common::identity::Role;
use slotmarket_common::pki::{self, TlsFiles};
use slotmarket_common::process_group::ProcessGroup;
use tokio::process::{Child, Command};

/// How long processes get between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for the master to write its address file (a debug build on a busy
/// machine can take a few seconds to open its database and bind).
const MASTER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often to look for the address file or reap children.
const POLL: Duration = Duration::from_millis(100);
/// Lines of a log shown when a process fails.
const LOG_TAIL_LINES: usize = 20;
/// The name the master's certificate carries (always included by `pki::init`).
pub(crate) const SERVER_NAME: &str = "localhost";
/// The user the demo submits as.
pub(crate) const DEMO_USER: &str = "demo";

/// The programs the demo runs, found next to this executable. `slotmarket-task` must be
/// there too: each agent puts its own directory first on its tasks' `PATH`, so job
/// commands find the `slotmarket-task` built with this demo.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    /// `slotmarket-master`.
    pub(crate) master: PathBuf,
    /// `slotmarket-agent`.
    pub(crate) agent: PathBuf,
}

impl Binaries {
    /// Looks beside `std::env::current_exe()`.
    pub(crate) fn locate() -> Result<Binaries> {
        let exe = std::env::current_exe().context("finding this executable's path")?;
        let dir = exe.parent().context("this executable has no parent directory")?;
        Binaries::locate_in(dir)
    }

    /// Checks that all three programs are in `dir`, naming the first missing one.
    pub(crate) fn locate_in(dir: &Path) -> Result<Binaries> {
        for name in ["slotmarket-master", "slotmarket-agent", "slotmarket-task"] {
            let path = dir.join(name);
            if !path.is_file() {
                let profile = if dir.ends_with("release") { "cargo build --release" } else { "cargo build" };
                bail!(
                    "{name} not found in {} (the demo runs the programs next to `slotmarket`); \
                     build the whole workspace first with `{profile}`",
                    dir.display()
                );
            }
        }
        Ok(Binaries { master: dir.join("slotmarket-master"), agent: dir.join("slotmarket-agent") })
    }
}

/// One process the demo started.
#[derive(Debug)]
struct Managed {
    /// `master` or `node-K`.
    name: String,
    /// The process; spawned with `kill_on_drop` as a last resort.
    child: Child,
    /// Its pid, which is also its process group id.
    pid: Option<u32>,
    /// Where its stderr goes.
    stderr_log: PathBuf,
    /// How it ended, once reaped.
    exited: Option<ExitStatus>,
}

/// The temporary directory and the processes running in it.
#[derive(Debug)]
pub(crate) struct Cluster {
    /// Removed on drop unless kept.
    temp: Option<tempfile::TempDir>,
    /// The directory's path (stays valid after it is kept).
    root: PathBuf,
    bins: Binaries,
    children: Vec<Managed>,
    /// Set once every child has been stopped or deliberately left running.
    released: bool,
}

impl Cluster {
    /// Creates the temporary directory and its layout.
    pub(crate) fn create(bins: Binaries) -> Result<Cluster> {
        let temp = tempfile::Builder::new()
            .prefix("slotmarket-demo-")
            .tempdir()
            .context("creating a temporary directory for the demo")?;
        let root = temp.path().to_path_buf();
        for sub in ["pki", "master", "agents", "shared", "logs"] {
            let dir = root.join(sub);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        Ok(Cluster { temp: Some(temp), root, bins, children: Vec::new(), released: false })
    }

    /// The temporary directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The certificate directory.
    pub(crate) fn pki_dir(&self) -> PathBuf {
        self.root.join("pki")
    }

    /// The log directory.
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The certificate files of `name` (e.g. `admin`, `demo`).
    pub(crate) fn tls_files(&self, name: &str) -> TlsFiles {
        TlsFiles::in_dir(&self.pki_dir(), name)
    }

    /// The CA with master and admin certificates, one agent certificate per node and one
    /// user certificate for each of `users`.
    pub(crate) fn make_certificates(&self, agents: u32, users: &[&str]) -> Result<()> {
        let dir = self.pki_dir();
        pki::init(&dir, &[]).with_context(|| format!("making the demo CA in {}", dir.display()))?;
        for k in 1..=agents {
            let name = node_name(k);
            pki::issue(&dir, Role::Agent, &name).with_context(|| format!("issuing {name}'s certificate"))?;
        }
        for user in users {
            pki::issue(&dir, Role::User, user).with_context(|| format!("issuing {user}'s certificate"))?;
        }
        Ok(())
    }

    /// Starts the master with `config` as its master.toml on a free loopback port and
    /// waits for it to say where.
    pub(crate) async fn start_master(&mut self, config: &str) -> Result<SocketAddr> {
        let data = self.root.join("master");
        let config_file = self.root.join("master.toml");
        std::fs::write(&config_file, config).with_context(|| format!("writing {}", config_file.display()))?;
        let args: Vec<OsString> = vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--data-dir".into(),
            data.clone().into(),
            "--cert-dir".into(),
            self.pki_dir().into(),
            "--config".into(),
            config_file.into(),
        ];
        let program = self.bins.master.clone();
        self.spawn("master", &program, &args)?;
        self.wait_for_address(&data.join("master.addr")).await
    }

    /// Polls the master's address file until it holds an address, the master exits or
    /// the wait runs out.
    async fn wait_for_address(&mut self, file: &Path) -> Result<SocketAddr> {
        let started = Instant::now();
        loop {
            // The master may be part-way through writing it; only a parsable address counts.
            if let Ok(text) = std::fs::read_to_string(file)
                && let Ok(addr) = text.trim().parse::<SocketAddr>()
            {
                return Ok(addr);
            }
            self.check_alive()?;
            if started.elapsed() > MASTER_START_TIMEOUT {
                bail!(
                    "the master did not write {} within {}s; its log is {}{}",
                    file.display(),
                    MASTER_START_TIMEOUT.as_secs(),
                    self.log_path("master").display(),
                    tail_of(&self.log_path("master"))
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Starts agents `node-1` to `node-COUNT` against the master at `master`.
    pub(crate) fn start_agents(&mut self, count: u32, master: SocketAddr) -> Result<()> {
        (1..=count).try_for_each(|k| self.start_agent(k, master))
    }

    /// Starts agent `node-K` against the master at `master`.
    fn start_agent(&mut self, k: u32, master: SocketAddr) -> Result<()> {
        let name = node_name(k);
        let work = self.root.join("agents").join(&name);
        let args: Vec<OsString> = vec![
            "--master".into(),
            master.to_string().into(),
            "--cert-dir".into(),
            self.pki_dir().into(),
            "--name".into(),
            name.clone().into(),
            "--map-slots".into(),
            "2".into(),
            "--reduce-slots".into(),
            "1".into(),
            "--work-dir".into(),
            work.into(),
            "--data-dir".into(),
            self.root.join("shared").into(),
        ];
        let program = self.bins.agent.clone();
        self.spawn(&name, &program, &args)
    }

    /// Spawns `program` in its own process group with stdout and stderr in log files.
    fn spawn(&mut self, name: &str, program: &Path, args: &[OsString]) -> Result<()> {
        let stdout_log = self.logs_dir().join(format!("{name}.stdout.log"));
        let stderr_log = self.log_path(name);
        let stdout =
            File::create(&stdout_log).with_context(|| format!("creating {}", stdout_log.display()))?;
        let stderr =
            File::create(&stderr_log).with_context(|| format!("creating {}", stderr_log.display()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            // Its own group: Ctrl-C in the terminal reaches only the demo, which then stops
            // the children in order, and a signal to the group reaches whatever they spawn.
            .process_group(0)
            .kill_on_drop(true);
        if std::env::var_os("RUST_LOG").is_none() {
            // Logs are only read when something went wrong; make them worth reading.
            command.env("RUST_LOG", "info");
        }
        let child = command.spawn().with_context(|| format!("starting {}", program.display()))?;
        tracing::debug!(name, pid = ?child.id(), "started");
        let pid = child.id();
        self.children.push(Managed { name: name.into(), child, pid, stderr_log, exited: None });
        Ok(())
    }

    /// Where `name`'s stderr goes.
    pub(crate) fn log_path(&self, name: &str) -> PathBuf {
        self.logs_dir().join(format!("{name}.stderr.log"))
    }

    /// Fails if any process has exited, with its status and the tail of its log.
    pub(crate) fn check_alive(&mut self) -> Result<()> {
        self.reap();
        match self.children.iter().find(|c| c.exited.is_some()) {
            None => Ok(()),
            Some(child) => bail!(
                "{} exited unexpectedly ({}); its log is {}{}",
                child.name,
                child.exited.map(|s| s.to_string()).unwrap_or_default(),
                child.stderr_log.display(),
                tail_of(&child.stderr_log)
            ),
        }
    }

    /// Records the exit of every child that has ended; answers whether all have.
    fn reap(&mut self) -> bool {
        for managed in self.children.iter_mut().filter(|c| c.exited.is_none()) {
            if let Ok(Some(status)) = managed.child.try_wait() {
                managed.exited = Some(status);
            }
        }
        self.children.iter().all(|c| c.exited.is_some())
    }

    /// Sends `signal` to the process group of every child still running. The child is not
    /// reaped yet, so its group id has not been reused.
    fn signal_running(&mut self, signal: libc::c_int) {
        for managed in self.children.iter().filter(|c| c.exited.is_none()) {
            if let Some(group) = managed.pid.and_then(ProcessGroup::led_by) {
                // Nothing better to do on failure: the SIGKILL and `kill_on_drop` follow.
                let _ = group.signal(signal);
            }
        }
    }

    /// Stops every process: SIGTERM, up to [`STOP_GRACE`] to exit, then SIGKILL.
    ///
    /// It polls with blocking sleeps because `Drop` runs it too; on the async paths the
    /// demo has nothing else to do meanwhile (the children are separate processes).
    pub(crate) fn shutdown(&mut self) {
        self.signal_running(libc::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while !self.reap() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        self.kill_stragglers();
        self.released = true;
    }

    /// SIGKILLs whatever outlived the grace period and reaps it.
    fn kill_stragglers(&mut self) {
        for managed in self.children.iter().filter(|c| c.exited.is_none()) {
            tracing::warn!(name = %managed.name, "did not stop within {}s; killing it", STOP_GRACE.as_secs());
        }
        self.signal_running(libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.reap() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Keeps the temporary directory (for its logs) when it would otherwise be removed.
    pub(crate) fn keep_files(&mut self) {
        if let Some(temp) = self.temp.take() {
            let _ = temp.keep();
        }
    }

    /// Leaves every process running and the directory in place; answers `(name, pid)` of
    /// each process so the caller can say how to stop them.
    pub(crate) fn detach(mut self) -> Vec<(String, u32)> {
        self.keep_files();
        self.released = true;
        let mut running = Vec::new();
        for managed in std::mem::take(&mut self.children) {
            if let Some(pid) = managed.pid {
                running.push((managed.name, pid));
            }
            // Forgetting the handle is what stops `kill_on_drop`; the process outlives us
            // by design here.
            std::mem::forget(managed.child);
        }
        running
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.released {
            self.shutdown();
        }
    }
}

/// `node-K`.
pub(crate) fn node_name(k: u32) -> String {
    format!("node-{k}")
}

/// `":\n<last lines>"` of a log, or nothing if it is empty or unreadable.
pub(crate) fn tail_of(path: &Path) -> String {
    let Ok(bytes) = std::fs::read(path) else { return String::new() };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
    format!(":\n    {}", tail.join("\n    "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binaries_are_named_with_the_build_command() {
        let dir = tempfile::tempdir().unwrap();
        let err = Binaries::locate_in(dir.path()).unwrap_err().to_string();
        assert!(err.contains("slotmarket-master not found"), "{err}");
        assert!(err.contains("cargo build"), "{err}");
        for name in ["slotmarket-master", "slotmarket-agent"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let err = Binaries::locate_in(dir.path()).unwrap_err().to_string();
        assert!(err.contains("slotmarket-task not found"), "{err}");
    }

    #[test]
    fn log_tails_keep_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        assert_eq!(tail_of(&path), "");
        let text: String = (0..30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let tail = tail_of(&path);
        assert!(tail.starts_with(":\n    line 10\n"), "{tail}");
        assert!(tail.ends_with("line 29"), "{tail}");
    }

    #[tokio::test]
    async fn shutdown_stops_children_in_their_own_groups() {
        let bins = Binaries { master: "/bin/sh".into(), agent: "/bin/sh".into() };
        let mut cluster = Cluster::create(bins).unwrap();
        // The signal goes to the group, so it reaches `sleep` even if the shell forked it.
        let args: Vec<OsString> = vec!["-c".into(), "sleep 30".into()];
        cluster.spawn("sleeper", Path::new("/bin/sh"), &args).unwrap();
        cluster.check_alive().unwrap();
        let started = Instant::now();
        cluster.shutdown();
        assert!(started.elapsed() < STOP_GRACE, "took {:?}", started.elapsed());
        assert!(cluster.reap());
        let root = cluster.root().to_path_buf();
        drop(cluster);
        assert!(!root.exists(), "the temporary directory is removed");
    }

    #[tokio::test]
    async fn detached_children_keep_running_with_their_files() {
        let bins = Binaries { master: "/bin/sh".into(), agent: "/bin/sh".into() };
        let mut cluster = Cluster::create(bins).unwrap();
        let args: Vec<OsString> = vec!["-c".into(), "sleep 30".into()];
        cluster.spawn("sleeper", Path::new("/bin/sh"), &args).unwrap();
        let root = cluster.root().to_path_buf();
        let running = cluster.detach();
        assert_eq!(running.len(), 1);
        let (name, pid) = running[0].clone();
        assert_eq!(name, "sleeper");
        std::thread::sleep(Duration::from_millis(100));
        let alive = |pid: u32| Path::new(&format!("/proc/{pid}")).exists();
        assert!(alive(pid) && root.exists());
        // Clean up what the test left running, the way the printed `kill` line would.
        ProcessGroup::led_by(pid).unwrap().signal(libc::SIGKILL).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[tokio::test]
    async fn an_exited_child_is_reported_with_its_log() {
        let bins = Binaries { master: "/bin/sh".into(), agent: "/bin/sh".into() };
        let mut cluster = Cluster::create(bins).unwrap();
        let args: Vec<OsString> = vec!["-c".into(), "echo boom >&2; exit 3".into()];
        cluster.spawn("master", Path::new("/bin/sh"), &args).unwrap();
        let err = cluster.wait_for_address(&cluster.root().join("master/master.addr")).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("master exited unexpectedly"), "{text}");
        assert!(text.contains("boom"), "{text}");
    }
}
