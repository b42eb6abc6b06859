//! Starting a task process straight into its container's cgroup with `clone3` and
//! `CLONE_INTO_CGROUP`, and waiting for it through a pidfd.
//!
//! Why: the other way in (fork, then write `cgroup.procs` between fork and exec) moves
//! the process between cgroups, which takes the kernel's cgroup threadgroup lock for
//! writing and so waits for an RCU grace period: 0.3 to 20 ms per task on the
//! development machine (`docs/benchmarks.md`, "Launch path"). `Command::spawn` waits for
//! the exec, so that wait also held one of the agent's async workers. A process born in
//! the cgroup is never moved.
//!
//! On x86-64 the clone also shares the agent's memory until the exec (`CLONE_VM |
//! CLONE_VFORK` on a stack of the child's own, as `posix_spawn` does; see `spawn_vfork.rs`), so
//! the agent's page tables are not copied for every task; the child keeps the rules that
//! sharing needs (see `child`). Elsewhere the clone copies the memory, as fork does.
//!
//! Under process-scan containment (no cgroup) the same clone runs without
//! `CLONE_INTO_CGROUP`: `tokio::process` would fork, copying the agent's page tables for
//! every task, and always start the shell. `clone3` needs Linux 5.3 (cgroup containment
//! needs 5.14); where it is missing or a seccomp filter refuses it (`ENOSYS`), [`spawn`]
//! says so and the caller falls back to `tokio::process`.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::descendants::OwnChild;
use crate::run_as::UnixUser;

/// `CLONE_INTO_CGROUP` (Linux 5.7), not in the `libc` crate.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// `CLONE_CLEAR_SIGHAND` (Linux 5.5), not in the `libc` crate.
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// How the child's signal handlers go back to their defaults before it unblocks signals.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum HandlerReset {
    /// The clone does it (`CLONE_CLEAR_SIGHAND`): ignored signals stay ignored, as across
    /// an exec. Saves the child a `sigaction` call per signal, some 70 on every launch.
    ByClone,
    /// The child does it, one signal at a time: Linux 5.3 and 5.4 refuse the flag.
    ByChild,
}

/// Whether the kernel took `CLONE_CLEAR_SIGHAND`; false once a clone with it was refused
/// (`EINVAL`) and the same clone without it was not.
static CLONE_CLEARS_HANDLERS: AtomicBool = AtomicBool::new(true);

/// `struct clone_args` as far as `cgroup` (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Everything the child needs, converted before the clone: the child may not allocate.
pub struct TaskCommand {
    program: CString,
    argv: Vec<CString>,
    /// Files tried in turn before `program`, each with `direct_argv` (see
    /// [`TaskCommand::trying_first`]).
    direct: Vec<CString>,
    direct_argv: Vec<CString>,
    /// The agent's environment entries the task inherits (those `env` does not set).
    inherited: Vec<&'static CStr>,
    /// The task's own entries.
    envp: Vec<CString>,
    cwd: CString,
    stdout: std::fs::File,
    stderr: std::fs::File,
    /// The container's cgroup directory, where there is one.
    cgroup: Option<Arc<OwnedFd>>,
    user: Option<UnixUser>,
}

/// The agent's environment as `KEY=value` entries, read once: it does not change while
/// the agent runs, and reading and converting it for every task was most of the
/// allocations of a launch.
fn agent_env() -> &'static [(OsString, CString)] {
    static ENV: OnceLock<Vec<(OsString, CString)>> = OnceLock::new();
    ENV.get_or_init(|| {
        std::env::vars_os()
            // Neither part can hold a NUL (they came from C strings).
            .filter_map(|(key, value)| {
                Some((key.clone(), c_string(&[key.as_bytes(), b"=", value.as_bytes()].concat()).ok()?))
            })
            .collect()
    })
}

