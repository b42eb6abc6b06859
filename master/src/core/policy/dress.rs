//! `dress`: DRESS, dynamic reservation for small-demand jobs (paper §III–IV). A job whose
//! widest stage asks for more than θ of its slot kind's slots is large-demand (LD), the
//! others small-demand (SD); each class is served first-come-first-served. TotR × δ
//! slots of each kind are reserved for SD jobs (a [`Reservation`] the reactor enforces),
//! and δ moves every interval by Algorithm 3 (`dress/ratio.rs`) from pending demand and
//! the releases predicted from the running containers' times (`dress/estimate.rs`).
//!
//! SD jobs may also use free slots outside the reservation (they are small, and a slot
//! left idle helps nobody); LD jobs may not use the reserved slots SD leaves idle, which
//! is what lets an arriving small job start at once in a congested cluster.

mod estimate;
mod ratio;

use std::collections::{BTreeMap, BTreeSet};

use slotmarket_common::ids::JobId;
pub use slotmarket_common::protocol::DemandClass;
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::fifo::fill_jobs;
use super::slots::FreeSlots;
use super::{Decisions, JobInfo, Policy, PolicyName, Reservation, SchedView, Trigger};
use crate::core::state::kind_ix;
use estimate::ReleaseModel;
use ratio::{RatioInputs, next_ratio};

/// DRESS's settings (the `[policy]` table's fields for `name = "dress"`).
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct DressSettings {
    /// θ: a job is large-demand when a stage asks for more than this share of its kind.
    pub theta: f64,
    /// δ before the first update.
    pub initial_delta: f64,
    /// How often δ is updated (Algorithm 3), in milliseconds.
    pub interval_ms: u64,
    /// The phase window pw of Algorithms 1–2, in milliseconds.
    pub window_ms: u64,
    /// t_e: finishes within the window that start a phase's release.
    pub heading: u32,
    /// Start a stage's ready tasks together or not at all (the paper's Figure 1).
    pub gang: bool,
}

/// What the last step decided, for views.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct DressReport {
    /// The reserve ratio δ.
    pub delta: f64,
    /// Slots reserved for SD jobs, per kind (map, reduce).
    pub reserved: [u32; 2],
    /// Containers predicted to be released over the next interval, (SD, LD).
    pub predicted: (f64, f64),
}

/// The DRESS policy.
#[derive(Clone, Debug)]
pub struct Dress {
    settings: DressSettings,
    /// The reserve ratio δ.
    delta: f64,
    /// When δ is next updated; `None` before the first step.
    next_update: Option<Timestamp>,
    /// Each job's class, fixed when it is first seen with slots to compare with.
    classes: BTreeMap<JobId, DemandClass>,
    /// Start and finish times of the tasks that ran, per job.
    model: ReleaseModel,
    /// The last decision, for views.
    report: DressReport,
}

impl Dress {
    /// A DRESS policy with `settings`.
    pub fn new(settings: DressSettings) -> Dress {
        Dress {
            settings,
            delta: settings.initial_delta,
            next_update: None,
            classes: BTreeMap::new(),
            model: ReleaseModel::new(settings.window_ms, settings.heading),
            report: DressReport { delta: settings.initial_delta, ..DressReport::default() },
        }
    }

    /// The class of `job`, deciding it now if it was not yet.
    fn class_of(&mut self, view: &SchedView<'_>, job: &JobInfo<'_>) -> DemandClass {
        if let Some(&class) = self.classes.get(&job.id()) {
            return class;
        }
        let mut large = false;
        for stage in job.stages() {
            let slots = view.total_slots(stage.kind);
            if slots == 0 {
                return DemandClass::Small; // nothing to compare with yet; decide later
            }
            large |= f64::from(stage.tasks) > self.settings.theta * f64::from(slots);
        }
        let class = if large { DemandClass::Large } else { DemandClass::Small };
        self.classes.insert(job.id(), class);
        class
    }

    /// Folds the containers' times into the release model: new runs start, ended ones
    /// finish now (Algorithms 1–2 read these), and ended jobs are dropped.
    fn observe(&mut self, now: Timestamp, view: &SchedView<'_>) {
        let mut live = BTreeSet::new();
        for c in view.live_unordered() {
            live.insert(c.container);
            if let Some(started) = c.started {
                self.model.running(c.task.job, c.container, c.kind, started);
            }
        }
        let jobs: Vec<JobId> = self.model.jobs().collect();
        for job in jobs {
            match view.job(job) {
                Some(info) if !info.is_ended() => {
                    let completed = SlotKind::ALL.map(|k| info.completed(k));
                    self.model.settle(job, now, &|c| live.contains(&c), completed);
                }
                _ => self.model.forget(job),
            }
        }
        // An ended job keeps its class while the core holds it, for `status` and `jobs`.
        self.classes.retain(|id, _| view.job(*id).is_some());
    }

