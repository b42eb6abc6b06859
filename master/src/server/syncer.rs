//! The group syncer and the held acknowledgements: the actor commits each batch without
//! waiting for the disk and numbers it; the syncer thread makes batches durable in groups
//! (while one sync runs, later batches queue and share the next), and the actor releases
//! what each batch acknowledges, in order, once the syncer says that batch is durable.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::mpsc;

/// What the syncer reports: every batch up to this number is durable, or the sync failed
/// (and nothing after the last reported batch may be taken as durable).
pub(super) type Durable = io::Result<u64>;

/// The highest batch number asked for, and whether the owner has gone.
struct Wanted {
    through: u64,
    stop: bool,
}

/// What the actor and the syncer thread share.
struct Shared {
    wanted: Mutex<Wanted>,
    wake: Condvar,
    /// Syncs completed (tests count them).
    syncs: AtomicU64,
}

/// A thread that runs `sync` whenever batches it was asked to make durable are not yet
/// covered, and reports the highest batch each sync covered.
pub(super) struct Syncer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts the thread. `sync` must make everything committed before it is called
    /// durable (the store's [`WalSync`](crate::store::WalSync)); each completed sync is
    /// reported on `durable`. The first failure is reported and ends the thread.
    pub(super) fn spawn(
        sync: impl FnMut() -> io::Result<()> + Send + 'static,
        durable: mpsc::UnboundedSender<Durable>,
    ) -> io::Result<Syncer> {
        let shared = Arc::new(Shared {
            wanted: Mutex::new(Wanted { through: 0, stop: false }),
            wake: Condvar::new(),
            syncs: AtomicU64::new(0),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("store-syncer".into())
            .spawn(move || sync_loop(&thread_shared, sync, &durable))?;
        Ok(Syncer { shared, thread: Some(thread) })
    }

    /// Asks for every batch up to `batch` (committed already) to be made durable.
    pub(super) fn request(&self, batch: u64) {
        let mut wanted = self.shared.wanted.lock().unwrap_or_else(PoisonError::into_inner);
        if batch > wanted.through {
            wanted.through = batch;
            self.shared.wake.notify_one();
        }
    }

    /// How many syncs have completed.
    #[cfg(test)]
    pub(super) fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }
}

impl Drop for Syncer {
    /// Lets the thread finish the syncs asked for (a stopping master leaves nothing it
    /// committed unsynced), then waits for it.
    fn drop(&mut self) {
        self.shared.wanted.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread's loop: wait until a batch above the last synced one is wanted, take the
/// highest wanted (every batch committed by then), sync, report it.
fn sync_loop(
    shared: &Shared,
    mut sync: impl FnMut() -> io::Result<()>,
    durable: &mpsc::UnboundedSender<Durable>,
) {
    let mut synced = 0;
    loop {
        let target = {
            let mut wanted = shared.wanted.lock().unwrap_or_else(PoisonError::into_inner);
            while wanted.through <= synced && !wanted.stop {
                wanted = shared.wake.wait(wanted).unwrap_or_else(PoisonError::into_inner);
            }
            if wanted.through <= synced {
                return;
            }
            wanted.through
        };
        if let Err(err) = sync() {
            let _ = durable.send(Err(err));
            return;
        }
        synced = target;
        shared.syncs.fetch_add(1, Ordering::Relaxed);
        // The actor may be gone (stopping); the sync still counted.
        let _ = durable.send(Ok(target));
    }
}

/// Acknowledgements waiting for their batch to be durable, in the order they were made.
pub(super) struct Held<T> {
    queue: VecDeque<(u64, T)>,
}

impl<T> Held<T> {
    /// An empty queue.
    pub(super) fn new() -> Held<T> {
        Held { queue: VecDeque::new() }
    }

    /// Holds `item` until batch `batch` is durable. Batches are pushed in order.
    pub(super) fn push(&mut self, batch: u64, item: T) {
        debug_assert!(self.queue.back().is_none_or(|(last, _)| *last <= batch));
        self.queue.push_back((batch, item));
    }

    /// Takes, in order, every item whose batch is at most `durable`.
    pub(super) fn release(&mut self, durable: u64) -> Vec<T> {
        let ready = self.queue.iter().take_while(|(batch, _)| *batch <= durable).count();
        self.queue.drain(..ready).map(|(_, item)| item).collect()
    }

    /// Takes every item, whatever its batch (when the master stops on a failure).
    pub(super) fn drain_all(&mut self) -> Vec<T> {
        self.queue.drain(..).map(|(_, item)| item).collect()
    }

    /// Whether anything is held.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether any held item matches `test`.
    pub(super) fn any(&self, test: impl Fn(&T) -> bool) -> bool {
        self.queue.iter().any(|(_, item)| test(item))
    }
}

#[cfg(test)]
#[path = "syncer_tests.rs"]
mod tests;