/// `/dev/null`, the stdin of every task, opened once.
fn dev_null() -> io::Result<RawFd> {
    static DEV_NULL: OnceLock<std::fs::File> = OnceLock::new();
    if let Some(file) = DEV_NULL.get() {
        return Ok(file.as_raw_fd());
    }
    let file = std::fs::File::open("/dev/null")?;
    Ok(DEV_NULL.get_or_init(|| file).as_raw_fd())
}

/// A NUL byte inside a string handed to `exec`.
fn nul_error() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command, a path or the environment")
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| nul_error())
}

impl TaskCommand {
    /// `program` with the argument vector `argv` (`argv[0]` included) in `cwd` with the
    /// agent's environment plus `env` (later entries win), output to the two files, born
    /// in the cgroup `cgroup` (a directory fd) where one is given.
    pub fn new(
        program: &OsStr,
        argv: &[&OsStr],
        env: &[(OsString, OsString)],
        cwd: &std::path::Path,
        (stdout, stderr): (std::fs::File, std::fs::File),
        cgroup: Option<Arc<OwnedFd>>,
        user: Option<UnixUser>,
    ) -> io::Result<TaskCommand> {
        let set = |key: &OsStr| env.iter().any(|(set, _)| set == key);
        let inherited =
            agent_env().iter().filter(|(key, _)| !set(key)).map(|(_, entry)| entry.as_c_str()).collect();
        // Of the task's own entries, the last for each variable.
        let envp = env
            .iter()
            .enumerate()
            .filter(|&(i, (key, _))| !env[i + 1..].iter().any(|(later, _)| later == key))
            .map(|(_, (key, value))| c_string(&[key.as_bytes(), b"=", value.as_bytes()].concat()))
            .collect::<io::Result<_>>()?;
        Ok(TaskCommand {
            program: c_string(program.as_bytes())?,
            argv: c_strings(argv)?,
            direct: Vec::new(),
            direct_argv: Vec::new(),
            inherited,
            envp,
            cwd: c_string(cwd.as_os_str().as_bytes())?,
            stdout,
            stderr,
            cgroup,
            user,
        })
    }

    /// Makes the child exec each of `programs` with `argv` first, in order, moving on past
    /// each that fails; `program` runs only once none has started, or at one that is no
    /// program (`ENOEXEC`). How a plain command starts without the shell where it can, and
    /// with it where the shell would do something else ([`crate::plain_command`]).
    pub fn trying_first(
        mut self,
        programs: &[impl AsRef<OsStr>],
        argv: &[impl AsRef<OsStr>],
    ) -> io::Result<TaskCommand> {
        self.direct = c_strings(programs)?;
        self.direct_argv = c_strings(argv)?;
        Ok(self)
    }
}

fn c_strings(strings: &[impl AsRef<OsStr>]) -> io::Result<Vec<CString>> {
    strings.iter().map(|string| c_string(string.as_ref().as_bytes())).collect()
}

/// A task process started by [`spawn`]; not yet reaped until [`TaskProcess::wait`]
/// returns. Dropped before that, it is SIGKILLed (as `kill_on_drop` would).
pub struct TaskProcess {
    pid: u32,
    pidfd: AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
    /// Its registration as the agent's own child, until reaped (or dropped unreaped).
    own: Option<OwnChild>,
}

/// What [`spawn`] could not do.
pub enum SpawnFailure {
    /// `clone3` is refused here (seccomp): use another way to start tasks.
    Unsupported,
    /// The process could not be started (the clone, or the child's set-up or exec).
    Failed(io::Error),
}

/// Starts `command` in its own process group, in its cgroup if it has one, and returns
/// once it has exec'd (or failed to). Must be called inside a tokio runtime, from a thread that lives
/// as long as the agent (the parent-death signal follows the thread that forked).
pub fn spawn(command: &TaskCommand) -> Result<TaskProcess, SpawnFailure> {
    let reset = if CLONE_CLEARS_HANDLERS.load(Ordering::Relaxed) {
        HandlerReset::ByClone
    } else {
        HandlerReset::ByChild
    };
    spawn_resetting(command, reset)
}