    /// Algorithm 3's inputs now, summed over the slot kinds.
    fn ratio_inputs(&mut self, now: Timestamp, view: &SchedView<'_>) -> RatioInputs {
        let mut inputs = RatioInputs::default();
        for kind in SlotKind::ALL {
            let total = view.total_slots(kind);
            let free: u32 = view.agents().map(|a| a.free(kind)).sum();
            let reserved = (self.delta * f64::from(total)).round() as u32;
            let sd_used: u32 = view
                .active_jobs()
                .filter(|j| self.classes.get(&j.id()) == Some(&DemandClass::Small))
                .map(|j| j.running(kind))
                .sum();
            let idle = reserved.saturating_sub(sd_used).min(free);
            inputs.total += f64::from(total);
            inputs.free_sd += f64::from(idle);
            inputs.free_ld += f64::from(free - idle);
        }
        let jobs: Vec<JobInfo<'_>> = view.active_jobs().collect();
        for job in jobs {
            let class = self.class_of(view, &job);
            let release: f64 = SlotKind::ALL
                .iter()
                .map(|&k| self.model.predicted(job.id(), k, now, self.settings.interval_ms))
                .sum();
            let pending: u32 = SlotKind::ALL.iter().map(|&k| job.pending(k)).sum();
            let (released, demands) = match class {
                DemandClass::Small => (&mut inputs.release_sd, &mut inputs.demands_sd),
                DemandClass::Large => (&mut inputs.release_ld, &mut inputs.demands_ld),
            };
            *released += release;
            if pending > 0 {
                demands.push(f64::from(pending));
            }
        }
        inputs
    }

    /// Updates δ once per interval, on ticks.
    fn update_ratio(&mut self, now: Timestamp, view: &SchedView<'_>, trigger: Trigger) {
        let due = self.next_update.is_some_and(|at| now >= at);
        if self.next_update.is_none() {
            self.next_update = Some(Timestamp(now.0 + self.settings.interval_ms));
        }
        if trigger != Trigger::Tick || !due {
            return;
        }
        let inputs = self.ratio_inputs(now, view);
        self.delta = next_ratio(self.delta, &inputs);
        self.report.predicted = (inputs.release_sd, inputs.release_ld);
        self.next_update = Some(Timestamp(now.0 + self.settings.interval_ms));
    }

    /// SD first (any free slot), then LD on what the reservation leaves, for `kind`.
    fn assign(&mut self, view: &SchedView<'_>, kind: SlotKind, reserved: u32, out: &mut Decisions) {
        let mut small = Vec::new();
        let mut large = Vec::new();
        let mut sd_used = 0;
        for job in view.active_jobs() {
            match self.class_of(view, &job) {
                DemandClass::Small => {
                    sd_used += job.running(kind);
                    small.push(job);
                }
                DemandClass::Large => large.push(job),
            }
        }
        if !view.has_free(kind) {
            return;
        }
        let total = view.total_slots(kind);
        let gang = |widest: u32| self.settings.gang.then_some(widest);
        let mut free = FreeSlots::new(view.agents_with_free(kind), kind);
        let before = free.remaining();
        let mut room = before;
        fill_jobs(
            kind,
            small.into_iter().filter(|j| j.ready(kind) > 0),
            &mut free,
            &mut room,
            gang(total),
            &mut out.assignments,
        );
        sd_used += before - free.remaining();
        let idle = reserved.saturating_sub(sd_used);
        let mut room = free.remaining().saturating_sub(idle);
        let widest = total.saturating_sub(reserved).max(1);
        fill_jobs(
            kind,
            large.into_iter().filter(|j| j.ready(kind) > 0),
            &mut free,
            &mut room,
            gang(widest),
            &mut out.assignments,
        );
    }
}

impl Policy for Dress {
    fn name(&self) -> PolicyName {
        PolicyName::Dress
    }

    fn schedule(&mut self, now: Timestamp, view: &SchedView<'_>, trigger: Trigger) -> Decisions {
        self.observe(now, view);
        for job in view.active_jobs() {
            self.class_of(view, &job);
        }
        self.update_ratio(now, view, trigger);
        let mut decisions = Decisions::default();
        let small: BTreeSet<JobId> = view
            .active_jobs()
            .filter(|j| self.classes.get(&j.id()) != Some(&DemandClass::Large))
            .map(|j| j.id())
            .collect();
        for kind in SlotKind::ALL {
            let reserved = (self.delta * f64::from(view.total_slots(kind))).round() as u32;
            self.report.reserved[kind_ix(kind)] = reserved;
            self.assign(view, kind, reserved, &mut decisions);
            decisions.reservations.push(Reservation { kind, slots: reserved, jobs: small.clone() });
        }
        self.report.delta = self.delta;
        decisions
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        self.next_update
    }

    fn reserve_report(&self) -> Option<DressReport> {
        Some(self.report.clone())
    }

    fn demand_class(&self, job: JobId) -> Option<DemandClass> {
        self.classes.get(&job).copied()
    }
}
