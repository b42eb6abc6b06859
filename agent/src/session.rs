//! The QUIC session with the master: register, then one long-lived control stream that
//! carries heartbeats and batched reports out and launches and kills in. On connection
//! loss tasks keep running and reports queue up; the session reconnects with backoff,
//! re-registers with the live containers and flushes the queue.
//!
//! Delivery: a report is never dropped while the agent runs, but around a lost connection
//! it may reach the master twice (a batch whose write failed is re-sent); reports that the
//! `Register` after a reconnect already supersedes are not re-sent.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quinn::{RecvStream, SendStream, VarInt};
use slotmarket_common::ids::{AgentId, ContainerId};
use slotmarket_common::pki::TlsFiles;
use slotmarket_common::protocol::{
    AgentToMaster, ContainerReport, DataMode, Locate, LogRead, LogReadReply, MasterToAgent, PROTOCOL_VERSION,
    Register,
};
use slotmarket_common::protocol::{OutputRead, OutputReadReply, RemoveJob};
use slotmarket_common::transport::{self, StreamError, TransportError, read_frame, write_frame};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::core::AgentEvent;
use crate::job_outputs::JobDirs;
use crate::shuffle::locate::{LocateCall, LocatesInFlight};
use crate::task_logs;

/// How long a connection attempt (QUIC handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the master has to answer `Register`.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);
/// A write that takes longer means the connection is unusable.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a clean shutdown waits for the master to acknowledge the last reports.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Reports per `Reports` frame; keeps a long queue well under the frame limit.
const REPORTS_PER_FRAME: usize = 256;

/// What the session needs to know.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The master's `host:port`, resolved on every connection attempt.
    pub master: String,
    /// The TLS name the master's certificate must carry.
    pub server_name: String,
    /// The agent's certificate files.
    pub tls: TlsFiles,
    /// The node name sent in `Register`; equal to the certificate's principal.
    pub node: String,
    /// Map slots offered.
    pub map_slots: u32,
    /// Reduce slots offered.
    pub reduce_slots: u32,
    /// Reconnect delays.
    pub backoff: BackoffConfig,
    /// Largest frame sent or accepted.
    pub max_frame: usize,
    /// The data directory and its id, reported in `Register`.
    pub data_dir: DataDirIdentity,
    /// Where container directories (with their `stdout` and `stderr`) live, for the
    /// master's log reads.
    pub containers_dir: PathBuf,
    /// What `Register` says about the data directory (local: with the shuffle address).
    pub data_mode: DataMode,
}

/// The agent's data directory and its id (see [`crate::data_dir`]).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct DataDirIdentity {
    /// The directory, as the agent sees it.
    pub path: String,
    /// Its `.slotmarket-shared-id`.
    pub id: String,
}

/// Reconnect delays: `initial`, doubling up to `max`, each with jitter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BackoffConfig {
    /// The first delay.
    pub initial: Duration,
    /// The largest delay.
    pub max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> BackoffConfig {
        BackoffConfig { initial: Duration::from_millis(200), max: Duration::from_secs(5) }
    }
}

/// The driver's answer to a [`SessionLinks::snapshot`] request: what `Register` carries.
pub type SnapshotReply = oneshot::Sender<Vec<ContainerReport>>;

/// Answered once `Leaving` has been written to the master (or at once while there is no
/// connection to write it to: it is then sent first thing after registering again).
pub type LeavingAck = oneshot::Sender<()>;

/// The session's channels to and from the driver.
#[derive(Debug)]
pub struct SessionLinks {
    /// Launches and kills from the master, for the core.
    pub events: mpsc::UnboundedSender<AgentEvent>,
    /// Reports from the core, in order. When every sender is gone the session sends what
    /// is left (if connected) and ends.
    pub reports: mpsc::UnboundedReceiver<ContainerReport>,
    /// Asks the driver, on every registration, for the last report of every live (and
    /// recently finished) container. The driver answers between two steps, after it has
    /// queued every report of the earlier steps, so a `Register` never claims less than
    /// the reports already handed to the session.
    pub snapshot: mpsc::Sender<SnapshotReply>,
    /// The driver is stopping: tell the master `Leaving` (after every report queued so
    /// far) before it kills the tasks, so their tasks go elsewhere without a failure.
    pub leaving: mpsc::Receiver<LeavingAck>,
    /// Questions for the master about where stages' outputs are (local data mode); they
    /// wait here while disconnected, and fail if the connection drops before the answer.
    pub locates: mpsc::UnboundedReceiver<LocateCall>,
}