/// [`spawn`], the child's signal handlers reset as `reset` says; a kernel that refuses
/// the clone's reset gets the child's, from then on.
fn spawn_resetting(command: &TaskCommand, reset: HandlerReset) -> Result<TaskProcess, SpawnFailure> {
    let failed = |err| SpawnFailure::Failed(err);
    let devnull = dev_null().map_err(failed)?;
    let argv = null_terminated(&command.argv);
    let direct_argv = null_terminated(&command.direct_argv);
    let inherited = command.inherited.iter().map(|e| e.as_ptr());
    let mut envp: Vec<*const libc::c_char> =
        inherited.chain(command.envp.iter().map(|e| e.as_ptr())).collect();
    envp.push(std::ptr::null());
    let context = |reset| ChildContext {
        command,
        argv: argv.as_ptr(),
        direct_argv: direct_argv.as_ptr(),
        envp: envp.as_ptr(),
        devnull,
        agent: std::process::id(),
        reset,
        error: AtomicI32::new(0),
        error_pipe: -1,
    };
    // Counted before the clone, so the agent's reaper of adopted orphans leaves it alone
    // until it is registered.
    let starting = crate::descendants::starting();
    let started = match clone_child(context(reset)) {
        Err(SpawnFailure::Failed(err))
            if reset == HandlerReset::ByClone && err.raw_os_error() == Some(libc::EINVAL) =>
        {
            let started = clone_child(context(HandlerReset::ByChild))?;
            if CLONE_CLEARS_HANDLERS.swap(false, Ordering::Relaxed) {
                tracing::info!(
                    "the kernel refuses CLONE_CLEAR_SIGHAND; tasks reset their signal handlers themselves"
                );
            }
            started
        }
        started => started?,
    };
    let pid = started.pid;
    let own = starting.started(pid);
    if let Some(err) = started.error {
        // The child exits at once (127) after reporting; reap it (then `own` goes).
        let _ = reap(pid, 0);
        return Err(SpawnFailure::Failed(err));
    }
    // SAFETY: an `OwnedFd` keeps its descriptor open and unchanged while the `AsyncFd`
    // owns it. If registering fails the child runs on unsupervised (and unregistered, for
    // the reaper of adopted orphans); the caller sweeps its container on the error.
    let pidfd = unsafe { AsyncFd::register_with_interest(started.pidfd, Interest::READABLE) }
        .map_err(|err| failed(err.into_parts().1))?;
    Ok(TaskProcess { pid, pidfd, status: None, own: Some(own) })
}

/// Pointers to `strings` and a NULL after them, as `execve` takes them.
fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|string| string.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// What the child reads, all prepared before the clone (the child may not allocate).
struct ChildContext<'a> {
    command: &'a TaskCommand,
    /// `argv`, the direct attempts' `argv` and `envp` for `execve`, NULL-terminated.
    argv: *const *const libc::c_char,
    direct_argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    devnull: RawFd,
    /// The agent's pid, to check the parent-death signal was set in time.
    agent: u32,
    /// Who resets the signal handlers: the clone or the child.
    reset: HandlerReset,
    /// The child's errno if its set-up or exec failed, 0 if it exec'd. A child sharing
    /// the agent's memory (`CLONE_VM`) writes it here, read once the parent wakes up.
    error: AtomicI32,
    /// Where a child with a copy of the memory writes its errno instead (-1: none).
    error_pipe: RawFd,
}

/// A child just cloned: its pid and pidfd, and why it failed if it did (it has then
/// exited, or is about to, with 127).
struct Started {
    pid: u32,
    pidfd: OwnedFd,
    error: Option<io::Error>,
}

/// The child's entry point on its own stack (see `spawn_vfork.rs`).
///
/// # Safety
/// `context` points at a live [`ChildContext`]; only in the child of a clone.
#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn child_entry(context: *mut std::ffi::c_void) -> ! {
    // SAFETY: the parent sleeps (CLONE_VFORK) with the context alive in its frame.
    unsafe { child(&*context.cast::<ChildContext>()) }
}

