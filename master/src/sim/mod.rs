//! The simulator behind `slotmarket-sim`: a discrete-event loop with a virtual clock that
//! drives the same sans-IO [`Core`] the master runs, with simulated agents whose task
//! durations come from a trace.
//!
//! - [`workload`]: the trace format, reading and checking it, task durations.
//! - [`generate`]: seeded trace generators (MRM's Table 1 mix, a DRESS-style congested
//!   mix, DP-style user streams).
//! - [`report`]: per-job results, and the run summary (the shared
//!   [`slotmarket_common::metrics`] plus the simulator's own figures) as text, JSON and CSV.
//! - [`plot`]: SVG plots from the CSVs.
//! - [`rng`]: the seeded generators everything random is drawn from.
//! - `segments`: a run cut in time where the cluster drains, its stretches on several
//!   threads, with the whole run's result.
//!
//! # The loop
//!
//! A timeline (`timeline`: earliest first, push order at one time) holds the `SimEvent`s
//! due later; trace arrivals come from a sorted list
//! beside it (half a million arrivals need not sit in the heap). At one instant, heap
//! events go before arrivals and among themselves in the order they were pushed. Each
//! step pops the earliest event and feeds it to the core (`handle`, or `tick` for a
//! wakeup; one the core has since moved earlier is stale and skipped, see `wakeup`),
//! then carries out the commands like an agent would: a `Launch` starts at once (reported
//! `Running`, or under fifo applied by the core itself, see `StartReports`) and ends `Completed` (or `Failed`) after its duration, drawn
//! then (draws are keyed, so not when but which task decides it); a `Kill` is reported `Killed` at once and cancels the pending end, losing
//! the attempt's work. Those reports go back into the core at the same instant, until it
//! has nothing more to say. The run stops when nothing is left to happen, at the horizon,
//! or at the step bound (which only a policy that never settles can reach).

pub mod accounts;
mod agents;
mod ahead;
pub mod generate;
pub mod jockey_experiment;
pub mod jockey_gen;
mod longest;
pub mod market;
pub mod plot;
pub mod report;
pub mod rng;
mod segments;
mod timeline;
mod trace_blocks;
mod wakeup;
pub mod workload;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use slotmarket_common::identity::{Identity, Role};

use crate::core::policy::jockey::{CompletionModel, build_completion_model};
use slotmarket_common::ids::{AgentId, ContainerId, JobId, TaskId};
use slotmarket_common::protocol::{ContainerReport, DataMode, JobHistory, JobState, Response};
use slotmarket_common::spec::DeadlineSpec;
use slotmarket_common::time::Timestamp;
use thiserror::Error;

use crate::core::{
    Command, Core, CoreConfig, Event, KillReason, NodeHealth, Persist, Persists, RequestId, StartReports,
    invariants,
};
use agents::{Agents, Place};
use longest::LongestTasks;
use report::{JobResult, Outcome, SloSample, SlotUsage};
use timeline::Timeline;
use wakeup::Wakeup;
use workload::{Trace, secs_to_ms, task_key};

pub use accounts::AccountEvent;

/// Request ids of account events start here, far above any trace index, so their
/// replies are told apart from submits'.
const ACCOUNT_REQUESTS: u64 = 1 << 40;

/// How a run is set up (besides the trace).
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The core's settings; the policy and its options come from here. The simulator
    /// turns loss by silence off (its agents never go quiet) and drops ended jobs.
    pub core: CoreConfig,
    /// Simulated agents.
    pub nodes: u32,
    /// Map slots per agent.
    pub map_slots: u32,
    /// Reduce slots per agent.
    pub reduce_slots: u32,
    /// Seed for drawn durations, noise and failures.
    pub seed: u64,
    /// Relative standard deviation of per-attempt noise on task durations (0: none).
    pub noise: f64,
    /// Probability that an attempt fails (part-way through its duration).
    pub fail_prob: f64,
    /// Stop at this virtual time even if work is left.
    pub horizon: Option<Timestamp>,
    /// Most events to process; `None`: a bound derived from the trace's size.
    pub max_steps: Option<u64>,
    /// Run `invariants::check` after every call into the core (slow; for tests).
    pub check_invariants: bool,
    /// MRM's market: each job buys a deadline before it is submitted; `None`: jobs are
    /// submitted as the trace gives them.
    pub market: Option<market::MarketConfig>,
    /// Accounts created with budgets, and spending-rate changes, at given times (DP).
    pub account_events: Vec<AccountEvent>,
    /// Keep every ended job's history record in [`SimRun::history`] (for estimator
    /// evaluation; off for big runs, where it would hold every task's time).
    pub keep_history: bool,
    /// Threads that run the trace's stretches at once where the run can be cut exactly
    /// ([`segments`]); 1, or a run that cannot be cut: one thread drives the core and a
    /// second prepares arriving jobs ahead of it.
    pub threads: usize,
}

