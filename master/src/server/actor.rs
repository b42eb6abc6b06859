//! The actor: owns the core and the store, turns [`Input`]s into core calls, sleeps
//! until the core's next wakeup, and executes the commands the core returns, in order:
//! launches and kills at once, acknowledgements once their writes are durable
//! (`actor_durable.rs`). What it answers clients is in `actor_requests.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::Identity;
use slotmarket_common::ids::{AgentId, ContainerId, JobId};
use slotmarket_common::protocol::{
    ContainerReport, DataMode, JobState, Launch, Locate, LogReadReply, MasterToAgent, Request, Response,
};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, error, info, warn};

use super::launches::pack_launches;

#[path = "actor_durable.rs"]
mod durable;
#[path = "job_files.rs"]
mod job_files;
#[path = "actor_requests.rs"]
mod requests;
use super::task_reads::PendingLogRead;
use super::{ServerError, reads};
use crate::core::policy::jockey::{CompletionModel, ModelRequest, build_completion_model};
use crate::core::{Command, Core, Event, KillReason, Persist, RequestId};
use crate::store::{Store, StoreError};
use durable::{Ack, Pipeline};
pub use job_files::DEFAULT_RETAIN as DEFAULT_CLEANUP_RETAIN;
use requests::{answer, fill_predictions, stored_read};

/// What sessions tell the actor.
pub(crate) enum Input {
    /// An agent sent a valid `Register`. The actor answers on `outbound` with
    /// `Registered` before anything else.
    AgentRegistered {
        node: String,
        map_slots: u32,
        reduce_slots: u32,
        live_containers: Vec<ContainerReport>,
        outbound: mpsc::UnboundedSender<MasterToAgent>,
        assigned: oneshot::Sender<AgentId>,
        /// Shared or local data directory.
        data_mode: DataMode,
        /// The data directory's id.
        data_dir_id: String,
    },
    /// A fact about a registered agent (heartbeat, reports, disconnect).
    Agent(Event),
    /// A one-shot client request.
    Request { caller: Identity, request: Request, reply: oneshot::Sender<Response> },
    /// A watch: `Job` responses go to `updates` until the job ends.
    Watch { caller: Identity, job: JobId, updates: WatchSender },
    /// A submit followed by a watch of the job it admits: the answer goes to `reply`
    /// once the admission is durable (without a sync of its own), then the job's updates
    /// to `updates` as for `Watch`.
    SubmitWatch { caller: Identity, spec: JobSpec, reply: oneshot::Sender<Response>, updates: WatchSender },
    /// An agent answered a log read.
    LogRead { agent: AgentId, answer: LogReadReply },
    /// An agent answered an output read.
    OutputRead { agent: AgentId, answer: slotmarket_common::protocol::OutputReadReply },
    /// An agent asked where a stage's outputs are; answered `MasterToAgent::Located`.
    Locate { agent: AgentId, locate: Locate },
}

/// Where a watch stream's updates go: only the latest response is kept, so a reader that
/// falls behind (or withholds flow control) skips to the newest state instead of making
/// the master queue every change for it. The actor drops the sender once the job ended.
pub(crate) type WatchSender = watch::Sender<Option<Response>>;

/// One open watch stream on a job.
struct Watcher {
    /// Who asked; each update is the job's status as this caller may see it.
    caller: Identity,
    /// The latest update, overwritten by the next one.
    updates: WatchSender,
}

/// Most queued inputs decided together before their writes are committed.
const MAX_BATCH: usize = 256;

/// A command other than a store write: what is left to do once a batch's writes are
/// split off and committed.
enum Action {
    Launch { agent: AgentId, launch: Launch },
    Kill { agent: AgentId, container: ContainerId, reason: KillReason },
    Reply { request: RequestId, response: Response },
    JobChanged { job: JobId },
    DropAgent { agent: AgentId, reason: String },
    BuildModel(Box<ModelRequest>),
}

/// Logs what an operator watches for in what was just stored: jobs that ended (failed
/// and cancelled ones at warn, with why) and task attempts that failed.
fn log_outcomes(persist: &[Persist]) {
    for op in persist {
        match op {
            Persist::JobState { job, state: JobState::Completed, .. } => info!(%job, "job completed"),
            Persist::JobState { job, state, message, .. } if state.is_terminal() => {
                warn!(%job, state = state.name(), reason = message.as_deref().unwrap_or(""), "job ended");
            }
            Persist::OutputsLost { job, stage_name, tasks, node, .. } => {
                let count = tasks.len();
                warn!(%job, %node, stage = stage_name.as_str(), count, "re-running {count} {stage_name} tasks of {job} whose output was on {node}");
            }
            Persist::Container { node, report } if report.state == ContainerState::Failed => {
                let reason = report.message.as_deref().unwrap_or("");
                info!(%node, task = %report.task, attempt = %report.attempt, exit_code = ?report.exit_code, reason, "task attempt failed");
            }
            _ => {}
        }
    }
}

