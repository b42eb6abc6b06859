//! Task processes: prepares a container's directories (taking one made ahead, see
//! [`ready`], where there is one), renders its command, starts it
//! under `/bin/sh -c` in its own process group (and its own cgroup, see [`containment`]:
//! born into it with `clone3`, see [`spawn`], or joined between fork and exec where
//! that is refused), and runs the kill sequence (SIGTERM to the group, a grace period,
//! SIGKILL). Once the task's leader has exited, whatever it left in its container is
//! killed too. One tokio task supervises each process, so every event about a container
//! is reported in order.
//!
//! [`containment`]: crate::containment
//! [`spawn`]: crate::spawn
//! [`ready`]: crate::ready

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use slotmarket_common::ids::{AccountId, ContainerId};
use slotmarket_common::process_group::ProcessGroup;
use slotmarket_common::protocol::{ENV_FETCH_SOCKET, ENV_FETCH_TOKEN, Launch};
use slotmarket_common::spec::{TemplateError, render};
use thiserror::Error;
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use crate::containment::{Containment, ContainmentError, TaskCgroup, join_cgroup_in_child};
use crate::core::TaskExit;
use crate::descendants::OwnChild;
use crate::plain_command::{PlainCommand, plain_command};
use crate::ready::ReadyDirs;
use crate::run_as::{RunAs, RunAsError, UnixUser};
use crate::set_up::SetUpSite;
use crate::shuffle::fetch::{FetchTokens, TokenGuard};
use crate::spawn::{self, SpawnFailure, TaskCommand, TaskProcess};
use crate::stderr_tail;

/// Where and how task processes run; built once (see `AgentConfig::process_config`) and
/// shared by every task.
#[derive(Clone, Debug)]
pub struct ProcessConfig {
    /// The agent's own directory, absolute (tasks run in their container directory, so a
    /// relative path would point elsewhere); containers get
    /// `{work_dir}/containers/{container}`.
    pub work_dir: PathBuf,
    /// The data directory shared by the agents, absolute; jobs get `{data_dir}/jobs/{job}`.
    pub data_dir: PathBuf,
    /// How long a process group has between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// The tasks' `PATH`: the agent's own directory in front of the inherited one, so
    /// `slotmarket-task` installed beside `slotmarket-agent` is found. `None` leaves
    /// `PATH` alone.
    pub task_path: Option<OsString>,
    /// How every process of a task is kept inside its container.
    pub containment: Containment,
    /// The Unix user each account's tasks run as (empty: the agent's own).
    pub run_as: RunAs,
    /// Local data mode: every task gets a fetch token and the fetch socket's path.
    pub fetch: Option<FetchEnv>,
    /// Container directories made ahead of their launch (see [`crate::ready`]).
    pub ready_dirs: Arc<ReadyDirs>,
    /// Where a task's set-up runs (see [`crate::set_up`]).
    pub set_up: SetUpSite,
}

/// What a task of a local-mode agent is given to fetch its inputs through the agent.
#[derive(Clone, Debug)]
pub struct FetchEnv {
    /// The agent's fetch socket (`SLOTMARKET_FETCH_SOCKET`).
    pub socket: PathBuf,
    /// Where containers' tokens (`SLOTMARKET_FETCH_TOKEN`) are registered.
    pub tokens: FetchTokens,
}

impl ProcessConfig {
    /// The working directory of `container` (absolute, like `work_dir`).
    pub fn container_dir(&self, container: impl std::fmt::Display) -> PathBuf {
        self.work_dir.join("containers").join(container.to_string())
    }

    /// The directory of `job` under the shared data directory (absolute, like `data_dir`).
    pub fn job_dir(&self, job: impl std::fmt::Display) -> PathBuf {
        self.data_dir.join("jobs").join(job.to_string())
    }

    /// Where container directories are made ahead of their launch (see [`crate::ready`]):
    /// beside `containers/`, on the same file system, so a rename moves one into place.
    pub fn ready_dir(&self) -> PathBuf {
        self.work_dir.join("ready")
    }

