//! `jockey`: per-job SLO control (Jockey, §3–4). Every control interval each running job
//! with a deadline gets a guaranteed number of slots: its progress (an indicator over its
//! profile from history) indexes a completion-time model C(p, a), the raw allocation is
//! the smallest that maximises the utility of the predicted finish (with slack, less the
//! dead zone; the job spec's own utility curve, or the policy's), and hysteresis smooths
//! it. Guaranteed slots go first to their jobs (taken
//! back by preemption when they are held by others); every slot a guarantee leaves
//! unused goes to the other jobs in admission order, and what they leave free to deadline
//! jobs' ready tasks beyond their guarantee (spare tokens, §2.1: the lowest priority, the
//! first preempted), so the cluster stays work-conserving. With `demand_cap` the
//! guarantee a job requests is the control step's target capped at the tasks it has
//! running and ready, recomputed at every scheduling call.
//!
//! Variants for the paper's comparison: without adaptation (the first model-based
//! allocation, kept), without the simulator (Amdahl's model) and max allocation.

mod config;
mod control;
mod model;
mod predict;
mod profile;
mod progress;
mod settings;

use std::collections::BTreeMap;

use slotmarket_common::ids::JobId;
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::preempt::{kills_in_flight, newest_of};
use super::slots::FreeSlots;
use super::{Assignment, Decisions, JobInfo, KillReason, Policy, PolicyName, SchedView, Trigger};

pub use config::{JockeyConfig, Predictor};
use control::carry_round;
pub use control::{Control, Utility};
pub use model::{
    Amdahl, BUCKETS, CompletionModel, INTERVAL, ModelRequest, allocation_grid, build_completion_model,
};
pub use profile::{JobProfile, SLOWDOWN_PRIOR_TASKS, SLOWDOWN_RANGE, StageProfile};
pub use progress::Indicator;
pub use settings::{JockeySettings, JockeySettingsError, PRESETS};

/// Points of C(p, a)'s spread a model keeps for [`JockeyConfig::expected_utility`].
const SPREAD_POINTS: u32 = 20;

