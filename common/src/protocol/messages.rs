//! Wire messages between agents, clients and the master.
//!
//! !!! postcard is not self-describing: the order of enum variants and struct fields *is*
//! the format. Append new variants and fields at the end, never reorder or remove, and
//! bump [`PROTOCOL_VERSION`] for any change an older peer cannot read.

use serde::{Deserialize, Serialize};

use super::accounts::{AccountSummary, LedgerEntry, LedgerPage, MarketInfo};
use crate::container::ContainerState;
use crate::ids::{AccountId, AgentId, AttemptId, ContainerId, JobId, TaskId};
use crate::money::Credits;
use crate::protocol::DemandClass;
use crate::protocol::JobHistory;
use crate::spec::{JobSpec, SlotKind, TaskVars};
use crate::time::Timestamp;

/// Checked in an agent's `Register` and in every client request; a mismatch is refused
/// (read before the rest of the message: see [`version`](super::version)). 3: a job
/// spec's `utility`, `SloStatus::utility_from_spec` and `Request::SubmitWatch`. 4: the
/// history in pages (`HistoryQuery::before`, `Response::History(HistoryPage)`).
pub const PROTOCOL_VERSION: u32 = 4;

// ---------------------------------------------------------------------------------
// Agents: one long-lived bidirectional control stream per agent connection.
// ---------------------------------------------------------------------------------

/// What an agent sends on its control stream. The first message must be `Register`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum AgentToMaster {
    /// Introduces the agent. `node` must equal the principal of its certificate.
    Register(Register),
    /// Sent every heartbeat interval; silence past the master's timeout means lost.
    Heartbeat,
    /// Container transitions, oldest first (batched when several happen at once).
    Reports(Vec<ContainerReport>),
    /// The agent is stopping (SIGTERM): it takes no new work and is about to kill its
    /// tasks and report them `Killed`. The master runs them elsewhere at once, without
    /// counting those attempts, and forgets the agent as soon as it disconnects.
    Leaving,
    /// The answer to a [`MasterToAgent::ReadLog`].
    LogRead(super::LogReadReply),
    /// Where a stage's outputs are, for a task's fetch; answered `MasterToAgent::Located`.
    Locate(super::Locate),
    /// The answer to a [`MasterToAgent::ReadOutput`].
    OutputRead(super::OutputReadReply),
}

/// An agent's introduction.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Register {
    /// Must equal [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The node's name; equal to its certificate's principal.
    pub node: String,
    /// Map slots offered.
    pub map_slots: u32,
    /// Reduce slots offered.
    pub reduce_slots: u32,
    /// The latest state of every container still alive on the agent (after a reconnect
    /// or a master restart), so the master can adopt them instead of re-running them.
    pub live_containers: Vec<ContainerReport>,
    /// The id of the agent's data directory (its `.slotmarket-shared-id`): agents that
    /// share the directory report the same id, and the master refuses an agent whose id
    /// differs from the registered agents'.
    pub data_dir_id: String,
    /// The agent's data directory as the agent sees it, for messages.
    pub data_dir: String,
    /// Whether the data directory is shared with other agents or the agent's own.
    pub data_mode: super::DataMode,
}

/// One container transition, as observed by the agent.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ContainerReport {
    /// The container.
    pub container: ContainerId,
    /// The task it runs.
    pub task: TaskId,
    /// The attempt it runs; reports for an attempt that is no longer current are ignored.
    pub attempt: AttemptId,
    /// The state entered.
    pub state: ContainerState,
    /// When the agent saw the transition.
    pub at: Timestamp,
    /// Exit code, for `Completed` and `Failed` after the process ran.
    pub exit_code: Option<i32>,
    /// Why, for `Failed` and `Killed` (spawn error, signal, kill reason).
    pub message: Option<String>,
}

