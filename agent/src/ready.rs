//! What the next task of a slot needs from the file systems, made before its launch
//! arrives, so that the path from one task's exit to the next one's exec holds no
//! directory, file or cgroup creation:
//! - [`CgroupLeases`]: the agent's container cgroups, named by serial (`t{n}`, never after
//!   a container, so no later container can find another's cgroup by name), each lent to
//!   one container at a time. A cgroup whose task ended *empty* goes back to the free list
//!   (up to `keep`) instead of being removed: an empty cgroup cannot fill again (only the
//!   agent puts processes in), so the next task is born into a cgroup holding nothing. One
//!   that still held processes is killed and removed, never lent again.
//! - [`ReadyDirs`]: directories `ready/{n}` beside `containers/` (on the same file
//!   system) holding empty `stdout` and `stderr`, opened, renamed to a container's
//!   directory when it is launched. Each is a removed container's directory, emptied, from
//!   the pool `ready/recycled/` (see [`crate::recycle`]) where one waits there, else new.
//!
//! Both are filled at start (one per slot) and refilled off the path: cgroups as their
//! tasks end (after the end is reported), directories once a task has started. What a
//! previous agent process left (cgroups, ready directories) is removed at start.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use slotmarket_common::ids::ContainerId;
use tracing::{debug, warn};

use crate::recycle;

/// The container cgroups under the agent's, and which container holds which.
#[derive(Debug)]
pub(crate) struct CgroupLeases {
    /// The agent's cgroup; every container cgroup is a child of it.
    base: PathBuf,
    state: Mutex<Leases>,
    /// The next serial for a new cgroup's name.
    next: AtomicU64,
}

/// A container cgroup, with its directory and its `cgroup.events` held open for as long
/// as the agent keeps it: a launch and a task's end each use it without opening anything.
#[derive(Debug)]
pub(crate) struct Cgroup {
    pub(crate) path: PathBuf,
    /// For a child to be born in (`CLONE_INTO_CGROUP`).
    pub(crate) dir: Arc<OwnedFd>,
    events: File,
}

impl Cgroup {
    /// Makes the cgroup `path` and opens it.
    fn make(path: PathBuf) -> io::Result<Cgroup> {
        std::fs::create_dir(&path)?;
        let open = || -> io::Result<Cgroup> {
            let dir = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY).open(&path)?;
            let events = File::open(path.join("cgroup.events"))?;
            Ok(Cgroup { path: path.clone(), dir: Arc::new(dir.into()), events })
        };
        open().inspect_err(|_| remove_cgroup(&path))
    }

    /// Whether a process is in it, from one read of `cgroup.events` (the kernel writes it
    /// afresh for every read from its start). A removed cgroup holds none.
    pub(crate) fn populated(&self) -> io::Result<bool> {
        let mut events = [0u8; 128];
        let read = match self.events.read_at(&mut events, 0) {
            Ok(read) => read,
            // What a file of a removed cgroup answers.
            Err(err) if err.raw_os_error() == Some(libc::ENODEV) => return Ok(false),
            Err(err) => return Err(err),
        };
        let mut lines = events[..read].split(|&byte| byte == b'\n');
        match lines.find(|line| line.starts_with(b"populated ")) {
            Some(b"populated 0") => Ok(false),
            Some(b"populated 1") => Ok(true),
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, "cgroup.events has no populated line")),
        }
    }
}

#[derive(Debug, Default)]
struct Leases {
    /// Empty cgroups, ready to be lent.
    free: Vec<Arc<Cgroup>>,
    /// The cgroup each container holds.
    lent: HashMap<ContainerId, Arc<Cgroup>>,
    /// How many empty cgroups are kept for reuse.
    keep: usize,
}

impl CgroupLeases {
    /// No cgroup made yet and none kept: until [`keep`](CgroupLeases::keep) is called,
    /// every container gets a new cgroup that is removed at its end.
    pub(crate) fn new(base: PathBuf) -> CgroupLeases {
        CgroupLeases { base, state: Mutex::new(Leases::default()), next: AtomicU64::new(0) }
    }

    /// The agent's cgroup.
    pub(crate) fn base(&self) -> &Path {
        &self.base
    }

    /// Keeps up to `count` empty cgroups for reuse and makes them now (blocking). Call it
    /// after the sweep at start: the sweep removes every cgroup under the agent's.
    pub(crate) fn keep(&self, count: usize) {
        self.lock().keep = count;
        while self.lock().free.len() < count {
            match self.make() {
                Ok(dir) => self.lock().free.push(dir),
                Err(err) => {
                    warn!(cgroup = %self.base.display(), error = %err, "cannot prepare a container cgroup ahead");
                    return;
                }
            }
        }
    }