/// What the controller knows of one SLO job.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct SloState {
    /// The smoothed allocation `A_t^s`; `None` before the first step.
    pub smoothed: Option<f64>,
    /// The guaranteed slots now.
    pub guarantee: u32,
    /// Progress at the last step.
    pub progress: f64,
    /// Predicted finish at the last step, with slack, under the guarantee, as `status`
    /// shows it: with `stage_reserve_chance`, the finish if no task left straggles past
    /// its profile, the outcome the allocation is sized for (the straggler is priced by
    /// its chance, not added).
    pub predicted_finish: Option<Timestamp>,
    /// The same with every straggler reserve added in full, as the ahead test reads the
    /// last step's prediction (equal to `predicted_finish` without `stage_reserve_chance`).
    pub reserved_finish: Option<Timestamp>,
    /// The allocation is kept as it is (no adaptation, once model-based).
    pub frozen: bool,
    /// Guaranteed slot-milliseconds so far: the guarantee integrated over time.
    pub guaranteed_slot_ms: u64,
    /// The largest guarantee so far.
    pub peak_guarantee: u32,
    /// When `guaranteed_slot_ms` was last brought up to date.
    pub accounted_to: Option<Timestamp>,
    /// Tasks it ran after the last scheduling call (those it was just assigned included).
    pub running: u32,
    /// How much slower than its profile its completed tasks ran, at the last step (1:
    /// as profiled, or not measured).
    pub slowdown: f64,
    /// The interval of the finish under the guarantee, without slack, at the last step
    /// (the model's [`model::INTERVAL`] quantiles); `None` without a simulated model.
    pub finish_interval: Option<(Timestamp, Timestamp)>,
    /// The deadline the last step controlled for.
    pub deadline: Option<Timestamp>,
    /// The raw allocation `A^r` of the last step, before smoothing.
    pub raw: u32,
    /// Tasks it had ready (not yet running) at the last control step.
    pub ready: u32,
    /// Slot-milliseconds it ran above its guarantee (on spare slots) so far.
    pub spare_slot_ms: u64,
    /// The guarantee the last control step sized (the smoothed allocation, rounded up),
    /// before [`JockeyConfig::demand_cap`] caps it at what the job can run.
    pub target: u32,
    /// The target integrated over time, in slot-milliseconds: without the demand cap the
    /// same as `guaranteed_slot_ms`, with it the guarantee the step sized.
    pub target_slot_ms: u64,
    /// Guaranteed slot-milliseconds the job's running tasks used (`min(guarantee,
    /// running)` integrated).
    pub used_slot_ms: u64,
    /// Guaranteed slot-milliseconds held above what ran while the job had no task
    /// waiting for a slot (a barrier, the tail): a guarantee the job could not use.
    pub idle_slot_ms: u64,
    /// Tasks still waiting for a slot after the last scheduling call's assignments.
    pub waiting: u32,
    /// The smoothed allocation less the guarantee, summed over the control steps, with
    /// [`JockeyConfig::carry_rounding`]: what the next step's rounding makes up.
    pub rounding_carry: f64,
    /// When the last control step ran.
    pub stepped_at: Option<Timestamp>,
    /// A step due before the next control step: the job was taken all in while its
    /// slowdown was unread ([`JockeyConfig::all_in_unread`]), which a reading may end.
    pub recheck_at: Option<Timestamp>,
    /// Consecutive control steps, up to the last, at which the job ran ahead of its
    /// model (counted only with [`JockeyConfig::ahead_steps`] on).
    pub ahead_steps: u32,
    /// The last control step found the job late even under the largest allocation it
    /// can use and took that allocation at once ([`JockeyConfig::all_in_within_ms`]), or
    /// would be were it heavier than profiled ([`JockeyConfig::all_in_unread`]).
    pub all_in: bool,
    /// With [`JockeyConfig::pace_floor`]: milliseconds of run between model-based
    /// control steps, summed.
    pub pace_clock_ms: f64,
    /// With [`JockeyConfig::pace_floor`]: what the model expected those intervals to
    /// take (the fall of C(p, a) over each, at the slots the job ran on), summed.
    pub pace_model_ms: f64,
    /// Slot-milliseconds the job had run (guaranteed and spare) at the last step.
    pub ran_slot_ms: u64,
}

impl SloState {
    /// Adds the guarantee held since the last account up to `now`.
    fn account(&mut self, now: Timestamp) {
        if let Some(since) = self.accounted_to {
            let held = now.0.saturating_sub(since.0);
            self.guaranteed_slot_ms += u64::from(self.guarantee) * held;
            self.spare_slot_ms += u64::from(self.running.saturating_sub(self.guarantee)) * held;
            self.target_slot_ms += u64::from(self.target) * held;
            self.used_slot_ms += u64::from(self.running.min(self.guarantee)) * held;
            if self.waiting == 0 {
                self.idle_slot_ms += u64::from(self.guarantee.saturating_sub(self.running)) * held;
            }
        }
        self.accounted_to = Some(now);
        self.peak_guarantee = self.peak_guarantee.max(self.guarantee);
    }

    /// This state with the guarantee held since the last account added up to `now`
    /// (for reports at a job's end).
    pub fn accounted_until(mut self, now: Timestamp) -> SloState {
        self.account(now);
        self
    }
}

/// Ended SLO jobs whose final controller state is kept for reports, newest last.
const ENDED_KEPT: usize = 10_000;

