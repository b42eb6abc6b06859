//! The master's sans-IO core: jobs, stages, tasks, containers, agents, accounts with
//! their ledger, and the scheduling policy. It does no I/O and reads no clock; drivers feed it timestamped events and carry
//! out the commands it returns (see [`Core`]).
//!
//! # Where deciding code lives
//!
//! - `event`, `command`: what comes in and what goes out; `reactor/`: the only code that
//!   changes state, one handler per event; `state`: jobs, tasks, containers, agents and the
//!   indexes over them, kept in `id_table` (records by sequential id) and `sorted_set`
//!   (small ordered sets); `view`: read-only answers for clients; `invariants`: cross-checks.
//! - `policy/`: allocation. One file per policy behind the `Policy` trait; a policy sees the
//!   state only through `SchedView` (jobs with deadlines, accounts and per-kind progress;
//!   containers with their times) and answers with `Decisions` the reactor checks.
//!   Reservations (DRESS) will be part of those decisions: a slot partition per kind, not a
//!   container state.
//! - `history`: the recorded runs of ended jobs that estimators learn from. MRM's
//!   admission, estimation and pricing (`admission.rs`, `estimate.rs`, `pricing.rs`) sit
//!   beside it, in front of the policies; budgets, rates and the ledger in `accounting.rs`.
//! - `locate`: where each task's output is, for agents without a shared data directory.
//!
//! Purity is enforced by a test that scans this directory for clocks and I/O
//! (`tests/purity.rs`). Splitting the core into its own crate would make it a compile
//! error instead; it is not done yet because `common` would first need its transport
//! behind a feature, and the scan has not let anything through.

pub mod accounting;
pub mod admission;
pub mod command;
pub mod estimate;
pub mod estimate_eval;
pub mod event;
mod history;
mod id_table;
pub mod invariants;
mod kept;
mod locate;
mod market;
pub mod policy;
pub mod pricing;
mod purchase;
mod queue;
pub mod quote;
mod reactor;
mod refusals;
mod sorted_set;
mod state;
mod view;

#[cfg(test)]
mod tests;

use std::time::Duration;

use slotmarket_common::identity::Identity;
use slotmarket_common::ids::{AgentId, JobId};
use slotmarket_common::protocol::{ContainerReport, ReservationView};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

pub use accounting::StoredAccount;
pub use command::{Command, KillReason, Persist, Persists};
pub use event::{Event, RecoveredJob, StoreRecovery};
pub use history::HistoryLimits;
#[cfg(test)]
pub(crate) use history::completed_run;
pub use policy::{PolicyName, PolicySettings};
pub use purchase::{credits_slot_ms, price_credits};
pub use quote::{AdmissionMode, AdmissionSettings, Choice, Offer, Quote, QuoteError};
pub use reactor::NodeHealth;
pub use refusals::{check_deadline_ahead, deadline_of_ended_job};
pub use view::{CoreView, no_such_job};

use policy::{Policy, SchedView, Trigger};
use reactor::Ctx;
use state::State;

/// Identifies a client request so the driver can route the matching `Command::Reply`.
/// The driver allocates them; the core only echoes them back.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RequestId(pub u64);

/// Who sent a client request: the role and principal from their certificate.
pub type Caller = Identity;