impl Default for SimConfig {
    /// MRM's cluster: 40 nodes with 2 map and 2 reduce slots each, FIFO, no noise.
    fn default() -> SimConfig {
        SimConfig {
            core: CoreConfig::default(),
            nodes: 40,
            map_slots: 2,
            reduce_slots: 2,
            seed: 1,
            noise: 0.0,
            fail_prob: 0.0,
            horizon: None,
            max_steps: None,
            check_invariants: false,
            market: None,
            account_events: Vec::new(),
            keep_history: false,
            threads: 1,
        }
    }
}

/// Why a run could not finish.
#[derive(Debug, Error)]
pub enum SimError {
    /// The core's state broke an invariant.
    #[error("invariant broken at {at} (step {step}): {message}")]
    Invariant {
        /// Virtual time.
        at: Timestamp,
        /// Events processed.
        step: u64,
        /// What broke.
        message: String,
    },
    /// The step bound was reached: a policy that keeps rescheduling without progress.
    #[error(
        "stopped after {steps} steps at {at} without finishing; raise --max-steps if the trace is that big"
    )]
    StepBound {
        /// Events processed.
        steps: u64,
        /// Virtual time.
        at: Timestamp,
    },
    /// The cluster has no node, or its nodes no slot.
    #[error("the cluster needs at least one node with a slot")]
    NoSlots,
    /// The failure probability is not a probability.
    #[error("fail_prob must be in [0, 1], got {0}")]
    FailProb(f64),
    /// The noise is negative or not a number.
    #[error("noise must be a finite number >= 0, got {0}")]
    Noise(f64),
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Events processed (arrivals, task ends, wakeups).
    pub steps: u64,
    /// Calls into the core.
    pub core_calls: u64,
    /// Task attempts launched.
    pub attempts: u64,
    /// Attempts killed while their job was still running (policy preemptions).
    pub preemptions: u64,
    /// Attempts that failed.
    pub failed_attempts: u64,
    /// Slot time spent on attempts that were killed or failed, in milliseconds.
    pub lost_work_ms: u64,
    /// Slot time in use, per kind (map, reduce), in milliseconds.
    pub busy_ms: [u64; 2],
    /// Virtual time when the run stopped.
    pub stopped_at: Timestamp,
    /// Whether the horizon cut the run short.
    pub hit_horizon: bool,
    /// Jockey completion models built for the core.
    pub models_built: u64,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct SimRun {
    /// One result per trace job, in trace order.
    pub jobs: Vec<JobResult>,
    /// Slot use over time.
    pub usage: SlotUsage,
    /// Counters.
    pub stats: RunStats,
    /// What each trace job bought, in trace order (all `None` without a market).
    pub purchases: Vec<Option<market::Purchase>>,
    /// Ended jobs' history records in the order they ended (empty unless
    /// [`SimConfig::keep_history`]).
    pub history: Vec<JobHistory>,
}

/// Something due at a virtual time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum SimEvent {
    /// A task attempt's process ends (unless it was killed first), with where the
    /// agents keep it.
    End(ContainerId, Place),
    /// The core asked to be ticked.
    Wakeup,
    /// Trace job `ix` is submitted (a follower, whose time depends on another job).
    Arrive(u32),
    /// Account event `i` of the config happens.
    Account(u32),
    /// Trace job `ix` asks for its `n`th deadline move.
    MoveDeadline(u32, u32),
}

/// Request ids at and above this are deadline moves, not submits (whose id is the trace index).
const MOVE_REQUESTS: u64 = 1 << 41;

/// Runs `trace` under `config`: cut in time on [`SimConfig::threads`] threads where
/// that finds exactly what one run finds ([`segments`]), else whole, one thread driving
/// the core while a second prepares what does not depend on it ([`ahead`]: each arriving
/// job's spec and drawn task durations).
pub fn run(trace: &Trace, config: &SimConfig) -> Result<SimRun, SimError> {
    let arrivals = arrival_order(trace);
    match segments::plan(trace, config, &arrivals) {
        Some(cuts) => segments::run(trace, config, &arrivals, &cuts),
        None => run_whole_in(trace, config, &arrivals),
    }
}

/// Runs `trace` under `config` whole.
#[cfg(test)]
fn run_whole(trace: &Trace, config: &SimConfig) -> Result<SimRun, SimError> {
    run_whole_in(trace, config, &arrival_order(trace))
}

