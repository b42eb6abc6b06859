//! The actor's side of durability (the rule is in the store's module header): each batch
//! of writes is committed without waiting for the disk and numbered; the syncer thread
//! makes batches durable in groups; what a batch acknowledges (replies, the watch update
//! announcing a job's end) waits in order until the syncer says it is durable, while
//! launches and kills go out at once. Job ids are reserved durably ahead of the jobs
//! that run, so no id whose tasks may have run is issued again after a power cut.

use std::time::{Duration, Instant};

use slotmarket_common::ids::AgentId;
use slotmarket_common::protocol::{ErrorKind, MasterToAgent, Response};
use tokio::sync::{mpsc, oneshot};
use tracing::error;

use super::{Action, Actor, WatchSender};
use crate::core::Persist;
use crate::server::ServerError;
use crate::server::syncer::{Durable, Held, Syncer};
use crate::store::{Store, StoreError};

/// How long a committed batch that acknowledges nothing, or only lazily (a
/// `SubmitWatch`'s id), may wait before the syncer is asked for it: such batches ride
/// along with the next acknowledging one's sync, so a completion nobody watches costs no
/// sync of its own and cannot make an acknowledgement behind it wait for a sync it
/// started. This bounds what a power cut can take of them, and how long a lazily held
/// id waits.
pub(super) const LAZY_SYNC: Duration = Duration::from_millis(50);

/// Job ids are reserved up to the end of the next block of this many above the newest
/// job, and again once a job comes within a block of the reservation's end: the durable
/// reservation stays far ahead, so a launch practically never waits for it.
pub(super) const JOB_ID_BLOCK: u64 = 1000;

/// What a reservation made when job `id` is the newest reaches: the end of the block
/// after `id`'s (at least one block ahead).
pub(super) fn reservation_for(id: u64) -> u64 {
    (id / JOB_ID_BLOCK + 2) * JOB_ID_BLOCK
}

/// Something that tells someone that a batch's writes happened: held until the batch is
/// durable.
pub(super) enum Ack {
    /// The answer to a request that wrote (or read what an earlier batch wrote).
    Reply { reply: oneshot::Sender<Response>, response: Response },
    /// A watch's last update: the job ended.
    WatchEnd { updates: WatchSender, response: Response },
    /// A message to an agent held behind an unsynced job id reservation (see
    /// [`Pipeline::agent_messages_wait`]).
    Agent { agent: AgentId, message: MasterToAgent },
}

/// The job id reservation as written and as known durable.
#[derive(Clone, Copy, Default)]
struct JobIds {
    /// The highest reservation committed.
    written: u64,
    /// The batch that committed it.
    written_in: u64,
    /// The highest reservation a completed sync covers: a job above it may not run yet.
    durable: u64,
}

/// Batches committed and made durable, and what waits for them.
pub(super) struct Pipeline {
    syncer: Syncer,
    /// The syncer's reports, read by the actor's loop.
    pub(super) reports: mpsc::UnboundedReceiver<Durable>,
    /// The number of the last batch committed (batches count from 1).
    committed: u64,
    /// The highest batch the syncer was asked for.
    requested: u64,
    /// When to ask for committed batches that acknowledge nothing (see [`LAZY_SYNC`]).
    pub(super) lazy_at: Option<Instant>,
    /// Every batch up to this one is durable.
    durable: u64,
    held: Held<Ack>,
    /// The highest batch an acknowledgement that asks for its sync at once waits for
    /// (held lazily ones, see [`Actor::acknowledge_lazily`], do not count).
    eager: u64,
    /// Acknowledgements made while the current step's inputs are decided, before its
    /// batch exists: they wait for that batch (see [`Actor::hold_for_this_step`]).
    this_step: Vec<Ack>,
    job_ids: JobIds,
}

impl Pipeline {
    /// Starts the syncer on `store`'s WAL.
    pub(super) fn start(store: &Store) -> Result<Pipeline, StoreError> {
        let mut wal = store.wal_sync()?;
        let (tx, reports) = mpsc::unbounded_channel();
        let syncer = Syncer::spawn(move || wal.sync(), tx)?;
        Ok(Pipeline {
            syncer,
            reports,
            committed: 0,
            requested: 0,
            lazy_at: None,
            durable: 0,
            held: Held::new(),
            eager: 0,
            this_step: Vec::new(),
            job_ids: JobIds::default(),
        })
    }

    /// Whether this batch's messages to agents must wait for durability too: a launch of
    /// a job the durable reservation does not cover yet, or agent messages already held
    /// (whose order the agent must see kept).
    fn agent_messages_wait(&self, actions: &[Action]) -> bool {
        let beyond = |action: &Action| matches!(action, Action::Launch { launch, .. } if launch.task.job.0 > self.job_ids.durable);
        actions.iter().any(beyond) || self.held.any(|ack| matches!(ack, Ack::Agent { .. }))
    }
}

