//! Tests that really spawn task processes: exit codes, captured output, the kill
//! sequence with and without a cooperative task, and that no process outlives its group.
//! Every wait is bounded.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use slotmarket_common::ids::{AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::Launch;
use slotmarket_common::spec::{SlotKind, TaskVars};
use tokio::sync::mpsc;

use super::{ProcessConfig, ProcessEvent, SpawnError, TaskHandle, start};
use crate::config::task_path;
use crate::containment::{Containment, ContainmentMode, session_of};
use crate::core::TaskExit;
use crate::run_as::RunAs;
use crate::set_up::SetUpSite;

/// Upper bound for any single wait in these tests.
const WAIT: Duration = Duration::from_secs(10);

struct Fixture {
    _dir: tempfile::TempDir,
    config: Arc<ProcessConfig>,
    /// What the tasks' `PATH` starts with.
    path_prefix: PathBuf,
}

impl Fixture {
    fn new(grace: Duration) -> Fixture {
        Fixture::with(grace, ContainmentMode::Auto)
    }

    fn with(grace: Duration, mode: ContainmentMode) -> Fixture {
        Fixture::with_set_up(grace, mode, SetUpSite::Inline)
    }

    fn with_set_up(grace: Duration, mode: ContainmentMode, set_up: SetUpSite) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path_prefix = dir.path().join("bin");
        let work_dir = dir.path().join("work");
        let config = ProcessConfig {
            fetch: None,
            containment: Containment::new(mode, "process-test", &work_dir).unwrap(),
            run_as: RunAs::default(),
            work_dir,
            data_dir: dir.path().join("data"),
            kill_grace: grace,
            task_path: task_path(&path_prefix),
            ready_dirs: Arc::default(),
            set_up,
        };
        Fixture { _dir: dir, config: Arc::new(config), path_prefix }
    }

    /// Waits until one of `container`'s processes is in a session other than `leader`'s.
    async fn wait_escape(&self, container: u64, leader: u32) {
        let deadline = Instant::now() + WAIT;
        let session = session_of(leader);
        let escaped = || {
            let pids = self.config.containment.marked_processes(ContainerId(container));
            pids.into_iter().any(|pid| session_of(pid).is_some_and(|s| Some(s) != session))
        };
        while !escaped() {
            assert!(Instant::now() < deadline, "no process of the task left its session");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn start(&self, container: u64, command: &str) -> (TaskHandle, mpsc::UnboundedReceiver<ProcessEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = start(self.config.clone(), launch(container, command), move |event| {
            let _ = tx.send(event);
        });
        (handle, rx)
    }
}

fn launch(container: u64, command: &str) -> Launch {
    let task = TaskId { job: JobId(5), stage: StageId(0), index: 2 };
    Launch {
        container: ContainerId(container),
        task,
        attempt: AttemptId(1),
        slot: SlotKind::Map,
        command: command.into(),
        vars: TaskVars {
            job: JobId(5),
            stage: "map".into(),
            task: 2,
            tasks: 4,
            attempt: AttemptId(1),
            input: None,
            stage_tasks: BTreeMap::new().into(),
        },
        account: "alice".into(),
    }
}

async fn next(events: &mut mpsc::UnboundedReceiver<ProcessEvent>) -> ProcessEvent {
    tokio::time::timeout(WAIT, events.recv()).await.expect("timed out waiting for a process event").unwrap()
}

async fn started(events: &mut mpsc::UnboundedReceiver<ProcessEvent>) -> i32 {
    match next(events).await {
        ProcessEvent::Started { pid } => pid as i32,
        other => panic!("expected Started, got {other:?}"),
    }
}

async fn exited(events: &mut mpsc::UnboundedReceiver<ProcessEvent>) -> TaskExit {
    match next(events).await {
        ProcessEvent::Exited(exit, _) => exit,
        other => panic!("expected Exited, got {other:?}"),
    }
}

/// Whether any process of group `pgid` is still alive. `kill(-pgid, 0)` failing with
/// ESRCH is the definitive answer; where it succeeds we also accept a group made only of
/// zombies, because orphans are reparented to PID 1 and some container inits never reap.
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence; pgid > 1 comes from a spawned child.
    let rc = unsafe { libc::kill(-pgid, 0) };
    if rc != 0 {
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    }
    let Ok(entries) = std::fs::read_dir("/proc") else { return true };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { return false };
        // Fields after the command name, which is in parentheses and may hold spaces.
        let Some((_, rest)) = stat.rsplit_once(')') else { return false };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) && fields.first() != Some(&"Z")
    })
}