fn run_whole_in(trace: &Trace, config: &SimConfig, arrivals: &[u32]) -> Result<SimRun, SimError> {
    let mut sim = Simulation::new(trace, config, arrivals)?;
    let (ahead, send) = ahead::channel();
    sim.ahead = Some(ahead);
    let order = arrivals;
    let seed = config.seed;
    std::thread::scope(|scope| {
        scope.spawn(move || ahead::prepare(trace, order, seed, send));
        // The run drops its end of the channel when it returns, which stops the thread
        // if it is still preparing (a run cut short); the scope then joins it.
        sim.start()?;
        sim.advance()?;
        Ok(sim.finish())
    })
}

/// The jobs that arrive on their own (no `follows`), by arrival time then trace order.
fn arrival_order(trace: &Trace) -> Vec<u32> {
    let mut arrivals: Vec<u32> =
        (0..trace.len() as u32).filter(|&ix| trace.follows(ix as usize).is_none()).collect();
    arrivals.sort_by_key(|&ix| (trace.jobs[ix as usize].arrival(), ix));
    arrivals
}

/// Why [`Simulation::advance`] returned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Advanced {
    /// Nothing is left to happen, or the horizon was reached.
    Done,
    /// The next step would submit the arrival at the pause (see `Simulation::pause`).
    Paused,
}

/// When the `n`th of `arrivals` (trace indices) arrives, if there is one.
fn arrival_at(trace: &Trace, arrivals: &[u32], n: usize) -> Option<Timestamp> {
    arrivals.get(n).map(|&ix| trace.jobs[ix as usize].arrival())
}

struct Simulation<'t> {
    trace: &'t Trace,
    config: SimConfig,
    core: Core,
    now: Timestamp,
    /// Events due later, earliest first and in push order at one time.
    heap: Timeline<SimEvent>,
    /// Jobs that arrive on their own (no `follows`), by arrival time then trace order.
    arrivals: &'t [u32],
    next_arrival: usize,
    /// The position in `arrivals` whose submission `advance` stops before (a time
    /// segment's end), if any.
    pause: Option<usize>,
    /// The position in `arrivals` a time segment's run started at (`None`: a whole run).
    segment: Option<usize>,
    /// When `arrivals[next_arrival]` arrives: asked before every step, so converted from
    /// the trace's seconds once per job rather than once per step.
    next_arrival_at: Option<Timestamp>,
    /// Jobs submitted when a job ends, by that job.
    followers: BTreeMap<u32, Vec<u32>>,
    agents: Agents,
    jobs: Vec<JobResult>,
    /// Trace index of each job the core admitted, at the position of the id its reply
    /// gave: the core hands out job ids in sequence, so a vector indexed by the id is
    /// dense, and every launch reads it (a hashed look-up each was 2 % of a run).
    job_of: Vec<Option<u32>>,
    /// Submitted jobs that have not ended (nor been rejected).
    open_jobs: usize,
    /// The one wakeup that counts among those in the heap.
    wakeup: Wakeup,
    /// `Arrive` events in the heap.
    queued_arrivals: u64,
    /// Buffers of `carry_out`, kept between steps so that a step allocates only what it
    /// hands to the core.
    work: VecDeque<Vec<Command>>,
    /// Emptied command buffers, handed to the core again (`handle_into`): a step's calls
    /// allocate no command buffer of their own.
    spare: Vec<Vec<Command>>,
    batches: Vec<(AgentId, Vec<ContainerReport>)>,
    /// Emptied report buffers, refilled for the next batch (`Core::reports_into` drains
    /// a batch and leaves its room).
    spare_reports: Vec<Vec<ContainerReport>>,
    /// Completion models built for the core this step, handed back as events.
    models: Vec<CompletionModel>,
    stats: RunStats,
    purchases: Vec<Option<market::Purchase>>,
    history: Vec<JobHistory>,
    /// Admitted deadline jobs that have not ended, whose controller state is sampled
    /// at every tick, with their trace index.
    slo_open: Vec<(JobId, u32)>,
    /// Each stage's longest task drawn, for the critical paths at the end.
    longest: LongestTasks,
    /// Jobs prepared by the second thread, in arrival order (`None`: prepared here).
    ahead: Option<ahead::Ahead>,
    /// Drawn task durations of each submitted job that has not ended, by trace index,
    /// when the second thread prepared them.
    drawn: Vec<Option<ahead::Durations>>,
    /// The critical path of each job the second thread prepared, by trace index.
    critical_paths: Vec<Option<u64>>,
}

