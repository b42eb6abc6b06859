//! Keeping every process of a task inside its container, so that none outlives it: not
//! one that left the task's process group (`setsid`), and not one left behind when the
//! agent itself was SIGKILLed.
//!
//! Two mechanisms, chosen once at start ([`ContainmentMode`]):
//! - **cgroup v2** (where the agent may create cgroups under its own): each container is
//!   lent a cgroup of its own under `slotmarket-agent-{name}-{hash of the work directory}`
//!   (the hash keeps two agents of one name on one machine, e.g. in tests, apart; the
//!   leases are [`crate::ready::CgroupLeases`]: an emptied cgroup is lent again, never one
//!   that held processes at its container's end); the task is born into it (or joins it
//!   between fork and exec), so all its descendants are in it whatever they do, and ending
//!   the container writes `cgroup.kill`. On start the agent kills and removes the cgroups a
//!   previous agent process left.
//! - **process scan** (everywhere else): every task carries `SLOTMARKET_AGENT_DIR` (the
//!   agent's work directory) and `SLOTMARKET_CONTAINER` in its environment, which its
//!   descendants inherit even across `setsid`. Ending a container SIGKILLs every process
//!   whose environment carries both, looking among the agent's descendants where the
//!   agent adopts its tasks' orphans ([`crate::descendants`]), else among every process;
//!   on start the agent SIGKILLs every process on the machine carrying its work
//!   directory. (A process that rewrites its own environment escapes this one.)
//!
//! The scan at start runs in both modes, since tasks of an agent that ran in the other
//! mode may be left.

use std::collections::BTreeSet;
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use slotmarket_common::ids::ContainerId;
use thiserror::Error;
use tracing::{debug, info, warn};

use crate::descendants;
use crate::ready::CgroupLeases;

/// Environment variable naming the agent (its work directory) in every task.
pub const AGENT_MARKER: &str = "SLOTMARKET_AGENT_DIR";
/// Environment variable naming the container in every task.
pub const CONTAINER_MARKER: &str = "SLOTMARKET_CONTAINER";
/// How long ending a container (or the sweep at start) waits for its processes to go.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Pause between two looks while waiting.
const POLL: Duration = Duration::from_millis(10);

/// How task processes are contained (`containment` in `agent.toml`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainmentMode {
    /// cgroup v2 where usable, else the process scan.
    #[default]
    Auto,
    /// cgroup v2; the agent refuses to start without it.
    Cgroup,
    /// The process scan only.
    Scan,
}

