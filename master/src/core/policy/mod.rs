//! Scheduling policies: the [`Policy`] trait, the read-only [`SchedView`] a policy decides
//! from, the [`Decisions`] it returns, and the [`PolicyName`] each answers to. One file per
//! policy; [`PolicySettings`] (in `settings`) is the one place a policy's settings, their
//! parsing and its construction live.
//!
//! A policy only decides; the reactor carries decisions out (allocating containers and
//! attempts, sending kills) and skips any that no longer fit, so a policy cannot break the
//! core's invariants. Within a job, the reactor picks which ready task of the assigned
//! kind runs (lowest stage, then lowest index).

mod capacity;
mod dress;
mod edf;
mod fair;
mod fifo;
pub mod jockey;
mod preempt;
mod priority;
mod proportional;
mod proportional_lag;
mod settings;
mod slots;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AgentId, ContainerId, JobId, TaskId};
use slotmarket_common::money::Credits;
use slotmarket_common::spec::{JobClass, SlotKind};
use slotmarket_common::time::Timestamp;

use super::command::KillReason;
use super::state::{Agent, Holder, Job, State, kind_ix};

pub use capacity::Capacity;
pub use dress::{DemandClass, Dress, DressReport, DressSettings};
pub use edf::Edf;
pub use fair::Fair;
pub use fifo::{Fifo, GangFifo};
pub use priority::Priority;
pub use proportional::{Proportional, ProportionalSettings};
pub use settings::{PolicySettings, PolicySettingsError};

/// The policies the master can run, as named by `name` in the `[policy]` table; the
/// identity a running policy reports (and kill reasons carry). Its settings are
/// [`PolicySettings`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum PolicyName {
    /// Jobs in submission order; each free slot goes to the earliest job that can use it.
    Fifo,
    /// Equal share among active jobs: each free slot goes to the job running the fewest
    /// tasks of its kind.
    Fair,
    /// Non-preemptive classes: delay-sensitive jobs, then unclassed, then delay-tolerant;
    /// FIFO within a class.
    Priority,
    /// Static queue shares, FIFO within a queue, spare capacity lent to other queues.
    Capacity,
    /// Gang-start first-come-first-served: a stage's ready tasks start together or not
    /// at all, and a job that cannot start holds back the later ones (DRESS's baseline).
    GangFifo,
    /// DRESS: a reserved share δ of the slots for small-demand jobs, moved every interval
    /// from pending demand and predicted container releases.
    Dress,
    /// Earliest deadline first for jobs with a deadline (MRM), then best-effort jobs in
    /// admission order.
    Edf,
    /// DP: every allocation interval each account with work gets slots in proportion to
    /// its spending rate, and pays its rate per slot used out of its budget.
    Proportional,
    /// Per-job SLO control: each deadline job is guaranteed the slots its completion
    /// model says it needs, re-sized every control interval; the rest is shared.
    Jockey,
}

impl PolicyName {
    /// Every policy, in the order they are documented.
    pub const ALL: [PolicyName; 9] = [
        PolicyName::Fifo,
        PolicyName::Fair,
        PolicyName::Priority,
        PolicyName::Capacity,
        PolicyName::GangFifo,
        PolicyName::Dress,
        PolicyName::Edf,
        PolicyName::Proportional,
        PolicyName::Jockey,
    ];

    /// The name used in configuration files and tables.
    pub fn name(self) -> &'static str {
        match self {
            PolicyName::Fifo => "fifo",
            PolicyName::Fair => "fair",
            PolicyName::Priority => "priority",
            PolicyName::Capacity => "capacity",
            PolicyName::GangFifo => "gang-fifo",
            PolicyName::Dress => "dress",
            PolicyName::Edf => "edf",
            PolicyName::Proportional => "proportional",
            PolicyName::Jockey => "jockey",
        }
    }

    /// This policy's presets, by name: `[policy]` keys as TOML, which a table naming the
    /// preset (`preset = "NAME"`) starts from.
    pub fn presets(self) -> &'static [(&'static str, &'static str)] {
        match self {
            PolicyName::Jockey => jockey::PRESETS,
            _ => &[],
        }
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a name from `master.toml`; the error (a sentence naming the known policies)
/// is a plain string, like `Role`'s, so config errors can embed it.
impl FromStr for PolicyName {
    type Err = String;
    fn from_str(s: &str) -> Result<PolicyName, String> {
        PolicyName::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let known: Vec<&str> = PolicyName::ALL.iter().map(|p| p.name()).collect();
            format!("unknown policy \"{s}\"; known policies: {}", known.join(", "))
        })
    }
}