impl Actor {
    /// Commits `persist` (with a new job id reservation first if an admitted job comes
    /// near the end of the written one) without waiting for the disk (the syncer is asked
    /// for it by [`after_step`](Actor::after_step)). Returns the batch whose durability this step's
    /// acknowledgements wait for: this one, or the last one if nothing was written.
    pub(super) fn commit(&mut self, persist: &[Persist]) -> Result<u64, ServerError> {
        if persist.is_empty() {
            return Ok(self.pipeline.committed);
        }
        let result = self.reserve_ahead_of(persist).and_then(|()| self.store.apply(persist));
        if let Err(err) = result {
            error!(error = %err, "store write failed");
            self.fail_acknowledgements("the master could not store the change and is stopping");
            return Err(err.into());
        }
        self.pipeline.committed += 1;
        // A batch that ends a job is synced at once: someone (a `--wait`, a watch about to
        // be opened, a status poll) is likely to ask for it. Asked for now, not once the
        // step's messages are out, so the disk works while they go.
        if persist.iter().any(|op| matches!(op, Persist::JobState { state, .. } if state.is_terminal())) {
            self.request_sync();
        }
        Ok(self.pipeline.committed)
    }

    /// Once a step's commands are out: if an acknowledgement waits for a batch the
    /// syncer was not asked for yet, asks for every committed batch now; otherwise
    /// committed batches are asked for within [`LAZY_SYNC`].
    pub(super) fn after_step(&mut self) {
        let pipeline = &mut self.pipeline;
        if pipeline.eager > pipeline.requested {
            self.request_sync();
        } else if pipeline.committed > pipeline.requested && pipeline.lazy_at.is_none() {
            pipeline.lazy_at = Some(Instant::now() + LAZY_SYNC);
        }
    }

    /// Asks the syncer for every committed batch.
    pub(super) fn request_sync(&mut self) {
        let pipeline = &mut self.pipeline;
        pipeline.lazy_at = None;
        if pipeline.committed > pipeline.requested {
            pipeline.requested = pipeline.committed;
            pipeline.syncer.request(pipeline.committed);
        }
    }

    /// Writes a larger job id reservation if a job in `persist` comes within a block of
    /// the written one's end (it is committed in the batch about to be).
    fn reserve_ahead_of(&mut self, persist: &[Persist]) -> Result<(), StoreError> {
        let newest = persist.iter().filter_map(|op| match op {
            Persist::JobAdmitted { job, .. } => Some(job.0),
            _ => None,
        });
        let Some(newest) = newest.max() else { return Ok(()) };
        if newest + JOB_ID_BLOCK > self.pipeline.job_ids.written {
            self.write_reservation(reservation_for(newest))?;
        }
        Ok(())
    }

    /// Commits a job id reservation up to `until`; it counts once its batch is durable.
    pub(super) fn write_reservation(&mut self, until: u64) -> Result<(), StoreError> {
        self.store.reserve_job_ids(until)?;
        let ids = &mut self.pipeline.job_ids;
        ids.written = ids.written.max(until);
        ids.written_in = self.pipeline.committed + 1;
        Ok(())
    }

    /// A barrier on the actor's thread: makes every committed batch durable now and
    /// releases what waited for them. For recovery, before an agent may forget files,
    /// and tests.
    pub(super) fn sync_now(&mut self) -> Result<(), StoreError> {
        // A reservation written outside a batch (recovery) counts as the next batch.
        let through = self.pipeline.committed.max(self.pipeline.job_ids.written_in);
        if through > self.pipeline.durable {
            self.store.sync()?;
            self.pipeline.committed = through;
            self.pipeline.requested = self.pipeline.requested.max(through);
            self.pipeline.lazy_at = None;
            self.mark_durable(through);
        }
        Ok(())
    }

    /// Takes a report of the syncer: releases what the durable batches acknowledge, or
    /// on a failed sync fails every held reply and stops the master.
    pub(super) fn on_durable(&mut self, report: Durable) -> Result<(), ServerError> {
        match report {
            Ok(batch) => {
                self.mark_durable(batch);
                Ok(())
            }
            Err(err) => {
                error!(error = %err, "syncing the store failed");
                self.fail_acknowledgements("the master could not make the change durable and is stopping");
                Err(StoreError::Sync(err).into())
            }
        }
    }

