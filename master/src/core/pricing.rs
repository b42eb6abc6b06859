//! MRM's price–deadline curve (§4.2): what each deadline from the earliest feasible finish
//! on costs a new job. Eq. 13 (the default) makes early deadlines expensive and slack
//! cheap, and charges for the slack a job takes from the queued jobs it jumps ahead of;
//! eqs. 14 (exponential decay) and 16 (load-aware) are selectable. Prices are in
//! slot-seconds of PI-upper work, 1 credit each: a job that pays its processing time
//! pays the floor. Pure arithmetic over an admission [`Schedule`].
//!
//! Slack a new job offers at deadline `d` is `δ = (d − f_e) / g`: the time between its
//! earliest feasible finish `f_e` and `d`, normalised by the average job processing time
//! `g` (fluid ms). For a queued job i, `δ_i` is its slack in the model over `g`, and
//! admitting the new job ahead of it lowers that by the new job's fluid size.

use serde::{Deserialize, Serialize};
use slotmarket_common::time::Timestamp;

use super::admission::{Demand, Schedule};

/// Longest a curve is searched past the last admitted deadline: ten years, in ms.
const SEARCH_HORIZON_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// Which curve prices deadlines (`[admission] price` in `master.toml`).
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "curve", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PriceCurve {
    /// Eq. 13: `κ (P_j/(δ_j+1) + Σ_{i jumped} (P_i/(δ'_i+1) − P_i/(δ_i+1)))`.
    Eq13 {
        /// κ: the price of a job offering no slack, per unit of work (default 2).
        kappa: f64,
    },
    /// Eq. 14: `κ P_j exp(−δ_j / (p_j/g))`: the fixed premium decays with slack measured
    /// in the job's own processing times.
    Eq14 {
        /// κ ≥ 1.
        kappa: f64,
    },
    /// Eq. 16: `P_j exp(ρ p_j / g)` with `ρ = max(0, 1 − b/p_j)` and `b` the room left up
    /// to the deadline once the jobs due by then are done. Not monotone across admitted
    /// deadlines, as in the paper.
    Eq16 {},
}

impl Default for PriceCurve {
    fn default() -> PriceCurve {
        PriceCurve::Eq13 { kappa: 2.0 }
    }
}

/// The new job as pricing sees it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Priced {
    /// Its demand in the admission model.
    pub demand: Demand,
    /// Its PI-upper work in slot-ms: the price floor, and `P_j`.
    pub work_ms: f64,
}

/// The curve of one new job against one schedule, precomputed so that each price is a
/// binary search: build once per quote.
#[derive(Clone, Debug)]
pub struct Quoter<'a> {
    schedule: &'a Schedule,
    job: Priced,
    curve: PriceCurve,
    /// g: the average job processing time, fluid ms (at least 1).
    avg_fluid_ms: f64,
    earliest: Timestamp,
    /// `jumped[k]`: eq. 13's second term for a deadline behind the first k jobs.
    jumped: Vec<f64>,
}

