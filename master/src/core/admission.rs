//! MRM's admission model (§5): the admitted jobs' remaining work (prediction-interval
//! upper bounds) against the cluster's slots, the earliest finish a new job can be
//! promised without making any admitted deadline infeasible under EDF, and the check
//! that a chosen deadline keeps every promise.
//!
//! # The model
//!
//! The cluster is one preemptive fluid server: a job with `map` slot-ms of map work and
//! `reduce` slot-ms of reduce work occupies it for `p = map/M + reduce/R` ms, where M and R
//! are the slot counts (all slots on one job at once). A job also cannot finish sooner
//! than its span `c` (its longest map task plus its longest reduce task), so it ends
//! `t = max(c − p, 0)` ms after its share of the server is done: its *tail*, during which
//! it holds only a few slots and the others already serve later jobs. Under EDF, job k (in
//! deadline order) is feasible when `now + Σ_{i≤k} p_i + t_k ≤ d_k`; its *slack* is
//! `d_k − now − Σ_{i≤k} p_i − t_k`. A new job of size `p` may take deadline `d` when the
//! jobs due by `d` leave it room (`now + Σ_{d_i≤d} p_i + p + t ≤ d`) and every job due
//! after `d` has slack of at least `p` (it is pushed back by exactly `p`). Ties go to the
//! job admitted first. This is the paper's greedy fill of the lazy schedule's gaps
//! (Figure 7), for many slots.

use slotmarket_common::ids::JobId;
use slotmarket_common::time::Timestamp;

/// What the model knows of one job: its size on the fluid server and its tail.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Demand {
    /// Milliseconds of the whole cluster its remaining work needs (`p`).
    pub fluid_ms: f64,
    /// Milliseconds it needs past its fluid share because it cannot use every slot (`t`).
    pub tail_ms: f64,
}

impl Demand {
    /// The demand of `map_ms` and `reduce_ms` slot-ms of work with a span of `span_ms`
    /// on `map_slots` and `reduce_slots` slots (a kind with no slots counts as one slot,
    /// so work never vanishes).
    pub fn new(map_ms: f64, reduce_ms: f64, span_ms: f64, map_slots: u32, reduce_slots: u32) -> Demand {
        let fluid_ms = map_ms / f64::from(map_slots.max(1)) + reduce_ms / f64::from(reduce_slots.max(1));
        Demand { fluid_ms, tail_ms: (span_ms - fluid_ms).max(0.0) }
    }
}

/// An admitted job as the model sees it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Admitted {
    /// The job.
    pub job: JobId,
    /// Its promised finish.
    pub deadline: Timestamp,
    /// Its remaining demand.
    pub demand: Demand,
}

/// The admitted jobs in EDF order with their prefix work and slack, built once per quote.
#[derive(Clone, Debug)]
pub struct Schedule {
    now: Timestamp,
    /// Admitted jobs by deadline, ties by admission (job id).
    jobs: Vec<Admitted>,
    /// `prefix[k]`: fluid ms of the first k jobs.
    prefix: Vec<f64>,
    /// `slack[k]`: slack of job k, in ms (negative when it is already late in the model).
    slack: Vec<f64>,
    /// `min_slack_from[k]`: the least slack among jobs k.. (infinite past the end).
    min_slack_from: Vec<f64>,
}

impl Schedule {
    /// The schedule of `jobs` at `now`.
    pub fn new(now: Timestamp, mut jobs: Vec<Admitted>) -> Schedule {
        jobs.sort_by_key(|j| (j.deadline, j.job));
        Schedule::from_sorted(now, jobs)
    }