/// The queue of jobs whose spec names none.
pub const DEFAULT_QUEUE: &str = "default";

/// A scheduling policy. The core calls [`schedule`](Policy::schedule) after every event
/// and every tick; the policy looks at the [`SchedView`] and answers with [`Decisions`].
/// The [`Trigger`] says which of the two it is: placing ready tasks on free slots is
/// worth doing after any event, while heavy periodic control (a DP allocation interval,
/// a Jockey control step, a DRESS ratio update) belongs on [`Trigger::Tick`] only, so
/// its cost and its cadence do not follow the event rate.
///
/// Policies that keep their own state (DP accounts, Jockey controllers, DRESS ratios) may
/// do so in `self`; they must derive it only from the view and `now`, so that runs stay
/// deterministic. Policies that need periodic work report it through
/// [`next_wakeup`](Policy::next_wakeup); the core then calls `schedule` with
/// [`Trigger::Tick`] from `tick` once that time is reached (or earlier, for its own
/// timers: a tick is a chance to do periodic work, not a promise that its interval is
/// due, so compare `now` with the policy's own next interval).
pub trait Policy: fmt::Debug + Send {
    /// Which policy this is.
    fn name(&self) -> PolicyName;

    /// Decides which free slots go to which jobs, and which containers to preempt.
    fn schedule(&mut self, now: Timestamp, view: &SchedView<'_>, trigger: Trigger) -> Decisions;

    /// When the policy next needs `schedule` without an event (e.g. an allocation
    /// interval). `None`: only when something happens.
    fn next_wakeup(&self) -> Option<Timestamp> {
        None
    }

    /// The reserve ratio and predicted releases of a policy that keeps them (`dress`),
    /// for the reservation view. `None` for the others.
    fn reserve_report(&self) -> Option<DressReport> {
        None
    }

    /// Each account's rate in force and slot allotment (DP's market), by account; empty
    /// for policies that allot no shares to accounts.
    fn account_shares(&self) -> Vec<(AccountId, Credits, [u32; 2])> {
        Vec::new()
    }

    /// Completion models the policy wants built (Jockey); the core hands each to its
    /// driver as a `Command::BuildCompletionModel`. Drained by the call.
    fn take_model_requests(&mut self) -> Vec<jockey::ModelRequest> {
        Vec::new()
    }

    /// A completion model the driver built, as asked.
    fn completion_model_built(&mut self, _model: jockey::CompletionModel) {}

    /// What the policy's SLO controller knows of `job` (Jockey): progress, predicted
    /// finish, guaranteed slots. `None` for policies without one and jobs it does not control.
    fn slo_state(&self, _job: JobId) -> Option<jockey::SloState> {
        None
    }

    /// The demand class the policy gave `job` (DRESS's SD/LD), for `status` and `jobs`.
    /// `None` for policies without classes and jobs not (or no longer) classed.
    fn demand_class(&self, _job: JobId) -> Option<DemandClass> {
        None
    }

    /// Where `job` stands in this policy's service order, for the queue view: lower
    /// first, ties in admission order. Every job ranks 0 (admission order) by default.
    fn queue_rank(&self, _job: &JobInfo<'_>) -> u64 {
        0
    }

    /// Whether a step after nothing but containers starting never decides anything: the
    /// policy reads only free slots and ready tasks, which a start changes neither of, and
    /// keeps no count of its steps. A driver whose tasks start in the instant they are
    /// launched may then leave the starts to the core (`StartReports::Implied`).
    fn ignores_starts(&self) -> bool {
        false
    }

    /// Whether the policy keeps nothing between steps that a later step reads (scratch
    /// room aside): its decisions follow from the jobs, tasks and slots it is shown and
    /// the time. A core that has drained then decides as a fresh one would (see
    /// [`Core::forgets_when_idle`](crate::core::Core::forgets_when_idle)).
    fn forgets_when_idle(&self) -> bool {
        false
    }

    /// Takes back the assignment buffer of the last [`Decisions`], emptied, so that the
    /// next step may fill it again instead of allocating one: the core carries out
    /// decisions at every step (millions in the simulator). Dropped by default.
    fn recycle(&mut self, _assignments: Vec<Assignment>) {}
}

/// Why the core asks a policy to [`schedule`](Policy::schedule).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Trigger {
    /// A fact arrived ([`Core::handle`](super::Core::handle)): an agent, a report, a
    /// submit, a cancel. Place work; keep it light, events come often.
    Event,
    /// Time passed ([`Core::tick`](super::Core::tick)): the moment for periodic control.
    Tick,
}

