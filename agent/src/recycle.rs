//! Container directories given a second life: when a removed job's container directory
//! (`slotmarket cleanup`, the retention timer) is provably out of reach of everything of
//! its task, it is emptied (extra files removed, `stdout` and `stderr` truncated, owner
//! and mode reset) and moved to a pool, `{work_dir}/ready/recycled/`, from which
//! [`ReadyDirs`](crate::ready::ReadyDirs) lends it to a later container, instead of
//! being unlinked and a new one made. On ext4 without a journal every inode allocation
//! scans past the inodes freed in the last minute, six while their inode table block is
//! unwritten (`recently_deleted`), so an agent that makes and removes four inodes per
//! job at hundreds of jobs a second pays for it twice.
//!
//! A directory is recycled only if (else it is removed, as before):
//! - the pool exists: the agent makes it only when its tasks run in cgroups, where a
//!   task's end means none of its processes is left (none can sit in the directory);
//! - it is a real directory (not a symlink) with no extended attributes (no ACL that a
//!   later container's files would inherit);
//! - its `stdout` and `stderr` are regular files with one link each (no hard link made
//!   elsewhere), no extended attributes, and nothing anywhere has them open: a write
//!   lease (`F_SETLEASE`) is granted only to the one open descriptor of a file, so a log
//!   read in flight, a leftover process or any other reader makes it fail;
//! - fewer than [`POOL_CAP`] wait in the pool.
//!
//! It is first renamed into the pool under a hidden name (so no new open by its old path
//! can reach it), checked and emptied there, and only then given its visible name.
//! Every check is on a descriptor opened without following symlinks. A restart removes
//! the pool with the rest of `ready/`.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tracing::debug;

/// The pool's name under `ready/`.
pub(crate) const POOL: &str = "recycled";

/// Most directories waiting in the pool; beyond it removed directories are unlinked.
pub(crate) const POOL_CAP: u64 = 4096;

/// The two files a container directory holds.
pub(crate) const LOG_FILES: [&str; 2] = ["stdout", "stderr"];

/// The pool that the containers of `containers_dir` (`{work_dir}/containers`) are
/// recycled into: `{work_dir}/ready/recycled`.
pub(crate) fn pool_of(containers_dir: &Path) -> Option<PathBuf> {
    Some(containers_dir.parent()?.join("ready").join(POOL))
}

/// What became of a removed container's directory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Recycled {
    /// There was nothing at its path.
    Gone,
    /// Emptied and waiting in the pool.
    Pooled,
    /// Not fit for reuse; it is now at this path (its old one, or the pool's hidden
    /// name) and must be removed.
    Remove(PathBuf),
}

/// Tries to empty `dir` and move it into `pool` under `name` (blocking). Never leaves
/// anything at `dir`'s old path in a state worse than before: a directory that fails a
/// check is handed back for removal.
pub(crate) fn recycle(dir: &Path, pool: &Path, name: &OsStr) -> Recycled {
    if !pool_has_room(pool) {
        return match std::fs::symlink_metadata(dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => Recycled::Gone,
            _ => Recycled::Remove(dir.to_path_buf()),
        };
    }
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    let staged = pool.join(hidden);
    match std::fs::rename(dir, &staged) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Recycled::Gone,
        Err(err) => {
            debug!(dir = %dir.display(), error = %err, "cannot move a container directory to the pool");
            return Recycled::Remove(dir.to_path_buf());
        }
    }
    match empty_for_reuse(&staged).and_then(|()| std::fs::rename(&staged, pool.join(name))) {
        Ok(()) => Recycled::Pooled,
        Err(err) => {
            debug!(dir = %dir.display(), error = %err, "a container directory is not reused");
            Recycled::Remove(staged)
        }
    }
}

/// Whether the pool exists and holds fewer than [`POOL_CAP`] directories (a directory's
/// link count is 2 plus its subdirectories).
fn pool_has_room(pool: &Path) -> bool {
    std::fs::symlink_metadata(pool).is_ok_and(|meta| meta.is_dir() && meta.nlink() < POOL_CAP + 2)
}