/// What the master sends to an agent.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum MasterToAgent {
    /// Registration accepted.
    Registered {
        /// The id of this registration.
        agent: AgentId,
        /// How often the agent must send `Heartbeat`, in milliseconds.
        heartbeat_interval_ms: u64,
    },
    /// Registration refused; the connection is closed after this.
    Refused {
        /// Why, for the agent's log.
        reason: String,
    },
    /// Start these containers (batched: one message per scheduling step and agent).
    Launch(Vec<Launch>),
    /// Terminate this container's process group and report `Killed`.
    Kill {
        /// The container.
        container: ContainerId,
        /// Why, echoed in the `Killed` report.
        reason: String,
    },
    /// Read part of a container's stdout or stderr; answered `AgentToMaster::LogRead`.
    ReadLog(super::LogRead),
    /// The answer to an `AgentToMaster::Locate`.
    Located(super::Located),
    /// List or read a job's output files; answered `AgentToMaster::OutputRead`.
    ReadOutput(super::OutputRead),
    /// Delete a job's directory and its containers' directories; not answered.
    RemoveJob(super::RemoveJob),
}

/// The most bytes one [`Launch`] encodes to for any spec that passes validation (the
/// spec limits on `input`, names, commands and stage counts make it so). The master
/// packs launches into messages by encoded size, so a valid job can never make a frame
/// an agent refuses.
pub const MAX_LAUNCH_BYTES: usize = 64 * 1024;

/// One container to start.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Launch {
    /// The container.
    pub container: ContainerId,
    /// The task.
    pub task: TaskId,
    /// The attempt.
    pub attempt: AttemptId,
    /// The slot kind it occupies.
    pub slot: SlotKind,
    /// The stage's command template; the agent renders it with `vars` and its job dir.
    pub command: std::sync::Arc<str>,
    /// Values for the template.
    pub vars: TaskVars,
    /// The job's account (its name): an agent running as root may run the task as the
    /// Unix user it maps this account to. Shared by every launch of the job, as `command`
    /// is (a per-launch copy of the name was an allocation per task); encodes as the
    /// string an `AccountId` encodes as.
    pub account: std::sync::Arc<str>,
}

// ---------------------------------------------------------------------------------
// Clients: one bidirectional stream per request; `Watch` streams until the job ends.
// ---------------------------------------------------------------------------------

/// A client's request, with the protocol version it speaks.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ClientRequest {
    /// Must equal [`PROTOCOL_VERSION`].
    pub version: u32,
    /// What is asked.
    pub body: Request,
}

impl ClientRequest {
    /// Wraps `body` with this build's protocol version.
    pub fn new(body: Request) -> ClientRequest {
        ClientRequest { version: PROTOCOL_VERSION, body }
    }
}