/// Settings the core needs; the server builds them from `master.toml`, the simulator
/// from its command line.
#[derive(Clone, PartialEq, Debug)]
pub struct CoreConfig {
    /// The scheduling policy and its settings (the `[policy]` table).
    pub policy: PolicySettings,
    /// An agent (or a recovered container waiting for its agent) silent for longer than
    /// this is lost: its tasks run again elsewhere. [`Duration::MAX`] turns loss by
    /// silence off for agents (the simulator's agents never fall silent).
    pub agent_timeout: Duration,
    /// How long an ended job stays in memory for status and watches before the core
    /// drops it (the server then answers for it from the store). Zero drops it at once:
    /// the simulator records what it needs from the commands, and half a million ended
    /// jobs would otherwise stay in memory.
    pub ended_job_retention: Duration,
    /// How much job history to keep, in memory and in the store.
    pub history: HistoryLimits,
    /// When an agent whose tasks keep failing fast is quarantined, and for how long.
    pub node_health: NodeHealth,
    /// Most tasks one job may have over all its stages; a larger job is refused at
    /// submit, naming this limit. Each task costs the master memory until its job ends.
    pub max_tasks_per_job: u64,
    /// Most tasks an account's unfinished jobs may hold together (every task of every job
    /// of the account that has not ended); a submit that would pass it is refused.
    pub max_queued_tasks_per_account: u64,
    /// This master lifetime's epoch: its container ids start at
    /// `container_epoch << CONTAINER_EPOCH_SHIFT` (0 starts at 1). The server sets its
    /// start time in milliseconds, so a master whose database was lost never reissues an
    /// id an earlier master gave to a container that agents may still run (that would
    /// take an earlier lifetime issuing over a million ids per millisecond it lived);
    /// recovered ids continue above both.
    pub container_epoch: u64,
    /// MRM admission: the `[admission]` table.
    pub admission: AdmissionSettings,
    /// Whether the admission model rescales a running deadline job's remaining work by
    /// how its completed tasks ran against the estimate (predictability under error). The
    /// master turns it on; the simulator's experiments keep the plain model (off).
    pub predict_from_progress: bool,
    /// Which durable writes the core builds: the master wants [`Persists::All`]; the
    /// simulator, which keeps no store, only job outcomes.
    pub persists: Persists,
}

/// How far [`CoreConfig::container_epoch`] is shifted into container ids: room for 2^20
/// ids per millisecond between two master starts, and ids stay below 2^63 (SQLite's
/// integers) for epochs in milliseconds until the year 2248.
pub const CONTAINER_EPOCH_SHIFT: u32 = 20;

/// Default [`CoreConfig::max_tasks_per_job`].
pub const DEFAULT_MAX_TASKS_PER_JOB: u64 = 100_000;
/// Default [`CoreConfig::max_queued_tasks_per_account`].
pub const DEFAULT_MAX_QUEUED_TASKS_PER_ACCOUNT: u64 = 1_000_000;

impl Default for CoreConfig {
    fn default() -> CoreConfig {
        CoreConfig {
            policy: PolicySettings::default(),
            agent_timeout: Duration::from_secs(10),
            ended_job_retention: Duration::from_secs(600),
            history: HistoryLimits::default(),
            node_health: NodeHealth::default(),
            max_tasks_per_job: DEFAULT_MAX_TASKS_PER_JOB,
            max_queued_tasks_per_account: DEFAULT_MAX_QUEUED_TASKS_PER_ACCOUNT,
            container_epoch: 0,
            admission: AdmissionSettings::default(),
            predict_from_progress: false,
            persists: Persists::All,
        }
    }
}