/// What a policy decided in one step.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Decisions {
    /// Slots to fill, in order. Each starts one ready task of the job on the agent.
    pub assignments: Vec<Assignment>,
    /// Containers to kill so their slots can go elsewhere; their tasks are requeued
    /// without counting an attempt once the kill is confirmed.
    pub preemptions: Vec<Preemption>,
    /// Slot partitions: slots of a kind held for a set of jobs. The reactor refuses an
    /// assignment to any other job that would eat into them (see `reactor::reserve`).
    /// Stated afresh with every decision: leaving it empty lifts every reservation.
    pub reservations: Vec<Reservation>,
    /// Ledger postings (DP's interval charges and income), written by the reactor in the
    /// same step as the decision that caused them.
    pub postings: Vec<Posting>,
}

/// Hold `slots` slots of `kind` for the jobs in `jobs`: free slots go to other jobs only
/// while more than the set's idle reserved slots stay free. Not a container state and not
/// preemptive (see `reactor::reserve`); sets of one kind's reservations should be disjoint.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Reservation {
    /// The slot kind held.
    pub kind: SlotKind,
    /// How many slots of it, used or not by the set's jobs.
    pub slots: u32,
    /// The jobs that may use them.
    pub jobs: BTreeSet<JobId>,
}

/// One ledger posting a policy asks for. The reactor posts it only to a created account
/// and never takes a balance below zero (a charge larger than the balance takes what is
/// left).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Posting {
    /// Take up to `amount` (positive) from `account` for the use it made of its slots.
    Charge {
        /// The account.
        account: AccountId,
        /// What the use cost.
        amount: Credits,
        /// Why, kept on the entry.
        reason: String,
    },
    /// Credit `amount` (positive) of income to `account`.
    Income {
        /// The account.
        account: AccountId,
        /// The income.
        amount: Credits,
        /// Why, kept on the entry.
        reason: String,
    },
}

/// Give one free slot of `kind` on `agent` to one ready task of `job`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Assignment {
    /// The agent whose slot is used.
    pub agent: AgentId,
    /// The job whose next ready task of `kind` runs there.
    pub job: JobId,
    /// The slot kind.
    pub kind: SlotKind,
}

/// Kill a live container to take its slot back.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Preemption {
    /// The container.
    pub container: ContainerId,
    /// Why, sent with the kill and echoed in the agent's report.
    pub reason: KillReason,
}

/// The read-only picture a policy decides from. Iterators walk indexes the core keeps up
/// to date, so a step costs in proportion to the jobs and agents it touches, not to every
/// task in the system.
#[derive(Clone, Copy, Debug)]
pub struct SchedView<'a> {
    state: &'a State,
}

impl<'a> SchedView<'a> {
    pub(crate) fn new(state: &'a State) -> SchedView<'a> {
        SchedView { state }
    }

    /// Jobs that have at least one ready task of `kind`, in admission order.
    pub fn jobs_with_ready(&self, kind: SlotKind) -> impl Iterator<Item = JobInfo<'a>> + use<'a> {
        let jobs = &self.state.jobs;
        self.state.ready_jobs[kind_ix(kind)]
            .iter()
            .filter_map(move |id| jobs.get(id))
            .map(|job| JobInfo { job })
    }

    /// Every job that has not ended, in admission order.
    pub fn active_jobs(&self) -> impl Iterator<Item = JobInfo<'a>> + use<'a> {
        let jobs = &self.state.jobs;
        self.state.active.iter().filter_map(move |id| jobs.get(id)).map(|job| JobInfo { job })
    }

    /// One job, if it exists.
    pub fn job(&self, id: JobId) -> Option<JobInfo<'a>> {
        self.state.jobs.get(&id).map(|job| JobInfo { job })
    }

    /// The kept runs of the job name `name`, oldest first (for profiles).
    pub fn history(
        &self,
        name: &str,
    ) -> impl Iterator<Item = &'a slotmarket_common::protocol::JobHistory> + use<'a> {
        let runs: Vec<&'a slotmarket_common::protocol::JobHistory> = self.state.history.runs(name).collect();
        runs.into_iter()
    }