    fn mark_durable(&mut self, batch: u64) {
        let pipeline = &mut self.pipeline;
        pipeline.durable = pipeline.durable.max(batch);
        if pipeline.job_ids.written_in <= pipeline.durable {
            pipeline.job_ids.durable = pipeline.job_ids.written;
        }
        let released = pipeline.held.release(batch);
        for ack in released {
            self.deliver(ack);
        }
    }

    /// Holds `ack`, made while this step's inputs are decided (e.g. a new watch on a job
    /// whose end this step or an unsynced one decided), until the step's batch is durable.
    pub(super) fn hold_for_this_step(&mut self, ack: Ack) {
        self.pipeline.this_step.push(ack);
    }

    /// Passes what [`hold_for_this_step`](Actor::hold_for_this_step) kept to `batch`,
    /// the step's batch once it is committed.
    pub(super) fn acknowledge_this_step(&mut self, batch: u64) {
        for ack in std::mem::take(&mut self.pipeline.this_step) {
            self.acknowledge(batch, ack);
        }
    }

    /// Sends `ack` once `batch` is durable: now if it already is; otherwise the syncer is
    /// asked for the batch once the step is out.
    pub(super) fn acknowledge(&mut self, batch: u64, ack: Ack) {
        if batch <= self.pipeline.durable {
            self.deliver(ack);
        } else {
            self.pipeline.eager = self.pipeline.eager.max(batch);
            self.pipeline.held.push(batch, ack);
        }
    }

    /// Sends `ack` once `batch` is durable, without asking for a sync of its own: it goes
    /// out with the next sync asked for (an acknowledgement or a job's end after it) or
    /// at the latest [`LAZY_SYNC`] after the batch. Held in order with the others.
    pub(super) fn acknowledge_lazily(&mut self, batch: u64, ack: Ack) {
        if batch <= self.pipeline.durable {
            self.deliver(ack);
        } else {
            self.pipeline.held.push(batch, ack);
        }
    }

    /// Whether the messages to agents of a step with `actions` wait for `batch`.
    pub(super) fn agent_hold(&self, actions: &[Action]) -> bool {
        self.pipeline.agent_messages_wait(actions)
    }

    /// Sends `message` to `agent`, or holds it behind `batch` when `hold`.
    pub(super) fn send_or_hold(&mut self, agent: AgentId, message: MasterToAgent, hold: Option<u64>) {
        match hold {
            Some(batch) => self.acknowledge(batch, Ack::Agent { agent, message }),
            None => self.send(agent, message),
        }
    }

    fn deliver(&self, ack: Ack) {
        match ack {
            // A client that hung up needs no answer; a watcher gone needs no update.
            Ack::Reply { reply, response } => drop(reply.send(response)),
            Ack::WatchEnd { updates, response } => drop(updates.send(Some(response))),
            Ack::Agent { agent, message } => self.send(agent, message),
        }
    }

    /// Answers every waiting client with an internal error: the master is stopping on a
    /// store failure, and what was not durable may be lost.
    fn fail_acknowledgements(&mut self, message: &str) {
        for (_, reply) in self.replies.drain() {
            let _ = reply.send(Response::error(ErrorKind::Internal, message));
        }
        for ack in self.pipeline.held.drain_all() {
            if let Ack::Reply { reply, .. } = ack {
                let _ = reply.send(Response::error(ErrorKind::Internal, message));
            }
        }
    }

    /// The last batch committed and the highest the syncer was asked for (tests).
    #[cfg(test)]
    pub(super) fn committed_and_requested(&self) -> (u64, u64) {
        (self.pipeline.committed, self.pipeline.requested)
    }

    /// How many syncs the syncer has completed (tests).
    #[cfg(test)]
    pub(super) fn syncs(&self) -> u64 {
        self.pipeline.syncer.syncs()
    }

    /// Whether every committed batch is durable (tests).
    #[cfg(test)]
    pub(super) fn all_durable(&self) -> bool {
        self.pipeline.durable >= self.pipeline.committed && self.pipeline.held.is_empty()
    }

    /// Waits (blocking, up to 5 s) for the syncer to report every committed batch
    /// durable, taking its reports as the actor's loop would (tests).
    #[cfg(test)]
    pub(super) fn await_syncer(&mut self) {
        self.request_sync();
        for _ in 0..500 {
            while let Ok(report) = self.pipeline.reports.try_recv() {
                self.on_durable(report).unwrap();
            }
            if self.all_durable() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the syncer did not report batch {} within 5 s", self.pipeline.committed);
    }

    /// Carries out `commands` and then makes them durable at once (tests that look at
    /// replies right after).
    #[cfg(test)]
    pub(super) fn execute_settled(&mut self, commands: Vec<crate::core::Command>) -> Result<(), ServerError> {
        self.execute(commands)?;
        self.sync_now()?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "actor_durable_tests.rs"]
mod tests;