/// Everything the master decides. No I/O, no clock, no global randomness.
///
/// # Driving contract
///
/// Inputs:
/// - [`handle`](Core::handle) — feed every fact (agent joined, report, submit, cancel,
///   recovered job, ...) as an [`Event`], one at a time, in the order the driver saw them.
/// - [`tick`](Core::tick) — call once the time returned by
///   [`next_wakeup`](Core::next_wakeup) has been reached (calling it early or more often is
///   harmless). Ask `next_wakeup` again after every `handle` and `tick`: events move it.
///
/// Outputs: both inputs return the [`Command`]s to carry out, **strictly in the order
/// returned**. [`handle_into`](Core::handle_into) and [`tick_into`](Core::tick_into) are
/// the same calls appending to a buffer the driver owns and reuses (the simulator makes
/// millions of calls; a fresh vector per call was a measurable share of its time); the
/// commands appended are exactly those `handle`/`tick` would return.
/// [`reports_into`](Core::reports_into) is `handle_into` of an
/// `Event::ContainerReports` whose reports the driver lends from a buffer it keeps, and
/// [`report_into`](Core::report_into) the same of a batch of one report.
/// [`CoreConfig::persists`] says which `Persist` commands the driver wants built; the
/// master wants them all. A `Persist` must be durable before any later command runs; that is how a
/// submit is acknowledged only once stored (`Persist(JobAdmitted)` precedes
/// `Reply{Submitted}`) and how the store learns of a container before the agent can
/// report on it. Launches for one agent that are adjacent may be batched into one message.
///
/// Queries: [`view`](Core::view) answers status and listing requests without changing
/// anything.
///
/// Time: every `now` is wall-clock time read by the driver (or the simulator's virtual
/// clock) and must not go backwards; a `now` earlier than one already seen is treated as
/// the latest seen. The core keeps no timers of its own.
///
/// Start-up: replay the stored accounts and ledger as [`Event::AccountsRecovered`], then
/// [`Event::StoreRecovered`] (id counters, history), then every stored job that had not
/// ended as [`Event::JobRecovered`], all before the first `AgentJoined`, so reconnecting
/// agents can adopt the containers that kept running.
#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
    state: State,
    policy: Box<dyn Policy>,
    /// The latest `now` seen, so a clock step backwards cannot reorder deadlines.
    latest: Timestamp,
    /// Scratch buffer for the jobs a step changed, kept to spare an allocation per step.
    changed: Vec<JobId>,
    /// MRM quoting state: estimates of admitted jobs, the mean job size.
    market: quote::Market,
    /// Whether a step ends with its `Command::JobChanged` notices (see
    /// [`Core::set_job_notices`]).
    job_notices: bool,
    /// Which reports the driver's agents send when a task starts (see
    /// [`Core::set_start_reports`]).
    start_reports: StartReports,
    /// Scratch buffer for the starts a step implies ([`StartReports::Implied`]), lent to
    /// each step's context and kept to spare an allocation per step.
    starts: Vec<reactor::ImpliedStart>,
}

/// Which reports a driver's agents send when a task starts (see
/// [`Core::set_start_reports`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum StartReports {
    /// `Acquired`, then `Running`: what the master's agents send. A report that skips a
    /// state is refused.
    #[default]
    AcquiredAndRunning,
    /// One `Running` report, standing for `Acquired` and `Running` at the same instant.
    Running,
    /// None: every launched container starts in the instant it is launched, and the core
    /// applies its `Running` report itself at the end of the step that launched it.
    /// Granted only to a policy that ignores starts, `fifo` (see [`Core::set_start_reports`]).
    Implied,
}

impl Core {
    /// A core with no jobs and no agents.
    pub fn new(config: CoreConfig) -> Core {
        let policy = config.policy.build();
        Core::with_policy(config, policy)
    }

    /// A core running `policy` rather than the one `config` names (for tests of the
    /// driving contract with a policy of their own).
    pub(crate) fn with_policy(config: CoreConfig, policy: Box<dyn Policy>) -> Core {
        let mut state = State::new(config.history);
        let first = config.container_epoch.saturating_mul(1 << CONTAINER_EPOCH_SHIFT).min(1 << 62);
        state.next_container = state.next_container.max(first);
        let mut market = quote::Market::default();
        market.rescale = config.predict_from_progress;
        let changed = Vec::new();
        let (job_notices, start_reports, starts) = (true, StartReports::default(), Vec::new());
        let latest = Timestamp::ZERO;
        Core { config, state, policy, latest, changed, market, job_notices, start_reports, starts }
    }

    /// Whether each step ends with one [`Command::JobChanged`] per job it changed (on by
    /// default: the master's actor wakes a job's watchers by them). A driver with no
    /// watchers turns them off once, before the first event: the simulator ignored
    /// them, and building, carrying and dropping one per report batch was 3 % of its run.
    /// Nothing else in the stream changes.
    pub fn set_job_notices(&mut self, on: bool) {
        self.job_notices = on;
    }