/// Splits `commands` into the store writes and the rest, each in the order given.
fn split(commands: Vec<Command>) -> (Vec<Persist>, Vec<Action>) {
    let mut persist = Vec::new();
    let mut actions = Vec::with_capacity(commands.len());
    for command in commands {
        let action = match command {
            Command::Persist(op) => {
                persist.push(op);
                continue;
            }
            Command::Launch { agent, launch } => Action::Launch { agent, launch },
            Command::Kill { agent, container, reason } => Action::Kill { agent, container, reason },
            Command::Reply { request, response } => Action::Reply { request, response: *response },
            Command::JobChanged { job } => Action::JobChanged { job },
            Command::DropAgent { agent, reason } => Action::DropAgent { agent, reason },
            Command::BuildCompletionModel(request) => Action::BuildModel(request),
        };
        actions.push(action);
    }
    (persist, actions)
}

/// The single owner of scheduling state.
pub(super) struct Actor {
    core: Core,
    store: Store,
    clock: Clock,
    /// Sent to agents in `Registered`.
    heartbeat_interval: Duration,
    /// Most encoded bytes of launches in one `Launch` message (see [`launch_budget`]).
    launch_budget: usize,
    /// The core's count of ignored reports when it was last logged.
    ignored_reports: u64,
    agents: BTreeMap<AgentId, mpsc::UnboundedSender<MasterToAgent>>,
    next_agent: u32,
    replies: HashMap<RequestId, oneshot::Sender<Response>>,
    next_request: u64,
    watchers: BTreeMap<JobId, Vec<Watcher>>,
    /// Submits that become watches of their job once admitted (`Input::SubmitWatch`),
    /// by the request whose reply admits the job.
    submit_watches: HashMap<RequestId, Watcher>,
    /// Completion models built off the actor come back here (see `build_model`).
    models_built: mpsc::UnboundedReceiver<CompletionModel>,
    models_to_actor: mpsc::UnboundedSender<CompletionModel>,
    /// Log reads sent to agents and not answered yet, by request number.
    log_reads: BTreeMap<u64, PendingLogRead>,
    next_log_read: u64,
    /// Output reads, nodes' data directories and job directory removals.
    files: job_files::JobFiles,
    /// Batches committed, the syncer making them durable, and what waits for it.
    pipeline: Pipeline,
}

impl Actor {
    /// An actor on `core` and `store`, with the syncer started on the store's WAL.
    pub(super) fn new(
        core: Core,
        store: Store,
        heartbeat_interval: Duration,
        launch_budget: usize,
    ) -> Result<Actor, StoreError> {
        let (models_to_actor, models_built) = mpsc::unbounded_channel();
        let pipeline = Pipeline::start(&store)?;
        Ok(Actor {
            core,
            store,
            clock: Clock::new(),
            heartbeat_interval,
            launch_budget,
            ignored_reports: 0,
            agents: BTreeMap::new(),
            next_agent: 1,
            replies: HashMap::new(),
            next_request: 1,
            watchers: BTreeMap::new(),
            submit_watches: HashMap::new(),
            models_built,
            models_to_actor,
            log_reads: BTreeMap::new(),
            next_log_read: 1,
            files: job_files::JobFiles::new(job_files::DEFAULT_RETAIN),
            pipeline,
        })
    }

    /// Sets how long an ended job's directories stay on the agents (`[cleanup] retain_s`).
    pub(super) fn set_cleanup_retain(&mut self, retain: Duration) {
        self.files = job_files::JobFiles::new(retain);
    }