/// Why containment could not be set up or used.
#[derive(Debug, Error)]
pub enum ContainmentError {
    /// `containment = "cgroup"` but no usable cgroup v2 hierarchy.
    #[error(
        "containment = \"cgroup\" but cgroup v2 is not usable here ({0}); use \"auto\" or \"scan\", or run the agent where it may create cgroups"
    )]
    NoCgroup(String),
    /// A container's cgroup could not be created.
    #[error("cannot create cgroup {path}: {source}")]
    Create {
        /// The cgroup directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// The containment chosen at start; shared by every task.
#[derive(Clone, Debug)]
pub struct Containment {
    /// The agent's cgroup (`slotmarket-agent-{name}-{hash}` below the agent's own) and the
    /// containers' cgroups under it, if cgroups are used.
    cgroups: Option<Arc<CgroupLeases>>,
    /// The agent's work directory: the value of [`AGENT_MARKER`] in its tasks.
    agent_dir: PathBuf,
    /// Containers ending under the process scan, scanned for together.
    scans: Arc<ScanQueue>,
}

/// How a task enters its container's cgroup.
#[derive(Debug)]
pub struct TaskCgroup {
    /// The cgroup's directory, for a child born in it (`CLONE_INTO_CGROUP`); the lease
    /// holds it open, so nothing is opened per launch.
    pub dir: Arc<OwnedFd>,
    /// Its `cgroup.procs`, for a child that joins it between fork and exec.
    pub procs: CString,
}

impl Containment {
    /// Chooses the mechanism for the agent `name` working in `agent_dir`.
    pub fn new(mode: ContainmentMode, name: &str, agent_dir: &Path) -> Result<Containment, ContainmentError> {
        let agent_dir = agent_dir.to_path_buf();
        if mode == ContainmentMode::Scan {
            return Ok(Containment::scan_only(&agent_dir));
        }
        match agent_cgroup(name, &agent_dir) {
            Ok(base) => {
                info!(cgroup = %base.display(), "tasks run in their own cgroups");
                let leases = Some(Arc::new(CgroupLeases::new(base)));
                Ok(Containment { cgroups: leases, agent_dir, scans: Arc::default() })
            }
            Err(reason) if mode == ContainmentMode::Auto => {
                info!(%reason, "cgroup v2 not usable; containing tasks by a process scan");
                Ok(Containment::scan_only(&agent_dir))
            }
            Err(reason) => Err(ContainmentError::NoCgroup(reason)),
        }
    }

    /// Containment by the process scan only (for tests).
    pub fn scan_only(agent_dir: &Path) -> Containment {
        Containment { cgroups: None, agent_dir: agent_dir.to_path_buf(), scans: Arc::default() }
    }

    /// Whether tasks run in cgroups.
    pub fn uses_cgroups(&self) -> bool {
        self.cgroups.is_some()
    }

    /// The live processes (not zombies) carrying this agent's and `container`'s markers.
    pub fn marked_processes(&self, container: ContainerId) -> Vec<u32> {
        let tag = container.to_string();
        let mut environs = Environs::default();
        processes()
            .filter(|&pid| {
                environs
                    .read(pid)
                    .is_some_and(|env| self.is_ours(env) && has_entry(env, CONTAINER_MARKER, tag.as_bytes()))
            })
            .collect()
    }

    /// The environment every task of `container` carries (see the module header).
    pub fn markers(&self, container: ContainerId) -> [(&'static str, OsString); 2] {
        [
            (AGENT_MARKER, self.agent_dir.clone().into_os_string()),
            (CONTAINER_MARKER, container.to_string().into()),
        ]
    }

    /// Keeps up to `count` empty cgroups ready for the next containers (one per slot) and
    /// makes them now; blocking. Call it after [`sweep_leftovers`], which removes them.
    ///
    /// [`sweep_leftovers`]: Containment::sweep_leftovers
    pub fn keep_ready(&self, count: usize) {
        if let Some(leases) = &self.cgroups {
            leases.keep(count);
        }
    }

    /// Lends `container` a cgroup (when cgroups are used: an emptied one kept ready, else
    /// a new one) and returns how a task enters it.
    pub fn prepare(&self, container: ContainerId) -> Result<Option<TaskCgroup>, ContainmentError> {
        let Some(leases) = &self.cgroups else { return Ok(None) };
        let cgroup = leases
            .lend(container)
            .map_err(|source| ContainmentError::Create { path: leases.base().to_path_buf(), source })?;
        let procs = cgroup.path.join("cgroup.procs");
        // A path from our own directory names never holds a NUL byte.
        let procs = CString::new(procs.as_os_str().as_bytes()).map_err(|_| ContainmentError::Create {
            path: procs,
            source: io::ErrorKind::InvalidInput.into(),
        })?;
        Ok(Some(TaskCgroup { dir: cgroup.dir.clone(), procs }))
    }

    /// The cgroup `container` holds (see [`prepare`](Containment::prepare)), if any.
    pub fn cgroup_of(&self, container: ContainerId) -> Option<PathBuf> {
        Some(self.cgroups.as_ref()?.of(container)?.path.clone())
    }

    /// Whether `container` is known to hold no process: its cgroup is empty (or it has
    /// none); without cgroups, the agent adopts orphans and has no child but its task
    /// leaders ([`descendants::none_adopted`]), which holds only once `container`'s
    /// leader is reaped (or never started): call it only then. Never blocks: a few reads of
    /// kernel files (the cgroup's events, or the agent's task directory and its threads'
    /// children lists), so the common end of a task (its leader exited and nothing was
    /// left behind) needs no trip to the blocking pool. `false`
    /// means processes may be left: then [`kill_container`](Containment::kill_container)
    /// must run. An empty container cannot fill again (only its own processes add to it);
    /// after `true`, end the lease with [`give_back_empty`](Containment::give_back_empty)
    /// (it may come after the container's end is reported: nothing of it runs).
    pub fn is_empty(&self, container: ContainerId) -> bool {
        let Some(leases) = &self.cgroups else { return descendants::none_adopted() };
        let Some(cgroup) = leases.of(container) else { return true };
        cgroup.populated().is_ok_and(|populated| !populated)
    }

    /// Ends `container`'s lease on a cgroup [`is_empty`](Containment::is_empty) found
    /// empty: kept for the next container, or removed if enough are kept.
    pub fn give_back_empty(&self, container: ContainerId) {
        if let Some(leases) = &self.cgroups {
            leases.give_back_empty(container);
        }
    }

    /// [`is_empty`](Containment::is_empty) and, if so,
    /// [`give_back_empty`](Containment::give_back_empty).
    pub fn release_if_empty(&self, container: ContainerId) -> bool {
        let empty = self.is_empty(container);
        if empty {
            self.give_back_empty(container);
        }
        empty
    }

    /// SIGKILLs every process still in `container`, waits (bounded) until none is left and
    /// removes its cgroup (a cgroup that held processes at its end is never lent again).
    /// Blocking: call it off the async threads.
    pub fn kill_container(&self, container: ContainerId) {
        match &self.cgroups {
            Some(leases) => {
                if let Some(cgroup) = leases.of(container) {
                    kill_cgroup(&cgroup.path);
                    leases.forget(container);
                }
            }
            None => self.scans.scan_for(container, |batch| {
                let killed = kill_marked(Scope::of_this_process(), |env| {
                    self.is_ours(env)
                        && batch.iter().any(|tag| has_entry(env, CONTAINER_MARKER, tag.as_bytes()))
                });
                if killed > 0 {
                    debug!(containers = ?batch, killed, "killed processes that left their task's group");
                }
            }),
        }
    }

    /// Kills whatever a previous process of this agent left: every cgroup under the
    /// agent's, and every process carrying this agent's marker. Blocking; call it at start,
    /// before any task runs.
    pub fn sweep_leftovers(&self) {
        if let Some(leases) = &self.cgroups {
            for entry in std::fs::read_dir(leases.base()).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    kill_cgroup(&path);
                    if let Err(err) = std::fs::remove_dir(&path) {
                        warn!(cgroup = %path.display(), error = %err, "cannot remove a leftover cgroup");
                    }
                }
            }
        }
        // A previous agent's processes are nobody's descendants here.
        let killed = kill_marked(Scope::Machine, |env| self.is_ours(env));
        if killed > 0 {
            warn!(killed, "killed task processes a previous agent process left running");
        }
    }

    /// Removes the cgroups kept ready, then the agent's cgroup if it is empty (at
    /// shutdown, once every task is gone); one still holding a container's cgroup stays
    /// for the next start to sweep.
    pub fn release(&self) {
        if let Some(leases) = &self.cgroups {
            leases.close();
            if let Err(err) = std::fs::remove_dir(leases.base()) {
                debug!(cgroup = %leases.base().display(), error = %err, "the agent's cgroup stays");
            }
        }
    }

    fn is_ours(&self, env: &[u8]) -> bool {
        has_entry(env, AGENT_MARKER, self.agent_dir.as_os_str().as_bytes())
    }
}