    /// Which reports the driver's agents send when a task starts; the master's send
    /// both (the default). A driver whose agents start every task in the instant it is
    /// launched (the simulator) may say so once, before the first event:
    /// - [`StartReports::Running`]: a `Running` report may come straight after
    ///   `Allocated`. An `Acquired` report changes nothing a later step reads but the
    ///   container's state, so the stream is the same, less the `Acquired` transition's
    ///   `Persist::Container` (which the simulator does not build).
    /// - [`StartReports::Implied`]: no start report at all; each step applies the
    ///   `Running` report of every container it launched, in the order the driver's
    ///   report batches would (agents in id order, each agent's in launch order), at the
    ///   step's instant. The stream is the one the driver would get by feeding those
    ///   reports back at once, but the policy is not asked again after them and the
    ///   starts' commands (a job's first `Persist::JobState { Running }`) close the step
    ///   that launched them. That is the same stream only for a policy whose step after
    ///   starts alone does nothing ([`Policy::ignores_starts`]): `fifo` decides from free
    ///   slots and ready tasks alone, which a start changes neither of, and its previous
    ///   step left no free slot
    ///   beside a ready task (without `retry_elsewhere` every assignment it makes is
    ///   placed). Other policies count their steps or read the running containers
    ///   (`proportional`'s outcome changed): they are given [`StartReports::Running`].
    ///
    /// [`start_reports`](Core::start_reports) says which was granted.
    pub fn set_start_reports(&mut self, reports: StartReports) {
        let implied_is_exact = self.policy.ignores_starts() && !self.config.node_health.retry_elsewhere;
        self.start_reports = match reports {
            StartReports::Implied if !implied_is_exact => StartReports::Running,
            reports => reports,
        };
    }

    /// Whether a drained core (no job open, no container live, no wakeup asked for)
    /// decides from then on exactly as a fresh core of the same configuration and agents
    /// would: its policy keeps nothing between steps ([`Policy::forgets_when_idle`]) and
    /// no admission model prices from the jobs that ran. Ids go on from where they were,
    /// which changes no decision: ids order only what is live, and nothing is. The
    /// simulator runs a trace's drained stretches on several threads by it.
    pub fn forgets_when_idle(&self) -> bool {
        self.policy.forgets_when_idle() && self.config.admission.mode == AdmissionMode::None
    }

    /// Which start reports the core expects (see [`set_start_reports`](Core::set_start_reports)).
    pub fn start_reports(&self) -> StartReports {
        self.start_reports
    }

    /// Applies one event, then lets the policy schedule; returns the commands to run.
    #[must_use]
    pub fn handle(&mut self, now: Timestamp, event: Event) -> Vec<Command> {
        let mut out = Ctx::new_buffer();
        self.handle_into(now, event, &mut out);
        out
    }

    /// [`handle`](Core::handle), appending the commands to `out` (after whatever it
    /// holds) rather than returning a new vector.
    pub fn handle_into(&mut self, now: Timestamp, event: Event, out: &mut Vec<Command>) {
        let mut cx = self.begin(now, std::mem::take(out));
        match event {
            Event::CompletionModelBuilt(model) => self.policy.completion_model_built(*model),
            Event::ChoiceSubmitted { request, caller, spec, choice } => {
                self.on_choice_submitted(&mut cx, request, &caller, spec, choice);
            }
            Event::StoreRecovered(recovery) => {
                self.market.recover_capacity(recovery.capacity);
                reactor::dispatch(&mut self.state, &mut cx, Event::StoreRecovered(recovery));
            }
            event => reactor::dispatch(&mut self.state, &mut cx, event),
        }
        self.schedule(&mut cx, Trigger::Event);
        *out = self.finish(&mut cx);
    }

    /// [`handle_into`](Core::handle_into) of `Event::ContainerReports { agent, reports }`
    /// with the reports taken out of a buffer the driver keeps (left empty, its room
    /// kept): the simulator feeds millions of report batches, and building each one's
    /// vector and event was an allocation and two copies of an `Event` per batch.
    pub fn reports_into(
        &mut self,
        now: Timestamp,
        agent: AgentId,
        reports: &mut Vec<ContainerReport>,
        out: &mut Vec<Command>,
    ) {
        let mut cx = self.begin(now, std::mem::take(out));
        reactor::on_container_reports(&mut self.state, &mut cx, agent, reports.drain(..));
        self.schedule(&mut cx, Trigger::Event);
        *out = self.finish(&mut cx);
    }