/// The Jockey policy.
#[derive(Debug)]
pub struct Jockey {
    config: JockeyConfig,
    next_control: Timestamp,
    jobs: BTreeMap<JobId, SloState>,
    models: BTreeMap<String, CompletionModel>,
    /// Newest profiled run each name's model was asked for, so it is asked for once.
    requested: BTreeMap<String, u64>,
    requests: Vec<ModelRequest>,
    /// The final state of recently ended SLO jobs (at most [`ENDED_KEPT`]).
    ended: BTreeMap<JobId, SloState>,
}

impl Jockey {
    /// A Jockey policy with `config`.
    pub fn new(config: JockeyConfig) -> Jockey {
        Jockey {
            config,
            next_control: Timestamp::ZERO,
            jobs: BTreeMap::new(),
            models: BTreeMap::new(),
            requested: BTreeMap::new(),
            requests: Vec::new(),
            ended: BTreeMap::new(),
        }
    }

    /// The controller's view of each SLO job, by id.
    pub fn slo_jobs(&self) -> &BTreeMap<JobId, SloState> {
        &self.jobs
    }

    /// Runs the control step for every SLO job (`all`), or only for those not seen yet
    /// and, at a `tick`, those whose recheck is due.
    fn control(&mut self, now: Timestamp, view: &SchedView<'_>, all: bool, tick: bool) {
        let total = SlotKind::ALL.iter().map(|&k| view.total_slots(k)).sum::<u32>().max(1);
        let mut live = BTreeMap::new();
        for job in view.active_jobs() {
            let Some(deadline) = job.deadline() else { continue };
            let mut slo = self.jobs.remove(&job.id()).unwrap_or_default();
            slo.account(now);
            if slo.deadline.is_some_and(|d| d != deadline) && !slo.frozen {
                // A moved deadline is news, not noise: hysteresis would take minutes to
                // follow it, so the next step jumps to its raw allocation at once.
                slo.smoothed = None;
            }
            let recheck = tick && slo.recheck_at.is_some_and(|at| now >= at);
            if (all || recheck || slo.smoothed.is_none()) && !slo.frozen {
                self.step(now, view, job, deadline, total, &mut slo);
                slo.target = slo.guarantee;
            }
            slo.running = SlotKind::ALL.iter().map(|&k| job.running(k)).sum();
            slo.ready = SlotKind::ALL.iter().map(|&k| job.ready(k)).sum();
            slo.waiting = slo.ready;
            if self.config.demand_cap {
                // The job requests no slot it has no task for (a barrier, the tail):
                // such slots were lent to other work anyway, so nothing that runs
                // changes. The target is kept, so the guarantee is back as soon as
                // tasks are released.
                slo.guarantee = slo.target.min(slo.running + slo.ready);
            }
            slo.peak_guarantee = slo.peak_guarantee.max(slo.guarantee);
            live.insert(job.id(), slo);
        }
        // What is left ended (or lost its deadline): keep its final state for reports,
        // holding no guarantee from now on.
        for (job, mut slo) in std::mem::replace(&mut self.jobs, live) {
            slo.account(now);
            slo.guarantee = 0;
            self.ended.insert(job, slo);
        }
        while self.ended.len() > ENDED_KEPT {
            self.ended.pop_first();
        }
    }