/// Clones the child with `CLONE_VM | CLONE_VFORK` on a stack of its own: nothing of the
/// agent's memory is copied, and this thread sleeps until the child has exec'd or exited.
#[cfg(target_arch = "x86_64")]
fn clone_child(context: ChildContext<'_>) -> Result<Started, SpawnFailure> {
    let mut pidfd: libc::c_int = -1;
    let mut args = clone_args(&context, &mut pidfd);
    args.flags |= (libc::CLONE_VM | libc::CLONE_VFORK) as u64;
    let context_ptr = std::ptr::from_ref(&context).cast_mut().cast();
    // SAFETY: `args` has CLONE_VM | CLONE_VFORK; `child_entry` follows the child's rules
    // (see `child`) and `context` outlives the call, which returns only once the child no
    // longer uses it (exec'd or exited).
    let ret = unsafe { vfork::clone_on_child_stack(&mut args, child_entry, context_ptr) };
    let pid = cloned_pid(ret)?;
    // SAFETY: the kernel wrote a new pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // The parent woke up after the child's exec or exit, so whatever it wrote is here.
    let error = match context.error.load(Ordering::Acquire) {
        0 => None,
        errno => Some(io::Error::from_raw_os_error(errno)),
    };
    Ok(Started { pid, pidfd, error })
}

/// Clones the child with a copy of the agent's memory (fork semantics), where the
/// assembly for a child stack of its own is not written; the child reports its errno
/// through a close-on-exec pipe.
#[cfg(not(target_arch = "x86_64"))]
fn clone_child(mut context: ChildContext<'_>) -> Result<Started, SpawnFailure> {
    let (errors_in, errors_out) = pipe().map_err(SpawnFailure::Failed)?;
    context.error_pipe = errors_out.as_raw_fd();
    let mut pidfd: libc::c_int = -1;
    let mut args = clone_args(&context, &mut pidfd);
    // SAFETY: `args` is a valid clone_args of the size given. Without CLONE_VM the child
    // gets a copy of this address space and runs `child`, which never returns.
    let ret =
        unsafe { libc::syscall(libc::SYS_clone3, std::ptr::addr_of_mut!(args), size_of::<CloneArgs>()) };
    if ret == 0 {
        // SAFETY: in the child, see above.
        unsafe { child(&context) }
    }
    let ret = if ret < 0 { Err(io::Error::last_os_error()) } else { Ok(ret) };
    let pid = cloned_pid(ret)?;
    // SAFETY: the kernel wrote a new pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop(errors_out);
    let error = read_child_error(&errors_in).unwrap_or_else(Some);
    Ok(Started { pid, pidfd, error })
}

/// The clone's arguments common to both ways: a pidfd, SIGCHLD at exit, the cgroup if any,
/// the handlers cleared if the clone is to do it.
fn clone_args(context: &ChildContext<'_>, pidfd: &mut libc::c_int) -> CloneArgs {
    let (into_cgroup, cgroup) = match &context.command.cgroup {
        Some(dir) => (CLONE_INTO_CGROUP, dir.as_raw_fd() as u64),
        None => (0, 0),
    };
    let clear_handlers = match context.reset {
        HandlerReset::ByClone => CLONE_CLEAR_SIGHAND,
        HandlerReset::ByChild => 0,
    };
    CloneArgs {
        flags: libc::CLONE_PIDFD as u64 | into_cgroup | clear_handlers,
        pidfd: std::ptr::from_mut(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup,
        ..CloneArgs::default()
    }
}

/// The child's pid from what `clone3` returned; `ENOSYS` (seccomp) is `Unsupported`.
fn cloned_pid(ret: io::Result<libc::c_long>) -> Result<u32, SpawnFailure> {
    match ret {
        Ok(pid) => u32::try_from(pid)
            .map_err(|_| SpawnFailure::Failed(io::Error::other("clone3 returned a bad pid"))),
        Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => Err(SpawnFailure::Unsupported),
        Err(err) => Err(SpawnFailure::Failed(err)),
    }
}

/// A close-on-exec pipe: (read end, write end).
#[cfg(not(target_arch = "x86_64"))]
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are new descriptors owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Waits for the exec: end of file means it happened (the pipe closed on exec); four
/// bytes are the child's errno.
#[cfg(not(target_arch = "x86_64"))]
fn read_child_error(errors: &OwnedFd) -> io::Result<Option<io::Error>> {
    let mut buf = [0u8; 4];
    loop {
        // SAFETY: `buf` is valid for 4 bytes.
        let n = unsafe { libc::read(errors.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => return Ok(None),
            4 => return Ok(Some(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)))),
            n if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            n if n < 0 => return Err(io::Error::last_os_error()),
            _ => return Err(io::Error::other("short read of the child's error")),
        }
    }
}