    /// Agents that take work (connected, neither draining nor quarantined: the only ones
    /// that can take launches), by id.
    pub fn agents(&self) -> impl Iterator<Item = AgentSlots> + use<'a> {
        self.state.agents.iter().filter(|(_, a)| a.takes_work()).map(|(id, a)| AgentSlots::of(id, a))
    }

    /// Agents that take work with at least one free slot of `kind`, by id. Walks an index, so
    /// it costs nothing when the cluster is full; when a good share of agents is free it
    /// walks the agent table instead, which beats a look-up per index entry.
    pub fn agents_with_free(&self, kind: SlotKind) -> impl Iterator<Item = AgentSlots> + use<'a> {
        let agents = &self.state.agents;
        let index = &self.state.free_agents[kind_ix(kind)];
        let scan = !index.is_empty() && index.len() * 4 >= agents.len();
        let by_scan = scan.then(|| {
            agents
                .iter()
                .filter(move |(_, a)| a.takes_work() && a.free(kind) > 0)
                .map(|(id, a)| AgentSlots::of(id, a))
        });
        let by_index = (!scan)
            .then(|| index.iter().filter_map(move |id| agents.get(id).map(|a| AgentSlots::of(*id, a))));
        by_scan.into_iter().flatten().chain(by_index.into_iter().flatten())
    }

    /// The agent [`agents_with_free`](SchedView::agents_with_free) would yield alone, when
    /// it would yield exactly one (read from the free-agent index, as it is for more than
    /// four agents). After one container ends on a busy cluster this is the usual case,
    /// and a policy can then hand out that agent's slots without a table of agents.
    pub fn sole_agent_with_free(&self, kind: SlotKind) -> Option<AgentSlots> {
        let (agents, index) = (&self.state.agents, &self.state.free_agents[kind_ix(kind)]);
        if index.len() != 1 || index.len() * 4 >= agents.len() {
            return None;
        }
        let id = *index.iter().next()?;
        agents.get(&id).map(|a| AgentSlots::of(id, a))
    }

    /// Whether some agent that takes work has a free slot of `kind` (one index look).
    pub fn has_free(&self, kind: SlotKind) -> bool {
        !self.state.free_agents[kind_ix(kind)].is_empty()
    }

    /// Slots of `kind` offered by agents that take work.
    pub fn total_slots(&self, kind: SlotKind) -> u32 {
        self.agents().map(|a| a.offered(kind)).sum()
    }

    /// The balance of `account` if an administrator created it; `None` for an account
    /// that exists only implicitly (nothing is metered on it).
    pub fn balance(&self, account: &AccountId) -> Option<Credits> {
        self.state.accounts.get(account).map(|a| a.balance())
    }

    /// The spending rate its user set on `account` at run time, if any.
    pub fn spending_rate(&self, account: &AccountId) -> Option<Credits> {
        self.state.accounts.rate(account)
    }

    /// The incomes (credits per hour) administrators set at run time, by account.
    pub fn incomes(&self) -> &BTreeMap<AccountId, Credits> {
        self.state.accounts.incomes()
    }

    /// Containers running a current task attempt (containers of ended jobs, which are
    /// only waiting for their kill, are left out), in the container table's own order:
    /// hashed, so a policy that turns some of them into decisions must sort those first
    /// for runs to stay deterministic.
    pub(super) fn live_unordered(&self) -> impl Iterator<Item = ContainerInfo> + use<'a> {
        self.state.containers.iter().filter(|(_, c)| !c.draining).map(|(&id, c)| ContainerInfo {
            container: id,
            task: c.task,
            agent: match c.holder {
                Holder::Agent(a) => Some(a),
                Holder::Orphan { .. } => None,
            },
            kind: c.kind,
            kill_sent: c.kill_sent,
            state: c.state,
            entered: c.entered,
            allocated: c.allocated,
            started: c.started,
        })
    }
}

/// A job as a policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct JobInfo<'a> {
    job: &'a Job,
}

impl<'a> JobInfo<'a> {
    /// Its id; ids grow in admission order.
    pub fn id(&self) -> JobId {
        self.job.id
    }

    /// Tasks of `kind` ready to run now (barrier passed, no live container).
    pub fn ready(&self, kind: SlotKind) -> u32 {
        self.job.ready[kind_ix(kind)].len() as u32
    }

    /// Tasks of `kind` with a live container.
    pub fn running(&self, kind: SlotKind) -> u32 {
        self.job.live[kind_ix(kind)]
    }

    /// Its service class, if the spec gives one.
    pub fn class(&self) -> Option<JobClass> {
        self.job.spec.class
    }