impl<'t> Simulation<'t> {
    /// A run of `trace` whose arrivals come in the order of `arrivals` (`arrival_order`).
    fn new(trace: &'t Trace, config: &SimConfig, arrivals: &'t [u32]) -> Result<Simulation<'t>, SimError> {
        if config.nodes == 0 || config.map_slots + config.reduce_slots == 0 {
            return Err(SimError::NoSlots);
        }
        if !(0.0..=1.0).contains(&config.fail_prob) {
            return Err(SimError::FailProb(config.fail_prob));
        }
        if !(config.noise >= 0.0 && config.noise.is_finite()) {
            return Err(SimError::Noise(config.noise));
        }
        // Simulated failures strike at random, not by node: no node is ever unhealthy,
        // and a retry has no reason to keep off the node its task failed on.
        let node_health = NodeHealth { fast_failures: 0, retry_elsewhere: false, ..config.core.node_health };
        // No store: only the writes the run reads (job outcomes, and history records
        // when they are kept) are built.
        let persists = if config.keep_history { Persists::JobStatesAndHistory } else { Persists::JobStates };
        let core_config = CoreConfig {
            persists,
            agent_timeout: Duration::MAX,
            ended_job_retention: Duration::ZERO,
            node_health,
            max_tasks_per_job: u64::MAX,
            max_queued_tasks_per_account: u64::MAX,
            ..config.core.clone()
        };
        let mut followers: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for ix in 0..trace.len() {
            if let Some(leader) = trace.follows(ix) {
                followers.entry(leader as u32).or_default().push(ix as u32);
            }
        }
        let next_arrival_at = arrival_at(trace, arrivals, 0);
        let mut core = Core::new(core_config);
        // Nobody watches a simulated job: its outcome comes from `Persist::JobState`.
        core.set_job_notices(false);
        // The simulated agents start a task in the instant it is launched. They send no
        // report of it where the core can apply the start in the step that launched it
        // (fifo), which spares a report batch and a core call per task, and one
        // `Running` report (for `Acquired` and `Running`) elsewhere.
        core.set_start_reports(StartReports::Implied);
        let report_starts = core.start_reports() != StartReports::Implied;
        Ok(Simulation {
            trace,
            config: config.clone(),
            core,
            now: Timestamp::ZERO,
            heap: Timeline::default(),
            arrivals,
            next_arrival: 0,
            pause: None,
            segment: None,
            next_arrival_at,
            followers,
            agents: Agents::new(config.noise, config.fail_prob, trace.len(), report_starts),
            jobs: (0..trace.len()).map(JobResult::new).collect(),
            job_of: Vec::new(),
            open_jobs: 0,
            wakeup: Wakeup::default(),
            queued_arrivals: 0,
            work: VecDeque::new(),
            spare: Vec::new(),
            batches: Vec::new(),
            spare_reports: Vec::new(),
            models: Vec::new(),
            stats: RunStats::default(),
            purchases: vec![None; if config.market.is_some() { trace.len() } else { 0 }],
            history: Vec::new(),
            slo_open: Vec::new(),
            longest: LongestTasks::new(trace),
            ahead: None,
            drawn: Vec::new(),
            critical_paths: Vec::new(),
        })
    }

    /// Makes the run a time segment's, starting at position `first` of the arrivals.
    fn start_segment_at(&mut self, first: usize) {
        self.next_arrival = first;
        self.next_arrival_at = arrival_at(self.trace, self.arrivals, first);
        self.segment = Some(first);
    }

    /// Joins the agents and queues the account events: what comes before the first step.
    fn start(&mut self) -> Result<(), SimError> {
        self.join_agents()?;
        for (i, e) in self.config.account_events.clone().iter().enumerate() {
            self.push(e.at, SimEvent::Account(i as u32));
        }
        Ok(())
    }

    /// Steps until nothing is left to happen, the horizon, or the pause.
    fn advance(&mut self) -> Result<Advanced, SimError> {
        let bound = self
            .config
            .max_steps
            .unwrap_or_else(|| 1_000_000 + 1000 * (self.trace.total_tasks() + self.trace.len() as u64));
        while let Some(at) = self.next_time() {
            if self.drained() {
                // Only wakeups are left: a periodic policy would tick forever.
                break;
            }
            if self.at_pause() {
                return Ok(Advanced::Paused);
            }
            if self.config.horizon.is_some_and(|h| at > h) {
                self.stats.hit_horizon = true;
                break;
            }
            if self.stats.steps >= bound {
                return Err(SimError::StepBound { steps: self.stats.steps, at: self.now });
            }
            self.stats.steps += 1;
            self.now = at;
            self.step()?;
        }
        Ok(Advanced::Done)
    }

    /// Whether the next step would submit the arrival at the pause (heap events go first
    /// at one instant, as in `step`).
    fn at_pause(&self) -> bool {
        if self.pause != Some(self.next_arrival) {
            return false;
        }
        let Some(arrival) = self.next_arrival_at else { return false };
        self.heap.peek().is_none_or(|t| t > arrival)
    }

    /// Whether the run has drained: every job submitted has ended, no task runs, no
    /// wakeup is to come and no job waits on another (a run that is cut has no account
    /// events or deadline moves, the heap's other events). From here a core that forgets
    /// when idle decides as a fresh one would.
    fn idle(&self) -> bool {
        self.open_jobs == 0
            && self.queued_arrivals == 0
            && self.agents.idle()
            && self.models.is_empty()
            && !self.wakeup.pending()
            && self.followers.is_empty()
    }

    /// When the next event is due: the heap's head or the next trace arrival.
    fn next_time(&self) -> Option<Timestamp> {
        let heap = self.heap.peek();
        let arrival = self.next_arrival_at;
        match (heap, arrival) {
            (Some(h), Some(a)) => Some(h.min(a)),
            (h, a) => h.or(a),
        }
    }

    /// Processes the next event, heap first on ties.
    fn step(&mut self) -> Result<(), SimError> {
        let heap_due = self.heap.peek().is_some_and(|t| t <= self.now);
        if !heap_due {
            let ix = self.arrivals[self.next_arrival];
            self.next_arrival += 1;
            self.next_arrival_at = arrival_at(self.trace, self.arrivals, self.next_arrival);
            let prepared = self.ahead.as_mut().and_then(|ahead| ahead.take(ix));
            return self.submit(ix, prepared);
        }
        let Some((at, event)) = self.heap.pop() else { return Ok(()) };
        match event {
            SimEvent::End(container, place) => match self.agents.end(container, place, self.now) {
                Some((agent, report)) => {
                    let out = self.call_report(agent, report)?;
                    self.carry_out(out)
                }
                // Killed before it could end.
                None => Ok(()),
            },
            SimEvent::Wakeup => {
                if !self.wakeup.take_due(at) {
                    // Superseded by an earlier wakeup that has been ticked already.
                    return Ok(());
                }
                let mut out = self.spare.pop().unwrap_or_default();
                self.core.tick_into(self.now, &mut out);
                let out = self.after_call(out)?;
                self.sample_slo_jobs();
                self.carry_out(out)
            }
            SimEvent::Arrive(ix) => {
                self.queued_arrivals -= 1;
                self.submit(ix, None)
            }
            SimEvent::Account(i) => self.account_event(i),
            SimEvent::MoveDeadline(ix, n) => self.move_deadline(ix, n),
        }
    }

    fn push(&mut self, at: Timestamp, event: SimEvent) {
        if let SimEvent::Arrive(_) = event {
            self.queued_arrivals += 1;
        }
        self.heap.push(at, event);
    }

    /// Whether nothing but wakeups can happen any more: every arrival submitted, every
    /// submitted job ended, no task running.
    fn drained(&self) -> bool {
        self.next_arrival == self.arrivals.len()
            && self.queued_arrivals == 0
            && self.open_jobs == 0
            && self.agents.idle()
    }

    fn join_agents(&mut self) -> Result<(), SimError> {
        for n in 0..self.config.nodes {
            let event = Event::AgentJoined {
                agent: AgentId(n + 1),
                node: format!("node-{:04}", n + 1),
                map_slots: self.config.map_slots,
                reduce_slots: self.config.reduce_slots,
                live_containers: Vec::new(),
                data_mode: DataMode::Shared,
                data_dir_id: String::new(),
            };
            let out = self.call(event)?;
            self.carry_out(out)?;
        }
        Ok(())
    }

    /// Creates an account (as an admin) or sets a rate (as its user).
    fn account_event(&mut self, i: u32) -> Result<(), SimError> {
        let Some(e) = self.config.account_events.get(i as usize).cloned() else { return Ok(()) };
        let request = RequestId(ACCOUNT_REQUESTS + u64::from(i));
        let account = slotmarket_common::ids::AccountId(e.user.clone());
        if let Some(budget) = e.budget {
            let caller = Identity { role: Role::Admin, principal: "sim".into() };
            let add = Event::AccountAddRequested {
                request,
                caller,
                account: account.clone(),
                budget: Some(budget).filter(|b| b.is_positive()),
                members: Vec::new(),
            };
            let out = self.call(add)?;
            self.carry_out(out)?;
        }
        if let Some(rate) = e.rate {
            let caller = Identity { role: Role::User, principal: e.user.clone() };
            let out = self.call(Event::RateSetRequested { request, caller, account: Some(account), rate })?;
            self.carry_out(out)?;
        }
        Ok(())
    }

    /// Trace job `ix` asks, as its user, for its `n`th deadline move (if it still runs).
    fn move_deadline(&mut self, ix: u32, n: u32) -> Result<(), SimError> {
        let trace_job = &self.trace.jobs[ix as usize];
        let (Some(job), Some(submitted), Some(step)) = (
            self.jobs[ix as usize].job,
            self.jobs[ix as usize].submitted,
            trace_job.deadline_moves.get(n as usize),
        ) else {
            return Ok(());
        };
        if self.jobs[ix as usize].ended.is_some() {
            return Ok(());
        }
        let deadline = Some(submitted + Duration::from_millis(secs_to_ms(step.deadline_after_s)));
        let caller = Identity { role: Role::User, principal: trace_job.user.clone() };
        let request = RequestId(MOVE_REQUESTS + u64::from(ix));
        let out = self.call(Event::DeadlineSetRequested { request, caller, job, deadline })?;
        self.carry_out(out)
    }

    /// Submits trace job `ix` as its user, with what the second thread prepared for it
    /// if it did.
    fn submit(&mut self, ix: u32, prepared: Option<ahead::Prepared>) -> Result<(), SimError> {
        let job = &self.trace.jobs[ix as usize];
        self.open_jobs += 1;
        self.jobs[ix as usize].submitted = Some(self.now);
        let caller = Identity { role: Role::User, principal: job.user.clone() };
        let mut spec = match prepared {
            Some(prepared) => {
                if self.drawn.len() <= ix as usize {
                    self.drawn.resize_with(self.trace.len(), || None);
                    self.critical_paths.resize(self.trace.len(), None);
                }
                self.drawn[ix as usize] = Some(prepared.durations);
                self.critical_paths[ix as usize] = Some(prepared.critical_path_ms);
                prepared.spec
            }
            None => job.spec(),
        };
        // A follower submitted after its trace deadline would be refused as asking for a
        // time already passed; it runs without one (its metrics still use the trace's).
        spec.deadline = spec.deadline.filter(|d| d.resolve(self.now) > self.now);
        if let Some(config) = self.config.market {
            spec.estimate = Some(market::estimate_for(job, ix, self.config.seed, config.estimate_noise));
            match market::buy(&mut self.core, self.now, job, &spec, &config) {
                Some(offer) => {
                    spec.deadline = Some(DeadlineSpec::At(offer.deadline));
                    self.purchases[ix as usize] = Some(market::Purchase { offer });
                }
                None => {
                    self.jobs[ix as usize].outcome = Outcome::Rejected;
                    self.end(ix, self.now);
                    return Ok(());
                }
            }
        }
        let event = Event::JobSubmitted { request: RequestId(u64::from(ix)), caller, spec };
        let out = self.call(event)?;
        self.carry_out(out)
    }

    /// Feeds one event to the core.
    fn call(&mut self, event: Event) -> Result<Vec<Command>, SimError> {
        let mut out = self.spare.pop().unwrap_or_default();
        self.core.handle_into(self.now, event, &mut out);
        self.after_call(out)
    }

    /// Feeds one agent's report batch to the core (as `Event::ContainerReports` would),
    /// keeping the emptied buffer for the next batch.
    fn call_reports(
        &mut self,
        agent: AgentId,
        mut reports: Vec<ContainerReport>,
    ) -> Result<Vec<Command>, SimError> {
        let mut out = self.spare.pop().unwrap_or_default();
        self.core.reports_into(self.now, agent, &mut reports, &mut out);
        self.spare_reports.push(reports);
        self.after_call(out)
    }

    /// Feeds one agent's report of one container to the core (a batch of one).
    fn call_report(&mut self, agent: AgentId, report: ContainerReport) -> Result<Vec<Command>, SimError> {
        let mut out = self.spare.pop().unwrap_or_default();
        self.core.report_into(self.now, agent, report, &mut out);
        self.after_call(out)
    }

    /// Bookkeeping after every core call: invariants, the next wakeup.
    fn after_call(&mut self, out: Vec<Command>) -> Result<Vec<Command>, SimError> {
        self.stats.core_calls += 1;
        if self.config.check_invariants {
            invariants::check(&self.core).map_err(|message| SimError::Invariant {
                at: self.now,
                step: self.stats.steps,
                message,
            })?;
        }
        if let Some(at) = self.core.next_wakeup().and_then(|at| self.wakeup.request(at, self.now)) {
            self.push(at, SimEvent::Wakeup);
        }
        Ok(out)
    }

    /// Carries out commands as agents and clients would, feeding the agents' reports
    /// back at the same instant until the core has nothing more to say.
    fn carry_out(&mut self, out: Vec<Command>) -> Result<(), SimError> {
        self.run_commands(out);
        // Most calls leave nothing to feed back (under fifo a launch reports nothing).
        if !self.agents.owes_reports() && self.models.is_empty() {
            return Ok(());
        }
        let mut work = std::mem::take(&mut self.work);
        let mut batches = std::mem::take(&mut self.batches);
        let result = self.feed_back(&mut work, &mut batches);
        work.clear();
        batches.clear();
        (self.work, self.batches) = (work, batches);
        result
    }

    /// Runs one call's commands and keeps the emptied buffer for the next call.
    fn run_commands(&mut self, mut out: Vec<Command>) {
        // Read in place: moving each command out of the buffer copied it whole.
        for command in &out {
            self.command(command);
        }
        out.clear();
        self.spare.push(out);
    }

    /// Feeds the agents' reports and the built models back to the core, and carries out
    /// what it answers, until nothing is left.
    fn feed_back(
        &mut self,
        work: &mut VecDeque<Vec<Command>>,
        batches: &mut Vec<(AgentId, Vec<ContainerReport>)>,
    ) -> Result<(), SimError> {
        loop {
            self.agents.take_reports(batches, &mut self.spare_reports);
            for (agent, reports) in batches.drain(..) {
                work.push_back(self.call_reports(agent, reports)?);
            }
            for model in std::mem::take(&mut self.models) {
                work.push_back(self.call(Event::CompletionModelBuilt(Box::new(model)))?);
            }
            let Some(out) = work.pop_front() else { return Ok(()) };
            self.run_commands(out);
        }
    }

    fn command(&mut self, command: &Command) {
        match command {
            Command::Launch { agent, launch } => {
                let agent = *agent;
                let Some(ix) = self.trace_ix(launch.task.job) else { return };
                let (key, base, ahead) = self.base_duration(ix, launch.task);
                if !ahead {
                    // A job prepared ahead came with its critical path.
                    self.longest.note(ix, launch.task.stage.0, base, launch.attempt.0 == 1);
                }
                let (end, place) = self.agents.launch(agent, launch, ix, (key, base), self.now);
                self.jobs[ix as usize].attempts += 1;
                self.stats.attempts += 1;
                self.push(end, SimEvent::End(launch.container, place));
            }
            Command::Kill { container, reason, .. } => {
                let killed = self.agents.kill(*container, self.now);
                // The core says why; only a policy's preemption counts as one (the other
                // kills clean up after a job that failed or was cancelled).
                if let (Some(ix), KillReason::Preempted { .. }) = (killed, *reason) {
                    self.stats.preemptions += 1;
                    self.jobs[ix as usize].kills += 1;
                }
            }
            Command::Persist(Persist::JobState { job, state, at, .. }) => self.job_state(*job, *state, *at),
            Command::Reply { request, response } => self.reply(*request, response),
            Command::BuildCompletionModel(request) => {
                // Jockey's offline simulator, run at once: the virtual clock stands still.
                let model = build_completion_model(request);
                self.stats.models_built += 1;
                self.models.push(model);
            }
            Command::Persist(Persist::History { record, .. }) if self.config.keep_history => {
                self.history.push((**record).clone());
            }
            Command::Persist(_) | Command::JobChanged { .. } | Command::DropAgent { .. } => {}
        }
    }

    /// The key of a task of submitted job `ix` and its drawn duration, drawn when it
    /// launches (draws are keyed, so it is the same whenever that is) unless the second
    /// thread drew it ahead (then the key is hashed only if an attempt's noise or failure
    /// is drawn from it, and the third value is true). The key also seeds each attempt's
    /// noise, so it is hashed once for both.
    fn base_duration(&self, ix: u32, task: TaskId) -> (u64, u64, bool) {
        let key = || task_key(self.config.seed, ix, task.stage.0, task.index);
        let drawn = self.drawn.get(ix as usize).and_then(Option::as_ref);
        match drawn.and_then(|d| d.get(task.stage.0, task.index)) {
            Some(ms) => (if self.agents.draws_per_attempt() { key() } else { 0 }, ms, true),
            None => {
                let key = key();
                (key, self.trace.jobs[ix as usize].keyed_task_ms(task.stage.0, task.index, key), false)
            }
        }
    }

    fn trace_ix(&self, job: JobId) -> Option<u32> {
        usize::try_from(job.0).ok().and_then(|at| self.job_of.get(at).copied().flatten())
    }

    fn reply(&mut self, request: RequestId, response: &Response) {
        if request.0 >= ACCOUNT_REQUESTS {
            // An account event's or a deadline move's answer: nothing to record (a
            // refusal leaves things as they were).
            return;
        }
        let ix = request.0 as u32;
        match response {
            &Response::Submitted { job } => {
                if let Ok(at) = usize::try_from(job.0) {
                    if self.job_of.len() <= at {
                        self.job_of.resize(at + 1, None);
                    }
                    self.job_of[at] = Some(ix);
                }
                self.jobs[ix as usize].job = Some(job);
                if self.trace.jobs[ix as usize].deadline().is_some() {
                    self.slo_open.push((job, ix));
                }
                for (n, step) in self.trace.jobs[ix as usize].deadline_moves.iter().enumerate() {
                    let at = self.now + Duration::from_millis(secs_to_ms(step.after_s));
                    self.push(at, SimEvent::MoveDeadline(ix, n as u32));
                }
            }
            _ => {
                self.jobs[ix as usize].outcome = Outcome::Rejected;
                self.end(ix, self.now);
            }
        }
    }

    fn job_state(&mut self, job: JobId, state: JobState, at: Timestamp) {
        let Some(ix) = self.trace_ix(job) else { return };
        let result = &mut self.jobs[ix as usize];
        match state {
            JobState::Pending => {}
            JobState::Running => result.started = result.started.or(Some(at)),
            JobState::Completed | JobState::Failed | JobState::Cancelled => {
                result.outcome = state.into();
                // The policy moves a job's controller state aside once it sees the job
                // ended, which is after this command; the state now is up to the last step.
                result.guaranteed = self.core.slo_state(job).map(|s| {
                    let since = s.accounted_to.map_or(0, |t| at.0.saturating_sub(t.0));
                    (s.guaranteed_slot_ms + u64::from(s.guarantee) * since, s.peak_guarantee)
                });
                result.spare_ms = self.core.slo_state(job).map(|s| {
                    let since = s.accounted_to.map_or(0, |t| at.0.saturating_sub(t.0));
                    s.spare_slot_ms + u64::from(s.running.saturating_sub(s.guarantee)) * since
                });
                result.slo_final = self.core.slo_state(job).map(|s| Box::new(s.accounted_until(at)));
                self.end(ix, at);
            }
        }
    }

    /// Records the controller's state of every open deadline job (Fig. 6).
    fn sample_slo_jobs(&mut self) {
        for &(job, ix) in &self.slo_open {
            let Some(s) = self.core.slo_state(job) else { continue };
            self.jobs[ix as usize].slo_timeline.push(SloSample {
                at_ms: self.now.0,
                guarantee: s.guarantee,
                running: s.running,
                progress: s.progress,
                predicted_finish_ms: s.predicted_finish.map(|t| t.0),
                raw: s.raw,
                slowdown: s.slowdown,
                ready: s.ready,
            });
        }
    }

    /// Job `ix` ended (or was rejected) at `at`: it is no longer open and its followers
    /// may come.
    fn end(&mut self, ix: u32, at: Timestamp) {
        self.slo_open.retain(|&(_, open)| open != ix);
        // No attempt of an ended job launches again.
        if let Some(drawn) = self.drawn.get_mut(ix as usize) {
            *drawn = None;
        }
        if self.jobs[ix as usize].ended.replace(at).is_none() {
            self.open_jobs -= 1;
        }
        self.release_followers(ix);
    }

    /// Schedules the jobs that follow job `ix`, now that it has ended.
    fn release_followers(&mut self, ix: u32) {
        let Some(followers) = self.followers.remove(&ix) else { return };
        for f in followers {
            let job = &self.trace.jobs[f as usize];
            let at = job.arrival().max(self.now + Duration::from_millis(job.think_ms()));
            self.push(at, SimEvent::Arrive(f));
        }
    }

    fn finish(mut self) -> SimRun {
        let totals = self.agents.close(self.now);
        self.stats.busy_ms = totals.busy_ms;
        self.stats.lost_work_ms = totals.lost_ms;
        self.stats.failed_attempts = totals.failed;
        self.stats.stopped_at = self.now;
        // A time segment's run answers for the jobs it submitted; a whole run for all.
        let owned: Vec<usize> = match self.segment {
            Some(first) => self.arrivals[first..self.next_arrival].iter().map(|&ix| ix as usize).collect(),
            None => (0..self.trace.len()).collect(),
        };
        for ix in owned {
            let (result, job) = (&mut self.jobs[ix], &self.trace.jobs[ix]);
            result.slot_ms = totals.job_busy_ms.get(ix).copied().unwrap_or(0);
            let ahead = self.critical_paths.get(ix).copied().flatten();
            result.critical_path_ms = match (ahead, self.longest.of(self.trace, ix as u32)) {
                (Some(ms), _) => ms,
                (None, Some(longest)) => job.critical_path_through(longest),
                (None, None) => job.critical_path_ms(ix as u32, self.config.seed),
            };
            if result.submitted.is_some() && result.ended.is_none() {
                result.outcome = Outcome::Unfinished;
            }
        }
        SimRun {
            jobs: self.jobs,
            usage: totals.usage,
            stats: self.stats,
            purchases: self.purchases,
            history: self.history,
        }
    }
}
