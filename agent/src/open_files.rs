//! The agent's limit on open descriptors. An agent holds a few per slot for as long as it
//! runs (each kept cgroup's directory and events, each ready directory's two output
//! files) and more per running task (its output files, its pidfd), so the usual soft
//! limit of 1,024 would cap it at about 140 slots. It raises its soft limit to the hard
//! one at start, and each task gets the soft limit back before its exec: a program may
//! size `select` sets or loops over descriptors by it, as it would outside the agent.

use std::io;
use std::sync::OnceLock;

/// The soft limit the agent was started with, once [`raise`] raised it: what tasks get.
static TASKS_LIMIT: OnceLock<libc::rlimit> = OnceLock::new();

/// The most descriptors asked for when the hard limit is unlimited (Linux's default
/// `fs.nr_open`).
const UNLIMITED_CAP: libc::rlim_t = 1 << 20;

/// Raises this process's soft limit on open descriptors to its hard limit (at most
/// 2^20); returns the limit now in force. Tasks started afterwards get the old one
/// back. Call it once, before any task starts.
pub fn raise() -> io::Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let wanted = if limit.rlim_max == libc::RLIM_INFINITY { UNLIMITED_CAP } else { limit.rlim_max };
    if wanted <= limit.rlim_cur {
        return Ok(limit.rlim_cur);
    }
    let raised = libc::rlimit { rlim_cur: wanted, rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads the struct given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let _ = TASKS_LIMIT.set(limit);
    Ok(wanted)
}

/// Puts back the soft limit [`raise`] replaced, if it did. Runs in a task's child before
/// its exec: one system call, no allocation, no lock. Returns 0 or -1 with `errno` set.
pub(crate) fn restore_in_child() -> libc::c_int {
    match TASKS_LIMIT.get() {
        // SAFETY: setrlimit reads the struct given; lowering a soft limit needs no
        // privilege.
        Some(limit) => unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, limit) },
        None => 0,
    }
}

#[cfg(test)]
#[path = "open_files_tests.rs"]
mod tests;