/// What a client can ask.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Request {
    /// Submit a job; answered `Submitted` once it is durable.
    Submit {
        /// The job.
        spec: JobSpec,
    },
    /// One job's status; answered `Job`.
    Status {
        /// The job.
        job: JobId,
    },
    /// A page of the caller's jobs (every job for admins); answered `Jobs`.
    Jobs(JobsQuery),
    /// The agents; answered `Nodes`.
    Nodes,
    /// Cancel a job, killing its running tasks; answered `Cancelled`.
    Cancel {
        /// The job.
        job: JobId,
    },
    /// A `Job` response now and after every change until the job ends.
    Watch {
        /// The job.
        job: JobId,
    },
    /// Recorded runs of ended jobs the caller may see; answered `History`.
    History(HistoryQuery),
    /// Admins: create an account, optionally with a first grant; answered `AccountAdded`
    /// once stored.
    AccountAdd {
        /// Its name (`[A-Za-z0-9._-]{1,64}`).
        account: AccountId,
        /// A first grant, recorded as the account's first ledger entry.
        budget: Option<Credits>,
        /// Users other than its namesake who may read it and submit to it.
        members: Vec<String>,
    },
    /// Admins: grant budget to an account (a negative amount takes budget back, never
    /// below zero); answered `BudgetAdded` once stored.
    BudgetAdd {
        /// The account.
        account: AccountId,
        /// The change; not zero.
        amount: Credits,
        /// Why, kept on the ledger entry.
        memo: Option<String>,
    },
    /// One account (`Some`) or every account the caller may read (`None`); answered
    /// `Accounts`.
    Account {
        /// The account.
        account: Option<AccountId>,
    },
    /// A page of an account's ledger; answered `Ledger`.
    Ledger {
        /// The account.
        account: AccountId,
        /// Only entries with a larger sequence number (0: from the start).
        after_seq: u64,
        /// At most this many entries (the master caps it at `MAX_LEDGER_PAGE`).
        limit: u32,
    },
    /// Admin only: stop giving the node new work; its running tasks finish. Answered
    /// `Node` with its state afterwards.
    Drain {
        /// The node's name.
        node: String,
    },
    /// Admin only: give a drained (or quarantined) node work again. Answered `Node`.
    Undrain {
        /// The node's name.
        node: String,
    },
    /// The policy's slot reservations, reserve ratio and predicted releases; answered
    /// `Reservation`.
    Reservation,
    /// Set an account's DP spending rate in credits per slot-hour: a user their own
    /// account's (the default), an admin any account's. Answered `RateSet`.
    RateSet {
        /// The account; `None` for the caller's own.
        account: Option<AccountId>,
        /// The new rate (not negative).
        rate: Credits,
    },
    /// The DP price and the accounts' shares; answered `Price`.
    Price,
    /// Move a running job's deadline (or drop it with `None`); answered `DeadlineSet`.
    /// The `jockey` policy re-sizes the job's allocation to follow it.
    SetDeadline {
        /// The job.
        job: JobId,
        /// The new deadline.
        deadline: Option<Timestamp>,
    },
    /// MRM: the estimate, earliest feasible finish and price–deadline curve of a job
    /// spec, without submitting it; answered `Quote` (an error when admission is off).
    Quote {
        /// The job.
        spec: JobSpec,
    },
    /// MRM: submit a job buying the deadline `choice` names. The master re-checks
    /// feasibility and charges the price in the same step as the admission; answered
    /// `Purchased`, or `ChoiceRefused` with the best alternative now.
    SubmitChoosing {
        /// The job.
        spec: JobSpec,
        /// Which deadline to buy.
        choice: super::DeadlineChoice,
    },
    /// The jobs with pending tasks in the policy's order, with why each waits; answered
    /// `Queue`.
    Queue,
    /// The estimator's R² and PI coverage on held-out history; answered `EstimateEval`.
    EstimateEval(super::EstimateEvalQuery),
    /// The Jockey profile of a job name, from the recorded runs the caller may see;
    /// answered `Profile`.
    Profile {
        /// The job name.
        name: String,
    },
    /// Admins: set a created account's DP income in credits per hour, credited every
    /// allocation interval (0 stops it); answered `IncomeSet`.
    IncomeSet {
        /// The account.
        account: AccountId,
        /// Credits per hour (not negative).
        income: Credits,
    },
    /// Every task of a job with its node, container, attempts, state, times and exit
    /// code; answered `Tasks`.
    Tasks {
        /// The job.
        job: JobId,
    },
    /// A chunk of a task's stdout or stderr, read from the agent that ran it; answered
    /// `Log`.
    Logs(super::LogQuery),
    /// The nodes holding a job's final outputs (one per data directory); answered
    /// `OutputNodes`.
    OutputNodes {
        /// The job.
        job: JobId,
    },
    /// List or read a job's outputs on one of its output nodes, relayed to that agent;
    /// answered `Output`.
    Output(super::OutputQuery),
    /// Remove these ended jobs' directories from the agents now (owner or admin);
    /// answered `CleanedUp`.
    Cleanup {
        /// The jobs.
        jobs: Vec<JobId>,
    },
    /// Submit a job and follow it on the same stream (`submit --wait` in one request):
    /// answered `Submitted` once the admission is durable, though without a sync of its
    /// own (it rides on the next one: the job's end, another client's request, or the
    /// master's lazy sync within 50 ms), then `Job` responses as `Watch` gives them,
    /// the last once the job's end is durable. A short job's answer thus costs one sync.
    /// A refused submit is answered `Error` and the stream ends.
    SubmitWatch {
        /// The job.
        spec: JobSpec,
    },
}