/// Removes what a SIGKILLed agent `name` on `agent_dir` leaves in the cgroup hierarchy once
/// its processes are gone: its empty containers' cgroups and its own. For whoever started
/// the agent in the same cgroup as itself (a test harness), since a killed agent cannot.
pub fn remove_agent_cgroup(name: &str, agent_dir: &Path) {
    let Some(base) = cgroup_base(name, agent_dir) else { return };
    for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        let _ = std::fs::remove_dir(entry.path());
    }
    let _ = std::fs::remove_dir(&base);
}

/// Where the agent's cgroup is (or would be), if this process has a cgroup v2 membership.
fn cgroup_base(name: &str, agent_dir: &Path) -> Option<PathBuf> {
    let mount = cgroup2_mount(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own_cgroup(&own)?;
    Some(mount.join(own.trim_start_matches('/')).join(agent_cgroup_name(name, agent_dir)))
}

/// Creates (if needed) and returns the agent's cgroup under its own, or why cgroup v2
/// cannot be used. The name is stable for one work directory, so a restarted agent finds
/// what its predecessor left.
pub(crate) fn agent_cgroup(name: &str, agent_dir: &Path) -> Result<PathBuf, String> {
    let base = cgroup_base(name, agent_dir)
        .ok_or("no cgroup2 file system is mounted, or this process is in no cgroup v2")?;
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    if !base.join("cgroup.kill").exists() {
        return Err("cgroup.kill is missing (Linux 5.14 or later is needed)".into());
    }
    Ok(base)
}

/// `slotmarket-agent-{name}-{FNV-1a of the work directory, hex}`.
fn agent_cgroup_name(name: &str, agent_dir: &Path) -> String {
    let hash = agent_dir
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("slotmarket-agent-{name}-{hash:016x}")
}

/// The mount point of the cgroup2 file system in `/proc/self/mountinfo` text.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        // Fields: id parent major:minor root mount-point options [optional...] - fstype source ...
        let (before, after) = line.split_once(" - ")?;
        let fstype = after.split(' ').next()?;
        let mount_point = before.split(' ').nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(unescape_mount(mount_point)))
    })
}