/// Why one connection attempt or connection ended.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The endpoint could not be built, the master not reached or not identified.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The connection failed.
    #[error("connection lost: {0}")]
    Connection(#[from] quinn::ConnectionError),
    /// A frame could not be written or read.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// The master refused the registration.
    #[error("the master refused the registration: {0}")]
    Refused(String),
    /// The master did not answer `Register` in time.
    #[error("no answer to Register within {0:?}")]
    RegisterTimeout(Duration),
    /// A write did not complete in time.
    #[error("write stalled for {0:?}")]
    WriteTimeout(Duration),
    /// The master sent something that does not belong where it came.
    #[error("unexpected message from the master: {0}")]
    Unexpected(&'static str),
    /// The master closed the control stream.
    #[error("the master closed the control stream")]
    ClosedByMaster,
    /// The driver is gone: the agent is stopping.
    #[error("the agent is stopping")]
    Stopped,
}

/// Exponential backoff with jitter from a small seeded generator (SplitMix64), so agents
/// restarted together do not reconnect in lockstep.
#[derive(Debug)]
pub struct Backoff {
    config: BackoffConfig,
    next: Duration,
    state: u64,
}

impl Backoff {
    /// Backoff starting at `config.initial`, with jitter seeded by `seed`.
    pub fn new(config: BackoffConfig, seed: u64) -> Backoff {
        Backoff { config, next: config.initial, state: seed }
    }

    /// The delay before the next attempt: between half and all of the current step,
    /// which then doubles (up to the maximum).
    pub fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = (self.next * 2).min(self.config.max);
        let half = step / 2;
        let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
        let jitter = if spread == 0 { 0 } else { self.random() % (spread + 1) };
        half + Duration::from_micros(jitter)
    }

    /// Starts again from the initial delay (after a successful registration).
    pub fn reset(&mut self) {
        self.next = self.config.initial;
    }

    /// Jumps to the largest delay (after a refusal, which is unlikely to pass soon).
    pub fn give_up_quick_retries(&mut self) {
        self.next = self.config.max;
    }

    fn random(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Drops queued reports that `live` (sent in `Register`) already supersedes: those for a
/// live container whose registered state is the same or later. Terminal reports and
/// reports newer than the snapshot stay, in order.
pub fn drop_superseded(queue: &mut VecDeque<ContainerReport>, live: &[ContainerReport]) {
    let registered: BTreeMap<ContainerId, _> = live.iter().map(|r| (r.container, r.state)).collect();
    queue.retain(|r| registered.get(&r.container).is_none_or(|&state| r.state > state));
}

/// How a connected session ended.
enum Ended {
    /// The driver is done; the session is over.
    Shutdown,
    /// The connection failed; reconnect.
    Lost(SessionError),
}

/// Runs the session until the driver drops its report sender: connects, registers, serves
/// the control stream and reconnects with backoff whenever the connection is lost.
pub async fn run(config: SessionConfig, mut links: SessionLinks) {
    let seed = {
        let mut hasher = DefaultHasher::new();
        (&config.node, std::process::id(), std::time::SystemTime::now()).hash(&mut hasher);
        hasher.finish()
    };
    let mut backoff = Backoff::new(config.backoff, seed);
    let mut queue = VecDeque::new();
    let mut endpoint: Option<(std::net::SocketAddr, quinn::Endpoint)> = None;
    let mut leaving = false;
    loop {
        let attempt = connect_and_register(&config, &mut endpoint, &links.snapshot);
        let Some(attempt) =
            queue_while(attempt, &mut queue, &mut links.reports, &mut links.leaving, &mut leaving).await
        else {
            info!(unsent = queue.len(), "shutting down while connecting");
            return;
        };
        let ended = match attempt {
            Ok((connected, recv)) => {
                backoff.reset();
                let span = info_span!("session", agent = %connected.agent);
                connected.serve(recv, &config, &mut queue, &mut links, &mut leaving).instrument(span).await
            }
            Err(err) => Ended::Lost(err),
        };
        match ended {
            Ended::Shutdown => return,
            Ended::Lost(SessionError::Refused(reason)) => {
                warn!(%reason, "registration refused; will retry");
                backoff.give_up_quick_retries();
            }
            Ended::Lost(err) => {
                // Tasks keep running: the master adopts them from `Register` when we are back.
                warn!(error = %err, queued = queue.len(), "not connected to the master; tasks keep running")
            }
        }
        let delay = backoff.next_delay();
        debug!(delay_ms = delay.as_millis() as u64, "reconnecting after a delay");
        let sleep = tokio::time::sleep(delay);
        if queue_while(sleep, &mut queue, &mut links.reports, &mut links.leaving, &mut leaving)
            .await
            .is_none()
        {
            info!(unsent = queue.len(), "shutting down while disconnected");
            return;
        }
    }
}

/// Runs `work` while moving reports into `queue`; `None` if the driver is done first. A
/// `Leaving` request is answered at once (the driver must not wait for a connection)
/// and remembered in `leaving`, to be sent once registered.
async fn queue_while<T>(
    work: impl Future<Output = T>,
    queue: &mut VecDeque<ContainerReport>,
    reports: &mut mpsc::UnboundedReceiver<ContainerReport>,
    requests: &mut mpsc::Receiver<LeavingAck>,
    leaving: &mut bool,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return Some(done),
            report = reports.recv() => match report {
                Some(report) => queue.push_back(report),
                None => return None,
            },
            Some(ack) = requests.recv() => {
                *leaving = true;
                let _ = ack.send(());
            }
        }
    }
}

