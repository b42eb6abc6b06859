//! The agent's event loop: one task owns [`AgentCore`], takes master messages and process
//! events from one channel, feeds them to the core with the current time and carries out
//! the returned actions in order. Between steps it answers the session's requests for
//! what `Register` carries. It also runs graceful shutdown.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use slotmarket_common::dir_lock;
use slotmarket_common::ids::ContainerId;
use slotmarket_common::protocol::{ContainerReport, DataMode};
use slotmarket_common::time::Timestamp;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use crate::config::{AgentConfig, ShuffleConfig};
use crate::core::{AgentAction, AgentCore, AgentEvent};
use crate::process::{self, FetchEnv, ProcessConfig, ProcessEvent, TaskHandle};
use crate::session::{self, LeavingAck, SessionLinks, SnapshotReply};
use crate::shuffle::locate::SessionLocator;
use crate::shuffle::{self, client::ShuffleClient, fetch::FetchService, fetch::FetchTokens};

/// Time allowed after the kill grace for killed tasks to be reaped during shutdown.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);
/// Time the session gets to deliver the last reports after the tasks are gone.
const SESSION_DRAIN: Duration = Duration::from_secs(3);
/// Time the session gets to tell the master the agent is leaving before tasks are killed.
const LEAVING_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the agent could not run.
#[derive(Debug, Error)]
pub enum DriverError {
    /// The work directory could not be created.
    #[error("cannot create the work directory {path}: {source}")]
    WorkDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another agent uses the work directory, or its lock file cannot be made.
    #[error(transparent)]
    WorkDirLock(#[from] dir_lock::DirLockError),
    /// Task containment (cgroups) could not be set up.
    #[error(transparent)]
    Containment(#[from] crate::containment::ContainmentError),
    /// The data directory or its id file is unusable.
    #[error(transparent)]
    DataDir(#[from] crate::data_dir::DataDirError),
    /// The shuffle service could not listen (local data mode).
    #[error("cannot start the shuffle service on {listen}: {source}")]
    Shuffle {
        /// The listen address.
        listen: std::net::SocketAddr,
        /// Why.
        source: slotmarket_common::transport::TransportError,
    },
    /// The fetch socket could not be made (local data mode).
    #[error("cannot create the fetch socket {path}: {source}")]
    FetchSocket {
        /// The socket's path.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What a local-mode agent runs besides the driver, for the driver to hand on.
struct LocalMode {
    /// What other agents dial (the configured address, or the one bound).
    advertised: std::net::SocketAddr,
    /// What every task is given.
    fetch: FetchEnv,
}

/// Starts the shuffle service and the fetch socket of a local-mode agent; both run until
/// the process exits.
async fn start_local_mode(
    config: &AgentConfig,
    shuffle: &ShuffleConfig,
    locator: SessionLocator,
) -> Result<LocalMode, DriverError> {
    let shuffle_error = |source| DriverError::Shuffle { listen: shuffle.listen, source };
    let endpoint = shuffle::server::bind(shuffle.listen, &config.tls_files()).map_err(shuffle_error)?;
    let bound = endpoint.local_addr().map_err(|source| {
        shuffle_error(slotmarket_common::transport::TransportError::Bind { addr: shuffle.listen, source })
    })?;
    let advertised = shuffle.advertise.unwrap_or(bound);
    tokio::spawn(shuffle::server::serve(endpoint, config.data_dir.clone(), shuffle.max_fetches));

    let socket = config.work_dir.join("fetch.sock");
    let listener = bind_fetch_socket(&socket)
        .map_err(|source| DriverError::FetchSocket { path: socket.clone(), source })?;
    let tokens = FetchTokens::default();
    let service = FetchService {
        tokens: tokens.clone(),
        locator: Arc::new(locator),
        client: Arc::new(ShuffleClient::new(config.tls_files())),
        data_dir: config.data_dir.clone(),
        node: config.name.clone(),
        max_fetches: shuffle.max_fetches,
    };
    tokio::spawn(shuffle::fetch::serve_socket(listener, Arc::new(service)));
    info!(%bound, %advertised, socket = %socket.display(), "shuffle service and fetch socket ready");
    Ok(LocalMode { advertised, fetch: FetchEnv { socket, tokens } })
}

/// Binds the fetch socket, replacing one a previous run left, connectable by every local
/// user: tasks may run as other users, and their token is what authenticates them.
fn bind_fetch_socket(path: &std::path::Path) -> std::io::Result<tokio::net::UnixListener> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
        _ => {}
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
    Ok(listener)
}

/// Runs the agent until `shutdown` completes: connects to the master (retrying forever),
/// runs what it launches, and on shutdown tells the master it is leaving, kills every
/// task, waits for them and lets the session deliver the final reports.
pub async fn run(config: AgentConfig, shutdown: impl Future<Output = ()>) -> Result<(), DriverError> {
    let containers = config.work_dir.join("containers");
    tokio::fs::create_dir_all(&containers)
        .await
        .map_err(|source| DriverError::WorkDir { path: containers, source })?;
    // Before the sweep below: a second agent on this work directory would take the first
    // one's running tasks for a crashed predecessor's and kill them, and the two would
    // replace each other at the master.
    let _lock = dir_lock::lock_dir(&config.work_dir, "agent.lock", "agent")?;
    info!(
        node = %config.name,
        master = %config.master,
        map_slots = config.map_slots,
        reduce_slots = config.reduce_slots,
        work_dir = %config.work_dir.display(),
        data_dir = %config.data_dir.display(),
        "agent starting"
    );
    let (locator, locates) = SessionLocator::new();
    let local = match &config.shuffle {
        Some(shuffle) => Some(start_local_mode(&config, shuffle, locator).await?),
        None => None,
    };
    let data_mode = match &local {
        Some(local) => DataMode::Local { shuffle: local.advertised },
        None => DataMode::Shared,
    };
    let process = config.process_config(local.map(|local| local.fetch))?;
    if config.adopt_orphans && !process.containment.uses_cgroups() {
        match crate::descendants::adopt_orphans() {
            Ok(()) => {
                info!("tasks' orphans stay below the agent; ending a container walks its descendants");
                tokio::spawn(reap_adopted_orphans());
            }
            Err(err) => {
                warn!(error = %err, "cannot adopt tasks' orphans; ending a container reads every process")
            }
        }
    }
    // Before anything runs: tasks a SIGKILLed predecessor left must not run beside re-runs.
    process.containment.sweep_leftovers();
    // One cgroup and one directory ready per slot, so a slot's next task starts without
    // making either on its path.
    process.keep_ready(config.map_slots.saturating_add(config.reduce_slots) as usize);
    let (events_tx, events) = mpsc::unbounded_channel();
    let (reports_tx, reports_rx) = mpsc::unbounded_channel();
    // One registration at a time asks; a slot for one request is all it needs.
    let (snapshot_tx, snapshots) = mpsc::channel(1);
    let (leaving_tx, leaving) = mpsc::channel(1);
    let links = SessionLinks {
        events: events_tx.clone(),
        reports: reports_rx,
        snapshot: snapshot_tx,
        leaving,
        locates,
    };
    let data_dir_id = crate::data_dir::shared_id(&config.data_dir)?;
    info!(data_dir = %config.data_dir.display(), id = %data_dir_id, "data directory");
    let session = tokio::spawn(session::run(config.session_config(data_dir_id, data_mode), links));
    let mut inbox = Inbox { events, snapshots };

    let mut driver = Driver {
        core: AgentCore::new(config.map_slots, config.reduce_slots),
        tasks: BTreeMap::new(),
        process,
        events: events_tx,
        reports: reports_tx,
        clock: Timestamp::ZERO,
    };
    driver.serve(&mut inbox, shutdown).await;
    driver.announce_leaving(&mut inbox, &leaving_tx).await;
    driver.stop(&mut inbox, config.kill_grace + SHUTDOWN_MARGIN).await;
    driver.process.containment.release();
    // Dropping the driver drops the report sender: the session sends what is left and ends.
    drop(driver);
    match tokio::time::timeout(SESSION_DRAIN, session).await {
        Ok(_) => info!("agent stopped"),
        Err(_) => warn!("the session did not finish delivering reports in time"),
    }
    Ok(())
}

/// [`run`] as a task of the runtime instead of on the calling thread: for `main`, whose
/// future `block_on` polls on the process's main thread, outside the worker pool. There,
/// every process event reaching the driver and every report leaving it crossed between
/// that thread and a worker (a futex wake-up each way, 0.1 to 0.5 ms on a busy machine,
/// twice on a slot's report path and twice on its launch path); as a task, the driver
/// is run next on the worker whose task woke it (tokio polls a task woken by the running
/// one next on the same thread), as the session and the supervisors already are.
pub async fn run_on_worker(
    config: AgentConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DriverError> {
    match tokio::spawn(run(config, shutdown)).await {
        Ok(result) => result,
        Err(join) => match join.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Only a runtime shutting down cancels the task, and then nobody is waiting.
            Err(_) => Ok(()),
        },
    }
}

/// Reaps the orphans the agent adopted as they exit: after each SIGCHLD (every exit of a
/// child of the agent sends one; signals pending together are delivered once), then rests
/// for [`REAP_GAP`], so a burst of exits costs one pass; a pass put off by a task being
/// started runs again after the rest. Where SIGCHLD cannot be listened to, every second.
async fn reap_adopted_orphans() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut exits = signal(SignalKind::child())
        .inspect_err(
            |err| warn!(error = %err, "cannot listen for SIGCHLD; reaping tasks' orphans once a second"),
        )
        .ok();
    loop {
        match &mut exits {
            Some(exits) => {
                if exits.recv().await.is_none() {
                    return;
                }
            }
            None => tokio::time::sleep(Duration::from_secs(1)).await,
        }
        while crate::descendants::reap_exited() {
            tokio::time::sleep(REAP_GAP).await;
        }
        tokio::time::sleep(REAP_GAP).await;
    }
}

/// The least time between two passes of [`reap_adopted_orphans`]: orphans exiting in a
/// burst wait at most this long as zombies.
const REAP_GAP: Duration = Duration::from_millis(100);

/// What the loop takes in: events for the core, and the session's snapshot requests.
struct Inbox {
    events: mpsc::UnboundedReceiver<AgentEvent>,
    snapshots: mpsc::Receiver<SnapshotReply>,
}

/// The loop's state: the core, a handle per task process, and the channels out.
struct Driver {
    core: AgentCore,
    tasks: BTreeMap<ContainerId, TaskHandle>,
    process: Arc<ProcessConfig>,
    /// Cloned into every process supervisor so its events come back here.
    events: mpsc::UnboundedSender<AgentEvent>,
    reports: mpsc::UnboundedSender<ContainerReport>,
    /// The last time given to the core, so it never goes backwards.
    clock: Timestamp,
}

impl Driver {
    /// Handles events and snapshot requests until `shutdown` completes.
    async fn serve(&mut self, inbox: &mut Inbox, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                // The driver holds an event sender itself, so that channel never closes here.
                Some(event) = inbox.events.recv() => self.step(event),
                // A closed channel (the session ended) only disables this branch.
                Some(reply) = inbox.snapshots.recv() => self.answer_snapshot(reply),
                () = &mut shutdown => return,
            }
        }
    }

    /// Has the session tell the master this agent is leaving, before any task is killed:
    /// the master then gives it no new work and runs its tasks elsewhere at once, without
    /// counting the kills as failures. Keeps answering snapshot requests meanwhile (the
    /// session may be registering); bounded by [`LEAVING_TIMEOUT`].
    async fn announce_leaving(&mut self, inbox: &mut Inbox, leaving: &mpsc::Sender<LeavingAck>) {
        let (ack, acked) = oneshot::channel();
        if leaving.send(ack).await.is_err() {
            return;
        }
        let deadline = tokio::time::sleep(LEAVING_TIMEOUT);
        tokio::pin!(acked, deadline);
        loop {
            tokio::select! {
                _ = &mut acked => return,
                Some(reply) = inbox.snapshots.recv() => self.answer_snapshot(reply),
                () = &mut deadline => {
                    warn!("could not tell the master this agent is leaving in time");
                    return;
                }
            }
        }
    }

    /// Kills every task and handles events (and snapshot requests) until none is live or
    /// `limit` passes.
    async fn stop(&mut self, inbox: &mut Inbox, limit: Duration) {
        info!(live = self.core.live_count(), "shutting down");
        self.step(AgentEvent::Shutdown);
        let deadline = tokio::time::Instant::now() + limit;
        while self.core.live_count() > 0 {
            let next = tokio::select! {
                event = inbox.events.recv() => event,
                Some(reply) = inbox.snapshots.recv() => {
                    self.answer_snapshot(reply);
                    continue;
                }
                () = tokio::time::sleep_until(deadline) => None,
            };
            match next {
                Some(event) => self.step(event),
                None => {
                    // kill_on_drop and PDEATHSIG still take the leaders down with us.
                    warn!(live = self.core.live_count(), "tasks still live at the shutdown deadline");
                    return;
                }
            }
        }
    }

    /// Feeds one event to the core and carries out its actions in order.
    fn step(&mut self, event: AgentEvent) {
        let finished = match &event {
            AgentEvent::Exited { container, .. } | AgentEvent::SpawnFailed { container, .. } => {
                Some(*container)
            }
            _ => None,
        };
        let now = self.now();
        let actions = self.core.handle(now, event);
        if let Some(container) = finished {
            self.tasks.remove(&container);
        }
        // This step's reports go to the session once its processes are started. A launch
        // reaches this step as the fourth task in a row woken by one datagram (quinn's
        // endpoint, its connection, the stream reader, the driver), past the three that
        // tokio runs next on the same worker; what the driver wakes then queues in order,
        // so the supervisors' set-up and clone now come before the session's write of
        // `Acquired` instead of after it. Reports keep their order, and none of a later
        // step can overtake them.
        let mut reports = Vec::new();
        for action in actions {
            match action {
                AgentAction::Spawn(launch) => {
                    let container = launch.container;
                    let events = self.events.clone();
                    let handle = process::start(self.process.clone(), launch, move |event| {
                        // A closed channel means the agent is exiting; nobody needs the event.
                        let _ = events.send(process_event(container, event));
                    });
                    self.tasks.insert(container, handle);
                }
                AgentAction::KillGroup { container } => match self.tasks.get_mut(&container) {
                    Some(handle) => handle.kill(),
                    None => warn!(%container, "kill for a container without a process handle"),
                },
                AgentAction::Report(report) => reports.push(report),
            }
        }
        for report in reports {
            // The session only goes away after the driver; nothing to do if it has.
            let _ = self.reports.send(report);
        }
    }

    /// Answers the session's request for what `Register` carries. Only called between
    /// steps, so every report of the earlier steps is already queued for the session and
    /// the snapshot is at least as new as any of them.
    fn answer_snapshot(&mut self, reply: SnapshotReply) {
        let now = self.now();
        // The session may have given up on this registration meanwhile; nothing to do then.
        let _ = reply.send(self.core.registration_reports(now));
    }

    /// Wall-clock time, held monotonic for the core.
    fn now(&mut self) -> Timestamp {
        self.clock = self.clock.max(Timestamp::from(SystemTime::now()));
        self.clock
    }
}

fn process_event(container: ContainerId, event: ProcessEvent) -> AgentEvent {
    match event {
        ProcessEvent::Started { pid } => AgentEvent::Started { container, pid },
        ProcessEvent::SpawnFailed(err) => AgentEvent::SpawnFailed { container, error: err.to_string() },
        ProcessEvent::Exited(exit, stderr_tail) => AgentEvent::Exited { container, exit, stderr_tail },
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