async fn assert_group_gone(pgid: i32) {
    let deadline = Instant::now() + WAIT;
    while group_alive(pgid) {
        assert!(Instant::now() < deadline, "process group {pgid} outlived its container");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The set-up's place, seen from outside: with the blocking pool's only thread held, a
/// task whose set-up runs inline starts at once, and one whose set-up goes to the pool
/// (a possibly remote file system) waits until the pool is free, then starts as before.
#[test]
fn inline_set_up_starts_a_task_while_the_blocking_pool_is_busy_and_pool_set_up_waits_for_it() {
    for site in [SetUpSite::Inline, SetUpSite::BlockingPool] {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let fx = Fixture::with_set_up(Duration::from_secs(3), ContainmentMode::Auto, site);
            let (release, held) = std::sync::mpsc::channel::<()>();
            let (busy, pool_taken) = tokio::sync::oneshot::channel();
            let holder = tokio::task::spawn_blocking(move || {
                let _ = busy.send(());
                // Until `release` is sent on or dropped.
                let _ = held.recv();
            });
            pool_taken.await.unwrap();
            let (_handle, mut events) = fx.start(9, "true");
            let while_held = if site == SetUpSite::Inline { WAIT } else { Duration::from_millis(300) };
            let early = tokio::time::timeout(while_held, events.recv()).await;
            match site {
                SetUpSite::Inline => assert!(
                    matches!(early, Ok(Some(ProcessEvent::Started { .. }))),
                    "inline set-up waited for the blocking pool: {early:?}"
                ),
                SetUpSite::BlockingPool => {
                    assert!(early.is_err(), "set-up in the pool ran while the pool was held: {early:?}");
                }
            }
            drop(release);
            holder.await.unwrap();
            if site == SetUpSite::BlockingPool {
                started(&mut events).await;
            }
            assert_eq!(exited(&mut events).await, TaskExit::Code(0));
        });
    }
}

#[tokio::test]
async fn a_nonzero_exit_code_is_reported() {
    let fx = Fixture::new(Duration::from_secs(3));
    let (_handle, mut events) = fx.start(1, "exit 3");
    started(&mut events).await;
    assert_eq!(exited(&mut events).await, TaskExit::Code(3));
}

#[tokio::test]
async fn output_environment_and_directories_are_set_up() {
    let fx = Fixture::new(Duration::from_secs(3));
    let command = "echo hello; echo oops >&2; echo $SLOTMARKET_JOB $SLOTMARKET_TASK $SLOTMARKET_CONTAINER; \
                   pwd; echo {job_dir}; echo $PATH";
    let (_handle, mut events) = fx.start(7, command);
    started(&mut events).await;
    assert_eq!(exited(&mut events).await, TaskExit::Code(0));

    let dir = fx.config.container_dir(ContainerId(7));
    let job_dir = fx.config.job_dir(JobId(5));
    assert!(job_dir.is_dir(), "the job directory is created");
    let stdout = std::fs::read_to_string(dir.join("stdout")).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "hello");
    assert_eq!(lines[1], "j5 j5.s0.t2 c7");
    assert_eq!(std::fs::canonicalize(lines[2]).unwrap(), std::fs::canonicalize(&dir).unwrap());
    assert_eq!(lines[3], job_dir.to_str().unwrap());
    let prefix = &fx.path_prefix;
    assert!(lines[4].starts_with(&format!("{}:", prefix.display())), "PATH is {}", lines[4]);
    assert_eq!(std::fs::read_to_string(dir.join("stderr")).unwrap(), "oops\n");
}

/// The pid in the first field of `/proc/self/stat` that container `container` printed.
fn printed_pid(fx: &Fixture, container: u64) -> i32 {
    let stat =
        std::fs::read_to_string(fx.config.container_dir(ContainerId(container)).join("stdout")).unwrap();
    stat.split(' ').next().unwrap().parse().unwrap()
}