/// A registered connection with the sending half of its control stream (the receiving
/// half goes to the reader task).
struct Connected {
    conn: quinn::Connection,
    send: SendStream,
    agent: AgentId,
    heartbeat: Duration,
    /// What `Register` carried, to drop queued reports it supersedes.
    registered_live: Vec<ContainerReport>,
    /// `Locate`s sent on this connection and not yet answered.
    locates: LocatesInFlight,
}

async fn connect_and_register(
    config: &SessionConfig,
    endpoint: &mut Option<(std::net::SocketAddr, quinn::Endpoint)>,
    snapshot: &mpsc::Sender<SnapshotReply>,
) -> Result<(Connected, RecvStream), SessionError> {
    let addr = transport::resolve(&config.master).await?;
    // One endpoint (one UDP socket) for as long as the master's address stays the same.
    let endpoint = match endpoint {
        Some((known, endpoint)) if *known == addr => endpoint,
        slot => &mut slot.insert((addr, transport::client_endpoint(&config.tls, addr)?)).1,
    };
    let (conn, master) =
        transport::connect_master(endpoint, addr, &config.server_name, CONNECT_TIMEOUT).await?;
    debug!(%addr, %master, "connected");
    match register(conn.clone(), config, snapshot).await {
        Ok(registered) => Ok(registered),
        Err(err) => {
            conn.close(VarInt::from_u32(0), b"registration failed");
            Err(err)
        }
    }
}

async fn register(
    conn: quinn::Connection,
    config: &SessionConfig,
    snapshot: &mpsc::Sender<SnapshotReply>,
) -> Result<(Connected, RecvStream), SessionError> {
    let (mut send, mut recv) = conn.open_bi().await?;
    let live = live_snapshot(snapshot).await?;
    let register = Register {
        version: PROTOCOL_VERSION,
        node: config.node.clone(),
        map_slots: config.map_slots,
        reduce_slots: config.reduce_slots,
        live_containers: live.clone(),
        data_dir_id: config.data_dir.id.clone(),
        data_dir: config.data_dir.path.clone(),
        data_mode: config.data_mode.clone(),
    };
    timed_write(&mut send, &AgentToMaster::Register(register), config.max_frame).await?;
    let answer = tokio::time::timeout(REGISTER_TIMEOUT, read_frame(&mut recv, config.max_frame))
        .await
        .map_err(|_| SessionError::RegisterTimeout(REGISTER_TIMEOUT))??;
    match answer {
        Some(MasterToAgent::Registered { agent, heartbeat_interval_ms }) => {
            // A zero interval would spin; one heartbeat per millisecond is already absurd.
            let heartbeat = Duration::from_millis(heartbeat_interval_ms.max(1));
            info!(%agent, heartbeat_ms = heartbeat_interval_ms, live = live.len(), "registered");
            let locates = LocatesInFlight::default();
            Ok((Connected { conn, send, agent, heartbeat, registered_live: live, locates }, recv))
        }
        Some(MasterToAgent::Refused { reason }) => Err(SessionError::Refused(reason)),
        Some(
            MasterToAgent::Launch(_)
            | MasterToAgent::Kill { .. }
            | MasterToAgent::ReadLog(_)
            | MasterToAgent::Located(_)
            | MasterToAgent::ReadOutput(_)
            | MasterToAgent::RemoveJob(_),
        ) => Err(SessionError::Unexpected("a launch, kill or log read before Registered")),
        None => Err(SessionError::ClosedByMaster),
    }
}

/// Asks the driver for what `Register` carries.
async fn live_snapshot(snapshot: &mpsc::Sender<SnapshotReply>) -> Result<Vec<ContainerReport>, SessionError> {
    let (reply, answer) = oneshot::channel();
    snapshot.send(reply).await.map_err(|_| SessionError::Stopped)?;
    answer.await.map_err(|_| SessionError::Stopped)
}