    /// [`reports_into`](Core::reports_into) of a batch of one `report`: the simulator's
    /// agents report each task's end on its own, and lending each from a buffer cost
    /// the buffer's handling and a draining iterator per task.
    pub fn report_into(
        &mut self,
        now: Timestamp,
        agent: AgentId,
        report: ContainerReport,
        out: &mut Vec<Command>,
    ) {
        let mut cx = self.begin(now, std::mem::take(out));
        reactor::on_container_reports(&mut self.state, &mut cx, agent, std::iter::once(report));
        self.schedule(&mut cx, Trigger::Event);
        *out = self.finish(&mut cx);
    }

    /// Periodic work: loses agents and orphaned containers whose silence passed the
    /// timeout, ends quarantines whose time is up, then lets the policy schedule with
    /// [`Trigger::Tick`] (its periodic work).
    #[must_use]
    pub fn tick(&mut self, now: Timestamp) -> Vec<Command> {
        let mut out = Ctx::new_buffer();
        self.tick_into(now, &mut out);
        out
    }

    /// [`tick`](Core::tick), appending the commands to `out` (after whatever it holds).
    pub fn tick_into(&mut self, now: Timestamp, out: &mut Vec<Command>) {
        let mut cx = self.begin(now, std::mem::take(out));
        reactor::on_tick(&mut self.state, &mut cx);
        self.schedule(&mut cx, Trigger::Tick);
        *out = self.finish(&mut cx);
    }

    /// Ends a step: under MRM admission stores the cluster's capacity when it changed
    /// (a restarted master quotes against it until agents reconnect), tells the kept
    /// admission schedule which jobs the step touched (see `quote::Market::note_changed`),
    /// then hands back the step's commands.
    fn finish(&mut self, cx: &mut Ctx) -> Vec<Command> {
        if self.config.admission.mode == AdmissionMode::Mrm
            && let Some([map_slots, reduce_slots]) = self.market.note_capacity(&self.state)
        {
            cx.persist(Persist::Capacity { map_slots, reduce_slots });
        }
        // Without a kept schedule (no quote yet, as in a simulation without a market)
        // there is nothing to note.
        if self.market.keeps_schedule() {
            let touched = std::mem::take(&mut self.state.touched);
            self.market.note_changed(cx.changed_jobs().iter().chain(&touched).copied());
            self.state.touched = touched;
        }
        self.state.touched.clear();
        if let Some(starts) = cx.implied_starts.take() {
            self.starts = starts;
        }
        cx.finish(&self.state, &mut self.changed, self.job_notices)
    }