/// The child between clone and exec: signal handlers and mask, standard streams, working
/// directory, own process group, the limit on open files, the account's user, the
/// parent-death signal, exec. On any failure it reports its errno (see [`ChildContext`])
/// and exits with 127.
///
/// The rules it keeps, since with `CLONE_VM` it runs in the agent's memory while the
/// agent's other threads go on: it only reads what was prepared before the clone, writes
/// nothing but `context.error` and this thread's `errno` (the thread that cloned sleeps
/// until the exec, so nobody reads that errno meanwhile), allocates nothing and takes no
/// lock. Each call is a system call through a thin libc wrapper (no locks, no allocation,
/// async-signal-safe); the user switch is made with raw system calls (see
/// [`become_user_raw`]).
///
/// # Safety
/// Only in the child of a clone, with `context` and what it points at alive.
unsafe fn child(context: &ChildContext<'_>) -> ! {
    let command = context.command;
    // SAFETY: every call is an async-signal-safe system call taking pointers to live data.
    unsafe {
        let fail = || -> ! {
            let errno = *libc::__errno_location();
            context.error.store(errno, Ordering::Release);
            if context.error_pipe >= 0 {
                libc::write(context.error_pipe, errno.to_ne_bytes().as_ptr().cast(), 4);
            }
            libc::_exit(127)
        };
        // Before any signal is unblocked: no handler of the agent's may run here.
        if context.reset == HandlerReset::ByChild {
            reset_signal_handlers();
        }
        default_sigpipe();
        let empty: libc::sigset_t = std::mem::zeroed();
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            fail();
        }
        if redirect(context.devnull, 0) < 0
            || redirect(command.stdout.as_raw_fd(), 1) < 0
            || redirect(command.stderr.as_raw_fd(), 2) < 0
            || libc::chdir(command.cwd.as_ptr()) != 0
            || libc::setpgid(0, 0) != 0
            || crate::open_files::restore_in_child() != 0
        {
            fail();
        }
        if let Some(user) = &command.user {
            if become_user_raw(user) != 0 {
                fail();
            }
        }
        if crate::process::die_with_parent(context.agent).is_err() {
            fail();
        }
        for program in &command.direct {
            libc::execve(program.as_ptr(), context.direct_argv, context.envp);
            // dash, too, goes on to the next `PATH` entry whatever the failure, but runs
            // a file that is no program (`ENOEXEC`) as a script: the shell's to do.
            if *libc::__errno_location() == libc::ENOEXEC {
                break;
            }
        }
        libc::execve(command.program.as_ptr(), context.argv, context.envp);
        fail()
    }
}

/// SIGPIPE back to its default action: Rust ignores it, a task starts with it on. Runs
/// in the child.
///
/// # Safety
/// Only in the child; sigaction is a system call that reads the struct given.
unsafe fn default_sigpipe() {
    // SAFETY: a zeroed sigaction struct is valid (SIG_DFL, no flags, empty mask).
    unsafe {
        let default: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGPIPE, &default, std::ptr::null_mut());
    }
}

