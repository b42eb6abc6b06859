//! An exclusive lock on a daemon's directory, so that two daemons never share one: a
//! second master on one database, or a second agent on one work directory, which would
//! take the first agent's running tasks for a crashed predecessor's leftovers and kill
//! them. The lock is `flock`'s: the kernel drops it when its holder exits, however it
//! exits, so a crash never leaves a stale lock behind.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Why a directory could not be locked.
#[derive(Debug, Error)]
pub enum DirLockError {
    /// The lock file could not be made.
    #[error("cannot create the lock file {path}: {source}")]
    Create {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file system refused the lock (no lock support, as on some network file
    /// systems).
    #[error("cannot lock {path}: {source}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another process holds the lock.
    #[error(
        "another {holder} is using {dir} (lock {path} is held); stop it first, or give this one its own directory"
    )]
    Held {
        /// What kind of daemon holds it (`master`, `agent`).
        holder: &'static str,
        /// The directory.
        dir: PathBuf,
        /// The lock file.
        path: PathBuf,
    },
}

/// Locks `dir` through the file `name` in it, for a daemon of kind `holder`, without
/// waiting: refuses at once if another process holds it.
pub fn lock_dir(dir: &Path, name: &str, holder: &'static str) -> Result<DirLock, DirLockError> {
    let path = dir.join(name);
    let file = File::create(&path).map_err(|source| DirLockError::Create { path: path.clone(), source })?;
    // SAFETY: flock on a descriptor this function owns; the lock lives as long as `file`.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let source = std::io::Error::last_os_error();
        return Err(if source.kind() == std::io::ErrorKind::WouldBlock {
            DirLockError::Held { holder, dir: dir.to_path_buf(), path }
        } else {
            DirLockError::Lock { path, source }
        });
    }
    Ok(DirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_dir(dir.path(), "agent.lock", "agent").unwrap();
        // flock conflicts between open files, even within one process.
        let err = lock_dir(dir.path(), "agent.lock", "agent").unwrap_err();
        assert!(matches!(err, DirLockError::Held { .. }), "{err}");
        assert!(err.to_string().starts_with("another agent is using "), "{err}");
        drop(first);
        assert!(lock_dir(dir.path(), "agent.lock", "agent").is_ok());
        let missing = lock_dir(&dir.path().join("gone"), "agent.lock", "agent").unwrap_err();
        assert!(matches!(missing, DirLockError::Create { .. }), "{missing}");
    }
}