    /// Makes, for `slots` tasks, what a task needs from the file systems ahead of its
    /// launch (an empty cgroup, a directory with its output files), after removing what a
    /// previous agent process left. Blocking; call it at start, after the containment's
    /// sweep, before any task runs.
    ///
    /// Where tasks run in cgroups (so a task's end leaves none of its processes), removed
    /// containers' directories are recycled for later ones (see [`crate::recycle`]).
    pub fn keep_ready(&self, slots: usize) {
        self.containment.keep_ready(slots);
        self.ready_dirs.keep(&self.ready_dir(), slots);
        if self.containment.uses_cgroups() {
            if let Err(err) = self.ready_dirs.recycle_into(&self.ready_dir()) {
                warn!(dir = %self.ready_dir().display(), error = %err, "cannot make the recycling pool; removed container directories are unlinked");
            }
        }
    }
}

/// Why a task process could not be started.
#[derive(Debug, Error)]
pub enum SpawnError {
    /// A directory or an output file could not be created.
    #[error("cannot create {path}: {source}")]
    Prepare {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The command template does not render.
    #[error("bad command template: {0}")]
    Template(#[from] TemplateError),
    /// The job directory is not valid UTF-8, so it cannot be put into a command.
    #[error("job directory {0} is not valid UTF-8")]
    NonUtf8(PathBuf),
    /// `/bin/sh` could not be executed.
    #[error("cannot start /bin/sh: {0}")]
    Exec(io::Error),
    /// The kill arrived before the process was started, so it never was.
    #[error("killed before it started")]
    KilledBeforeStart,
    /// The container's cgroup could not be made.
    #[error(transparent)]
    Containment(#[from] ContainmentError),
    /// The job's account has no Unix user on this agent.
    #[error(transparent)]
    RunAs(#[from] RunAsError),
}

/// What happened to a supervised task process, in the order it happened.
#[derive(Debug)]
pub enum ProcessEvent {
    /// The process started; `pid` is also its process group id.
    Started {
        /// Its process id.
        pid: u32,
    },
    /// The process could not be started; nothing runs.
    SpawnFailed(SpawnError),
    /// The process exited and its group was swept; nothing of it runs any more. Unless
    /// it exited with code 0, the tail of its stderr comes along (see `stderr_tail`).
    Exited(TaskExit, Option<String>),
}

/// The agent's hold on one supervised task: asks for the kill sequence.
#[derive(Debug)]
pub struct TaskHandle {
    kill: Option<oneshot::Sender<()>>,
}

impl TaskHandle {
    /// Starts the kill sequence (or cancels a start that has not happened yet). Calling
    /// it again does nothing.
    pub fn kill(&mut self) {
        if let Some(kill) = self.kill.take() {
            // An error means the supervisor already finished: nothing left to kill.
            let _ = kill.send(());
        }
    }
}

/// Starts supervising `launch`: prepares its directories, spawns it and waits for it,
/// calling `on_event` with `Started`/`SpawnFailed` and then `Exited`. Must be called
/// inside a tokio runtime.
pub fn start(
    config: Arc<ProcessConfig>,
    launch: Launch,
    on_event: impl FnMut(ProcessEvent) + Send + 'static,
) -> TaskHandle {
    let (kill_tx, kill_rx) = oneshot::channel();
    tokio::spawn(supervise(config, launch, kill_rx, on_event));
    TaskHandle { kill: Some(kill_tx) }
}

async fn supervise(
    config: Arc<ProcessConfig>,
    launch: Launch,
    mut kill: oneshot::Receiver<()>,
    mut on_event: impl FnMut(ProcessEvent),
) {
    let container = launch.container;
    // The token works until the container is done (dropped before its end is reported).
    let (prepared, fetch_token) = match prepare(Arc::clone(&config), launch).await {
        Ok(prepared) => prepared,
        Err(err) => return on_event(ProcessEvent::SpawnFailed(err)),
    };
    if kill.try_recv().is_ok() {
        drop(fetch_token);
        sweep_container(&config, container).await;
        return on_event(ProcessEvent::SpawnFailed(SpawnError::KilledBeforeStart));
    }
    let mut child = match prepared.start() {
        Ok(child) => child,
        Err(err) => {
            drop(fetch_token);
            sweep_container(&config, container).await;
            return on_event(ProcessEvent::SpawnFailed(SpawnError::Exec(err)));
        }
    };
    let pid = child.id();
    let group = ProcessGroup::led_by(pid);
    debug!(%container, pid, "task started");
    on_event(ProcessEvent::Started { pid });
    // The slot's next task finds its directory made while this one runs.
    refill_ready_dirs(&config);

    let status = tokio::select! {
        status = child.wait() => status,
        // A dropped handle (Err) is not a kill request: the branch is then disabled.
        Ok(()) = &mut kill => terminate(&mut child, group, config.kill_grace).await,
    };
    // The leader is gone, but children it left behind may not be, even outside its group;
    // no task process may outlive its container.
    if let Some(group) = group {
        signal_group(group, libc::SIGKILL);
    }
    // Nothing of the task may run once its end is reported: an empty container is checked
    // here, but its cgroup handed on (or removed) only after the report, off the slot's
    // path. A leader not known reaped may still hold children of its own, which only a
    // scan finds.
    let empty = status.is_ok() && config.containment.is_empty(container);
    if !empty {
        kill_container(&config, container).await;
    }
    drop(fetch_token);
    let exit = match status {
        Ok(status) => exit_of(status),
        Err(err) => TaskExit::Unknown(err.to_string()),
    };
    debug!(%container, pid, ?exit, "task exited");
    let tail = match exit {
        TaskExit::Code(0) => None,
        _ => stderr_tail::of_failed(&config.container_dir(container)).await,
    };
    on_event(ProcessEvent::Exited(exit, tail));
    if empty {
        config.containment.give_back_empty(container);
    }
}

/// Makes ready container directories up to the number kept, as blocking work.
fn refill_ready_dirs(config: &Arc<ProcessConfig>) {
    if config.ready_dirs.wants_more() {
        let config = Arc::clone(config);
        tokio::task::spawn_blocking(move || config.ready_dirs.refill(&config.ready_dir()));
    }
}

/// Kills whatever is left in `container`: at once when it is known empty (the usual end),
/// else as blocking work off the async threads.
async fn sweep_container(config: &Arc<ProcessConfig>, container: ContainerId) {
    if config.containment.release_if_empty(container) {
        return;
    }
    kill_container(config, container).await;
}

/// Kills whatever is left in `container` and removes its cgroup, as blocking work.
async fn kill_container(config: &Arc<ProcessConfig>, container: ContainerId) {
    let config = Arc::clone(config);
    let swept = tokio::task::spawn_blocking(move || config.containment.kill_container(container)).await;
    if let Err(err) = swept {
        warn!(%container, error = %err, "sweeping the container failed");
    }
}

/// A task ready to start: its command, directories, output files, environment and
/// cgroup, all prepared off the async threads.
struct PreparedTask {
    container: ContainerId,
    rendered: String,
    /// Where `rendered` is one plain command, the program the child tries before the
    /// shell ([`crate::plain_command`]).
    plain: Option<PlainCommand>,
    dir: PathBuf,
    stdout: std::fs::File,
    stderr: std::fs::File,
    /// Set on top of the agent's own environment, in order (later entries win).
    env: Vec<(OsString, OsString)>,
    /// The container's cgroup: born in (see [`crate::spawn`]), or joined in the child by
    /// the fallback.
    cgroup: Option<TaskCgroup>,
    user: Option<UnixUser>,
}

/// Set once `clone3` was refused (seccomp): every later task starts the fallback way.
static CLONE3_REFUSED: AtomicBool = AtomicBool::new(false);

impl PreparedTask {
    /// Starts the process and returns once it has exec'd: by `clone3` ([`crate::spawn`]),
    /// born in its cgroup if it has one; where `clone3` is refused, through
    /// `tokio::process` with the cgroup joined between fork and exec.
    fn start(self) -> io::Result<TaskChild> {
        let PreparedTask { container, rendered, plain, dir, mut stdout, mut stderr, env, cgroup, user } =
            self;
        let (cgroup_dir, cgroup_procs) = cgroup.map(|c| (c.dir, c.procs)).unzip();
        let shell = [OsStr::new("/bin/sh"), OsStr::new("-c"), OsStr::new(&rendered)];
        if !CLONE3_REFUSED.load(Ordering::Relaxed) {
            let mut command =
                TaskCommand::new(shell[0], &shell, &env, &dir, (stdout, stderr), cgroup_dir, user.clone())?;
            if let Some(plain) = &plain {
                command = command.trying_first(&plain.candidates, &plain.argv)?;
            }
            match spawn::spawn(&command) {
                Ok(process) => return Ok(TaskChild::Born(process)),
                Err(SpawnFailure::Failed(err)) => return Err(err),
                Err(SpawnFailure::Unsupported) => {
                    warn!(%container, "clone3 is refused here; tasks start by fork instead (joining their cgroup, if any, before exec)");
                    CLONE3_REFUSED.store(true, Ordering::Relaxed);
                    // The refused command took the output files; the fallback below
                    // starts the task with fresh handles on them.
                    (stdout, stderr) = PreparedTask::reopen_outputs(&dir)?;
                }
            }
        }
        // Always the shell here: this way in has no place to try the program first.
        let mut command = Command::new(shell[0]);
        command
            .args(&shell[1..])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .envs(env)
            // Its own group, so the kill sequence reaches every process the task forks.
            .process_group(0)
            // Safety net for an agent that dies without running the kill sequence.
            .kill_on_drop(true);
        child_setup(&mut command, cgroup_procs, user);
        let starting = crate::descendants::starting();
        let child = command.spawn()?;
        // `id` is only `None` once the child has been waited for.
        let own = starting.started_reaped_elsewhere(child.id().unwrap_or_default());
        Ok(TaskChild::Forked(child, Some(own)))
    }

    /// The output files again (the first pair went into the refused attempt).
    fn reopen_outputs(dir: &Path) -> io::Result<(std::fs::File, std::fs::File)> {
        let open = |name| std::fs::OpenOptions::new().append(true).open(dir.join(name));
        Ok((open("stdout")?, open("stderr")?))
    }
}

/// A running task process, however it was started.
enum TaskChild {
    /// Born in its cgroup by `clone3`.
    Born(TaskProcess),
    /// Started by `tokio::process`, with its registration as the agent's own child until
    /// reaped (or dropped unreaped).
    Forked(Child, Option<OwnChild>),
}

impl TaskChild {
    fn id(&self) -> u32 {
        match self {
            TaskChild::Born(process) => process.id(),
            // `id` is only `None` once the child has been waited for, which has not happened.
            TaskChild::Forked(child, _) => child.id().unwrap_or_default(),
        }
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            TaskChild::Born(process) => process.wait().await,
            TaskChild::Forked(child, own) => {
                // tokio reaps inside these polls: each is a reap under way (see
                // `descendants::reaping`).
                let mut wait = std::pin::pin!(child.wait());
                let status = std::future::poll_fn(|cx| {
                    let _reap = crate::descendants::reaping();
                    wait.as_mut().poll(cx)
                })
                .await;
                if status.is_ok() {
                    if let Some(own) = own.take() {
                        own.reaped();
                    }
                }
                status
            }
        }
    }

    fn start_kill(&mut self) -> io::Result<()> {
        match self {
            TaskChild::Born(process) => {
                process.kill();
                Ok(())
            }
            TaskChild::Forked(child, _) => child.start_kill(),
        }
    }
}

/// Creates the job and container directories and the output files, renders the command
/// and gathers what the process needs (but does not start it). The file system work is
/// one blocking call: a trivial task's launch cost is mostly these few system calls. It
/// runs right here where the file systems are local (no hand-off on the slot's path, see
/// [`crate::set_up`]), else in the blocking pool.
async fn prepare(
    config: Arc<ProcessConfig>,
    launch: Launch,
) -> Result<(PreparedTask, Option<TokenGuard>), SpawnError> {
    if config.set_up == SetUpSite::Inline {
        return prepare_blocking(&config, &launch);
    }
    tokio::task::spawn_blocking(move || prepare_blocking(&config, &launch)).await.unwrap_or_else(|join| {
        Err(SpawnError::Prepare { path: PathBuf::new(), source: io::Error::other(join) })
    })
}

fn prepare_blocking(
    config: &ProcessConfig,
    launch: &Launch,
) -> Result<(PreparedTask, Option<TokenGuard>), SpawnError> {
    let user = config.run_as.user_for(&AccountId(launch.account.to_string()))?.cloned();
    let job_dir = config.job_dir(launch.task.job);
    let dir = config.container_dir(launch.container);
    // Made by the job's first task here: for the others one look-up, where a `mkdir`
    // refused would also lock the directory that every agent's jobs share. (On NFS the
    // look-up may answer from cached attributes; a job's directory is removed only after
    // the job ended.)
    if !job_dir.is_dir() {
        std::fs::create_dir_all(&job_dir)
            .map_err(|source| SpawnError::Prepare { path: job_dir.clone(), source })?;
    }
    let job_dir_text = job_dir.to_str().ok_or_else(|| SpawnError::NonUtf8(job_dir.clone()))?;
    let rendered = render(&launch.command, &launch.vars, job_dir_text)?;
    let (stdout, stderr) = container_dir(config, &dir)?;
    if let Some(user) = &user {
        // The task writes its job's and its container's directories as its own user.
        for path in [job_dir.clone(), dir.clone(), dir.join("stdout"), dir.join("stderr")] {
            std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid))
                .map_err(|source| SpawnError::Prepare { path, source })?;
        }
    }
    let cgroup = config.containment.prepare(launch.container)?;

    let mut env: Vec<(OsString, OsString)> = vec![
        ("SLOTMARKET_JOB".into(), launch.task.job.to_string().into()),
        ("SLOTMARKET_TASK".into(), launch.task.to_string().into()),
        ("SLOTMARKET_ATTEMPT".into(), launch.attempt.0.to_string().into()),
        ("SLOTMARKET_JOB_DIR".into(), job_dir.clone().into_os_string()),
    ];
    if let Some(path) = &config.task_path {
        env.push(("PATH".into(), path.clone()));
    }
    // Inherited by everything the task starts, even across `setsid`: how the sweep finds it.
    env.extend(config.containment.markers(launch.container).map(|(key, value)| (key.into(), value)));
    // What the shell sets (dash keeps a `PWD` that names its working directory): the same
    // for a task started without one.
    env.push(("PWD".into(), dir.clone().into_os_string()));
    if let Some(user) = &user {
        env.push(("USER".into(), user.name.clone().into()));
        env.push(("LOGNAME".into(), user.name.clone().into()));
    }
    let token = match &config.fetch {
        Some(fetch) => {
            let guard = fetch
                .tokens
                .issue(launch.task.job)
                .map_err(|source| SpawnError::Prepare { path: PathBuf::from("/dev/urandom"), source })?;
            env.push((ENV_FETCH_SOCKET.into(), fetch.socket.clone().into_os_string()));
            env.push((ENV_FETCH_TOKEN.into(), guard.token().into()));
            Some(guard)
        }
        None => None,
    };
    let plain = match &config.task_path {
        Some(path) => plain_command(&rendered, Some(path)),
        None => plain_command(&rendered, std::env::var_os("PATH").as_deref()),
    };
    debug!(container = %launch.container, command = %rendered, dir = %dir.display(), plain = plain.is_some(), "prepared");
    let prepared =
        PreparedTask { container: launch.container, rendered, plain, dir, stdout, stderr, env, cgroup, user };
    Ok((prepared, token))
}

/// Makes the container directory `dir` with empty output files, and opens them: by
/// renaming a ready directory into place where one is left (one call on the path), else
/// as before. A directory already there (a repeated container id) is reused, its output
/// files emptied.
fn container_dir(config: &ProcessConfig, dir: &Path) -> Result<(std::fs::File, std::fs::File), SpawnError> {
    if let Some(ready) = config.ready_dirs.take() {
        match std::fs::rename(&ready.path, dir) {
            Ok(()) => return Ok((ready.stdout, ready.stderr)),
            Err(err) => {
                debug!(dir = %dir.display(), error = %err, "the ready directory does not fit; making one");
                let _ = std::fs::remove_dir_all(&ready.path);
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| SpawnError::Prepare { path: dir.to_path_buf(), source })?;
    Ok((output_file(&dir.join("stdout"))?, output_file(&dir.join("stderr"))?))
}

fn output_file(path: &Path) -> Result<std::fs::File, SpawnError> {
    std::fs::File::create(path).map_err(|source| SpawnError::Prepare { path: path.to_path_buf(), source })
}

/// What the child does between fork and exec: joins its cgroup (if any), gets the limit on
/// open files the agent started with, becomes its account's Unix user (if mapped), then
/// asks the kernel to SIGKILL it if the agent dies (Linux only; after the user switch,
/// which would clear it).
fn child_setup(command: &mut Command, cgroup_procs: Option<std::ffi::CString>, user: Option<UnixUser>) {
    let agent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (open/write/close, setrlimit, setgroups/setgid/setuid, prctl,
    // getppid) on data prepared before the fork; it allocates nothing.
    // The death signal fires when the *thread* that forked exits; tasks are spawned from
    // tokio worker threads, which live as long as the runtime, i.e. the agent.
    unsafe {
        command.pre_exec(move || {
            // First, so that nothing the task starts can be outside the cgroup.
            if let Some(procs) = &cgroup_procs {
                join_cgroup_in_child(procs)?;
            }
            if crate::open_files::restore_in_child() != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(user) = &user {
                become_user(user)?;
            }
            die_with_parent(agent)
        });
    }
}

/// Drops to `user`: supplementary groups, then group, then user (the order in which each
/// step is still permitted). Runs in the forked child.
pub(crate) fn become_user(user: &UnixUser) -> io::Result<()> {
    // SAFETY: `groups` is a live slice of `len` gids; the calls are async-signal-safe.
    unsafe {
        if libc::setgroups(user.groups.len() as _, user.groups.as_ptr()) != 0
            || libc::setgid(user.gid) != 0
            || libc::setuid(user.uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(agent: u32) -> io::Result<()> {
    // SAFETY: prctl and getppid are async-signal-safe and take no pointers.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        // The agent may have died between fork and prctl; then nobody would kill us.
        if libc::getppid() as u32 != agent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_agent: u32) -> io::Result<()> {
    Ok(())
}

/// SIGTERM to the group, up to `grace` for the leader to exit, then SIGKILL. Without a
/// usable group only the leader is killed.
async fn terminate(
    child: &mut TaskChild,
    group: Option<ProcessGroup>,
    grace: Duration,
) -> io::Result<ExitStatus> {
    let Some(group) = group else {
        child.start_kill()?;
        return child.wait().await;
    };
    signal_group(group, libc::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            info!(%group, grace_ms = grace.as_millis() as u64, "grace period over; sending SIGKILL");
            signal_group(group, libc::SIGKILL);
            child.wait().await
        }
    }
}

/// Sends `signal` to the task's process group; a failure (other than an already empty
/// group) is logged, since the kill sequence has nothing better to do with it.
fn signal_group(group: ProcessGroup, signal: libc::c_int) {
    if let Err(err) = group.signal(signal) {
        warn!(%group, signal, error = %err, "cannot signal process group");
    }
}

fn exit_of(status: ExitStatus) -> TaskExit {
    match (status.code(), status.signal()) {
        (Some(code), _) => TaskExit::Code(code),
        (None, Some(signal)) => TaskExit::Signal(signal),
        (None, None) => TaskExit::Unknown(format!("unrecognised wait status {status}")),
    }
}

#[cfg(test)]
#[path = "process_tests.rs"]
mod tests;