/// Every signal the agent handles back to its default action, where the clone could not
/// do it. A handler of the agent's (tokio's, Rust's) running in a `CLONE_VM` child would
/// act on the agent's memory; exec would reset the handlers anyway, but only after the
/// child has unblocked signals. Ignored signals stay ignored, as across an exec (SIGPIPE
/// is [`default_sigpipe`]'s). Runs in the child.
///
/// # Safety
/// Only in the child; sigaction is a system call that reads and writes the structs given.
unsafe fn reset_signal_handlers() {
    // SAFETY: zeroed sigaction structs are valid (SIG_DFL, no flags, empty mask).
    unsafe {
        let default: libc::sigaction = std::mem::zeroed();
        // 1..=64: every signal Linux has; glibc refuses its two internal ones (EINVAL),
        // whose handlers ignore signals that are not glibc's own.
        for signal in 1..=64 {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut current) != 0 {
                continue;
            }
            if current.sa_sigaction != libc::SIG_DFL && current.sa_sigaction != libc::SIG_IGN {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}

/// Drops to `user` (supplementary groups, group, user) with raw system calls: glibc's
/// `setuid` and friends apply the change to every thread of the process, signalling the
/// others and taking a lock, which a child sharing the agent's memory must not do (it
/// would signal the agent's threads). Returns 0 or -1 with `errno` set. Runs in the child.
///
/// # Safety
/// Only in the child; `user.groups` is a live slice.
unsafe fn become_user_raw(user: &UnixUser) -> libc::c_long {
    // SAFETY: `groups` is a live slice of `len` gids; the calls take no other pointers.
    unsafe {
        let groups = libc::syscall(libc::SYS_setgroups, user.groups.len(), user.groups.as_ptr());
        if groups != 0 {
            return groups;
        }
        let gid = libc::syscall(libc::SYS_setgid, user.gid);
        if gid != 0 {
            return gid;
        }
        libc::syscall(libc::SYS_setuid, user.uid)
    }
}

/// Makes `to` a copy of `from` that survives the exec. `dup2` onto itself would keep the
/// close-on-exec flag (an agent started with a standard stream closed may have opened a
/// file there), so then only the flag is cleared. Runs in the child.
///
/// # Safety
/// Only async-signal-safe calls; both are descriptor numbers.
unsafe fn redirect(from: RawFd, to: RawFd) -> libc::c_int {
    // SAFETY: fcntl and dup2 are async-signal-safe and take no pointers.
    unsafe { if from == to { libc::fcntl(to, libc::F_SETFD, 0) } else { libc::dup2(from, to) } }
}

impl TaskProcess {
    /// Its process id (also its process group's).
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Waits until it has exited and reaps it. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.status {
                return Ok(status);
            }
            let mut ready = self.pidfd.readable().await?;
            match reap(self.pid, libc::WNOHANG)? {
                Some(status) => {
                    drop(ready);
                    self.own = None;
                    self.status = Some(status);
                    return Ok(status);
                }
                None => ready.clear_ready(),
            }
        }
    }

    /// SIGKILLs it (through the pidfd, so never another process); nothing if reaped.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: a valid pidfd, no siginfo, no flags.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    self.pidfd.get_ref().as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            }
        }
    }
}

/// Reaps the child `pid` if it has exited (with `WNOHANG`; else waits for it).
fn reap(pid: u32, options: libc::c_int) -> io::Result<Option<ExitStatus>> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    let mut status = 0;
    loop {
        let _reap = crate::descendants::reaping();
        // SAFETY: our own unreaped child (unreaped, its pid cannot be reused; registered,
        // the reaper of adopted orphans leaves it alone).
        let ret = unsafe { libc::waitpid(pid, &mut status, options) };
        if ret == pid {
            return Ok(Some(ExitStatus::from_raw(status)));
        }
        if ret == 0 {
            return Ok(None);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

impl Drop for TaskProcess {
    fn drop(&mut self) {
        // Unregistered with it: nobody waits for it now, the reaper of adopted orphans may.
        self.kill();
    }
}

#[cfg(target_arch = "x86_64")]
#[path = "spawn_vfork.rs"]
mod vfork;

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;
