//! MRM quotes over the core's live state: the admitted deadline jobs' remaining work (from
//! their estimates and progress) as an admission [`Schedule`], the new job's estimate and
//! demand, its earliest feasible finish and its price–deadline curve; and a buyer's
//! choice (`--earliest`, `--deadline`, `--max-price`) turned into a deadline and a price,
//! or refused with the best alternative.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use slotmarket_common::ids::JobId;
use slotmarket_common::spec::{JobSpec, SlotKind};
use slotmarket_common::time::Timestamp;
use thiserror::Error;

use super::admission::{Admitted, Demand, Schedule};
use super::estimate::{self, DEFAULT_PI_LEVEL, EstimateError, EstimateMethod, EstimateSettings, JobEstimate};
use super::kept::KeptSchedule;
use super::policy::SchedView;
use super::pricing::{PriceCurve, Priced, Quoter};
use super::state::{Job, State, kind_ix};

/// The `[admission]` table: whether jobs buy deadlines, and how they are priced.
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionSettings {
    /// `mrm`: submits may choose a quoted deadline; `none` (default): deadlines as given.
    #[serde(default)]
    pub mode: AdmissionMode,
    /// One-sided level of the runtime prediction interval (default 0.95).
    #[serde(default = "default_pi_level")]
    pub pi_level: f64,
    /// The price–deadline curve (default eq. 13 with κ = 2).
    #[serde(default)]
    pub price: PriceCurve,
}

fn default_pi_level() -> f64 {
    DEFAULT_PI_LEVEL
}

impl Default for AdmissionSettings {
    fn default() -> AdmissionSettings {
        AdmissionSettings {
            mode: AdmissionMode::None,
            pi_level: DEFAULT_PI_LEVEL,
            price: PriceCurve::default(),
        }
    }
}

impl AdmissionSettings {
    /// Checks what serde cannot: the PI level in (0.5, 1) and κ positive (eq. 14: ≥ 1).
    /// The error names the field and the problem.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(self.pi_level > 0.5 && self.pi_level < 1.0) {
            return Err(("admission.pi_level", format!("must be in (0.5, 1), got {}", self.pi_level)));
        }
        match self.price {
            PriceCurve::Eq13 { kappa } if !(kappa > 0.0 && kappa.is_finite()) => {
                Err(("admission.price.kappa", format!("must be a positive number, got {kappa}")))
            }
            PriceCurve::Eq14 { kappa } if !(kappa >= 1.0 && kappa.is_finite()) => {
                Err(("admission.price.kappa", format!("must be at least 1 for eq. 14, got {kappa}")))
            }
            _ => Ok(()),
        }
    }
}

/// The admission layer in front of the policy.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdmissionMode {
    /// Every job is admitted; a deadline in its spec is taken as given.
    #[default]
    None,
    /// MRM: a deadline is bought from the quoted curve and kept feasible.
    Mrm,
}

/// What a quote tells a submitter.
#[derive(Clone, PartialEq, Debug)]
pub struct Quote {
    /// The runtime estimate with its prediction interval.
    pub estimate: JobEstimate,
    /// Its size in the admission model.
    pub demand: Demand,
    /// PI-upper work in slot-ms: the lowest price.
    pub work_ms: f64,
    /// The earliest deadline that can be promised.
    pub earliest: Timestamp,
    /// Deadlines from the earliest on and their prices (slot-ms).
    pub curve: Vec<(Timestamp, f64)>,
    /// Admitted jobs with a deadline the quote was made against.
    pub admitted: usize,
    /// The map and reduce slots the quote assumed because no agent offered one of the
    /// kinds (a restarted master before its agents reconnect): the last known capacity.
    pub assumed_slots: Option<[u32; 2]>,
}

