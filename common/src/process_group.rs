//! Signalling a child's whole process group (unix). The agent's task kill sequence, the
//! demo's cluster and the multi-process tests all start children with
//! `process_group(0)` and stop them through their group, so whatever a child forked is
//! reached too.

use std::fmt;
use std::io;

/// The process group of a child spawned as the leader of its own group
/// (`process_group(0)`), whose group id is its pid.
///
/// Only ids above 1 are accepted: `kill(-0)` would signal our own group and `kill(-1)`
/// every process we may signal.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessGroup(libc::pid_t);

impl ProcessGroup {
    /// The group that the child with `pid` leads, or `None` for an id that cannot name
    /// one child's group.
    pub fn led_by(pid: u32) -> Option<ProcessGroup> {
        libc::pid_t::try_from(pid).ok().filter(|&pgid| pgid > 1).map(ProcessGroup)
    }

    /// The group id.
    pub fn id(self) -> libc::pid_t {
        self.0
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) to every process in the group. A group that
    /// is already empty (`ESRCH`) is not an error: that is the normal case once the
    /// leader and everything it forked have exited.
    pub fn signal(self, signal: libc::c_int) -> io::Result<()> {
        // SAFETY: `kill` has no memory-safety preconditions; `led_by` guarantees the id
        // is above 1, so this never signals our own group or every process.
        let rc = unsafe { libc::kill(-self.0, signal) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ESRCH) => Ok(()),
            _ => Err(err),
        }
    }
}

impl fmt::Display for ProcessGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pgid {}", self.0)
    }
}

impl fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn ids_that_would_reach_beyond_one_group_are_refused() {
        assert_eq!(ProcessGroup::led_by(0), None);
        assert_eq!(ProcessGroup::led_by(1), None);
        assert_eq!(ProcessGroup::led_by(u32::MAX), None);
        assert_eq!(ProcessGroup::led_by(42).map(ProcessGroup::id), Some(42));
    }

    #[test]
    fn a_signal_reaches_the_group_and_an_empty_group_is_no_error() {
        let mut child = Command::new("/bin/sh").args(["-c", "sleep 30"]).process_group(0).spawn().unwrap();
        let group = ProcessGroup::led_by(child.id()).unwrap();
        group.signal(libc::SIGKILL).unwrap();
        assert_eq!(child.wait().unwrap().code(), None, "killed by the signal");

        // A leader that exited and was reaped, with nothing forked: its group is gone.
        let mut child = Command::new("/bin/true").process_group(0).spawn().unwrap();
        let group = ProcessGroup::led_by(child.id()).unwrap();
        child.wait().unwrap();
        group.signal(libc::SIGTERM).unwrap();
    }
}