/// Which jobs a `Jobs` request lists, and where its page starts.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JobsQuery {
    /// Newest first (the default listing) or oldest first (walking every job).
    pub newest_first: bool,
    /// Start after this job in the listing's order (the previous page's `next`).
    pub after: Option<JobId>,
    /// Most jobs in the page; the master may return fewer to stay under the frame limit.
    pub limit: u32,
    /// Only jobs in one of these states; empty for every state.
    pub states: Vec<JobState>,
    /// Only jobs running on this account.
    pub account: Option<AccountId>,
}

impl Default for JobsQuery {
    /// The plain listing: the newest [`JobsQuery::DEFAULT_LIMIT`] jobs of any state.
    fn default() -> JobsQuery {
        JobsQuery {
            newest_first: true,
            after: None,
            limit: JobsQuery::DEFAULT_LIMIT,
            states: Vec::new(),
            account: None,
        }
    }
}

impl JobsQuery {
    /// Jobs in a listing when nothing else is asked for.
    pub const DEFAULT_LIMIT: u32 = 50;
}

/// One page of a job listing.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JobsPage {
    /// The jobs, in the order asked for.
    pub jobs: Vec<JobSummary>,
    /// Where the next page starts, if there may be more.
    pub next: Option<JobId>,
}

/// Which recorded runs a `History` request lists.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct HistoryQuery {
    /// Only runs of jobs with this name.
    pub name: Option<String>,
    /// Most runs in the page, newest first; the master may return fewer to stay under the
    /// frame limit.
    pub limit: u32,
    /// Start after this run, newest first (the previous page's `next`).
    pub before: Option<RunCursor>,
}

/// A run's place in the history's order (newest first: by when it finished, then by job).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct RunCursor {
    /// When the run finished.
    pub finished: Timestamp,
    /// Its job.
    pub job: JobId,
}

impl RunCursor {
    /// Where `run` is in the order.
    pub fn of(run: &JobHistory) -> RunCursor {
        RunCursor { finished: run.finished, job: run.job }
    }
}

/// One page of recorded runs.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct HistoryPage {
    /// Newest first.
    pub runs: Vec<JobHistory>,
    /// Where the next page starts, if there are more.
    pub next: Option<RunCursor>,
}

/// The master's answer.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Response {
    /// The job is admitted and stored.
    Submitted {
        /// Its id.
        job: JobId,
    },
    /// A job's status.
    Job(JobStatus),
    /// A page of jobs, in the order asked for.
    Jobs(JobsPage),
    /// The agents, by id.
    Nodes(Vec<NodeSummary>),
    /// The job is cancelled (or had already ended).
    Cancelled {
        /// Its id.
        job: JobId,
        /// Its state after the request.
        state: JobState,
    },
    /// The request failed.
    Error(ErrorReply),
    /// A page of recorded runs of ended jobs, newest first.
    History(HistoryPage),
    /// The account is created and stored.
    AccountAdded(AccountSummary),
    /// The grant is stored.
    BudgetAdded {
        /// The ledger entry written.
        entry: LedgerEntry,
        /// The account after it.
        account: AccountSummary,
    },
    /// Accounts, by name.
    Accounts(Vec<AccountSummary>),
    /// A page of a ledger.
    Ledger(LedgerPage),
    /// One agent, after a `Drain` or `Undrain`.
    Node(NodeSummary),
    /// The policy's reservations.
    Reservation(super::ReservationView),
    /// The spending rate is set; it counts from the next allocation interval.
    RateSet {
        /// The account.
        account: AccountId,
        /// Its rate now.
        rate: Credits,
    },
    /// The DP market: price and shares.
    Price(MarketInfo),
    /// The job's deadline after a `SetDeadline`.
    DeadlineSet {
        /// The job.
        job: JobId,
        /// Its deadline now.
        deadline: Option<Timestamp>,
    },
    /// An MRM quote.
    Quote(super::QuoteInfo),
    /// The job is admitted with the deadline bought, charged and stored.
    Purchased(super::Purchase),
    /// The choice cannot be had; nothing was admitted or charged.
    ChoiceRefused(super::ChoiceRefusal),
    /// The queue of pending work.
    Queue(super::QueueView),
    /// The answer to `EstimateEval`.
    EstimateEval(super::EstimateEvalReport),
    /// A job name's profile.
    Profile(super::ProfileView),
    /// The account after an `IncomeSet`; the income counts from the next interval.
    IncomeSet(AccountSummary),
    /// A job's tasks.
    Tasks(super::TaskList),
    /// A chunk of a task's log.
    Log(super::LogChunk),
    /// The nodes holding a job's final outputs, one per data directory.
    OutputNodes(Vec<String>),
    /// A listing or a chunk of a job's outputs.
    Output(super::OutputData),
    /// What a `Cleanup` did, per job.
    CleanedUp(Vec<super::JobCleanup>),
}