    /// Lends `container` a cgroup: an empty one kept for reuse, else a new one. A container
    /// that already holds one (a repeated launch) is given the same.
    pub(crate) fn lend(&self, container: ContainerId) -> io::Result<Arc<Cgroup>> {
        let mut leases = self.lock();
        if let Some(dir) = leases.lent.get(&container) {
            return Ok(dir.clone());
        }
        let dir = match leases.free.pop() {
            Some(dir) => dir,
            None => {
                drop(leases);
                let dir = self.make()?;
                leases = self.lock();
                dir
            }
        };
        leases.lent.insert(container, dir.clone());
        Ok(dir)
    }

    /// The cgroup `container` holds, if any.
    pub(crate) fn of(&self, container: ContainerId) -> Option<Arc<Cgroup>> {
        self.lock().lent.get(&container).cloned()
    }

    /// Ends `container`'s lease on a cgroup known to be empty: kept for the next container
    /// while fewer than `keep` are, else removed. Does nothing if it holds none.
    pub(crate) fn give_back_empty(&self, container: ContainerId) {
        let mut leases = self.lock();
        let Some(cgroup) = leases.lent.remove(&container) else { return };
        if leases.free.len() < leases.keep {
            leases.free.push(cgroup);
            return;
        }
        drop(leases);
        remove_cgroup(&cgroup.path);
    }

    /// Ends `container`'s lease and removes its cgroup (whose processes the caller has
    /// killed); returns the cgroup it held, if any.
    pub(crate) fn forget(&self, container: ContainerId) -> Option<PathBuf> {
        let cgroup = self.lock().lent.remove(&container)?;
        remove_cgroup(&cgroup.path);
        Some(cgroup.path.clone())
    }

    /// At shutdown, once no task is live: keeps no more cgroups and removes the kept ones
    /// and every lent one that is empty (a supervisor may not have given its lease back
    /// yet; a cgroup still holding processes refuses the removal and stays for the next
    /// start's sweep), so the agent's own cgroup can go too.
    pub(crate) fn close(&self) {
        let (free, lent) = {
            let mut leases = self.lock();
            leases.keep = 0;
            (std::mem::take(&mut leases.free), leases.lent.values().cloned().collect::<Vec<_>>())
        };
        for cgroup in free {
            remove_cgroup(&cgroup.path);
        }
        for cgroup in lent {
            if let Err(err) = std::fs::remove_dir(&cgroup.path) {
                debug!(cgroup = %cgroup.path.display(), error = %err, "a lent cgroup stays");
            }
        }
    }

