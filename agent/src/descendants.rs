//! The agent's own descendants, for the process scan: the agent as the child subreaper of
//! its tasks (so whatever a task leaves behind, `setsid` or not, stays below the agent),
//! the walk over its descendants, and reaping the orphans it adopts.
//!
//! Why: ending a container under the scan has to find every process carrying its marker.
//! Reading every process on the machine costs one environment read per process, on every
//! container's end (7 ms per task with 368 processes, `docs/benchmarks.md`, launch path,
//! twelfth round). Below a subreaper, a task's processes are all among the agent's
//! descendants, which are a few per running task.
//!
//! Adopting is a setting of the whole process, and an adopted orphan is a child that
//! nobody else reaps, so the agent's own process turns it on ([`adopt_orphans`]); a test
//! running the driver inside the test binary does not, and its scans read the whole
//! machine as before. The agent's own children (its task leaders, reaped by their
//! waiters) are counted from before their clone and registered from just after it until
//! they are reaped, and the reaper never touches them.

use std::collections::{BTreeMap, HashSet};
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Whether this process adopts orphans and its scans walk its descendants.
static ADOPTING: AtomicBool = AtomicBool::new(false);
/// The children this process started and reaps itself (task leaders): how many
/// [`OwnChild`] registrations each pid has (two only while a pid just reaped is reused).
static OWN: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());
/// Children being started: counted from before the clone until they are in [`OWN`].
static STARTING: AtomicUsize = AtomicUsize::new(0);
/// Reaps of this process's children begun and ended: each `waitpid` of ours, and each
/// poll of a wait that `tokio::process` reaps in. The kernel's children list can skip an
/// entry when the one printed before it is reaped mid-read, so this process's own list,
/// read while no reap was under way and none began, is complete. (The lists of deeper
/// descendants, which the walk also reads, have reapers of their own.)
static REAPS_BEGUN: AtomicU64 = AtomicU64::new(0);
static REAPS_ENDED: AtomicU64 = AtomicU64::new(0);
/// Tries at a children list that no reap overlapped, before giving up.
const LIST_TRIES: usize = 3;
/// Re-reads of this process's own children within one walk, at most: each finds the
/// processes reparented to it while the walk ran, so a task forking orphans without end
/// could keep a walk going; the scan's next look finds what one walk left.
const MAX_ROUNDS: usize = 16;