    /// Its `capacity` queue: the spec's, or `default`.
    pub fn queue(&self) -> &'a str {
        self.job.spec.queue.as_deref().unwrap_or(DEFAULT_QUEUE)
    }

    /// Its spec's name (the key of its history).
    pub fn name(&self) -> &'a str {
        &self.job.spec.name
    }

    /// Its spec (stages and their barriers).
    pub fn spec(&self) -> &'a slotmarket_common::spec::JobSpec {
        &self.job.spec
    }

    /// The account it runs on.
    pub fn account(&self) -> &'a AccountId {
        &self.job.account
    }

    /// Whether it has ended (completed, failed or cancelled).
    pub fn is_ended(&self) -> bool {
        self.job.state.is_terminal()
    }

    /// When it was admitted.
    pub fn submitted(&self) -> Timestamp {
        self.job.submitted
    }

    /// When it should finish, if it has a deadline.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.job.deadline
    }

    /// Tasks of `kind` over all its stages.
    pub fn tasks(&self, kind: SlotKind) -> u32 {
        self.stages().filter(|s| s.kind == kind).map(|s| s.tasks).sum()
    }

    /// Tasks of `kind` completed.
    pub fn completed(&self, kind: SlotKind) -> u32 {
        self.stages().filter(|s| s.kind == kind).map(|s| s.completed).sum()
    }

    /// Tasks of `kind` neither completed nor running: ready, or waiting for a barrier.
    pub fn pending(&self, kind: SlotKind) -> u32 {
        self.stages().filter(|s| s.kind == kind).map(|s| s.pending()).sum()
    }

    /// Per stage in spec order, the summed run time in milliseconds of the attempts that
    /// completed its tasks (0 for an ended job, whose per-task records are freed).
    pub fn completed_run_ms(&self) -> impl Iterator<Item = u64> + use<'a> {
        self.job.stages.iter().map(|s| s.tasks.iter().filter_map(|t| t.run_ms).sum())
    }

    /// Its stages, in spec order.
    pub fn stages(&self) -> impl Iterator<Item = StageInfo> + use<'a> {
        let job = self.job;
        // The spec's task counts: an ended job has already freed its per-task records.
        job.stages.iter().enumerate().map(|(ix, s)| StageInfo {
            kind: s.kind,
            tasks: job.stage_size(ix),
            completed: s.completed,
            running: s.live,
            released: s.released,
        })
    }
}

/// A stage's progress as a policy sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StageInfo {
    /// Its slot kind.
    pub kind: SlotKind,
    /// Its tasks.
    pub tasks: u32,
    /// Tasks completed.
    pub completed: u32,
    /// Tasks with a live container.
    pub running: u32,
    /// Whether its barrier has passed, so its pending tasks may run.
    pub released: bool,
}

impl StageInfo {
    /// Tasks neither completed nor running.
    pub fn pending(&self) -> u32 {
        self.tasks - self.completed - self.running
    }
}

/// An agent's slot table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AgentSlots {
    /// The registration.
    pub agent: AgentId,
    offered: [u32; 2],
    used: [u32; 2],
}

impl AgentSlots {
    fn of(agent: AgentId, a: &Agent) -> AgentSlots {
        AgentSlots { agent, offered: a.offered, used: a.used }
    }

    /// Slots of `kind` offered.
    pub fn offered(&self, kind: SlotKind) -> u32 {
        self.offered[kind_ix(kind)]
    }

    /// Slots of `kind` in use (including containers waiting for a kill to land).
    pub fn used(&self, kind: SlotKind) -> u32 {
        self.used[kind_ix(kind)]
    }

    /// Slots of `kind` free now.
    pub fn free(&self, kind: SlotKind) -> u32 {
        self.offered(kind).saturating_sub(self.used(kind))
    }
}

/// A live container as a policy sees it (for preemption).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ContainerInfo {
    /// The container.
    pub container: ContainerId,
    /// The task attempt it runs.
    pub task: TaskId,
    /// Its agent; `None` while it waits for adoption after a master restart.
    pub agent: Option<AgentId>,
    /// The slot kind it occupies.
    pub kind: SlotKind,
    /// A kill was already sent; preempting it again does nothing.
    pub kill_sent: bool,
    /// Its last reported state (never terminal: ended containers leave the view).
    pub state: ContainerState,
    /// When it entered `state` (the agent's clock, or the master's for `Allocated`).
    pub entered: Timestamp,
    /// When the master allocated it (or recovered it after a restart).
    pub allocated: Timestamp,
    /// When its process started running, once it did.
    pub started: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_parse_and_print() {
        assert_eq!("fifo".parse::<PolicyName>(), Ok(PolicyName::Fifo));
        assert_eq!(PolicyName::Fifo.to_string(), "fifo");
        let err = "lifo".parse::<PolicyName>().unwrap_err();
        assert_eq!(
            err,
            "unknown policy \"lifo\"; known policies: fifo, fair, priority, capacity, gang-fifo, dress, edf, proportional, jockey"
        );
        for name in PolicyName::ALL {
            assert_eq!(name.name().parse::<PolicyName>(), Ok(name));
        }
    }
}