impl Connected {
    /// Serves the control stream until the connection fails or the driver is done.
    async fn serve(
        mut self,
        recv: RecvStream,
        config: &SessionConfig,
        queue: &mut VecDeque<ContainerReport>,
        links: &mut SessionLinks,
        leaving: &mut bool,
    ) -> Ended {
        // Reading runs in its own task: a frame read cancelled half-way by `select!` would
        // lose bytes and break the framing.
        let (log_replies, mut log_rx) = mpsc::unbounded_channel();
        let dirs = JobDirs {
            data_dir: PathBuf::from(&config.data_dir.path),
            containers_dir: config.containers_dir.clone(),
        };
        let logs = LogReads {
            containers_dir: Arc::new(config.containers_dir.clone()),
            replies: log_replies,
            dirs: Arc::new(dirs),
        };
        let located = self.locates.clone();
        let mut reader =
            tokio::spawn(read_master(recv, links.events.clone(), logs, located, config.max_frame));
        let ended = self.serve_writes(config, queue, links, leaving, &mut reader, &mut log_rx).await;
        reader.abort();
        match &ended {
            Ended::Shutdown => self.close_cleanly().await,
            Ended::Lost(_) => self.conn.close(VarInt::from_u32(0), b"reconnecting"),
        }
        ended
    }

    async fn serve_writes(
        &mut self,
        config: &SessionConfig,
        queue: &mut VecDeque<ContainerReport>,
        links: &mut SessionLinks,
        leaving: &mut bool,
        reader: &mut JoinHandle<SessionError>,
        log_replies: &mut mpsc::UnboundedReceiver<AgentToMaster>,
    ) -> Ended {
        // Reports that queued while we were away, minus what `Register` already told.
        while let Ok(report) = links.reports.try_recv() {
            queue.push_back(report);
        }
        drop_superseded(queue, &self.registered_live);
        if let Err(err) = self.flush(queue, config.max_frame).await {
            return Ended::Lost(err);
        }
        if *leaving {
            if let Err(err) = timed_write(&mut self.send, &AgentToMaster::Leaving, config.max_frame).await {
                return Ended::Lost(err);
            }
        }
        let start = tokio::time::Instant::now() + self.heartbeat;
        let mut heartbeat = tokio::time::interval_at(start, self.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                err = &mut *reader => {
                    return Ended::Lost(err.unwrap_or(SessionError::Unexpected("the reader task failed")));
                }
                _ = heartbeat.tick() => {
                    if let Err(err) = timed_write(&mut self.send, &AgentToMaster::Heartbeat, config.max_frame).await {
                        return Ended::Lost(err);
                    }
                }
                report = links.reports.recv() => {
                    let Some(report) = report else { return Ended::Shutdown };
                    queue.push_back(report);
                    while let Ok(report) = links.reports.try_recv() {
                        queue.push_back(report);
                    }
                    if let Err(err) = self.flush(queue, config.max_frame).await {
                        return Ended::Lost(err);
                    }
                }
                Some(message) = log_replies.recv() => {
                    if let Err(err) = timed_write(&mut self.send, &message, config.max_frame).await {
                        return Ended::Lost(err);
                    }
                }
                Some(call) = links.locates.recv() => {
                    let locate = Locate { request: self.locates.register(call.reply), job: call.job, stage: call.stage };
                    if let Err(err) = timed_write(&mut self.send, &AgentToMaster::Locate(locate), config.max_frame).await {
                        return Ended::Lost(err);
                    }
                }
                Some(ack) = links.leaving.recv() => {
                    *leaving = true;
                    if let Err(err) = self.send_leaving(queue, links, config.max_frame).await {
                        return Ended::Lost(err);
                    }
                    info!("told the master this agent is leaving");
                    let _ = ack.send(());
                }
            }
        }
    }

    /// Sends every report the driver queued before it asked, then `Leaving`, so the
    /// master settles what already ended before it hands the rest back.
    async fn send_leaving(
        &mut self,
        queue: &mut VecDeque<ContainerReport>,
        links: &mut SessionLinks,
        max_frame: usize,
    ) -> Result<(), SessionError> {
        while let Ok(report) = links.reports.try_recv() {
            queue.push_back(report);
        }
        self.flush(queue, max_frame).await?;
        timed_write(&mut self.send, &AgentToMaster::Leaving, max_frame).await
    }

    /// Sends every queued report, oldest first, in as few frames as the limit allows. A
    /// batch is removed from the queue only once written, so a failed write keeps it.
    async fn flush(
        &mut self,
        queue: &mut VecDeque<ContainerReport>,
        max_frame: usize,
    ) -> Result<(), SessionError> {
        while !queue.is_empty() {
            let count = queue.len().min(REPORTS_PER_FRAME);
            let batch: Vec<ContainerReport> = queue.iter().take(count).cloned().collect();
            debug!(reports = batch.len(), "sending reports");
            timed_write(&mut self.send, &AgentToMaster::Reports(batch), max_frame).await?;
            queue.drain(..count);
        }
        Ok(())
    }

    /// Finishes the control stream, waits (briefly) for the master to acknowledge what was
    /// sent, then closes the connection.
    async fn close_cleanly(&mut self) {
        if self.send.finish().is_ok() {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.send.stopped()).await;
        }
        self.conn.close(VarInt::from_u32(0), b"agent shutting down");
    }
}