impl Response {
    /// A failed request's answer: `Error` with `kind` and `message`.
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Response {
        Response::Error(ErrorReply::new(kind, message))
    }
}

/// Why a request failed.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct ErrorReply {
    /// The class of failure.
    pub kind: ErrorKind,
    /// A sentence for the user.
    pub message: String,
}

impl ErrorReply {
    /// A failure of class `kind`, explained by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorReply {
        ErrorReply { kind, message: message.into() }
    }
}

/// Classes of request failure.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The request is malformed or the spec invalid.
    BadRequest,
    /// No such job or account, or one the caller may not see (the two are not told apart).
    NotFound,
    /// The caller's role or account may not do this.
    Forbidden,
    /// The client speaks another protocol version.
    VersionMismatch,
    /// The master failed (e.g. could not store the job); try again.
    Internal,
}

/// A job's place in its life.
///
/// ```text
/// Pending ──> Running ──> Completed
///    │           ├──────> Failed     (a task used up its attempts)
///    └───────────┴──────> Cancelled
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum JobState {
    /// Admitted; no task has started yet.
    Pending,
    /// At least one task has started.
    Running,
    /// Every task completed.
    Completed,
    /// A task failed on every attempt.
    Failed,
    /// Cancelled by its owner or an admin.
    Cancelled,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 5] =
        [JobState::Pending, JobState::Running, JobState::Completed, JobState::Failed, JobState::Cancelled];

    /// Whether the job has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Completed | JobState::Failed | JobState::Cancelled)
    }

    /// Lower-case name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// The state whose [`name`](JobState::name) is `name`, if any (e.g. read back from
    /// the store).
    pub fn from_name(name: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A job in a list.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JobSummary {
    /// Its id.
    pub id: JobId,
    /// Its spec's name.
    pub name: String,
    /// The account it runs on.
    pub account: AccountId,
    /// Where it is.
    pub state: JobState,
    /// When it was admitted.
    pub submitted: Timestamp,
    /// When its first task started running.
    pub started: Option<Timestamp>,
    /// When it ended.
    pub finished: Option<Timestamp>,
    /// Tasks in all stages.
    pub tasks_total: u64,
    /// Tasks completed.
    pub tasks_completed: u64,
    /// Tasks with a container currently allocated, acquired or running.
    pub tasks_running: u64,
    /// The principal who submitted it.
    pub owner: AccountId,
    /// When it should finish, if it has a deadline.
    pub deadline: Option<Timestamp>,
    /// For an admitted deadline job under MRM: when the admission model now expects it
    /// to finish (remaining work under its estimate, rescaled by how fast its tasks ran).
    #[serde(default)]
    pub predicted_finish: Option<Timestamp>,
    /// The price of the deadline it bought, if it bought one.
    #[serde(default)]
    pub price: Option<Credits>,
    /// What its account was charged for that deadline.
    #[serde(default)]
    pub paid: Option<Credits>,
    /// Its demand class under the `dress` policy (`None` under the others, and for an
    /// ended job the master no longer holds in memory).
    #[serde(default)]
    pub demand_class: Option<DemandClass>,
}

/// One job in detail.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JobStatus {
    /// The summary line.
    pub summary: JobSummary,
    /// Per stage counts, in spec order.
    pub stages: Vec<StageStatus>,
    /// Why it failed or was cancelled.
    pub message: Option<String>,
    /// For a deadline job under the `jockey` policy: its controller's view.
    #[serde(default)]
    pub slo: Option<SloStatus>,
}

