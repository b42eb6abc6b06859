//! `Event`: facts from the world, fed to [`Core::handle`](super::Core::handle). Each
//! carries the identities needed to fence it against late or duplicate delivery.

use slotmarket_common::ids::{AccountId, AgentId, ContainerId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{ContainerReport, DataMode, JobHistory, LedgerEntry};
use slotmarket_common::spec::JobSpec;

use super::accounting::StoredAccount;
use super::{Caller, RequestId};

/// Something that happened, as told to the core.
#[derive(Clone, PartialEq, Debug)]
pub enum Event {
    /// An agent registered (a new connection). If an agent of the same `node` is known
    /// (disconnected, or restored after a master restart), its live containers listed in
    /// `live_containers` are adopted by this registration and the old one is dropped.
    AgentJoined {
        /// The id the driver gave this registration.
        agent: AgentId,
        /// The node's name (its certificate principal).
        node: String,
        /// Map slots offered.
        map_slots: u32,
        /// Reduce slots offered.
        reduce_slots: u32,
        /// Containers still alive on the agent.
        live_containers: Vec<ContainerReport>,
        /// Whether its data directory is shared or its own (then other agents fetch the
        /// outputs of the tasks it completed from its shuffle service).
        data_mode: DataMode,
        /// Its data directory's id (`.slotmarket-shared-id`): a local-mode node that
        /// registers again with another id has lost the outputs it held.
        data_dir_id: String,
    },
    /// The agent sent a heartbeat.
    AgentHeartbeat {
        /// The registration.
        agent: AgentId,
    },
    /// The agent's connection closed. Its containers keep running until it reconnects
    /// or its silence passes the timeout, whichever comes first.
    AgentDisconnected {
        /// The registration.
        agent: AgentId,
    },
    /// Container transitions reported by an agent, oldest first.
    ContainerReports {
        /// The registration that sent them; reports about containers it does not hold
        /// are ignored.
        agent: AgentId,
        /// The transitions.
        reports: Vec<ContainerReport>,
    },
    /// A client submitted a job (already parsed; the core validates it again).
    JobSubmitted {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The job.
        spec: JobSpec,
    },
    /// A client asked to cancel a job.
    JobCancelRequested {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The job.
        job: JobId,
    },
    /// A job read back from the store when the master starts. Replayed before any agent
    /// joins; `now` is the recovery time.
    JobRecovered(RecoveredJob),
    /// What the store knows beyond the jobs still running: id counters and job history.
    /// Replayed once at start-up, before the first `JobRecovered`.
    StoreRecovered(StoreRecovery),
    /// An administrator asked to create an account (with an optional first grant).
    AccountAddRequested {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The account's name.
        account: AccountId,
        /// A first grant.
        budget: Option<Credits>,
        /// Users besides its namesake who may read it and submit to it.
        members: Vec<String>,
    },
    /// An administrator asked to grant budget to an account (negative: take it back).
    BudgetAddRequested {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The account.
        account: AccountId,
        /// The change.
        amount: Credits,
        /// Why, kept on the entry.
        memo: Option<String>,
    },
    /// Accounts and the whole ledger read back from the store when the master starts
    /// (already checked by the store); replayed before the jobs.
    AccountsRecovered {
        /// Every created account.
        accounts: Vec<StoredAccount>,
        /// Every ledger entry, in sequence order.
        ledger: Vec<LedgerEntry>,
    },
    /// The agent said it is stopping: it takes no new work, its tasks run elsewhere at
    /// once without counting an attempt, and it is forgotten when it disconnects.
    AgentLeaving {
        /// The registration.
        agent: AgentId,
    },
    /// A client asked to drain (`drain`) or undrain a node; admins only.
    NodeDrainRequested {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The node's name.
        node: String,
        /// Drain (`true`) or undrain (`false`).
        drain: bool,
    },
    /// A user (their own account) or an admin (any account) sets a DP spending rate.
    RateSetRequested {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The account; `None` for the caller's own.
        account: Option<AccountId>,
        /// Credits per slot-hour.
        rate: Credits,
    },
    /// A completion model the core asked for (`Command::BuildCompletionModel`), built.
    CompletionModelBuilt(Box<crate::core::policy::jockey::CompletionModel>),
    /// A client (or a trace) asked to move a job's deadline, or to drop it (`None`).
    DeadlineSetRequested {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The job.
        job: JobId,
        /// The new deadline.
        deadline: Option<slotmarket_common::time::Timestamp>,
    },
    /// A client submitted a job buying the deadline `choice` names (MRM admission).
    ChoiceSubmitted {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The job.
        spec: JobSpec,
        /// Which deadline to buy.
        choice: slotmarket_common::protocol::DeadlineChoice,
    },
    /// An admin sets a created account's DP income (credits per hour).
    IncomeSetRequested {
        /// Where the reply goes.
        request: RequestId,
        /// Who asked.
        caller: Caller,
        /// The account.
        account: AccountId,
        /// Credits per hour.
        income: Credits,
    },
    /// The DP spending rates and incomes the store kept, replayed after
    /// `AccountsRecovered` when the master starts.
    AccountSettingsRecovered {
        /// Spending rates set at run time, by account.
        rates: Vec<(AccountId, Credits)>,
        /// Incomes set by administrators, by account.
        income: Vec<(AccountId, Credits)>,
    },
}

/// The store's state outside the active jobs, as read back after a restart.
#[derive(Clone, PartialEq, Debug)]
pub struct StoreRecovery {
    /// Above every job id ever stored, ended jobs included, so ids are never reused.
    pub next_job: JobId,
    /// Above every container id ever stored.
    pub next_container: ContainerId,
    /// The kept history of ended jobs, oldest first.
    pub history: Vec<JobHistory>,
    /// The nodes last registered in local data mode, with their directories' ids.
    pub local_nodes: Vec<(String, String)>,
}

/// A stored job, as the store hands it back after a restart.
#[derive(Clone, PartialEq, Debug)]
pub struct RecoveredJob {
    /// Its id.
    pub id: JobId,
    /// The account it runs on.
    pub account: AccountId,
    /// Who submitted it.
    pub owner: AccountId,
    /// Its deadline, as resolved at admission.
    pub deadline: Option<slotmarket_common::time::Timestamp>,
    /// The job.
    pub spec: JobSpec,
    /// When it was admitted.
    pub submitted: slotmarket_common::time::Timestamp,
    /// Its stored state; terminal jobs are restored for listings only.
    pub state: slotmarket_common::protocol::JobState,
    /// When its first task ran, if one did.
    pub started: Option<slotmarket_common::time::Timestamp>,
    /// When it ended, if it did.
    pub finished: Option<slotmarket_common::time::Timestamp>,
    /// Why it failed or was cancelled.
    pub message: Option<String>,
    /// Every container the store knows for this job, **one row per container** (its
    /// last recorded report and the node it was on), in container id order; completed
    /// tasks stay completed, live ones wait to be adopted.
    pub containers: Vec<(String, ContainerReport)>,
}