/// Runs `command` in `container` to its end; its process id and its exit.
async fn run_to_exit(fx: &Fixture, container: u64, command: &str) -> (i32, TaskExit) {
    let (_handle, mut events) = fx.start(container, command);
    let pid = started(&mut events).await;
    (pid, exited(&mut events).await)
}

#[tokio::test]
async fn a_plain_command_is_the_task_process_itself_where_sh_is_dash() {
    a_plain_command_is_the_task_process_itself_with(ContainmentMode::Auto).await;
}

#[tokio::test]
async fn a_plain_command_is_the_task_process_itself_with_the_process_scan_too() {
    a_plain_command_is_the_task_process_itself_with(ContainmentMode::Scan).await;
}

async fn a_plain_command_is_the_task_process_itself_with(mode: ContainmentMode) {
    let fx = Fixture::with(Duration::from_secs(3), mode);
    let (pid, exit) = run_to_exit(&fx, 8, "cat /proc/self/stat").await;
    assert_eq!(exit, TaskExit::Code(0));
    let dash = std::fs::canonicalize("/bin/sh").unwrap().ends_with("dash");
    assert_eq!(printed_pid(&fx, 8) == pid, dash, "started {pid}; dash: {dash}");

    // With shell syntax the shell starts `cat` as its child.
    let (pid, exit) = run_to_exit(&fx, 9, "cat /proc/self/stat; exit 0").await;
    assert_eq!(exit, TaskExit::Code(0));
    assert_ne!(printed_pid(&fx, 9), pid);
}

/// A file named `name` in the directory at the head of the tasks' `PATH`.
fn in_path_prefix(fx: &Fixture, name: &str, content: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(&fx.path_prefix).unwrap();
    let path = fx.path_prefix.join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn stdout_of(fx: &Fixture, container: u64) -> String {
    std::fs::read_to_string(fx.config.container_dir(ContainerId(container)).join("stdout")).unwrap()
}

#[tokio::test]
async fn where_the_program_cannot_be_exec_d_the_shell_does_what_it_always_did() {
    let fx = Fixture::new(Duration::from_secs(3));
    // Not executable, ahead of the real `cat` on PATH: dash goes on to the real one, and so
    // does the child, without the shell.
    in_path_prefix(&fx, "cat", "#!/bin/sh\necho wrong cat\n", 0o644);
    let (pid, exit) = run_to_exit(&fx, 20, "cat /proc/self/stat").await;
    assert_eq!(exit, TaskExit::Code(0));
    let dash = std::fs::canonicalize("/bin/sh").unwrap().ends_with("dash");
    assert_eq!(printed_pid(&fx, 20) == pid, dash, "the real cat, started {pid}; dash: {dash}");

    // No `#!`: dash runs it as a script of its own.
    in_path_prefix(&fx, "no-header", "echo from the script\n", 0o755);
    assert_eq!(run_to_exit(&fx, 21, "no-header").await.1, TaskExit::Code(0));
    assert_eq!(stdout_of(&fx, 21), "from the script\n");

    // Not found anywhere: the shell says so.
    assert_eq!(run_to_exit(&fx, 22, "no-such-program-anywhere").await.1, TaskExit::Code(127));
    let stderr = std::fs::read_to_string(fx.config.container_dir(ContainerId(22)).join("stderr")).unwrap();
    assert!(stderr.contains("not found"), "{stderr}");

    // A FIFO with execute bits: nothing waits on it, and the shell finds no program.
    let fifo =
        std::ffi::CString::new(fx.path_prefix.join("fifo-program").into_os_string().into_encoded_bytes())
            .unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o755) }, 0);
    assert_eq!(run_to_exit(&fx, 23, "fifo-program").await.1, TaskExit::Code(127));
}

#[tokio::test]
async fn a_task_with_or_without_a_shell_sees_its_directory_as_pwd() {
    let fx = Fixture::new(Duration::from_secs(3));
    for (container, command) in [(10, "env"), (11, "echo PWD=$PWD")] {
        assert_eq!(run_to_exit(&fx, container, command).await.1, TaskExit::Code(0));
        let dir = fx.config.container_dir(ContainerId(container));
        let stdout = std::fs::read_to_string(dir.join("stdout")).unwrap();
        let pwd = format!("PWD={}", dir.display());
        assert!(stdout.lines().any(|line| line == pwd), "{command}: no {pwd} in {stdout}");
    }
}