/// Empties the container directory `dir` for another container: removes every entry but
/// the two log files, truncates those, and gives all three the owner and mode a new one
/// would have. Fails (leaving it to be removed) at the first doubt.
pub(crate) fn empty_for_reuse(dir: &Path) -> io::Result<()> {
    let handle = open_nofollow(dir, libc::O_RDONLY | libc::O_DIRECTORY)?;
    if !handle.metadata()?.is_dir() {
        return Err(doubt("not a directory"));
    }
    no_xattrs(&handle)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if LOG_FILES.iter().any(|log| entry.file_name() == OsStr::new(log)) {
            continue;
        }
        // What the task made: removed, symlinks themselves and not what they point to.
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?
        } else {
            std::fs::remove_file(&path)?
        }
    }
    for log in LOG_FILES {
        truncate_unshared(&dir.join(log))?;
    }
    reset_owner_and_mode(&handle, 0o777)?;
    // Nothing may have appeared meanwhile: exactly the two log files.
    if std::fs::read_dir(dir)?.count() != LOG_FILES.len() {
        return Err(doubt("entries appeared while it was emptied"));
    }
    Ok(())
}

/// Truncates the log file at `path` if it is a regular file with one link that nothing
/// else has open (a write lease is granted only then), and resets its owner and mode.
fn truncate_unshared(path: &Path) -> io::Result<()> {
    // Non-blocking: a FIFO in a log file's place would otherwise wait for a reader.
    let file = open_nofollow(path, libc::O_WRONLY | libc::O_NONBLOCK)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(doubt("a log file is not a regular file with one link"));
    }
    no_xattrs(&file)?;
    // SAFETY: plain fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Linked again before it changed hands? (Its owner could until the reset.)
    let emptied = file.set_len(0).and_then(|()| reset_owner_and_mode(&file, 0o666)).and_then(|()| {
        if file.metadata()?.nlink() == 1 { Ok(()) } else { Err(doubt("a log file was linked meanwhile")) }
    });
    // SAFETY: as above; the lease also ends when the descriptor is closed.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
    emptied
}

/// Opens `path` without following a symlink in its last component.
pub(crate) fn open_nofollow(path: &Path, flags: libc::c_int) -> io::Result<File> {
    let write = flags & libc::O_ACCMODE == libc::O_WRONLY;
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags((flags & !libc::O_ACCMODE) | libc::O_NOFOLLOW)
        .open(path)
}

/// Fails if `file` carries any extended attribute (an ACL, a label, user data).
fn no_xattrs(file: &File) -> io::Result<()> {
    // SAFETY: a null buffer of length 0 asks only for the size of the name list.
    let len = unsafe { libc::flistxattr(file.as_raw_fd(), std::ptr::null_mut(), 0) };
    match len {
        0 => Ok(()),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Err(doubt("it carries extended attributes")),
    }
}

/// Gives `file` the agent's user and group and `base` masked by the agent's umask: what
/// a file or directory the agent makes now would have (the next task's user, if another,
/// is given it at launch, as for a new directory).
fn reset_owner_and_mode(file: &File, base: u32) -> io::Result<()> {
    // SAFETY: geteuid/getegid take nothing and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let meta = file.metadata()?;
    if meta.uid() != uid || meta.gid() != gid {
        std::os::unix::fs::fchown(file, Some(uid), Some(gid))?;
    }
    let mode = base & !umask();
    if meta.mode() & 0o7777 != mode {
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// The agent's umask, read once from `/proc/self/status` (setting it to read it back
/// would race with other threads making files); 022 where it cannot be read.
fn umask() -> u32 {
    static UMASK: OnceLock<u32> = OnceLock::new();
    *UMASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|line| line.starts_with("Umask:"))?;
                u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).ok()
            })
            .unwrap_or(0o022)
    })
}

fn doubt(why: &'static str) -> io::Error {
    io::Error::other(why)
}

#[cfg(test)]
#[path = "recycle_tests.rs"]
mod tests;