    /// The schedule of `jobs` at `now`, already in EDF order (by deadline, then job id).
    pub fn from_sorted(now: Timestamp, jobs: Vec<Admitted>) -> Schedule {
        debug_assert!(jobs.windows(2).all(|w| (w[0].deadline, w[0].job) <= (w[1].deadline, w[1].job)));
        let mut prefix = Vec::with_capacity(jobs.len() + 1);
        prefix.push(0.0);
        for job in &jobs {
            prefix.push(prefix[prefix.len() - 1] + job.demand.fluid_ms);
        }
        let slack: Vec<f64> = jobs
            .iter()
            .enumerate()
            .map(|(k, j)| ms_between(now, j.deadline) - prefix[k + 1] - j.demand.tail_ms)
            .collect();
        let mut min_slack_from = vec![f64::INFINITY; jobs.len() + 1];
        for k in (0..jobs.len()).rev() {
            min_slack_from[k] = min_slack_from[k + 1].min(slack[k]);
        }
        Schedule { now, jobs, prefix, slack, min_slack_from }
    }

    /// The admitted jobs in EDF order.
    pub fn jobs(&self) -> &[Admitted] {
        &self.jobs
    }

    /// The slack of the `k`-th job in EDF order, in ms.
    pub fn slack_ms(&self, k: usize) -> f64 {
        self.slack[k]
    }

    /// When the schedule was taken.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Jobs due at or before `at`: the ones a new job with deadline `at` runs behind.
    pub fn due_by(&self, at: Timestamp) -> usize {
        self.jobs.partition_point(|j| j.deadline <= at)
    }

    /// Fluid ms of all admitted work: when the server would be idle with no new job.
    pub fn total_fluid_ms(&self) -> f64 {
        self.prefix[self.jobs.len()]
    }

    /// Whether a new job of `demand` may be promised `deadline`: it fits behind the jobs
    /// due by then, and every job due later keeps a slack of at least its size.
    pub fn is_feasible(&self, demand: &Demand, deadline: Timestamp) -> bool {
        let k = self.due_by(deadline);
        let own = ms_between(self.now, deadline) >= self.prefix[k] + demand.fluid_ms + demand.tail_ms - 1e-6;
        own && demand.fluid_ms <= self.min_slack_from[k] + 1e-6
    }

    /// The earliest deadline a new job of `demand` may be promised (whole milliseconds).
    /// Walks the gaps between admitted deadlines in order and takes the first where the
    /// job fits and the jobs after the gap can absorb it; past the last deadline it always
    /// fits, so there is always an answer.
    pub fn earliest_feasible_finish(&self, demand: &Demand) -> Timestamp {
        let now_ms = self.now.0 as f64;
        for k in 0..=self.jobs.len() {
            // Within a group of equal deadlines only its end is a gap boundary.
            if k > 0 && k < self.jobs.len() && self.jobs[k].deadline == self.jobs[k - 1].deadline {
                continue;
            }
            if demand.fluid_ms > self.min_slack_from[k] + 1e-6 {
                continue;
            }
            let floor = if k == 0 { self.now } else { self.jobs[k - 1].deadline };
            let needed = now_ms + self.prefix[k] + demand.fluid_ms + demand.tail_ms;
            let at = floor.max(Timestamp(needed.ceil().max(0.0) as u64));
            if self.jobs.get(k).is_none_or(|next| at < next.deadline) && self.is_feasible(demand, at) {
                return at;
            }
        }
        // Unreachable in exact arithmetic (the last gap is unbounded); a safe answer anyway.
        let needed = now_ms + self.total_fluid_ms() + demand.fluid_ms + demand.tail_ms;
        let last = self.jobs.last().map_or(self.now, |j| j.deadline);
        last.max(Timestamp(needed.ceil() as u64)) + std::time::Duration::from_millis(1)
    }

    /// The schedule with the new job admitted at `deadline` (for tests and for quoting a
    /// run of arrivals).
    pub fn with(&self, job: JobId, demand: Demand, deadline: Timestamp) -> Schedule {
        let mut jobs = self.jobs.clone();
        jobs.push(Admitted { job, deadline, demand });
        Schedule::new(self.now, jobs)
    }

    /// Whether every admitted job meets its deadline in the model (all slack ≥ 0).
    pub fn all_feasible(&self) -> bool {
        self.slack.iter().all(|&s| s >= -1e-6)
    }
}

/// Milliseconds from `from` to `to`, negative when `to` is earlier.
fn ms_between(from: Timestamp, to: Timestamp) -> f64 {
    to.0 as f64 - from.0 as f64
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