async fn timed_write(
    send: &mut SendStream,
    msg: &AgentToMaster,
    max_frame: usize,
) -> Result<(), SessionError> {
    tokio::time::timeout(WRITE_TIMEOUT, write_frame(send, msg, max_frame))
        .await
        .map_err(|_| SessionError::WriteTimeout(WRITE_TIMEOUT))?
        .map_err(SessionError::from)
}

/// Reads the master's messages and hands launches and kills to the driver, until the
/// stream fails or ends; returns why.
async fn read_master(
    mut recv: RecvStream,
    events: mpsc::UnboundedSender<AgentEvent>,
    logs: LogReads,
    located: LocatesInFlight,
    max_frame: usize,
) -> SessionError {
    loop {
        let event = match read_frame::<MasterToAgent>(&mut recv, max_frame).await {
            Ok(Some(MasterToAgent::Launch(launches))) => {
                debug!(launches = launches.len(), "launch batch received");
                AgentEvent::Launch(launches)
            }
            Ok(Some(MasterToAgent::Kill { container, reason })) => AgentEvent::Kill { container, reason },
            Ok(Some(MasterToAgent::ReadLog(read))) => {
                logs.serve(read);
                continue;
            }
            Ok(Some(MasterToAgent::Located(answer))) => {
                located.answer(answer);
                continue;
            }
            Ok(Some(MasterToAgent::ReadOutput(read))) => {
                logs.serve_output(read);
                continue;
            }
            Ok(Some(MasterToAgent::RemoveJob(remove))) => {
                logs.remove_job(remove);
                continue;
            }
            Ok(Some(MasterToAgent::Registered { .. })) => {
                return SessionError::Unexpected("a second Registered");
            }
            Ok(Some(MasterToAgent::Refused { reason })) => return SessionError::Refused(reason),
            Ok(None) => return SessionError::ClosedByMaster,
            Err(err) => return err.into(),
        };
        if events.send(event).is_err() {
            // The driver is gone; the session ends through its report channel.
            return SessionError::Stopped;
        }
    }
}

/// Where log and output reads are served from and where their answers go (the writer
/// sends them).
struct LogReads {
    containers_dir: Arc<PathBuf>,
    replies: mpsc::UnboundedSender<AgentToMaster>,
    /// Job and container directories, for output reads and removals.
    dirs: Arc<JobDirs>,
}

impl LogReads {
    /// Reads off the reader task, so a slow disk never delays launches and kills.
    fn serve(&self, read: LogRead) {
        let (dir, replies) = (Arc::clone(&self.containers_dir), self.replies.clone());
        tokio::spawn(async move {
            let result = task_logs::read(&dir, &read).await;
            // The session may have ended meanwhile; the master fails the read then.
            let _ = replies.send(AgentToMaster::LogRead(LogReadReply { request: read.request, result }));
        });
    }

    /// Lists or reads a job's outputs off the reader task, like a log read.
    fn serve_output(&self, read: OutputRead) {
        let (dirs, replies) = (Arc::clone(&self.dirs), self.replies.clone());
        tokio::spawn(async move {
            let result = dirs.answer(read.job, &read.op).await;
            let _ =
                replies.send(AgentToMaster::OutputRead(OutputReadReply { request: read.request, result }));
        });
    }

    /// Deletes a job's directory and its containers' directories, off the reader task.
    fn remove_job(&self, remove: RemoveJob) {
        let dirs = Arc::clone(&self.dirs);
        tokio::spawn(async move {
            match dirs.remove(&remove).await {
                Ok(removed) => info!(job = %remove.job, dirs = removed.len(), "job directories removed"),
                Err(error) => warn!(job = %remove.job, %error, "removing the job's directories failed"),
            }
        });
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