/// Undoes the octal escapes (`\040` for a space) of a mountinfo path.
fn unescape_mount(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup v2 path in `/proc/self/cgroup` text (the `0::PATH` line).
fn own_cgroup(text: &str) -> Option<&str> {
    text.lines().find_map(|line| line.strip_prefix("0::"))
}

/// Writes `cgroup.kill` and waits (bounded) until the cgroup holds no process.
fn kill_cgroup(dir: &Path) {
    if let Err(err) = std::fs::write(dir.join("cgroup.kill"), "1") {
        if err.kind() != io::ErrorKind::NotFound {
            warn!(cgroup = %dir.display(), error = %err, "cannot kill the cgroup");
        }
        return;
    }
    let deadline = Instant::now() + KILL_WAIT;
    while populated(dir) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|events| events.lines().any(|line| line == "populated 1"))
        .unwrap_or(false)
}

/// Containers whose end waits for a process scan. A scan reads every process it looks at
/// (on the machine, or below the agent), so containers ending while one runs share the
/// next: one thread scans for the
/// whole batch while the others wait for it. A container is scanned for only by a scan
/// that starts after it was queued, so after its leader's end. A batch ends when none of
/// its containers has a process left (or at [`KILL_WAIT`]), so it waits for its slowest.
#[derive(Debug, Default)]
struct ScanQueue {
    state: Mutex<ScanState>,
    finished: Condvar,
}

#[derive(Debug)]
struct ScanState {
    /// Containers queued for the next batch (their marker values).
    waiting: Vec<String>,
    /// The number the next batch will have; batches count from 1.
    next: u64,
    /// The last batch finished (0: none).
    done: u64,
    /// Whether a thread is scanning for a batch now.
    scanning: bool,
}

impl Default for ScanState {
    fn default() -> ScanState {
        ScanState { waiting: Vec::new(), next: 1, done: 0, scanning: false }
    }
}