/// A buyer's choice.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Choice {
    /// The earliest feasible deadline, whatever it costs.
    Earliest,
    /// This deadline (refused if infeasible).
    Deadline(Timestamp),
    /// The earliest deadline costing at most this many slot-ms.
    MaxPrice(f64),
    /// The deadline behind every admitted job: FCFS's promise (a baseline's).
    BehindAll,
}

/// A deadline sold.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Offer {
    /// The promised finish.
    pub deadline: Timestamp,
    /// Its price in slot-ms.
    pub price_ms: f64,
    /// The earliest feasible finish at the time.
    pub earliest: Timestamp,
    /// The job's PI-upper work in slot-ms (what a price is compared with).
    pub work_ms: f64,
}

/// Why a quote or a choice failed.
#[derive(Clone, PartialEq, Debug, Error)]
pub enum QuoteError {
    /// The job cannot be estimated.
    #[error(transparent)]
    Estimate(#[from] EstimateError),
    /// The cluster has no slot of a kind the job needs.
    #[error("no agent offers {0} slots; a quote needs the cluster's capacity")]
    NoSlots(&'static str),
    /// The asked deadline would break a promise made to an admitted job.
    #[error("deadline {asked:?} is not feasible; the earliest is {earliest:?} at {price_ms:.0} slot-ms")]
    Infeasible {
        /// The deadline asked for.
        asked: Timestamp,
        /// The earliest feasible one now.
        earliest: Timestamp,
        /// Its price.
        price_ms: f64,
    },
    /// Even the cheapest deadline costs more than the buyer's maximum.
    #[error("no deadline costs at most {max_ms:.0} slot-ms; the cheapest costs {floor_ms:.0}")]
    Unaffordable {
        /// The maximum given.
        max_ms: f64,
        /// The lowest price on the curve.
        floor_ms: f64,
    },
}

/// The quoting state the core keeps: estimates of admitted jobs, made once each, and
/// the admission schedule kept between quotes.
#[derive(Debug, Default)]
pub(crate) struct Market {
    /// Estimates of the kept jobs, made when first seen by a quote, with the slot counts
    /// their whole size was computed for and that size; ordered by id so the sum of the
    /// sizes is taken in the same order every time.
    estimates: BTreeMap<JobId, Estimated>,
    /// Whether a running job's estimate is stretched by how its completed tasks ran
    /// ([`rescaled`]); `CoreConfig::predict_from_progress`.
    pub(crate) rescale: bool,
    /// The admitted deadline jobs in EDF order as of the last quote; `None` until the
    /// first quote, and after too many changes without one.
    kept: Option<KeptSchedule>,
    /// Jobs touched since the last quote (repeats allowed): what it must look at again.
    dirty: Vec<JobId>,
    /// Active deadline jobs that could not be estimated (no history, no `[estimate]`);
    /// tried again at every quote, as history may have arrived.
    unestimated: BTreeSet<JobId>,
    /// Sum of the durations alone on the cluster (ms) of every deadline job estimated so
    /// far: with `seen_jobs`, the long-run average job time `g` that slack is measured in.
    seen_job_ms: f64,
    /// How many jobs `seen_job_ms` sums.
    seen_jobs: u64,
    /// Per kind, the slots last seen offered while that kind had any (`[0, 0]` before
    /// any): stored (`Persist::Capacity`) and recovered after a restart.
    last_slots: [u32; 2],
    /// Per kind, the measured and the estimated work (slot-ms) of the ended deadline jobs
    /// priced by their `[estimate]`, each older job weighing [`STRETCH_DECAY`] less: how
    /// much longer such tasks run than their owners said under the current load. Only
    /// kept with `rescale` (the live master), see [`Market::stretched`].
    spec_work: [(f64, f64); 2],
}

/// Weight of the previous jobs each time an ended job is added to `spec_work`: the last
/// few jobs dominate, so the stretch follows the load as it changes.
const STRETCH_DECAY: f64 = 0.7;

/// Touched jobs noted without a quote past which the kept schedule is dropped (rebuilt
/// at the next quote): at least this many, or four per kept job.
const DIRTY_LIMIT: usize = 4096;

/// A deadline job's estimate.
#[derive(Clone, Copy, Debug)]
struct Estimated {
    estimate: JobEstimate,
}

/// How long a whole job of `estimate` takes alone on `slots` in the model (its fluid
/// share plus its tail): the job's processing time as the paper's `g` averages it.
fn alone_ms(estimate: &JobEstimate, slots: [u32; 2]) -> f64 {
    let whole = SlotKind::ALL.map(|k| estimate.phase(k).tasks);
    let demand = demand_of(estimate, whole, slots).0;
    demand.fluid_ms + demand.tail_ms
}

/// The admitted jobs as the model sees them, and what pricing needs besides.
struct Admissions {
    schedule: Schedule,
    /// PI-upper remaining work of each job in EDF order, slot-ms.
    works: Vec<f64>,
}

/// The slots offered now, map then reduce.
fn offered(view: &SchedView<'_>) -> [u32; 2] {
    [view.total_slots(SlotKind::Map), view.total_slots(SlotKind::Reduce)]
}

/// The slots to quote against: those offered now, a kind none offers taken at its last
/// known count (a restarted master before its agents reconnect), with whether any was.
fn known_slots(offered: [u32; 2], last: [u32; 2]) -> ([u32; 2], bool) {
    let slots = [0, 1].map(|k| if offered[k] == 0 { last[k] } else { offered[k] });
    (slots, slots != offered)
}

/// The slot counts, map then reduce, and whether they were assumed from the last known
/// ones; or which kind the job needs that no agent offers and none was ever seen.
fn capacity(
    view: &SchedView<'_>,
    estimate: &JobEstimate,
    last: [u32; 2],
) -> Result<([u32; 2], bool), QuoteError> {
    let (slots, assumed) = known_slots(offered(view), last);
    for kind in SlotKind::ALL {
        if estimate.phase(kind).tasks > 0 && slots[kind_ix(kind)] == 0 {
            return Err(QuoteError::NoSlots(kind.name()));
        }
    }
    Ok((slots, assumed))
}

/// The model's demand of `estimate` with `left` tasks of each kind still to run. Its
/// span counts waves: tasks run whole, so `n` tasks on `s` slots take `⌈n/s⌉` task
/// times however the work is spread (the fluid size alone would promise `n/s`), the
/// last wave as long as the slowest of the phase's tasks.
fn demand_of(estimate: &JobEstimate, left: [u32; 2], slots: [u32; 2]) -> (Demand, f64) {
    let [map, reduce] = [SlotKind::Map, SlotKind::Reduce].map(|k| {
        let phase = estimate.phase(k);
        let tasks = left[kind_ix(k)];
        let waves = tasks.div_ceil(slots[kind_ix(k)].max(1));
        let span = match waves {
            0 => 0.0,
            w => phase.task_upper_ms * f64::from(w - 1) + phase.slowest_upper_ms(tasks),
        };
        (phase.task_upper_ms * f64::from(tasks), span)
    });
    let demand = Demand::new(map.0, reduce.0, map.1 + reduce.1, slots[0], slots[1]);
    (demand, map.0 + reduce.0)
}

/// `estimate` stretched by how `job`'s completed tasks ran: per kind, when their mean run
/// time exceeds the expected task time, every task time of that kind (mean, PI upper,
/// spread) is scaled by the ratio, so the remaining work and the predicted finish follow
/// a job that runs slower than estimated. Never shrunk: a fast start does not spend the
/// safety margin that keeps the admitted deadlines.
pub(crate) fn rescaled(estimate: &JobEstimate, job: &Job) -> JobEstimate {
    let mut out = *estimate;
    for kind in SlotKind::ALL {
        let (sum, count) = job
            .stages
            .iter()
            .filter(|s| s.kind == kind)
            .flat_map(|s| s.tasks.iter().filter_map(|t| t.run_ms))
            .fold((0u64, 0u32), |(sum, n), ms| (sum.saturating_add(ms), n + 1));
        let phase = &mut out.phases[kind_ix(kind)];
        if count == 0 || phase.task_ms <= 0.0 {
            continue;
        }
        let ratio = sum as f64 / f64::from(count) / phase.task_ms;
        if ratio > 1.0 {
            phase.task_ms *= ratio;
            phase.task_upper_ms *= ratio;
            phase.task_sd_ms *= ratio;
        }
    }
    out
}

/// The demand and work `job` has left under its estimate, stretched by how its tasks ran
/// when `rescale` is on. The whole size that normalises slack stays the unstretched one:
/// it measures the workload's typical job, not this job's delays.
fn remaining(estimated: &Estimated, job: &Job, rescale: bool, slots: [u32; 2]) -> (Demand, f64) {
    let estimate = if rescale { rescaled(&estimated.estimate, job) } else { estimated.estimate };
    demand_of(&estimate, left_of(job), slots)
}

/// Tasks of each kind a job has not completed (running ones count in full: the model
/// does not know how far along they are, so it stays on the safe side). One pass over
/// the stages for both kinds: a quote does this for every admitted job.
fn left_of(job: &Job) -> [u32; 2] {
    let mut left = [0u32; 2];
    for (ix, stage) in job.stages.iter().enumerate() {
        left[kind_ix(stage.kind)] += job.stage_size(ix).saturating_sub(stage.completed);
    }
    left
}

/// The active jobs with a deadline, in id order: `active` and `jobs` are both ordered by
/// id and every active job is in `jobs`, so one merged walk finds them all.
fn active_deadline_jobs(state: &State) -> impl Iterator<Item = (&Job, Timestamp)> {
    let mut jobs = state.jobs.iter().peekable();
    state.active.iter().filter_map(move |id| {
        while jobs.next_if(|(k, _)| k < id).is_some() {}
        let (_, job) = jobs.next_if(|(k, _)| k == id)?;
        job.deadline.map(|deadline| (job, deadline))
    })
}

impl Market {
    /// Notes the slots offered now; returns the capacity to store when a kind's last
    /// known count changed (a kind none offers keeps its last count).
    pub(crate) fn note_capacity(&mut self, state: &State) -> Option<[u32; 2]> {
        let (slots, _) = known_slots(offered(&SchedView::new(state)), self.last_slots);
        (slots != self.last_slots).then(|| {
            self.last_slots = slots;
            slots
        })
    }

    /// Takes the capacity a restarted master recovered from the store.
    pub(crate) fn recover_capacity(&mut self, slots: Option<[u32; 2]>) {
        if let Some(slots) = slots {
            self.last_slots = slots;
        }
    }

    /// Whether a schedule is kept, so that [`note_changed`](Market::note_changed) has
    /// anything to do: a step that finds none skips gathering the jobs it touched.
    pub(crate) fn keeps_schedule(&self) -> bool {
        self.kept.is_some()
    }

    /// Notes jobs a core step touched (admitted, progressed, re-queued, deadline moved,
    /// ended): the next quote takes them out of the kept schedule and puts back what
    /// they are now. Nothing is kept before the first quote, so nothing is noted.
    pub(crate) fn note_changed(&mut self, jobs: impl IntoIterator<Item = JobId>) {
        let Some(kept) = &self.kept else { return };
        self.dirty.extend(jobs);
        // With no quote for a long while the list grows with every task; past a few
        // notes per kept job a rebuild is cheaper than catching up.
        if self.dirty.len() > DIRTY_LIMIT.max(4 * kept.jobs().len()) {
            self.kept = None;
            self.dirty.clear();
        }
    }

    /// The admitted deadline jobs in EDF order with their PI-upper works and sizes: the
    /// kept schedule brought up to date, or rebuilt when the cluster's slots changed.
    fn admissions(
        &mut self,
        now: Timestamp,
        state: &State,
        settings: &EstimateSettings,
        slots: [u32; 2],
    ) -> Admissions {
        let kept = match self.kept.take() {
            Some(kept) if kept.slots == slots => self.synced(kept, state, settings),
            _ => self.rebuilt(state, settings, slots),
        };
        #[cfg(debug_assertions)]
        self.check_kept(&kept, state);
        let schedule = Schedule::from_sorted(now, kept.jobs().to_vec());
        let works = kept.works().to_vec();
        self.kept = Some(kept);
        Admissions { schedule, works }
    }

    /// The schedule built from every active deadline job.
    fn rebuilt(&mut self, state: &State, settings: &EstimateSettings, slots: [u32; 2]) -> KeptSchedule {
        self.dirty.clear();
        self.unestimated.clear();
        let mut all = Vec::with_capacity(self.estimates.len());
        for (job, deadline) in active_deadline_jobs(state) {
            match self.estimated(state, job.id, settings, slots) {
                Some(estimated) => {
                    let (demand, work) = remaining(&estimated, job, self.rescale, slots);
                    all.push((Admitted { job: job.id, deadline, demand }, work));
                }
                None => {
                    self.unestimated.insert(job.id);
                }
            }
        }
        let kept = KeptSchedule::from_unsorted(slots, all);
        self.estimates.retain(|id, _| kept.contains(*id));
        kept
    }

    /// `kept` with every touched job (and every one not estimated yet) taken out and put
    /// back as it is now: in place with its remaining work, or not at all once it ended
    /// or lost its deadline.
    fn synced(&mut self, mut kept: KeptSchedule, state: &State, settings: &EstimateSettings) -> KeptSchedule {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.extend(std::mem::take(&mut self.unestimated));
        dirty.sort_unstable();
        dirty.dedup();
        for id in dirty.drain(..) {
            let job = state.jobs.get(&id).filter(|_| state.active.contains(&id));
            let Some((job, deadline)) = job.and_then(|j| j.deadline.map(|d| (j, d))) else {
                kept.remove(id);
                self.estimates.remove(&id);
                self.learn_from_ended(state, id, settings);
                continue;
            };
            match self.estimated(state, id, settings, kept.slots) {
                Some(estimated) => {
                    let (demand, work) = remaining(&estimated, job, self.rescale, kept.slots);
                    kept.insert(Admitted { job: id, deadline, demand }, work);
                }
                None => {
                    kept.remove(id);
                    self.unestimated.insert(id);
                }
            }
        }
        self.dirty = dirty;
        kept
    }

    /// Adds how long an ended job's `[estimate]`-priced phases really took (from its
    /// history record) to `spec_work`. Only with `rescale`.
    /// The estimate compared with is made again from the spec and the runs before the
    /// job, unstretched: the ratio is against what the owner said, and a job admitted and
    /// ended between two quotes was never estimated.
    fn learn_from_ended(&mut self, state: &State, id: JobId, settings: &EstimateSettings) {
        if !self.rescale {
            return;
        }
        let Some(job) = state.jobs.get(&id) else { return };
        let Some(run) = state.history.runs(&job.spec.name).find(|r| r.job == id) else { return };
        let before: Vec<_> = state.history.runs(&job.spec.name).filter(|r| r.job != id).collect();
        let Ok(estimate) = estimate::estimate(&job.spec, &before, settings) else { return };
        for kind in SlotKind::ALL {
            let phase = estimate.phase(kind);
            if phase.method != EstimateMethod::Spec || phase.tasks == 0 {
                continue;
            }
            let times: Vec<Option<u64>> =
                run.stages.iter().filter(|s| s.slot == kind).flat_map(|s| s.run_ms.iter().copied()).collect();
            // A phase with a task that never completed says nothing reliable about time.
            if times.is_empty() || times.iter().any(Option::is_none) {
                continue;
            }
            let measured: f64 = times.iter().flatten().map(|&ms| ms as f64).sum();
            let (sum, est) = &mut self.spec_work[kind_ix(kind)];
            *sum = *sum * STRETCH_DECAY + measured;
            *est = *est * STRETCH_DECAY + phase.task_ms * times.len() as f64;
        }
    }

    /// `estimate` with each `[estimate]`-priced phase stretched by how much longer such
    /// phases of recently ended jobs ran than estimated (never shrunk): the owners' task
    /// times were measured on a quiet cluster, and under load a quote priced on them sells
    /// deadlines the cluster cannot keep. History-based phases are left alone (they
    /// already learn from the runs); the simulator (no `rescale`) is unchanged.
    fn stretched(&self, mut estimate: JobEstimate) -> JobEstimate {
        if !self.rescale {
            return estimate;
        }
        for kind in SlotKind::ALL {
            let (measured, estimated) = self.spec_work[kind_ix(kind)];
            let phase = &mut estimate.phases[kind_ix(kind)];
            if phase.method != EstimateMethod::Spec || estimated <= 0.0 {
                continue;
            }
            let ratio = measured / estimated;
            if ratio > 1.0 {
                phase.task_ms *= ratio;
                phase.task_upper_ms *= ratio;
                phase.task_sd_ms *= ratio;
            }
        }
        estimate
    }

    /// Debug builds check every quote's kept schedule against one built from scratch:
    /// a touched job the core forgot to note would otherwise go unseen.
    #[cfg(debug_assertions)]
    fn check_kept(&self, kept: &KeptSchedule, state: &State) {
        let mut fresh = Vec::new();
        for (job, deadline) in active_deadline_jobs(state) {
            match self.estimates.get(&job.id) {
                Some(estimated) => {
                    let (demand, work) = remaining(estimated, job, self.rescale, kept.slots);
                    fresh.push((Admitted { job: job.id, deadline, demand }, work));
                }
                None => {
                    debug_assert!(self.unestimated.contains(&job.id), "{} neither kept nor pending", job.id)
                }
            }
        }
        let fresh = KeptSchedule::from_unsorted(kept.slots, fresh);
        debug_assert_eq!(fresh.jobs(), kept.jobs(), "the kept admission schedule went stale");
        debug_assert_eq!(fresh.works(), kept.works(), "the kept admission works went stale");
        debug_assert_eq!(self.estimates.len(), kept.jobs().len());
    }

    /// The admission schedule at `now` (tests).
    #[cfg(test)]
    pub(crate) fn schedule(
        &mut self,
        now: Timestamp,
        state: &State,
        settings: &AdmissionSettings,
    ) -> Schedule {
        let estimate_settings = EstimateSettings { pi_level: settings.pi_level };
        let (slots, _) = known_slots(offered(&SchedView::new(state)), self.last_slots);
        self.admissions(now, state, &estimate_settings, slots).schedule
    }

    /// When each admitted deadline job finishes in the admission model at `now`: the
    /// jobs due before it and its own remaining work, in EDF order, plus its tail.
    pub(crate) fn predicted_finishes(
        &mut self,
        now: Timestamp,
        state: &State,
        settings: &AdmissionSettings,
    ) -> HashMap<JobId, Timestamp> {
        let estimate_settings = EstimateSettings { pi_level: settings.pi_level };
        let (slots, _) = known_slots(offered(&SchedView::new(state)), self.last_slots);
        let Admissions { schedule, .. } = self.admissions(now, state, &estimate_settings, slots);
        let now_ms = now.0 as f64;
        (0..schedule.jobs().len())
            .map(|k| {
                let job = schedule.jobs()[k];
                // slack = deadline − now − (work due before and with it) − tail.
                let finish_ms = job.deadline.0 as f64 - schedule.slack_ms(k);
                (job.job, Timestamp(finish_ms.max(now_ms).ceil() as u64))
            })
            .collect()
    }

    /// The estimate of deadline job `id` and its whole size on `slots`, made on first
    /// sight; `None` for a job that cannot be estimated (no history, no `[estimate]`):
    /// it was admitted without MRM and the model cannot account for it.
    fn estimated(
        &mut self,
        state: &State,
        id: JobId,
        settings: &EstimateSettings,
        slots: [u32; 2],
    ) -> Option<Estimated> {
        if let Some(known) = self.estimates.get(&id) {
            return Some(*known);
        }
        let spec = &state.jobs.get(&id)?.spec;
        let runs: Vec<_> = state.history.runs(&spec.name).collect();
        let estimate = self.stretched(estimate::estimate(spec, &runs, settings).ok()?);
        self.seen_job_ms += alone_ms(&estimate, slots);
        self.seen_jobs += 1;
        let known = Estimated { estimate };
        self.estimates.insert(id, known);
        Some(known)
    }

    /// Quotes `spec` at `now` and prices the deadline `choice` asks for.
    pub(crate) fn quote(
        &mut self,
        now: Timestamp,
        state: &State,
        settings: &AdmissionSettings,
        spec: &JobSpec,
        choice: Choice,
    ) -> Result<(Quote, Offer), QuoteError> {
        let estimate_settings = EstimateSettings { pi_level: settings.pi_level };
        let runs: Vec<_> = state.history.runs(&spec.name).collect();
        let estimate = estimate::estimate(spec, &runs, &estimate_settings)?;
        let (slots, assumed) = capacity(&SchedView::new(state), &estimate, self.last_slots)?;
        // The admissions first: bringing them up to date learns from the jobs that ended.
        let Admissions { schedule, works } = self.admissions(now, state, &estimate_settings, slots);
        let estimate = self.stretched(estimate);
        let left = SlotKind::ALL.map(|k| estimate.phase(k).tasks);
        let (demand, work_ms) = demand_of(&estimate, left, slots);
        // g, the average job processing time slack is measured in (§4.2): how long a job
        // takes alone on the cluster, averaged over every deadline job seen and this
        // one. Not the queue's mean fluid share, which made g a fraction of a job's time
        // and swung with the load (see docs/experiments/mrm.md, "Jump-ahead and α").
        let g = (self.seen_job_ms + demand.fluid_ms + demand.tail_ms) / (self.seen_jobs + 1) as f64;
        let quoter = Quoter::new(&schedule, Priced { demand, work_ms }, &works, settings.price, g);
        let quote = Quote {
            estimate,
            demand,
            work_ms,
            earliest: quoter.earliest(),
            curve: quoter.curve(quoter.standard_points()),
            admitted: schedule.jobs().len(),
            assumed_slots: assumed.then_some(slots),
        };
        let offer = choose(&quoter, choice, work_ms)?;
        Ok((quote, offer))
    }
}

/// The deadline and price `choice` buys on `quoter`'s curve.
fn choose(quoter: &Quoter<'_>, choice: Choice, work_ms: f64) -> Result<Offer, QuoteError> {
    let earliest = quoter.earliest();
    let offer = |deadline, price_ms| Offer { deadline, price_ms, earliest, work_ms };
    let earliest_price = quoter.price(earliest).unwrap_or(quoter.floor());
    match choice {
        Choice::Earliest => Ok(offer(earliest, earliest_price)),
        Choice::Deadline(asked) => match quoter.price(asked) {
            Some(price) => Ok(offer(asked, price)),
            None => Err(QuoteError::Infeasible { asked, earliest, price_ms: earliest_price }),
        },
        Choice::BehindAll => {
            let (deadline, price) = quoter.behind_all();
            Ok(offer(deadline, price))
        }
        Choice::MaxPrice(max_ms) => match quoter.earliest_within(max_ms) {
            Some((deadline, price)) => Ok(offer(deadline, price)),
            None => Err(QuoteError::Unaffordable { max_ms, floor_ms: quoter.floor() }),
        },
    }
}