    /// Replays the stored accounts and ledger, then every stored job, into the core at
    /// the actor's current time; returns how many jobs there were. Call it once, before
    /// `run`, so the jobs are in place before any agent joins.
    pub(super) fn recover(&mut self) -> Result<usize, StoreError> {
        let (accounts, ledger) = self.store.recover_accounts()?;
        let (rates, income) = self.store.recover_account_settings()?;
        let store = self.store.recover_store()?;
        let first_job = store.next_job.0;
        let jobs = self.store.recover()?;
        let count = jobs.len();
        let now = self.clock.now();
        info!(accounts = accounts.len(), entries = ledger.len(), "recovered accounts and ledger");
        let mut commands = self.core.handle(now, Event::AccountsRecovered { accounts, ledger });
        let refused = self.core.view().accounts_refused_on_replay();
        if refused > 0 {
            warn!(refused, "stored account records the core could not apply");
        }
        commands.extend(self.core.handle(now, Event::AccountSettingsRecovered { rates, income }));
        commands.extend(self.core.handle(now, Event::StoreRecovered(store)));
        for job in jobs {
            commands.extend(self.core.handle(now, Event::JobRecovered(job)));
        }
        // Nothing can be launched or killed before agents join, and no client waits; but a
        // job that recovery settles (its last task completed just before the stop) must be
        // stored as ended, or it would be recovered and settled again on every start.
        let (persist, _) = split(commands);
        debug!(writes = persist.len(), "recovery settled stored jobs");
        self.store.apply(&persist)?;
        // Before anything is launched: ids ahead of this lifetime's first jobs reserved,
        // and both durable.
        self.write_reservation(durable::reservation_for(first_job))?;
        self.sync_now()?;
        Ok(count)
    }