/// What the `jockey` policy's control loop knows of a deadline job.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SloStatus {
    /// Progress by the configured indicator, in thousandths.
    pub progress_permille: u32,
    /// When it is predicted to finish under its guarantee, slack included.
    pub predicted_finish: Option<Timestamp>,
    /// Slots guaranteed to it now.
    pub guaranteed: u32,
    /// The largest guarantee it has had.
    pub peak_guaranteed: u32,
    /// The interval of its finish under the guarantee, without slack (the completion
    /// model's 10th and 90th percentiles), when a simulated model is built.
    #[serde(default)]
    pub finish_interval: Option<(Timestamp, Timestamp)>,
    /// How much slower than its profile its completed tasks ran, in thousandths (1000:
    /// as profiled).
    #[serde(default)]
    pub slowdown_permille: u32,
    /// The control loop maximises the job spec's own utility curve (false: the
    /// policy's `utility` setting).
    #[serde(default)]
    pub utility_from_spec: bool,
}

/// A stage's task counts.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StageStatus {
    /// The stage's name.
    pub name: String,
    /// Its slot kind.
    pub slot: SlotKind,
    /// Tasks in the stage.
    pub tasks: u32,
    /// Tasks waiting for a slot (or for their barrier).
    pub pending: u32,
    /// Tasks with a live container.
    pub running: u32,
    /// Tasks completed.
    pub completed: u32,
    /// Attempts that failed, were killed or were lost with their agent (not those an
    /// agent that was leaving handed back).
    pub failed_attempts: u32,
}

/// An agent as the master sees it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NodeSummary {
    /// The registration id.
    pub agent: AgentId,
    /// The node's name.
    pub node: String,
    /// Connected, or disconnected and waiting to reconnect.
    pub connected: bool,
    /// Map slots offered.
    pub map_slots: u32,
    /// Map slots in use.
    pub map_used: u32,
    /// Reduce slots offered.
    pub reduce_slots: u32,
    /// Reduce slots in use.
    pub reduce_used: u32,
    /// The last time anything was heard from it.
    pub last_seen: Timestamp,
    /// Why it takes no new work although connected, if it is draining.
    pub draining: Option<DrainCause>,
    /// Set while it takes no new work because its tasks kept failing fast.
    pub quarantine: Option<Quarantine>,
}

/// Why an agent is draining: it gets no new work; its running tasks are left to finish
/// (admin) or are handed back by the agent (leaving).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum DrainCause {
    /// An admin ran `slotmarket node drain`.
    Admin,
    /// The agent said it is stopping.
    Leaving,
}

impl DrainCause {
    /// Lower-case name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            DrainCause::Admin => "draining",
            DrainCause::Leaving => "leaving",
        }
    }
}