    /// One control step for one job.
    fn step(
        &mut self,
        now: Timestamp,
        view: &SchedView<'_>,
        job: JobInfo<'_>,
        deadline: Timestamp,
        total: u32,
        slo: &mut SloState,
    ) {
        let profile =
            JobProfile::from_newest_runs(job.spec(), view.history(job.name()), self.config.profile_runs);
        let (Some(mut profile), false) = (profile, self.config.predictor == Predictor::Max) else {
            // Nothing to predict from (or max allocation): the whole cluster.
            *slo = SloState {
                smoothed: Some(f64::from(total)),
                guarantee: total,
                raw: total,
                frozen: !self.config.adapt,
                ..*slo
            };
            return;
        };
        let prediction = self.predict(now, view, &mut profile, &job, total, slo);
        // More slots than tasks left cannot speed the job up: a job behind in its tail
        // (one straggler in a last stage of a few tasks) would otherwise be raised to
        // the whole cluster, which the model's C(p, a) — flat beyond that — cannot stop
        // when no allocation meets the deadline and the largest loses least utility.
        let cap = total.min(job.stages().map(|s| s.tasks.saturating_sub(s.completed)).sum::<u32>().max(1));
        let control = self.control_for(&job, prediction.progress);
        let ahead_steps = self.ahead_steps(now, slo, &prediction);
        let ahead = self.config.ahead_steps > 0 && ahead_steps >= self.config.ahead_steps;
        let remaining = |a: u32| prediction.remaining_ms(a);
        // §4.4: a job the model finds late even on the most it can use is raised to
        // that at once, not over the steps hysteresis would take; nor is it cut to the
        // smallest allocation at which C(p, a) is as late (flat beyond it in the model,
        // which the run need not be).
        let all_in_slack = self.config.all_in_slack.unwrap_or(control.slack);
        let all_in = self.all_in_within_ms(now, deadline).is_some_and(|within| {
            prediction.slowdown > self.config.all_in_slowdown
                && control.late_even_at_most(
                    now.0 as f64
                        + all_in_slack
                            * prediction.remaining_ms_with_reserve(cap, self.config.all_in_reserve),
                    deadline.0 as i64,
                    within,
                )
        });
        // Taken all in while its slowdown was unread, a job holds it until its recheck:
        // a step in between (the wave it launched moves the prediction) would preempt
        // the wave it just started.
        let held = slo.recheck_at.filter(|&at| now < at);
        let unread_all_in = !all_in
            && (held.is_some()
                || self.late_at_cap_were_it_heavier(now, deadline, cap, &job, &profile, &prediction));
        let all_in = all_in || unread_all_in;
        let recheck_at =
            unread_all_in.then(|| held.unwrap_or(Timestamp(now.0 + (self.config.interval_ms / 4).max(1))));
        let keep = all_in && self.config.all_in_keep_smoothed;
        // The control law's own raw allocation; all in, the cap unless the law's
        // smoothing is kept beside it.
        let law_raw = if all_in && !keep {
            cap
        } else {
            self.raw_allocation(&control, now, deadline, cap, &prediction, ahead)
        };
        let raw = if all_in { cap } else { law_raw };
        let previous = slo.smoothed.map(|s| s.ceil().max(1.0) as u32).unwrap_or(law_raw);
        let finish_previous = now.0 as f64 + control.slack * remaining(previous);
        let law_smoothed = if ahead {
            control.smooth_ahead(
                slo.smoothed,
                law_raw,
                finish_previous,
                deadline.0 as i64,
                self.config.ahead_hysteresis,
            )
        } else {
            control.smooth(slo.smoothed, law_raw, finish_previous, deadline.0 as i64)
        }
        .clamp(1.0, f64::from(cap));
        let smoothed = if all_in { f64::from(cap) } else { law_smoothed };
        let (guarantee, rounding_carry) = if self.config.carry_rounding {
            carry_round(smoothed, slo.rounding_carry, cap)
        } else {
            (smoothed.ceil() as u32, 0.0)
        };
        let model_based = prediction.model.is_some() || self.config.predictor != Predictor::Simulator;
        let at = |ms: f64| Timestamp((now.0 as f64 + ms).max(0.0) as u64);
        let reserved_finish = at(control.slack * remaining(guarantee));
        // Only a chance-priced reserve needs the outcomes: the first has no straggler.
        let no_straggler_ms = match self.config.stage_reserve_chance {
            Some(_) => prediction.outcomes_ms(guarantee).first().map(|&(_, ms)| ms),
            None => None,
        };
        let predicted_finish = no_straggler_ms.map_or(reserved_finish, |ms| at(control.slack * ms));
        let finish_interval = prediction.interval_ms(guarantee).map(|(lo, hi)| (at(lo), at(hi)));
        *slo = SloState {
            // A guess made while the simulated model is being built is not a history to
            // smooth from: the first model-based step starts afresh.
            // Kept, the next step smooths from where the control law would be, so a
            // job no longer late at the cap comes down to it at once.
            smoothed: model_based.then_some(if keep { law_smoothed } else { smoothed }),
            guarantee,
            progress: prediction.progress,
            predicted_finish: Some(predicted_finish),
            reserved_finish: Some(reserved_finish),
            frozen: !self.config.adapt && model_based,
            slowdown: prediction.slowdown,
            finish_interval,
            deadline: Some(deadline),
            raw,
            rounding_carry: if model_based { rounding_carry } else { 0.0 },
            stepped_at: Some(now),
            recheck_at,
            ahead_steps,
            all_in,
            pace_clock_ms: prediction.pace_sums.0,
            pace_model_ms: prediction.pace_sums.1,
            ran_slot_ms: slo.used_slot_ms + slo.spare_slot_ms,
            ..*slo
        };
    }