impl<'a> Quoter<'a> {
    /// The curve for `job` over `schedule`; `works_ms[k]` is the PI-upper work of the
    /// k-th job in EDF order (the schedule's order), its `P_k`.
    pub fn new(
        schedule: &'a Schedule,
        job: Priced,
        works_ms: &[f64],
        curve: PriceCurve,
        avg_fluid_ms: f64,
    ) -> Quoter<'a> {
        let g = avg_fluid_ms.max(1.0);
        let n = schedule.jobs().len();
        let mut jumped = vec![0.0; n + 1];
        for k in (0..n).rev() {
            let p = works_ms.get(k).copied().unwrap_or(0.0);
            let before = schedule.slack_ms(k).max(0.0) / g;
            let after = (before - job.demand.fluid_ms / g).max(0.0);
            jumped[k] = jumped[k + 1] + p / (after + 1.0) - p / (before + 1.0);
        }
        let earliest = schedule.earliest_feasible_finish(&job.demand);
        Quoter { schedule, job, curve, avg_fluid_ms: g, earliest, jumped }
    }

    /// The earliest deadline the job can be promised.
    pub fn earliest(&self) -> Timestamp {
        self.earliest
    }

    /// The deadline behind every admitted job (what FCFS would promise) and its price:
    /// the later of the last admitted deadline and the time all admitted work and this
    /// job's are done. Always feasible: no job is due after it.
    pub fn behind_all(&self) -> (Timestamp, f64) {
        let needed = self.schedule.now().0 as f64
            + self.schedule.total_fluid_ms()
            + self.job.demand.fluid_ms
            + self.job.demand.tail_ms;
        let last = self.schedule.jobs().last().map_or(self.earliest, |j| j.deadline);
        let at = last.max(self.earliest).max(Timestamp(needed.ceil().max(0.0) as u64));
        (at, self.raw_price(at))
    }

    /// The lowest price any deadline has: the job's PI-upper work, in slot-ms.
    pub fn floor(&self) -> f64 {
        self.job.work_ms
    }

    /// The price of `deadline` in slot-ms, or `None` when the model cannot promise it.
    pub fn price(&self, deadline: Timestamp) -> Option<f64> {
        self.schedule.is_feasible(&self.job.demand, deadline).then(|| self.raw_price(deadline))
    }

    /// The curve's value at `deadline` (from the earliest feasible finish on), feasible
    /// or not.
    fn raw_price(&self, deadline: Timestamp) -> f64 {
        let g = self.avg_fluid_ms;
        let p = self.job.work_ms;
        let delta = deadline.0.saturating_sub(self.earliest.0) as f64 / g;
        let raw = match self.curve {
            PriceCurve::Eq13 { kappa } => {
                kappa * (p / (delta + 1.0) + self.jumped[self.schedule.due_by(deadline)])
            }
            PriceCurve::Eq14 { kappa } => {
                let own = (self.job.demand.fluid_ms / g).max(1e-9);
                kappa * p * (-delta / own).exp()
            }
            PriceCurve::Eq16 {} => {
                let k = self.schedule.due_by(deadline);
                let before: f64 = self.schedule.jobs()[..k].iter().map(|j| j.demand.fluid_ms).sum();
                let room = deadline.0 as f64 - self.schedule.now().0 as f64 - before;
                let fluid = self.job.demand.fluid_ms.max(1e-9);
                let rho = (1.0 - room / fluid).max(0.0);
                p * (rho * fluid / g).exp()
            }
        };
        raw.max(p)
    }

    /// Prices at `deadlines`, leaving out those the model cannot promise.
    pub fn curve(&self, deadlines: impl IntoIterator<Item = Timestamp>) -> Vec<(Timestamp, f64)> {
        deadlines.into_iter().filter_map(|d| self.price(d).map(|p| (d, p))).collect()
    }

    /// The deadlines a quote shows: the earliest, then the earliest plus ¼, ½, 1, 2, 4
    /// and 8 average job times (where the price falls), each if feasible.
    pub fn standard_points(&self) -> Vec<Timestamp> {
        [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
            .iter()
            .map(|f| Timestamp(self.earliest.0 + (f * self.avg_fluid_ms).round() as u64))
            .collect()
    }

    /// The earliest feasible deadline whose price is at most `budget` (slot-ms), with
    /// that price. Walks the gaps between admitted deadlines; within one gap both the
    /// price and feasibility only get better with time, so a binary search finds it.
    pub fn earliest_within(&self, budget: f64) -> Option<(Timestamp, f64)> {
        if budget + 1e-9 < self.floor() {
            return None;
        }
        let jobs = self.schedule.jobs();
        let start = self.schedule.due_by(self.earliest);
        let mut low = self.earliest;
        for k in start..=jobs.len() {
            let high = jobs.get(k).map_or(low.0 + SEARCH_HORIZON_MS, |j| j.deadline.0.saturating_sub(1));
            if high >= low.0 {
                let ok = |d: u64| {
                    let at = Timestamp(d);
                    self.raw_price(at) <= budget + 1e-9 && self.schedule.is_feasible(&self.job.demand, at)
                };
                if ok(high) {
                    let (mut lo, mut hi) = (low.0, high);
                    while lo < hi {
                        let mid = lo + (hi - lo) / 2;
                        if ok(mid) { hi = mid } else { lo = mid + 1 }
                    }
                    return Some((Timestamp(lo), self.raw_price(Timestamp(lo))));
                }
            }
            if let Some(j) = jobs.get(k) {
                low = low.max(j.deadline);
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "pricing_tests.rs"]
mod tests;