/// A node set aside because its tasks kept failing fast.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Quarantine {
    /// When it gets work again (unless its tasks fail fast again then).
    pub until: Timestamp,
    /// What was seen, e.g. "3 tasks in a row failed within 5 s of starting; last: ...".
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, StageId};

    #[test]
    fn messages_round_trip_through_postcard() {
        let report = ContainerReport {
            container: ContainerId(9),
            task: TaskId { job: JobId(1), stage: StageId(0), index: 2 },
            attempt: AttemptId(1),
            state: ContainerState::Running,
            at: Timestamp(1234),
            exit_code: None,
            message: Some("ok".into()),
        };
        let msg = AgentToMaster::Reports(vec![report]);
        let bytes = postcard::to_allocvec(&msg).unwrap();
        assert_eq!(postcard::from_bytes::<AgentToMaster>(&bytes).unwrap(), msg);
    }

    #[test]
    fn the_largest_valid_launch_fits_max_launch_bytes() {
        use crate::spec::{MAX_INPUT_LEN, MAX_STAGE_NAME_LEN, MAX_STAGES, MAX_TASKS_PER_STAGE, MAX_TEXT_LEN};
        let name = |i: usize| format!("{i:0>width$}", width = MAX_STAGE_NAME_LEN);
        let launch = Launch {
            container: ContainerId(u64::MAX),
            task: TaskId { job: JobId(u64::MAX), stage: StageId(u32::MAX), index: u32::MAX },
            attempt: AttemptId(u32::MAX),
            slot: SlotKind::Reduce,
            command: "c".repeat(MAX_TEXT_LEN).into(),
            vars: TaskVars {
                job: JobId(u64::MAX),
                stage: name(0).into(),
                task: u32::MAX,
                tasks: MAX_TASKS_PER_STAGE,
                attempt: AttemptId(u32::MAX),
                input: Some("i".repeat(MAX_INPUT_LEN)),
                stage_tasks: std::sync::Arc::new(
                    (0..MAX_STAGES).map(|i| (name(i), MAX_TASKS_PER_STAGE)).collect(),
                ),
            },
            account: "a".repeat(MAX_TEXT_LEN).into(),
        };
        let size = postcard::to_allocvec(&launch).unwrap().len();
        assert!(size > MAX_INPUT_LEN + MAX_STAGES * MAX_STAGE_NAME_LEN, "{size}");
        assert!(size <= MAX_LAUNCH_BYTES, "{size} > {MAX_LAUNCH_BYTES}");
    }

    /// `Launch` as it was before its account became a shared `Arc<str>`.
    #[derive(Serialize)]
    struct LaunchWithOwnedAccount {
        container: ContainerId,
        task: TaskId,
        attempt: AttemptId,
        slot: SlotKind,
        command: std::sync::Arc<str>,
        vars: TaskVars,
        account: AccountId,
    }

    #[test]
    fn a_launchs_shared_account_encodes_as_the_owned_account_id_did() {
        let vars = TaskVars {
            job: JobId(7),
            stage: "map".into(),
            task: 3,
            tasks: 4,
            attempt: AttemptId(2),
            input: None,
            stage_tasks: std::sync::Arc::new([("map".to_string(), 4)].into_iter().collect()),
        };
        let task = TaskId { job: JobId(7), stage: StageId(0), index: 3 };
        let (container, attempt, slot, command) =
            (ContainerId(11), AttemptId(2), SlotKind::Map, "run {task}");
        let launch = Launch {
            container,
            task,
            attempt,
            slot,
            command: command.into(),
            vars: vars.clone(),
            account: "alice".into(),
        };
        let before = LaunchWithOwnedAccount {
            container,
            task,
            attempt,
            slot,
            command: command.into(),
            vars,
            account: AccountId("alice".into()),
        };
        let bytes = postcard::to_allocvec(&launch).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&before).unwrap());
        assert_eq!(postcard::from_bytes::<Launch>(&bytes).unwrap(), launch);
    }

    #[test]
    fn every_job_state_is_listed_once_and_its_name_round_trips() {
        // Exhaustive on purpose: a new variant fails to compile here until it is in `ALL`.
        let position = |s: JobState| match s {
            JobState::Pending => 0,
            JobState::Running => 1,
            JobState::Completed => 2,
            JobState::Failed => 3,
            JobState::Cancelled => 4,
        };
        for (i, state) in JobState::ALL.into_iter().enumerate() {
            assert_eq!(position(state), i, "{state} is out of place in ALL");
            assert_eq!(JobState::from_name(state.name()), Some(state));
        }
        assert_eq!(JobState::from_name("Pending"), None);
        assert_eq!(JobState::from_name("canceled"), None);
    }

    #[test]
    fn error_responses_carry_their_kind_and_message() {
        let response = Response::error(ErrorKind::NotFound, "no job j1");
        assert_eq!(
            response,
            Response::Error(ErrorReply { kind: ErrorKind::NotFound, message: "no job j1".into() })
        );
        assert_eq!(ErrorReply::new(ErrorKind::Internal, String::from("down")).message, "down");
    }
}