    /// With `all_in_unread`, whether a job whose slowdown is still unread (fewer than
    /// [`SLOWDOWN_PRIOR_TASKS`] tasks of its profiled stages completed) would finish past
    /// `deadline` even on `cap` slots, were it `all_in_unread` times slower than
    /// profiled (or than read so far, if that is more): a heavier run is still possible,
    /// and a job whose critical path is most of its deadline cannot win back a first
    /// wave run narrow.
    fn late_at_cap_were_it_heavier(
        &self,
        now: Timestamp,
        deadline: Timestamp,
        cap: u32,
        job: &JobInfo<'_>,
        profile: &JobProfile,
        prediction: &predict::Prediction,
    ) -> bool {
        let Some(slowdown) = self.config.all_in_unread else { return false };
        // The slowdown is kept within `SLOWDOWN_RANGE`, above 0.
        let heavier = slowdown.max(prediction.slowdown) / prediction.slowdown;
        f64::from(tasks_seen(job, profile)) < SLOWDOWN_PRIOR_TASKS
            && now.0 as f64 + heavier * prediction.remaining_ms_with_reserve(cap, 0.0) > deadline.0 as f64
    }

    /// The all-in test's margin before `deadline` at `now`: `all_in_within_ms`, or with
    /// `all_in_margin` at least that share of the time left (either alone when the
    /// other is off); `None`: no all-in test.
    fn all_in_within_ms(&self, now: Timestamp, deadline: Timestamp) -> Option<i64> {
        let share = self.config.all_in_margin;
        let margin = (share > 0.0).then(|| (share * deadline.0.saturating_sub(now.0) as f64).round() as i64);
        match (self.config.all_in_within_ms, margin) {
            (Some(within), Some(margin)) => Some(within.max(margin)),
            (within, margin) => within.or(margin),
        }
    }

    /// How much slower than `profile` the job's completed tasks ran (1 unless `rescale`):
    /// the model knows the profiled run, and a run whose tasks take longer (more input, a
    /// slower cluster: Table 3) has that much more time left at the same progress.
    fn slowdown(&self, now: Timestamp, view: &SchedView<'_>, profile: &JobProfile, job: &JobInfo<'_>) -> f64 {
        if !self.config.rescale {
            return 1.0;
        }
        let completed: Vec<u32> = job.stages().map(|s| s.completed).collect();
        let started: Vec<u32> = job.stages().map(|s| s.completed + s.running).collect();
        let observed: Vec<u64> = job.completed_run_ms().collect();
        if !self.config.count_running {
            let slowdown = profile.observed_slowdown(&completed, &started, &observed);
            let prior = self.config.slowdown_prior;
            if prior == 1.0 {
                return slowdown;
            }
            return shrunk_toward(slowdown, tasks_seen(job, profile), prior);
        }
        let mut running_ms = vec![Vec::new(); completed.len()];
        for c in view.live_unordered().filter(|c| c.task.job == job.id()) {
            let since = c.started.unwrap_or(c.allocated);
            if let Some(stage) = running_ms.get_mut(c.task.stage.0 as usize) {
                stage.push(now.0.saturating_sub(since.0));
            }
        }
        profile.observed_slowdown_with_running(&completed, &started, &observed, &running_ms)
    }