    /// Makes a new cgroup with the next free serial name.
    fn make(&self) -> io::Result<Arc<Cgroup>> {
        loop {
            let dir = self.base.join(format!("t{}", self.next.fetch_add(1, Ordering::Relaxed)));
            match Cgroup::make(dir) {
                Ok(cgroup) => return Ok(Arc::new(cgroup)),
                // Not ours to reuse (the sweep at start removes what a previous agent
                // left; this one is someone's): take the next name.
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Leases> {
        // A panic while holding this lock leaves the lists consistent (every step is one
        // push, pop or insert), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn remove_cgroup(dir: &Path) {
    if let Err(err) = std::fs::remove_dir(dir) {
        if err.kind() != io::ErrorKind::NotFound {
            warn!(cgroup = %dir.display(), error = %err, "cannot remove a container's cgroup");
        }
    }
}

/// A container directory made ahead, with its output files open.
#[derive(Debug)]
pub(crate) struct ReadyDir {
    /// Where it is now (`ready/{n}`).
    pub(crate) path: PathBuf,
    /// Its empty `stdout`, opened for writing.
    pub(crate) stdout: File,
    /// Its empty `stderr`, opened for writing.
    pub(crate) stderr: File,
}

/// Container directories made ahead of their launch.
#[derive(Debug, Default)]
pub struct ReadyDirs {
    state: Mutex<(Vec<ReadyDir>, usize)>,
    next: AtomicU64,
    /// Names last seen in the recycling pool and not taken yet (listed again when empty).
    pooled: Mutex<Vec<std::ffi::OsString>>,
}

impl ReadyDirs {
    /// Removes what a previous agent process left in `ready` (which only ever holds ready
    /// directories and the recycling pool), then keeps up to `count` ready there and makes
    /// them now (blocking).
    pub fn keep(&self, ready: &Path, count: usize) {
        for entry in std::fs::read_dir(ready).into_iter().flatten().flatten() {
            if let Err(err) = std::fs::remove_dir_all(entry.path()) {
                warn!(dir = %entry.path().display(), error = %err, "cannot remove a leftover ready directory");
            }
        }
        if let Err(err) = std::fs::create_dir_all(ready) {
            warn!(dir = %ready.display(), error = %err, "cannot create the ready directories' directory");
        }
        self.lock().1 = count;
        self.refill(ready);
    }

    /// A ready directory, if one is left.
    pub(crate) fn take(&self) -> Option<ReadyDir> {
        self.lock().0.pop()
    }

    /// Makes ready directories in `ready` until as many as kept are (blocking).
    pub(crate) fn refill(&self, ready: &Path) {
        loop {
            let (have, want) = {
                let state = self.lock();
                (state.0.len(), state.1)
            };
            if have >= want {
                return;
            }
            match self.make(ready) {
                Ok(made) => self.lock().0.push(made),
                Err(err) => {
                    debug!(dir = %ready.display(), error = %err, "cannot prepare a container directory ahead");
                    return;
                }
            }
        }
    }

    /// Whether fewer than wanted are ready.
    pub(crate) fn wants_more(&self) -> bool {
        let state = self.lock();
        state.0.len() < state.1
    }

    /// Makes the recycling pool in `ready` (see [`crate::recycle`]): from now on removed
    /// container directories fit for reuse wait there for later containers. Call it only
    /// where a task's end leaves none of its processes (cgroups).
    pub fn recycle_into(&self, ready: &Path) -> io::Result<()> {
        std::fs::create_dir_all(ready.join(recycle::POOL))
    }

    /// A ready directory: one from the recycling pool if one waits there, else a new one.
    fn make(&self, ready: &Path) -> io::Result<ReadyDir> {
        while let Some(name) = self.pooled_name(ready) {
            let path = ready.join(self.next.fetch_add(1, Ordering::Relaxed).to_string());
            match reuse(&ready.join(recycle::POOL).join(&name), &path) {
                Ok(Some(made)) => return Ok(made),
                Ok(None) => {}
                Err(err) => {
                    debug!(dir = %path.display(), error = %err, "a recycled container directory is not reused");
                    let _ = std::fs::remove_dir_all(&path);
                }
            }
        }
        self.make_new(ready)
    }

    /// The next name waiting in the pool, listing it again when none is left from the last
    /// listing (names already taken are skipped by [`reuse`]).
    fn pooled_name(&self, ready: &Path) -> Option<std::ffi::OsString> {
        let mut pooled = self.pooled.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if pooled.is_empty() {
            let pool = ready.join(recycle::POOL);
            // A directory's link count is 2 plus its subdirectories: one `stat` says
            // whether any wait there, so an empty pool costs a task's refill no listing.
            if std::fs::symlink_metadata(&pool).map_or(true, |meta| meta.nlink() <= 2) {
                return None;
            }
            let listing = std::fs::read_dir(&pool).ok()?;
            // Hidden names are directories still being checked.
            pooled.extend(
                listing
                    .flatten()
                    .map(|entry| entry.file_name())
                    .filter(|name| !name.as_bytes().starts_with(b".")),
            );
        }
        pooled.pop()
    }

    fn make_new(&self, ready: &Path) -> io::Result<ReadyDir> {
        let path = loop {
            let path = ready.join(self.next.fetch_add(1, Ordering::Relaxed).to_string());
            match std::fs::create_dir(&path) {
                Ok(()) => break path,
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
        };
        let stdout = File::create(path.join("stdout"))?;
        let stderr = File::create(path.join("stderr"))?;
        Ok(ReadyDir { path, stdout, stderr })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<ReadyDir>, usize)> {
        // Every step under the lock is one push, pop or store: a poisoned lock is consistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Moves the pooled directory `pooled` to `path` and opens its log files, checked again
/// (empty regular files with one link): `None` if another refill took it first.
fn reuse(pooled: &Path, path: &Path) -> io::Result<Option<ReadyDir>> {
    match std::fs::rename(pooled, path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    }
    let open = |name| -> io::Result<File> {
        let file = recycle::open_nofollow(&path.join(name), libc::O_WRONLY | libc::O_NONBLOCK)?;
        let meta = file.metadata()?;
        if !meta.is_file() || meta.nlink() != 1 || meta.len() != 0 {
            return Err(io::Error::other("a recycled log file is not empty"));
        }
        Ok(file)
    };
    let [stdout, stderr] = recycle::LOG_FILES;
    Ok(Some(ReadyDir { path: path.to_path_buf(), stdout: open(stdout)?, stderr: open(stderr)? }))
}

#[cfg(test)]
#[path = "ready_tests.rs"]
mod tests;