    /// When `tick` next has something to do: the earliest agent-silence, orphan or
    /// quarantine deadline, job time limit, the next ended job to drop from memory, or the policy's own
    /// next interval. `None` when nothing is waiting on time.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        // Asked after every step (by the simulator, millions of times): the earliest of
        // four options, compared pairwise rather than through a chain of iterators.
        let silence = reactor::next_deadline(&self.state, self.config.agent_timeout);
        let drop_ended = self.state.ended.front().map(|&(at, _)| at);
        let time_limit = self.state.waits.next_expiry();
        [drop_ended, time_limit, self.policy.next_wakeup()].into_iter().fold(silence, earliest)
    }

    /// MRM's quote for `spec` at `now`: its estimate, earliest feasible finish and
    /// price–deadline curve against the admitted deadline jobs. Counts the job's size
    /// into the mean that normalises slack, hence `&mut`.
    pub fn quote(&mut self, now: Timestamp, spec: &JobSpec) -> Result<Quote, QuoteError> {
        let now = self.latest.max(now);
        let settings = self.config.admission;
        self.market.quote(now, &self.state, &settings, spec, Choice::Earliest).map(|(quote, _)| quote)
    }

    /// The deadline and price `choice` buys for `spec` at `now`, re-checked against the
    /// admitted jobs; the caller submits the job with that deadline next, before any
    /// other event, so that the check still holds (the master's actor and the simulator
    /// both do).
    pub fn offer(
        &mut self,
        now: Timestamp,
        spec: &JobSpec,
        choice: Choice,
    ) -> Result<(Quote, Offer), QuoteError> {
        let now = self.latest.max(now);
        let settings = self.config.admission;
        self.market.quote(now, &self.state, &settings, spec, choice)
    }

    /// The estimator's R² and PI coverage on held-out history (`estimate --eval`), at
    /// the configured PI level, over the runs in memory the caller may see (all for an
    /// admin, their accounts' for a user).
    pub fn estimate_eval(
        &self,
        caller: &Caller,
        query: &slotmarket_common::protocol::EstimateEvalQuery,
    ) -> Result<slotmarket_common::protocol::EstimateEvalReport, estimate::EstimateError> {
        let runs: Vec<_> = self.state.history.all().filter(|r| caller.may_act_for(&r.account)).collect();
        let settings = estimate_eval::EvalSettings {
            holdout_pct: query.holdout_pct,
            pi_level: self.config.admission.pi_level,
        };
        estimate_eval::evaluate(&runs, query.name.as_deref(), &settings)
    }

    /// Read-only queries for status, listings and the console.
    pub fn view(&self) -> CoreView<'_> {
        CoreView::new(&self.state, Some(self.policy.as_ref()))
    }

    /// The SLO controller's view of `job` (progress, predicted finish, guaranteed slots)
    /// when the policy has one (`jockey`) and controls that job.
    pub fn slo_state(&self, job: JobId) -> Option<policy::jockey::SloState> {
        self.policy.slo_state(job)
    }

    /// The policy's slot reservations, δ and predicted releases, listing only the
    /// reserved jobs `caller` may see.
    pub fn reservation(&self, caller: &Caller) -> ReservationView {
        view::reservation(&self.state, self.policy.name(), self.policy.reserve_report(), caller)
    }

    /// The jobs with pending tasks in the policy's service order, each with why it
    /// waits; names and owners only of the jobs `caller` may see.
    pub fn queue(&self, caller: &Caller) -> slotmarket_common::protocol::QueueView {
        queue::queue(&self.state, self.policy.as_ref(), caller)
    }

    /// The DP market for `caller`: the price and the standing of every account with
    /// work that `caller` may read (the price counts every account).
    pub fn market(&self, caller: &Caller) -> slotmarket_common::protocol::MarketInfo {
        market::market(&self.state, self.policy.as_ref(), caller)
    }

    /// The admission model's schedule of the admitted deadline jobs at `now` (tests).
    #[cfg(test)]
    pub(crate) fn admission_schedule(&mut self, now: Timestamp) -> admission::Schedule {
        let settings = self.config.admission;
        self.market.schedule(now, &self.state, &settings)
    }

    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    /// Starts a step at `now` whose commands go after those already in `out`.
    fn begin(&mut self, now: Timestamp, out: Vec<Command>) -> Ctx {
        self.latest = self.latest.max(now);
        let changed = std::mem::take(&mut self.changed);
        let config = &self.config;
        let mut cx = Ctx::new(
            self.latest,
            config.agent_timeout,
            config.ended_job_retention,
            config.node_health,
            (out, changed),
        );
        cx.persists = config.persists;
        cx.one_start_report = self.start_reports != StartReports::AcquiredAndRunning;
        if self.start_reports == StartReports::Implied {
            cx.implied_starts = Some(std::mem::take(&mut self.starts));
        }
        cx.task_limits = reactor::TaskLimits {
            per_job: config.max_tasks_per_job,
            per_account: config.max_queued_tasks_per_account,
        };
        cx
    }

    /// Asks the policy for decisions over the current state and carries them out.
    fn schedule(&mut self, cx: &mut Ctx, trigger: Trigger) {
        let decisions = self.policy.schedule(cx.now, &SchedView::new(&self.state), trigger);
        let emptied = reactor::apply_decisions(&mut self.state, cx, decisions);
        self.policy.recycle(emptied);
        reactor::start_launched(&mut self.state, cx);
        for request in self.policy.take_model_requests() {
            cx.push(Command::BuildCompletionModel(Box::new(request)));
        }
    }
}

/// The earlier of two optional times; `None` only when both are.
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