    /// The simulated model of `profile`'s job if it is built for this profile; asks for
    /// one (once per profile) when the predictor is the simulator.
    fn model_for(&mut self, profile: &JobProfile, total: u32) -> Option<&CompletionModel> {
        if self.config.predictor != Predictor::Simulator {
            return None;
        }
        let fresh = self.models.get(&profile.name).is_some_and(|m| m.newest_run == profile.newest_run);
        if !fresh && self.requested.get(&profile.name) != Some(&profile.newest_run) {
            self.requested.insert(profile.name.clone(), profile.newest_run);
            self.requests.push(ModelRequest {
                profile: profile.clone(),
                indicator: self.config.indicator,
                allocations: allocation_grid(total),
                runs: self.config.model_runs,
                quantile: self.config.quantile,
                seed: profile.newest_run,
                pooled_tail: self.config.pooled_tail,
                pooled_below: self.config.pooled_below,
                tail_quantile: self.config.tail_quantile,
                spread_points: if self.config.expected_utility.is_some() { SPREAD_POINTS } else { 0 },
            });
        }
        // A stale model still beats none while the new one is built.
        self.models.get(&profile.name)
    }

    /// Free slots of `kind`: first to SLO jobs below their guarantee (earliest deadline
    /// first), then to every other job with ready tasks in admission order, and with
    /// spare tokens on, what is still free to SLO jobs' remaining ready tasks.
    fn assign(
        &self,
        view: &SchedView<'_>,
        kind: SlotKind,
        given: &mut BTreeMap<JobId, u32>,
        out: &mut Vec<Assignment>,
    ) {
        let mut free = FreeSlots::new(view.agents_with_free(kind), kind);
        let mut slo: Vec<(Timestamp, JobInfo<'_>)> = view
            .jobs_with_ready(kind)
            .filter_map(|j| self.jobs.get(&j.id()).map(|_| (j.deadline().unwrap_or(Timestamp::ZERO), j)))
            .collect();
        slo.sort_by_key(|(d, j)| (*d, j.id()));
        // Ready tasks of `kind` each SLO job still has after its guaranteed share.
        let mut left: Vec<(JobId, u32)> = Vec::with_capacity(slo.len());
        for (_, job) in &slo {
            let owed = self.owed(job, given).min(job.ready(kind));
            let taken = give(&mut free, job.id(), kind, owed, out);
            *given.entry(job.id()).or_default() += taken;
            if taken < owed {
                return;
            }
            left.push((job.id(), job.ready(kind) - owed));
        }
        for job in view.jobs_with_ready(kind).filter(|j| !self.jobs.contains_key(&j.id())) {
            if give(&mut free, job.id(), kind, job.ready(kind), out) < job.ready(kind) {
                return;
            }
        }
        if !self.config.spare {
            return;
        }
        // Spare tokens: nothing else wants these slots now. They are taken back first
        // when a guarantee needs them (`take_back`), and best-effort work is served
        // before them whenever a slot frees.
        for (job, ready) in left {
            let taken = give(&mut free, job, kind, ready, out);
            *given.entry(job).or_default() += taken;
            if taken < ready {
                return;
            }
        }
    }

    /// Slots `job` is still owed: its guarantee less what it runs and was given this step.
    fn owed(&self, job: &JobInfo<'_>, given: &BTreeMap<JobId, u32>) -> u32 {
        let guarantee = self.jobs.get(&job.id()).map_or(0, |s| s.guarantee);
        let held = SlotKind::ALL.iter().map(|&k| job.running(k)).sum::<u32>()
            + given.get(&job.id()).copied().unwrap_or(0);
        guarantee.saturating_sub(held)
    }

    /// Kills enough tasks of `kind` of jobs without a guarantee (youngest job first), or
    /// above theirs, to hand SLO jobs their guaranteed slots.
    fn take_back(
        &self,
        view: &SchedView<'_>,
        kind: SlotKind,
        given: &BTreeMap<JobId, u32>,
    ) -> Vec<super::Preemption> {
        let owed: u32 = view
            .jobs_with_ready(kind)
            .filter(|j| self.jobs.contains_key(&j.id()))
            .map(|j| self.owed(&j, given).min(j.ready(kind)))
            .sum();
        let budget = owed.saturating_sub(kills_in_flight(view, kind));
        if budget == 0 {
            return Vec::new();
        }
        let mut victims: Vec<(JobId, u32)> = view
            .active_jobs()
            .filter_map(|j| {
                let over = match self.jobs.get(&j.id()) {
                    Some(slo) => {
                        SlotKind::ALL.iter().map(|&k| j.running(k)).sum::<u32>().saturating_sub(slo.guarantee)
                    }
                    None => j.running(kind),
                };
                (over > 0).then(|| (j.id(), over.min(j.running(kind))))
            })
            .collect();
        // Jobs without a guarantee first, youngest first: the least sunk work. With spare
        // tokens, the tasks SLO jobs run above their guarantee are the lowest priority
        // of all, so they go before best-effort work.
        let spare_first = self.config.spare;
        victims.sort_by_key(|&(id, _)| (self.jobs.contains_key(&id) != spare_first, std::cmp::Reverse(id)));
        let reason = KillReason::Preempted {
            policy: PolicyName::Jockey,
            why: "a deadline job needs its guaranteed slots",
        };
        newest_of(view, kind, &victims, Some, budget, reason)
    }
}

/// The observed `slowdown` ([`JobProfile::observed_slowdown`], shrunk towards 1 by a
/// prior of [`SLOWDOWN_PRIOR_TASKS`] tasks) shrunk towards `prior` instead, after `seen`
/// completed tasks ([`JockeyConfig::slowdown_prior`]): the prior's weight is
/// `SLOWDOWN_PRIOR_TASKS / (seen + SLOWDOWN_PRIOR_TASKS)` of the reading, so the shift is
/// `(prior − 1)` times that; `prior` itself before any task has completed. Kept in
/// [`SLOWDOWN_RANGE`].
fn shrunk_toward(slowdown: f64, seen: u32, prior: f64) -> f64 {
    let weight = SLOWDOWN_PRIOR_TASKS / (f64::from(seen) + SLOWDOWN_PRIOR_TASKS);
    (slowdown + (prior - 1.0) * weight).clamp(SLOWDOWN_RANGE.0, SLOWDOWN_RANGE.1)
}

/// The completed tasks of `job`'s stages that `profile` has task times for: what its
/// slowdown has been read from.
fn tasks_seen(job: &JobInfo<'_>, profile: &JobProfile) -> u32 {
    let profiled = job.stages().zip(&profile.stages).filter(|(_, p)| !p.run_ms.is_empty());
    profiled.map(|(s, _)| s.completed).sum()
}

/// Up to `n` assignments of `kind` to `job` from `free`; how many there were.
fn give(free: &mut FreeSlots, job: JobId, kind: SlotKind, n: u32, out: &mut Vec<Assignment>) -> u32 {
    for given in 0..n {
        let Some(agent) = free.take() else { return given };
        out.push(Assignment { agent, job, kind });
    }
    n
}

impl Policy for Jockey {
    fn name(&self) -> PolicyName {
        PolicyName::Jockey
    }

