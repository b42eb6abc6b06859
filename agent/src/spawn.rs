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
//! Only for cgroup containment (which needs Linux 5.14, so `clone3` and
//! `CLONE_INTO_CGROUP`, both older, exist); where a seccomp filter refuses `clone3`
//! (`ENOSYS`), [`spawn`] says so and the caller falls back to `tokio::process`.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::run_as::UnixUser;

/// `CLONE_INTO_CGROUP` (Linux 5.7), not in the `libc` crate.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

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
    envp: Vec<CString>,
    cwd: CString,
    stdout: std::fs::File,
    stderr: std::fs::File,
    /// The container's cgroup directory.
    cgroup: OwnedFd,
    user: Option<UnixUser>,
}

/// A NUL byte inside a string handed to `exec`.
fn nul_error() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command, a path or the environment")
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| nul_error())
}

impl TaskCommand {
    /// `program args...` in `cwd` with the agent's environment plus `env` (later entries
    /// win), output to the two files, born in the cgroup `cgroup` (a directory fd).
    pub fn new(
        program: &OsStr,
        args: &[&OsStr],
        env: &[(OsString, OsString)],
        cwd: &std::path::Path,
        (stdout, stderr): (std::fs::File, std::fs::File),
        cgroup: OwnedFd,
        user: Option<UnixUser>,
    ) -> io::Result<TaskCommand> {
        let mut vars: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
        vars.extend(env.iter().cloned());
        let envp = vars
            .iter()
            .map(|(key, value)| c_string(&[key.as_bytes(), b"=", value.as_bytes()].concat()))
            .collect::<io::Result<_>>()?;
        let mut argv = vec![c_string(program.as_bytes())?];
        for arg in args {
            argv.push(c_string(arg.as_bytes())?);
        }
        Ok(TaskCommand {
            program: c_string(program.as_bytes())?,
            argv,
            envp,
            cwd: c_string(cwd.as_os_str().as_bytes())?,
            stdout,
            stderr,
            cgroup,
            user,
        })
    }
}

/// A task process started by [`spawn`]; not yet reaped until [`TaskProcess::wait`]
/// returns. Dropped before that, it is SIGKILLed (as `kill_on_drop` would).
pub struct TaskProcess {
    pid: u32,
    pidfd: AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
}

/// What [`spawn`] could not do.
pub enum SpawnFailure {
    /// `clone3` is refused here (seccomp): use another way to start tasks.
    Unsupported,
    /// The process could not be started (the clone, or the child's set-up or exec).
    Failed(io::Error),
}

/// Starts `command` in its own process group, in its cgroup, and returns once it has
/// exec'd (or failed to). Must be called inside a tokio runtime, from a thread that lives
/// as long as the agent (the parent-death signal follows the thread that forked).
pub fn spawn(command: &TaskCommand) -> Result<TaskProcess, SpawnFailure> {
    let failed = |err| SpawnFailure::Failed(err);
    let devnull = std::fs::File::open("/dev/null").map_err(failed)?;
    let (errors_in, errors_out) = pipe().map_err(failed)?;
    let mut argv: Vec<*const libc::c_char> = command.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = command.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let agent = std::process::id();
    let mut pidfd: libc::c_int = -1;
    let mut args = CloneArgs {
        flags: libc::CLONE_PIDFD as u64 | CLONE_INTO_CGROUP,
        pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: command.cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a valid clone_args of the size given. Without CLONE_VM the child
    // gets a copy of this address space (fork semantics) and runs `child`, which only
    // makes async-signal-safe calls on data prepared above and never returns.
    let ret =
        unsafe { libc::syscall(libc::SYS_clone3, std::ptr::addr_of_mut!(args), size_of::<CloneArgs>()) };
    if ret == 0 {
        // SAFETY: in the child, see above.
        unsafe { child(command, &argv, &envp, devnull.as_raw_fd(), errors_out.as_raw_fd(), agent) }
    }
    if ret < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOSYS) => SpawnFailure::Unsupported,
            _ => SpawnFailure::Failed(err),
        });
    }
    let pid = u32::try_from(ret).map_err(|_| failed(io::Error::other("clone3 returned a bad pid")))?;
    // SAFETY: the kernel wrote a new pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop(errors_out);
    // SAFETY: an `OwnedFd` keeps its descriptor open and unchanged while the `AsyncFd`
    // owns it. If registering fails the child runs on unsupervised; the caller sweeps its
    // cgroup on the error.
    let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
        .map_err(|err| failed(err.into_parts().1))?;
    let mut process = TaskProcess { pid, pidfd, status: None };
    match read_child_error(&errors_in) {
        Ok(None) => Ok(process),
        Ok(Some(err)) | Err(err) => {
            // The child exits at once (127) after reporting; reap it.
            process.kill();
            process.reap_blocking();
            Err(SpawnFailure::Failed(err))
        }
    }
}

/// A close-on-exec pipe: (read end, write end).
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

/// The child between clone and exec: standard streams, working directory, own process
/// group, default signals, the account's user, the parent-death signal, exec. On any
/// failure it writes its errno to `errors` and exits with 127.
///
/// # Safety
/// Only in the child of a fork-like clone; makes async-signal-safe calls only.
unsafe fn child(
    command: &TaskCommand,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    devnull: RawFd,
    errors: RawFd,
    agent: u32,
) -> ! {
    // SAFETY: every call is async-signal-safe and takes pointers to live data.
    unsafe {
        let fail = || -> ! {
            let errno = (*libc::__errno_location()).to_ne_bytes();
            libc::write(errors, errno.as_ptr().cast(), errno.len());
            libc::_exit(127)
        };
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        // Rust ignores SIGPIPE and tokio may block signals; a task starts with defaults.
        if libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0
            || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
        {
            fail();
        }
        if redirect(devnull, 0) < 0
            || redirect(command.stdout.as_raw_fd(), 1) < 0
            || redirect(command.stderr.as_raw_fd(), 2) < 0
            || libc::chdir(command.cwd.as_ptr()) != 0
            || libc::setpgid(0, 0) != 0
        {
            fail();
        }
        if let Some(user) = &command.user {
            if crate::process::become_user(user).is_err() {
                fail();
            }
        }
        if crate::process::die_with_parent(agent).is_err() {
            fail();
        }
        libc::execve(command.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        fail()
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

    /// Reaps it, waiting for the exit (only right after a failed exec, which is quick).
    fn reap_blocking(&mut self) {
        if let Ok(Some(status)) = reap(self.pid, 0) {
            self.status = Some(status);
        }
    }
}

/// Reaps the child `pid` if it has exited (with `WNOHANG`; else waits for it).
fn reap(pid: u32, options: libc::c_int) -> io::Result<Option<ExitStatus>> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    let mut status = 0;
    loop {
        // SAFETY: our own unreaped child (its pidfd keeps the pid from reuse).
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
        self.kill();
    }
}

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;