    /// Runs until every session and the server have dropped their inbox senders, or the
    /// store fails.
    pub(super) async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<Input>) -> Result<(), ServerError> {
        let mut cleanup = tokio::time::interval(self.files.check_every());
        cleanup.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let wakeup = self.core.next_wakeup().map(|at| self.clock.instant_of(at));
            let lazy_sync = self.pipeline.lazy_at.map(tokio::time::Instant::from_std);
            let mut commands = Vec::new();
            tokio::select! {
                input = inbox.recv() => {
                    let Some(input) = input else { return Ok(()) };
                    commands.extend(self.on_input(input));
                    // Group commit: whatever is already queued is decided now too, so all of
                    // its store writes share one transaction (one fsync) below.
                    for _ in 1..MAX_BATCH {
                        let Ok(input) = inbox.try_recv() else { break };
                        commands.extend(self.on_input(input));
                    }
                }
                Some(model) = self.models_built.recv() => {
                    info!(job = %model.name, allocations = model.allocations.len(), "completion model built");
                    commands = self.core.handle(self.clock.now(), Event::CompletionModelBuilt(Box::new(model)));
                }
                Some(report) = self.pipeline.reports.recv() => self.on_durable(report)?,
                () = sleep_until(lazy_sync) => self.request_sync(),
                () = sleep_until(wakeup) => commands = self.core.tick(self.clock.now()),
                _ = cleanup.tick() => self.cleanup_round(self.clock.now()),
            }
            self.execute(commands)?;
        }
    }

    /// Feeds one input to the core. Reads (status, listings, watches) are answered at
    /// once from the core's view, which may include decisions of this batch whose writes
    /// are not yet committed; nothing that depends on them is sent before the commit.
    fn on_input(&mut self, input: Input) -> Vec<Command> {
        let now = self.clock.now();
        match input {
            Input::AgentRegistered {
                node,
                map_slots,
                reduce_slots,
                live_containers,
                outbound,
                assigned,
                data_mode,
                data_dir_id,
            } => {
                let agent = AgentId(self.next_agent);
                self.next_agent += 1;
                let heartbeat_interval_ms = millis(self.heartbeat_interval);
                // If the session is already gone the agent will simply be lost later.
                let _ = outbound.send(MasterToAgent::Registered { agent, heartbeat_interval_ms });
                let _ = assigned.send(agent);
                self.agents.insert(agent, outbound);
                let (node_name, dir_id) = (node.clone(), data_dir_id.clone());
                let event = Event::AgentJoined {
                    agent,
                    node,
                    map_slots,
                    reduce_slots,
                    live_containers,
                    data_mode,
                    data_dir_id,
                };
                let commands = self.core.handle(now, event);
                // Once the core knows it: the removals it is owed go out now.
                self.on_agent_data_dir(node_name, dir_id);
                commands
            }
            Input::Agent(event) => {
                if let Event::AgentDisconnected { agent } = &event {
                    self.agents.remove(agent);
                    self.fail_log_reads(*agent);
                    self.fail_output_reads(*agent);
                }
                self.core.handle(now, event)
            }
            Input::Request { caller, request, reply } => self.on_request(now, caller, request, reply),
            Input::Watch { caller, job, updates } => {
                self.on_watch(caller, job, updates);
                Vec::new()
            }
            Input::SubmitWatch { caller, spec, reply, updates } => {
                let id = RequestId(self.next_request);
                let watcher = Watcher { caller: caller.clone(), updates };
                let commands = self.on_request(now, caller, Request::Submit { spec }, reply);
                // Answered at once (refused before the core saw it): nothing to watch.
                if self.replies.contains_key(&id) {
                    self.submit_watches.insert(id, watcher);
                }
                commands
            }
            Input::Locate { agent, locate } => {
                self.answer_locate(agent, locate);
                Vec::new()
            }
            Input::LogRead { agent, answer } => {
                // Only the agent asked may answer (and only once).
                if self.log_reads.get(&answer.request).is_some_and(|p| p.agent == agent) {
                    if let Some(pending) = self.log_reads.remove(&answer.request) {
                        pending.finish(answer);
                    }
                }
                Vec::new()
            }
            Input::OutputRead { agent, answer } => {
                self.on_output_read(agent, answer);
                Vec::new()
            }
        }
    }

    /// Builds a completion model on tokio's blocking pool (it simulates a job profile many
    /// times: seconds of CPU that must not stall scheduling) and sends it back to the
    /// actor's loop, which hands it to the core.
    fn build_model(&self, request: ModelRequest) {
        let back = self.models_to_actor.clone();
        tokio::spawn(async move {
            match tokio::task::spawn_blocking(move || build_completion_model(&request)).await {
                Ok(model) => {
                    let _ = back.send(model);
                }
                Err(err) => error!(%err, "building a completion model failed"),
            }
        });
    }

    /// Carries out `commands` (see [`execute_once`](Actor::execute_once)), then feeds the
    /// core the failures of launches that could not be sent and carries out its answer,
    /// until nothing is left unsent.
    fn execute(&mut self, commands: Vec<Command>) -> Result<(), ServerError> {
        let mut unsent = self.execute_once(commands)?;
        while !unsent.is_empty() {
            let commands = unsent
                .into_iter()
                .flat_map(|(agent, reports)| {
                    self.core.handle(self.clock.now(), Event::ContainerReports { agent, reports })
                })
                .collect();
            unsent = self.execute_once(commands)?;
        }
        Ok(())
    }

    /// Carries out `commands`: first every store write, in one transaction committed
    /// without waiting for the disk, then the rest in order. Launches and kills go out
    /// at once (a crash of the process loses nothing committed; what a power cut loses
    /// is handled on recovery: see the store's module header); replies and the watch
    /// updates announcing a job's end wait until the syncer has made the batch durable.
    /// Returns, per agent, a `Failed` report for every launch too large to send.
    fn execute_once(
        &mut self,
        commands: Vec<Command>,
    ) -> Result<Vec<(AgentId, Vec<ContainerReport>)>, ServerError> {
        let (persist, actions) = split(commands);
        let batch = self.commit(&persist)?;
        self.acknowledge_this_step(batch);
        log_outcomes(&persist);
        let hold = self.agent_hold(&actions).then_some(batch);
        let mut launches: BTreeMap<AgentId, Vec<Launch>> = BTreeMap::new();
        let mut changed: BTreeSet<JobId> = BTreeSet::new();
        let mut unsent: BTreeMap<AgentId, Vec<ContainerReport>> = BTreeMap::new();
        for action in actions {
            match action {
                Action::Launch { agent, launch } => launches.entry(agent).or_default().push(launch),
                Action::Kill { agent, container, reason } => {
                    // Keep this agent's launches and kills in the order the core decided them.
                    if let Some(list) = launches.remove(&agent) {
                        self.send_launches(agent, list, &mut unsent, hold);
                    }
                    if matches!(reason, KillReason::AgentSilent { .. }) {
                        warn!(%agent, %container, %reason, "agent lost; its task runs again elsewhere");
                    }
                    self.send_or_hold(
                        agent,
                        MasterToAgent::Kill { container, reason: reason.to_string() },
                        hold,
                    );
                }
                Action::Reply { request, response } => match self.replies.remove(&request) {
                    Some(reply) => match self.submit_watches.remove(&request) {
                        Some(watcher) => self.admitted_for_watch(batch, reply, response, watcher),
                        None => self.acknowledge(batch, Ack::Reply { reply, response }),
                    },
                    None => warn!(request = request.0, "reply for an unknown request"),
                },
                Action::JobChanged { job } => {
                    changed.insert(job);
                }
                Action::DropAgent { agent, reason } => {
                    self.send_or_hold(agent, MasterToAgent::Refused { reason }, hold);
                    // Dropping the queue ends the session's writer, which closes the connection.
                    self.agents.remove(&agent);
                }
                Action::BuildModel(request) => self.build_model(*request),
            }
        }
        for (agent, list) in launches {
            self.send_launches(agent, list, &mut unsent, hold);
        }
        self.notify_watchers(changed, batch);
        self.after_step();
        self.log_ignored_reports();
        Ok(unsent.into_iter().collect())
    }

    /// Logs the core's count of reports dropped by fencing when a batch raised it: late
    /// or duplicate reports are expected around reconnects, a steady climb is not.
    fn log_ignored_reports(&mut self) {
        let ignored = self.core.view().ignored_reports();
        if ignored != self.ignored_reports {
            debug!(
                ignored,
                new = ignored.saturating_sub(self.ignored_reports),
                "container reports ignored by fencing"
            );
            self.ignored_reports = ignored;
        }
    }

    /// Sends launches in messages of at most `launch_budget` encoded bytes, so neither a
    /// large scheduling step nor a job with large launches makes a frame the agent
    /// refuses (which would cost the connection, and every task's reports with it). A
    /// launch over the budget on its own is never sent: a `Failed` report for it goes to
    /// `unsent`, so its attempt ends instead. Spec validation keeps valid jobs far
    /// below that (`MAX_LAUNCH_BYTES`); this is the backstop. With `hold`, the messages
    /// wait for that batch to be durable.
    fn send_launches(
        &mut self,
        agent: AgentId,
        list: Vec<Launch>,
        unsent: &mut BTreeMap<AgentId, Vec<ContainerReport>>,
        hold: Option<u64>,
    ) {
        for (chunk, oversized) in pack_launches(list, self.launch_budget) {
            if !chunk.is_empty() {
                self.send_or_hold(agent, MasterToAgent::Launch(chunk), hold);
            }
            if let Some((launch, size)) = oversized {
                warn!(%agent, container = %launch.container, size, "launch too large to send; failing the attempt");
                let message = format!(
                    "the launch message is {size} bytes, over the {} bytes an agent accepts",
                    self.launch_budget
                );
                unsent.entry(agent).or_default().push(ContainerReport {
                    container: launch.container,
                    task: launch.task,
                    attempt: launch.attempt,
                    state: ContainerState::Failed,
                    at: self.clock.now(),
                    exit_code: None,
                    message: Some(message),
                });
            }
        }
    }

    fn send(&self, agent: AgentId, message: MasterToAgent) {
        match self.agents.get(&agent) {
            Some(queue) if queue.send(message).is_ok() => {}
            // The core learns of the loss through AgentDisconnected or silence.
            _ => debug!(%agent, "message for a disconnected agent dropped"),
        }
    }

    /// Sends each watcher of a `changed` job its status as of now; the update that
    /// announces the job's end waits for `batch` to be durable.
    fn notify_watchers(&mut self, changed: BTreeSet<JobId>, batch: u64) {
        let watched = changed.iter().any(|job| self.watchers.contains_key(job));
        let predictions =
            if watched { self.core.predicted_finishes(self.clock.now()) } else { HashMap::new() };
        let mut ends = Vec::new();
        for job in changed {
            let Some(watchers) = self.watchers.remove(&job) else { continue };
            let view = self.core.view();
            let mut open = Vec::with_capacity(watchers.len());
            for w in watchers {
                let Ok(mut status) = view.job_status(job, &w.caller) else { continue };
                fill_predictions(&predictions, &mut status.summary);
                if status.summary.state.is_terminal() {
                    ends.push(Ack::WatchEnd { updates: w.updates, response: Response::Job(status) });
                } else if w.updates.send(Some(Response::Job(status))).is_ok() {
                    // Replaces an update the reader has not taken yet: at most one per watcher.
                    open.push(w);
                }
            }
            if !open.is_empty() {
                self.watchers.insert(job, open);
            }
        }
        for end in ends {
            self.acknowledge(batch, end);
        }
    }
}

/// Time for the core: the wall clock read once at start, advanced by a monotonic clock,
/// so a stepped system clock (NTP) can neither declare every agent lost at once nor
/// freeze timeouts.
struct Clock {
    wall_at_start: Timestamp,
    started: std::time::Instant,
}

impl Clock {
    fn new() -> Clock {
        Clock { wall_at_start: Timestamp::from(SystemTime::now()), started: std::time::Instant::now() }
    }

    fn now(&self) -> Timestamp {
        self.wall_at_start + self.started.elapsed()
    }

    /// The tokio instant at which core time `at` is reached.
    fn instant_of(&self, at: Timestamp) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.started) + at.saturating_since(self.wall_at_start)
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "actor_test_support.rs"]
mod test_support;

#[cfg(test)]
#[path = "actor_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "actor_mrm_tests.rs"]
mod mrm_tests;

#[cfg(test)]
#[path = "actor_durability_tests.rs"]
mod durability_tests;

#[cfg(test)]
#[path = "actor_pipeline_tests.rs"]
mod pipeline_tests;

#[cfg(test)]
#[path = "actor_ended_tests.rs"]
mod ended_tests;