    fn schedule(&mut self, now: Timestamp, view: &SchedView<'_>, trigger: Trigger) -> Decisions {
        let tick = trigger == Trigger::Tick;
        let due = tick && now >= self.next_control;
        if due {
            self.next_control = Timestamp(now.0 + self.config.interval_ms.max(1));
        }
        self.control(now, view, due, tick);
        let mut decisions = Decisions::default();
        let mut given = BTreeMap::new();
        for kind in SlotKind::ALL {
            if view.has_free(kind) {
                self.assign(view, kind, &mut given, &mut decisions.assignments);
            } else if self.config.preemption {
                decisions.preemptions.extend(self.take_back(view, kind, &given));
            }
        }
        // What was just assigned runs from now on: the spare slot time counts it.
        for (job, n) in given {
            if let Some(slo) = self.jobs.get_mut(&job) {
                slo.running += n;
                slo.waiting = slo.waiting.saturating_sub(n);
            }
        }
        decisions
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        let rechecks = self.jobs.values().filter_map(|slo| slo.recheck_at);
        (!self.jobs.is_empty()).then(|| rechecks.fold(self.next_control, Timestamp::min))
    }

    fn take_model_requests(&mut self) -> Vec<ModelRequest> {
        std::mem::take(&mut self.requests)
    }