/// Makes this process the child subreaper of everything it starts, and its scans walk its
/// descendants. Only for the agent's own process: see the module header. Fails where the
/// kernel does not list a process's children (`CONFIG_PROC_CHILDREN`); scans then read
/// the whole machine.
pub fn adopt_orphans() -> io::Result<()> {
    // The walk needs the children lists; check before changing anything.
    own_children()?;
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and no pointers.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    ADOPTING.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether [`adopt_orphans`] took effect in this process.
pub fn adopting() -> bool {
    ADOPTING.load(Ordering::SeqCst)
}

/// A child about to be started: hold it across the clone, then name the child with
/// [`Starting::started`]. While any is held, the reaper leaves every child alone, since
/// one it cannot tell from an orphan may be this one.
pub(crate) struct Starting(());

/// Call before cloning a child that this process will reap itself.
pub(crate) fn starting() -> Starting {
    STARTING.fetch_add(1, Ordering::SeqCst);
    Starting(())
}

impl Starting {
    /// Registers the child `pid`, which this process reaps through [`reaping`], as its own
    /// while the result lives.
    pub(crate) fn started(self, pid: u32) -> OwnChild {
        *own().entry(pid).or_default() += 1;
        OwnChild { pid, reaped_elsewhere: false }
    }

    /// As [`started`](Starting::started), for a child that `tokio::process` reaps: the
    /// caller brackets each poll of its wait with [`reaping`] and calls
    /// [`OwnChild::reaped`] once the wait returned its status. Dropped before that,
    /// tokio's orphan queue reaps it at a moment we cannot see, so a reap counts as under
    /// way from then on (children lists are no longer trusted; the scan runs).
    pub(crate) fn started_reaped_elsewhere(self, pid: u32) -> OwnChild {
        let mut own = self.started(pid);
        own.reaped_elsewhere = true;
        own
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        STARTING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A child this process started and reaps itself: the reaper of adopted orphans leaves
/// it alone while this lives. Drop it once the child is reaped, or once nobody will wait
/// for it (the reaper may then take it).
#[derive(Debug)]
pub(crate) struct OwnChild {
    pid: u32,
    /// Reaped by `tokio::process`, and not yet known to be.
    reaped_elsewhere: bool,
}

impl OwnChild {
    /// The child's wait returned its status: it is reaped.
    pub(crate) fn reaped(mut self) {
        self.reaped_elsewhere = false;
    }
}

impl Drop for OwnChild {
    fn drop(&mut self) {
        let mut own = own();
        if let Some(count) = own.get_mut(&self.pid) {
            *count -= 1;
            if *count == 0 {
                own.remove(&self.pid);
            }
        }
        if self.reaped_elsewhere {
            std::mem::forget(reaping());
        }
    }
}

/// A reap of one of this process's children under way: hold it across the `waitpid`.
#[derive(Debug)]
pub(crate) struct Reap(());

/// Call before reaping a child of this process (see [`REAPS_BEGUN`]).
pub(crate) fn reaping() -> Reap {
    REAPS_BEGUN.fetch_add(1, Ordering::SeqCst);
    Reap(())
}

impl Drop for Reap {
    fn drop(&mut self) {
        REAPS_ENDED.fetch_add(1, Ordering::SeqCst);
    }
}

fn own() -> MutexGuard<'static, BTreeMap<u32, usize>> {
    OWN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This process's children (of all its threads).
fn own_children() -> io::Result<Vec<u32>> {
    let mut children = Vec::new();
    Lists::default().children_of(None, &mut children)?;
    Ok(children)
}

/// Whether this process adopts orphans and has no child but the task leaders it started:
/// then nothing is left of a container whose leader was reaped, since every process the
/// leader left was reparented to this process at its exit (before it could be reaped), or
/// lies below one that was. Never blocks; `false` where that cannot be told.
pub fn none_adopted() -> bool {
    if !adopting() {
        return false;
    }
    let Some(children) = own_children_between_reaps() else { return false };
    // A child being started counts as adopted here, as it should: unknown.
    let own = own();
    children.iter().all(|pid| own.contains_key(pid))
}

/// This process's children, from a read that no reap of ours overlapped (so none was
/// skipped), or `None` if reaps kept overlapping or the list cannot be read.
fn own_children_between_reaps() -> Option<Vec<u32>> {
    for _ in 0..LIST_TRIES {
        // Ended before begun: a reap that ends between the two loads shows as under way.
        let ended = REAPS_ENDED.load(Ordering::SeqCst);
        let begun = REAPS_BEGUN.load(Ordering::SeqCst);
        if begun != ended {
            // Every reap is one non-blocking `waitpid`: let it finish.
            std::thread::yield_now();
            continue;
        }
        let children = own_children().ok()?;
        if REAPS_BEGUN.load(Ordering::SeqCst) == begun {
            return Some(children);
        }
    }
    None
}

/// Reaps the adopted orphans that have exited, from this process's children; never
/// blocks. Ending a container reaps them too, but a long task leaving short-lived orphans
/// behind would otherwise fill the pid table with zombies before its end, so the agent
/// also calls this as its children exit. Returns whether it had to put the reaping off
/// (a child was being started): then call it again soon.
pub fn reap_exited() -> bool {
    own_children().is_ok_and(|children| reap_adopted(&children).deferred)
}

/// One walk over this process's descendants.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Every descendant found, parents before their children.
    pub descendants: Vec<u32>,
    /// This process's direct children at the walk's end.
    pub children: Vec<u32>,
}

/// Walks this process's descendants breadth first (each thread's children, since a child
/// belongs to the thread that cloned it). A process orphaned during the walk moves to
/// this process's children, perhaps after its old parent was read: the own children are
/// read again at the end, and the walk goes on from any new one.
pub(crate) fn walk() -> Walk {
    let mut lists = Lists::default();
    let mut walk = Walk::default();
    let mut seen = HashSet::new();
    let mut next = Vec::new();
    for _ in 0..MAX_ROUNDS {
        // Failing a read that no reap overlapped, a plain one: it may skip a child, as
        // every read could before the reaps were counted.
        walk.children = own_children_between_reaps().or_else(|| own_children().ok()).unwrap_or_default();
        let mut queue: Vec<u32> = walk.children.iter().copied().filter(|&pid| seen.insert(pid)).collect();
        if queue.is_empty() {
            break;
        }
        while !queue.is_empty() {
            for pid in queue.drain(..) {
                walk.descendants.push(pid);
                // An unreadable list (a process gone) ends that branch; its children
                // moved to the nearest subreaper: this process, read again in the next
                // round, or one already read (the scan's next look finds them there).
                let _ = lists.children_of(Some(pid), &mut next);
            }
            queue.extend(next.drain(..).filter(|&pid| seen.insert(pid)));
        }
    }
    walk
}

/// What [`reap_adopted`] left.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Reaping {
    /// The adopted children not reaped: alive, or all of them if `deferred`.
    pub left: Vec<u32>,
    /// Whether a child was being started, so that none was reaped (one just cloned and
    /// not yet registered looks like an orphan).
    pub deferred: bool,
}

/// Reaps the zombies among `children` (this process's direct children) that it did not
/// start: orphans it adopted.
pub(crate) fn reap_adopted(children: &[u32]) -> Reaping {
    // `children` was read before this lock: a child in it that is not registered yet was
    // cloned before that read, so its `Starting` was counted before too, and is dropped
    // only after registering, which waits for this lock.
    let own = own();
    let adopted = children.iter().copied().filter(|pid| !own.contains_key(pid));
    if STARTING.load(Ordering::SeqCst) > 0 {
        return Reaping { left: adopted.collect(), deferred: true };
    }
    let left = adopted
        .filter(|&pid| {
            let Ok(pid_t) = libc::pid_t::try_from(pid) else { return true };
            let _reap = reaping();
            let mut status = 0;
            // SAFETY: waitpid writes the status into a local; WNOHANG never blocks. The
            // pid is a child of this process that no waiter of its own owns.
            unsafe { libc::waitpid(pid_t, &mut status, libc::WNOHANG) != pid_t }
        })
        .collect();
    Reaping { left, deferred: false }
}

/// Reads `/proc/PID/task/TID/children` lists into buffers kept across a walk.
#[derive(Default)]
struct Lists {
    path: String,
    text: String,
    tids: Vec<String>,
}

impl Lists {
    /// Appends the children of every thread of `pid` (`None`: this process) to `out`.
    fn children_of(&mut self, pid: Option<u32>, out: &mut Vec<u32>) -> io::Result<()> {
        use std::fmt::Write;
        self.path.clear();
        match pid {
            Some(pid) => write!(self.path, "/proc/{pid}/task"),
            None => write!(self.path, "/proc/self/task"),
        }
        .map_err(io::Error::other)?;
        self.tids.clear();
        for entry in std::fs::read_dir(&self.path)? {
            if let Some(tid) = entry?.file_name().to_str() {
                self.tids.push(tid.to_owned());
            }
        }
        let task_dir = self.path.len();
        for tid in &self.tids {
            self.path.truncate(task_dir);
            let _ = write!(self.path, "/{tid}/children");
            self.text.clear();
            match std::fs::File::open(&self.path).and_then(|mut file| file.read_to_string(&mut self.text)) {
                Ok(_) => {
                    out.extend(self.text.split_ascii_whitespace().filter_map(|pid| pid.parse::<u32>().ok()))
                }
                // A thread that ended since the directory was read.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "descendants_tests.rs"]
mod tests;