impl ScanQueue {
    /// Queues `container` and returns once a batch holding it has been scanned, by this
    /// thread (`scan`, given the batch's marker values) or another.
    fn scan_for(&self, container: ContainerId, scan: impl Fn(&[String])) {
        let mut state = self.lock();
        state.waiting.push(container.to_string());
        let mine = state.next;
        loop {
            if state.done >= mine {
                return;
            }
            if state.scanning {
                state = self.finished.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.scanning = true;
            let batch = std::mem::take(&mut state.waiting);
            let number = state.next;
            state.next += 1;
            drop(state);
            scan(&batch);
            state = self.lock();
            state.done = number;
            state.scanning = false;
            self.finished.notify_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, ScanState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where a scan looks for marked processes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scope {
    /// Every process on the machine.
    Machine,
    /// This process's descendants: all of its tasks' processes are there once it adopts
    /// orphans ([`crate::descendants`]).
    Descendants,
}

impl Scope {
    /// Where this process's own tasks' processes are all found.
    fn of_this_process() -> Scope {
        if descendants::adopting() { Scope::Descendants } else { Scope::Machine }
    }
}

/// SIGKILLs every process (but this one) in `scope` whose environment satisfies
/// `matches`, looking again until none is found or [`KILL_WAIT`] passes (a process may
/// fork while it is being killed). Below this process, each look also reaps the adopted
/// orphans that have exited, and the scan ends only once the ones it killed are reaped,
/// so no zombie of a container outlives its end. Returns how many distinct processes
/// were signalled.
fn kill_marked(scope: Scope, matches: impl Fn(&[u8]) -> bool) -> usize {
    let me = std::process::id();
    let mut killed = BTreeSet::new();
    let deadline = Instant::now() + KILL_WAIT;
    let mut environs = Environs::default();
    loop {
        let (candidates, dying) = match scope {
            Scope::Machine => (processes().collect(), false),
            Scope::Descendants => {
                let walk = descendants::walk();
                let reaping = descendants::reap_adopted(&walk.children);
                (walk.descendants, reaping.left.iter().any(|pid| killed.contains(pid)))
            }
        };
        let found: Vec<u32> = candidates
            .into_iter()
            .filter(|&pid| pid != me && environs.read(pid).is_some_and(&matches))
            .collect();
        if (found.is_empty() && !dying) || Instant::now() >= deadline {
            return killed.len();
        }
        for pid in found {
            if let Ok(pid_t) = libc::pid_t::try_from(pid) {
                // SAFETY: kill has no memory-safety preconditions; pid is one process's id
                // read from /proc, above 0.
                unsafe { libc::kill(pid_t, libc::SIGKILL) };
                killed.insert(pid);
            }
        }
        std::thread::sleep(POLL);
    }
}

/// The ids of the live processes, from `/proc`.
fn processes() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|name| name.parse().ok()))
}

/// Reads processes' initial environments into one buffer, reused across a scan: a scan
/// reads every process's, on every container's end, so it makes the fewest system calls
/// it can (`open`, one `read`, `close`; `std::fs::read` adds a `statx` and a second
/// `read`) and allocates nothing once the buffer has grown.
#[derive(Default)]
struct Environs {
    path: String,
    buf: Vec<u8>,
}

impl Environs {
    /// `pid`'s environment; `None` if it is gone, a zombie, or not ours to read.
    fn read(&mut self, pid: u32) -> Option<&[u8]> {
        use std::fmt::Write;
        use std::io::Read;
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/environ");
        let mut file = std::fs::File::open(&self.path).ok()?;
        if self.buf.len() < ENVIRON_START {
            self.buf.resize(ENVIRON_START, 0);
        }
        let mut len = 0;
        loop {
            let n = file.read(&mut self.buf[len..]).ok()?;
            len += n;
            // The kernel fills a read up to the end of the environment, so a read that
            // left room was the last (`environ_read` in fs/proc/base.c).
            if n == 0 || len < self.buf.len() {
                break;
            }
            self.buf.resize(self.buf.len() * 2, 0);
        }
        (len > 0).then(|| &self.buf[..len])
    }
}

/// The buffer a scan starts with: most environments are a few KiB.
const ENVIRON_START: usize = 64 * 1024;

/// Whether the NUL-separated environment `env` holds exactly `key=value`.
fn has_entry(env: &[u8], key: &str, value: &[u8]) -> bool {
    env.split(|b| *b == 0).any(|entry| {
        entry.strip_prefix(key.as_bytes()).and_then(|rest| rest.strip_prefix(b"=")) == Some(value)
    })
}

/// Joins the cgroup whose `cgroup.procs` is `procs`: runs in the forked child before exec,
/// so it makes only async-signal-safe system calls and allocates nothing.
pub(crate) fn join_cgroup_in_child(procs: &CString) -> io::Result<()> {
    // SAFETY: `procs` is a valid NUL-terminated path; open/write/close are
    // async-signal-safe and the buffer outlives the call.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // "0" means the writing process itself.
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(error);
        }
    }
    Ok(())
}

/// The session id of process `pid` (from `/proc/PID/stat`), for tests that need to know a
/// process escaped its task's session.
#[cfg(test)]
pub(crate) fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, may hold spaces): state ppid pgrp session.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
#[path = "containment_tests.rs"]
mod tests;