    fn slo_state(&self, job: JobId) -> Option<SloState> {
        self.jobs.get(&job).or_else(|| self.ended.get(&job)).copied()
    }

    fn completion_model_built(&mut self, model: CompletionModel) {
        self.models.insert(model.name.clone(), model);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE_MS: u64 = 60_000;

    #[test]
    fn the_slowdown_prior_moves_early_readings_and_fades_with_the_tasks_seen() {
        // Nothing seen yet: the reading is 1, the prior itself.
        assert!((shrunk_toward(1.0, 0, 1.4) - 1.4).abs() < 1e-12);
        // Ten tasks seen, as many as the prior's: half of the prior's 0.4 is added.
        assert!((shrunk_toward(1.3, 10, 1.4) - 1.5).abs() < 1e-12);
        // A hundred seen: a eleventh of it.
        assert!((shrunk_toward(1.3, 100, 1.4) - (1.3 + 0.4 / 11.0)).abs() < 1e-12);
        // At 1 nothing moves; kept within the range.
        assert_eq!(shrunk_toward(1.3, 0, 1.0), 1.3);
        assert_eq!(shrunk_toward(3.9, 0, 2.0), SLOWDOWN_RANGE.1);
    }

    #[test]
    fn the_all_in_margin_is_a_share_of_the_time_left_beside_the_fixed_one() {
        let jockey = |within: Option<i64>, margin: f64| {
            Jockey::new(JockeyConfig {
                all_in_within_ms: within,
                all_in_margin: margin,
                ..Default::default()
            })
        };
        let (now, deadline) = (Timestamp(10 * MINUTE_MS), Timestamp(40 * MINUTE_MS));
        // Off: no test at all; the fixed margin alone as before.
        assert_eq!(jockey(None, 0.0).all_in_within_ms(now, deadline), None);
        assert_eq!(jockey(Some(180_000), 0.0).all_in_within_ms(now, deadline), Some(180_000));
        // 30 minutes left: a fifth of them is 6 minutes, more than the fixed 3...
        let both = jockey(Some(180_000), 0.2);
        assert_eq!(both.all_in_within_ms(now, deadline), Some(6 * MINUTE_MS as i64));
        assert_eq!(jockey(None, 0.2).all_in_within_ms(now, deadline), Some(6 * MINUTE_MS as i64));
        // ...10 minutes left, 2: the fixed margin holds; at or past the deadline, 0.
        let late = Timestamp(30 * MINUTE_MS);
        assert_eq!(both.all_in_within_ms(late, deadline), Some(180_000));
        assert_eq!(jockey(None, 0.2).all_in_within_ms(Timestamp(50 * MINUTE_MS), deadline), Some(0));
    }
}