#[tokio::test]
async fn a_killed_task_leaves_no_process_in_its_group() {
    let fx = Fixture::new(Duration::from_secs(3));
    let (mut handle, mut events) = fx.start(2, "sleep 30");
    let pgid = started(&mut events).await;
    let begun = Instant::now();
    handle.kill();
    assert_eq!(exited(&mut events).await, TaskExit::Signal(libc::SIGTERM));
    assert!(begun.elapsed() < Duration::from_secs(2), "SIGTERM should have been enough");
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn a_task_ignoring_sigterm_is_sigkilled_after_the_grace() {
    let grace = Duration::from_millis(300);
    let fx = Fixture::new(grace);
    // The shell and its `sleep` child both ignore SIGTERM.
    let (mut handle, mut events) = fx.start(3, "trap '' TERM; sleep 30; true");
    let pgid = started(&mut events).await;
    // Give the shell time to install the trap before the signal arrives.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let begun = Instant::now();
    handle.kill();
    assert_eq!(exited(&mut events).await, TaskExit::Signal(libc::SIGKILL));
    assert!(begun.elapsed() >= grace, "SIGKILL came before the grace period ended");
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn background_children_die_with_the_group() {
    let fx = Fixture::new(Duration::from_secs(3));
    let (mut handle, mut events) = fx.start(4, "sleep 30 & sleep 30 & wait");
    let pgid = started(&mut events).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.kill();
    exited(&mut events).await;
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn processes_left_behind_by_a_finished_task_are_swept() {
    processes_left_behind_by_a_finished_task_are_swept_with(ContainmentMode::Auto).await;
}

#[tokio::test]
async fn processes_left_behind_by_a_finished_task_are_swept_by_the_process_scan_too() {
    processes_left_behind_by_a_finished_task_are_swept_with(ContainmentMode::Scan).await;
}

async fn processes_left_behind_by_a_finished_task_are_swept_with(mode: ContainmentMode) {
    let fx = Fixture::with(Duration::from_secs(3), mode);
    let (_handle, mut events) = fx.start(5, "sleep 30 & exit 0");
    let pgid = started(&mut events).await;
    assert_eq!(exited(&mut events).await, TaskExit::Code(0));
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn a_bad_template_fails_the_spawn() {
    let fx = Fixture::new(Duration::from_secs(3));
    let (_handle, mut events) = fx.start(6, "echo {nope}");
    match next(&mut events).await {
        ProcessEvent::SpawnFailed(SpawnError::Template(err)) => assert!(err.to_string().contains("nope")),
        other => panic!("expected a template error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_kill_before_the_start_means_no_start() {
    let fx = Fixture::new(Duration::from_secs(3));
    let (mut handle, mut events) = fx.start(8, "sleep 30");
    // `start` only spawned the supervisor; it has not run yet on this runtime.
    handle.kill();
    match next(&mut events).await {
        ProcessEvent::SpawnFailed(SpawnError::KilledBeforeStart) => {}
        other => panic!("expected KilledBeforeStart, got {other:?}"),
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Every container's cgroup is gone once its task exited; the agent's is empty.
        self.config.containment.release();
    }
}

/// A task that put a child in a session of its own (out of reach of its group) is
/// cancelled: nothing of it is left.
async fn a_cancelled_task_that_called_setsid_leaves_nothing(mode: ContainmentMode) {
    let fx = Fixture::with(Duration::from_millis(300), mode);
    let (mut handle, mut events) = fx.start(9, "setsid sleep 300 & sleep 300");
    let leader = started(&mut events).await as u32;
    fx.wait_escape(9, leader).await;
    handle.kill();
    exited(&mut events).await;
    assert_eq!(fx.config.containment.marked_processes(ContainerId(9)), Vec::<u32>::new());
}

#[tokio::test]
async fn a_cancelled_setsid_task_leaves_nothing_with_cgroups_where_usable() {
    a_cancelled_task_that_called_setsid_leaves_nothing(ContainmentMode::Auto).await;
}

#[tokio::test]
async fn a_cancelled_setsid_task_leaves_nothing_with_the_process_scan() {
    a_cancelled_task_that_called_setsid_leaves_nothing(ContainmentMode::Scan).await;
}

/// As root (this machine's tests run as root), an account mapped to `nobody` runs as
/// `nobody`, in directories it owns, and an unmapped account is refused; an agent that is
/// not root refuses the mapping when it starts (see `config`), so nothing is run here then.
#[tokio::test]
async fn a_mapped_account_runs_as_its_unix_user_and_an_unmapped_one_is_refused() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mapping: BTreeMap<String, String> = [("alice".to_string(), "nobody".to_string())].into();
    let run_as = match RunAs::resolve(&mapping, euid) {
        Ok(run_as) => run_as,
        Err(err) => {
            assert_ne!(euid, 0, "root must be able to map to nobody: {err}");
            return;
        }
    };
    let mut fx = Fixture::new(Duration::from_secs(3));
    Arc::get_mut(&mut fx.config).unwrap().run_as = run_as;
    let (_handle, mut events) = fx.start(11, "id -u; id -g; echo $USER; touch {job_dir}/written");
    started(&mut events).await;
    assert_eq!(exited(&mut events).await, TaskExit::Code(0));
    let dir = fx.config.container_dir(ContainerId(11));
    let stdout = std::fs::read_to_string(dir.join("stdout")).unwrap();
    let nobody = crate::run_as::lookup_user("nobody").unwrap();
    assert_eq!(stdout, format!("{}\n{}\nnobody\n", nobody.uid, nobody.gid));
    use std::os::unix::fs::MetadataExt;
    let written = std::fs::metadata(fx.config.job_dir(JobId(5)).join("written")).unwrap();
    assert_eq!(written.uid(), nobody.uid);

    let mut bob = launch(12, "true");
    bob.account = "bob".into();
    let (tx, mut events) = mpsc::unbounded_channel();
    let _handle = start(fx.config.clone(), bob, move |event| {
        let _ = tx.send(event);
    });
    match next(&mut events).await {
        ProcessEvent::SpawnFailed(SpawnError::RunAs(err)) => {
            assert!(err.to_string().contains("account bob"), "{err}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_local_mode_task_gets_a_fetch_token_for_its_job_that_dies_with_its_container() {
    let mut fixture = Fixture::new(Duration::from_millis(200));
    let tokens = crate::shuffle::fetch::FetchTokens::default();
    let socket = fixture._dir.path().join("work/fetch.sock");
    let mut config = (*fixture.config).clone();
    config.fetch = Some(super::FetchEnv { socket: socket.clone(), tokens: tokens.clone() });
    fixture.config = Arc::new(config);
    let (_handle, mut events) = fixture.start(
        7,
        "echo \"$SLOTMARKET_FETCH_SOCKET\" > env; echo \"$SLOTMARKET_FETCH_TOKEN\" >> env; sleep 0.3",
    );
    started(&mut events).await;
    let env = fixture._dir.path().join("work/containers/c7/env");
    let deadline = Instant::now() + WAIT;
    while std::fs::read_to_string(&env).map_or(true, |text| text.lines().count() < 2) {
        assert!(Instant::now() < deadline, "the task wrote no env");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = std::fs::read_to_string(&env).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], socket.to_str().unwrap());
    assert_eq!(tokens.job_of(lines[1]), Some(JobId(5)), "the token is the container's job's while it runs");
    assert_eq!(exited(&mut events).await, TaskExit::Code(0));
    assert_eq!(tokens.job_of(lines[1]), None, "the token dies with the container");
}

/// How many ready directories (named by number, not the recycling pool) `ready` holds.
fn ready_dirs_in(ready: &std::path::Path) -> usize {
    let entries = std::fs::read_dir(ready).unwrap().map(|entry| entry.unwrap().file_name());
    entries.filter(|name| name.to_string_lossy().bytes().all(|b| b.is_ascii_digit())).count()
}

/// Waits (bounded) until `done` holds.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_slots_next_task_starts_in_a_ready_directory_and_the_emptied_cgroup_untouched_by_a_late_kill() {
    let fx = Fixture::new(Duration::from_secs(3));
    fx.config.keep_ready(1);
    let ready_count = || ready_dirs_in(&fx.config.ready_dir());
    assert_eq!(ready_count(), 1);
    let (mut first, mut events) = fx.start(1, "echo one");
    started(&mut events).await;
    let cgroup = fx.config.containment.cgroup_of(ContainerId(1));
    assert_eq!(exited(&mut events).await, TaskExit::Code(0));
    assert_eq!(
        std::fs::read_to_string(fx.config.container_dir(ContainerId(1)).join("stdout")).unwrap(),
        "one\n"
    );
    let containers = std::fs::read_dir(fx.config.work_dir.join("containers")).unwrap().count();
    assert_eq!(containers, 1, "only the container's directory is among the containers'");
    // Made again while the first task ran; its cgroup handed back after its end.
    wait_until("a directory is ready again", || ready_count() == 1).await;
    wait_until("the first lease ends", || fx.config.containment.cgroup_of(ContainerId(1)).is_none()).await;

    let (mut second, mut events) = fx.start(2, "echo two; exec sleep 300");
    let pid = started(&mut events).await;
    assert_eq!(fx.config.containment.cgroup_of(ContainerId(2)), cgroup, "the emptied cgroup is lent again");
    if let Some(cgroup) = &cgroup {
        let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
        assert_eq!(procs.trim(), pid.to_string(), "nothing but the new task is in it");
    }
    let dir = fx.config.container_dir(ContainerId(2));
    wait_until("the second task writes", || dir.join("stdout").metadata().is_ok_and(|m| m.len() > 0)).await;
    assert_eq!(std::fs::read_to_string(dir.join("stdout")).unwrap(), "two\n");
    // A kill for the first container arriving late touches nothing of the second.
    first.kill();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(group_alive(pid), "the next task runs on");
    second.kill();
    assert_eq!(exited(&mut events).await, TaskExit::Signal(libc::SIGTERM));
    assert_group_gone(pid).await;
}

#[tokio::test]
async fn a_removed_containers_directory_is_lent_to_a_later_task_holding_only_that_tasks_output() {
    use std::os::unix::fs::MetadataExt;
    let fx = Fixture::new(Duration::from_secs(3));
    fx.config.keep_ready(1);
    if !fx.config.containment.uses_cgroups() {
        // Without cgroups nothing is recycled; the recycle tests cover the checks.
        assert!(!fx.config.ready_dir().join(crate::recycle::POOL).exists(), "no pool without cgroups");
        return;
    }
    let (_first, mut events) = fx.start(1, "echo secret; echo leftover > left.txt");
    started(&mut events).await;
    assert_eq!(exited(&mut events).await, TaskExit::Code(0));
    let first_dir = fx.config.container_dir(ContainerId(1));
    let inode = std::fs::metadata(&first_dir).unwrap().ino();
    let dirs = crate::job_outputs::JobDirs {
        data_dir: fx.config.data_dir.clone(),
        containers_dir: fx.config.work_dir.join("containers"),
    };
    let order = slotmarket_common::protocol::RemoveJob {
        job: JobId(5),
        containers: vec![ContainerId(1)],
        job_dir: true,
    };
    assert_eq!(dirs.remove(&order).await.unwrap().len(), 2);
    assert!(!first_dir.exists(), "removed as far as anyone can see");
    // The slot's ready directory was made while the first task ran; take it, so the
    // next refill lends the recycled one.
    wait_until("a directory is ready again", || ready_dirs_in(&fx.config.ready_dir()) == 1).await;
    let spare = fx.config.ready_dirs.take().unwrap();
    fx.config.ready_dirs.refill(&fx.config.ready_dir());
    drop(spare);

    let (_second, mut events) = fx.start(2, "echo next; ls");
    started(&mut events).await;
    assert_eq!(exited(&mut events).await, TaskExit::Code(0));
    let dir = fx.config.container_dir(ContainerId(2));
    assert_eq!(std::fs::metadata(&dir).unwrap().ino(), inode, "the first container's directory, recycled");
    assert_eq!(std::fs::read_to_string(dir.join("stdout")).unwrap(), "next\nstderr\nstdout\n");
    assert_eq!(std::fs::read_to_string(dir.join("stderr")).unwrap(), "");
}
