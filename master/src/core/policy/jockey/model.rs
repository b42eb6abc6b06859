//! Jockey's completion-time model C(p, a) (§4.1): the remaining time of a job at
//! progress `p` under an allocation of `a` slots, built by simulating the job's profile
//! many times at each allocation and sampling every step; and the Amdahl alternative
//! `S_t + P_t / a`.
//!
//! The builder is pure and deterministic (a seeded generator) but costs many simulated
//! runs, so the core never calls it: the `jockey` policy asks for a model with
//! [`Command::BuildCompletionModel`](crate::core::Command), and the driver builds it — the
//! simulator at once, the server off its actor — and hands it back as
//! [`Event::CompletionModelBuilt`](crate::core::Event).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use slotmarket_common::rng::SplitMix64;

use super::profile::{JobProfile, StageProfile};
use super::progress::Indicator;

/// Progress buckets a model keeps per allocation.
pub const BUCKETS: usize = 50;

/// What the policy asks a driver to build.
#[derive(Clone, PartialEq, Debug)]
pub struct ModelRequest {
    /// The profile to simulate.
    pub profile: JobProfile,
    /// The indicator the model is indexed by.
    pub indicator: Indicator,
    /// The allocations to model, ascending.
    pub allocations: Vec<u32>,
    /// Simulated runs per allocation.
    pub runs: u32,
    /// Which quantile of the sampled remaining times the model keeps (e.g. 0.9: a time
    /// the job beats nine times in ten).
    pub quantile: f64,
    /// Seed of the simulated draws.
    pub seed: u64,
    /// Draw each stage's task times from the job's pooled spread (every stage's times
    /// over its own mean) scaled by the stage's mean, rather than from the stage's own
    /// times only: a heavier tail than one stage's few samples show.
    pub pooled_tail: bool,
    /// Stages with fewer profiled task times than this draw from the pooled spread too
    /// (as `pooled_tail` draws every stage): a few samples cannot show a stage's tail.
    pub pooled_below: u32,
    /// A higher quantile for the tail reserve ([`CompletionModel::tail_reserve`]); at or
    /// below `quantile`: no reserve.
    pub tail_quantile: f64,
    /// Keep this many evenly spaced quantiles of the sampled remaining times per bucket
    /// ([`CompletionModel::spread_ms`]), for an expected utility over C(p, a)'s spread;
    /// 0: none.
    pub spread_points: u32,
}

/// A built C(p, a): for each modelled allocation, the quantile of the remaining time per
/// progress bucket.
#[derive(Clone, PartialEq, Debug)]
pub struct CompletionModel {
    /// The job name.
    pub name: String,
    /// The newest run of the profile it was built from.
    pub newest_run: u64,
    /// The modelled allocations, ascending.
    pub allocations: Vec<u32>,
    /// `remaining_ms[i][b]`: remaining time in milliseconds under `allocations[i]` at
    /// progress in bucket `b` (`b / BUCKETS ..= (b + 1) / BUCKETS`).
    pub remaining_ms: Vec<Vec<f64>>,
    /// Each stage's total queueing time (`Q_s`) measured at the middle allocation, for
    /// the `totalworkWithQ` indicator.
    pub queue_ms: Vec<f64>,
    /// Like `remaining_ms`, the [`INTERVAL`] quantiles of the sampled remaining times:
    /// the predicted finish's interval that `slotmarket status` shows.
    pub interval_ms: Vec<Vec<(f64, f64)>>,
    /// Per progress bucket, how much longer the `tail_quantile` of the remaining time is
    /// than the kept quantile under the largest modelled allocation, where what remains
    /// is the critical path: the straggler risk no allocation can shorten. Empty without
    /// a `tail_quantile`.
    pub reserve_ms: Vec<f64>,
    /// `spread_ms[i][b]`: the `spread_points` quantiles `(k + ½) / n` of the sampled
    /// remaining times under `allocations[i]` in bucket `b`, ascending — C(p, a)'s
    /// distribution, each point standing for an equal share of the runs. Empty without
    /// `spread_points`.
    pub spread_ms: Vec<Vec<Vec<f64>>>,
}

/// The quantiles of the simulated remaining times a model keeps as its interval.
pub const INTERVAL: (f64, f64) = (0.1, 0.9);

impl CompletionModel {
    /// C(p, a): the remaining time at progress `p` under the largest modelled allocation
    /// not above `a` (the smallest when `a` is below them all).
    pub fn remaining(&self, p: f64, a: u32) -> f64 {
        let i = self.allocations.iter().rposition(|&m| m <= a).unwrap_or(0);
        let b = ((p.clamp(0.0, 1.0) * BUCKETS as f64) as usize).min(BUCKETS - 1);
        self.remaining_ms.get(i).and_then(|row| row.get(b)).copied().unwrap_or(0.0)
    }

    /// C(p, a) for any `a`: between two modelled allocations, interpolated linearly in
    /// `1 / a` (remaining time falls roughly as work over slots), so an allocation
    /// between grid points is not priced as the one below it; outside the grid, the
    /// nearest end.
    pub fn remaining_between(&self, p: f64, a: u32) -> f64 {
        let Some(i) = self.allocations.iter().rposition(|&m| m <= a) else { return self.remaining(p, a) };
        let (Some(&low), Some(&high)) = (self.allocations.get(i), self.allocations.get(i + 1)) else {
            return self.remaining(p, a);
        };
        let (r_low, r_high) = (self.remaining(p, low), self.remaining(p, high));
        let inverse = |x: u32| 1.0 / f64::from(x.max(1));
        let w = (inverse(low) - inverse(a)) / (inverse(low) - inverse(high));
        r_low + w.clamp(0.0, 1.0) * (r_high - r_low)
    }

    /// Time to keep in hand at progress `p` for a straggler on what remains of the
    /// critical path ([`reserve_ms`](Self::reserve_ms)): added to C(p, a) at every `a`,
    /// it makes the job reach its tail that much earlier, so that a long last task that
    /// the kept quantile leaves out still fits. 0 without a reserve.
    pub fn tail_reserve(&self, p: f64) -> f64 {
        let b = ((p.clamp(0.0, 1.0) * BUCKETS as f64) as usize).min(BUCKETS - 1);
        self.reserve_ms.get(b).copied().unwrap_or(0.0)
    }

    /// C(p, a)'s spread ([`spread_ms`](Self::spread_ms)) at any `a`, each point
    /// interpolated between the modelled allocations around `a` as
    /// [`remaining_between`](Self::remaining_between) does; empty without a spread.
    pub fn spread_between(&self, p: f64, a: u32) -> Vec<f64> {
        let b = ((p.clamp(0.0, 1.0) * BUCKETS as f64) as usize).min(BUCKETS - 1);
        let row = |i: usize| self.spread_ms.get(i).and_then(|r| r.get(b)).cloned().unwrap_or_default();
        let Some(i) = self.allocations.iter().rposition(|&m| m <= a) else { return row(0) };
        let (Some(&low), Some(&high)) = (self.allocations.get(i), self.allocations.get(i + 1)) else {
            return row(i);
        };
        let inverse = |x: u32| 1.0 / f64::from(x.max(1));
        let w = ((inverse(low) - inverse(a)) / (inverse(low) - inverse(high))).clamp(0.0, 1.0);
        row(i).iter().zip(row(i + 1)).map(|(l, h)| l + w * (h - l)).collect()
    }

    /// The [`INTERVAL`] of remaining times at progress `p` under allocation `a`, chosen
    /// as [`remaining`](Self::remaining) chooses.
    pub fn interval(&self, p: f64, a: u32) -> (f64, f64) {
        let i = self.allocations.iter().rposition(|&m| m <= a).unwrap_or(0);
        let b = ((p.clamp(0.0, 1.0) * BUCKETS as f64) as usize).min(BUCKETS - 1);
        self.interval_ms.get(i).and_then(|row| row.get(b)).copied().unwrap_or((0.0, 0.0))
    }
}

/// The allocations worth modelling up to `max`: every one to 8, then steps of about 15 %.
pub fn allocation_grid(max: u32) -> Vec<u32> {
    let mut grid = Vec::new();
    let mut a = 1u32;
    while a <= max {
        grid.push(a);
        a = if a < 8 { a + 1 } else { (f64::from(a) * 1.15).ceil() as u32 };
    }
    if grid.last() != Some(&max) && max > 0 {
        grid.push(max);
    }
    grid
}

/// Builds C(p, a) by simulating `request.profile` `runs` times at each allocation.
pub fn build_completion_model(request: &ModelRequest) -> CompletionModel {
    let mut profile = request.profile.clone();
    let middle = request.allocations.get(request.allocations.len() / 2).copied().unwrap_or(1);
    let mut rng = SplitMix64::for_stream(request.seed, profile.newest_run);
    let pooled =
        |stage: &StageProfile| request.pooled_tail || stage.run_ms.len() < request.pooled_below as usize;
    let shape = if profile.stages.iter().any(pooled) { pooled_shape(&profile) } else { Vec::new() };
    let shape = Shape { pooled: profile.stages.iter().map(pooled).collect(), spread: shape };
    let queue_ms = simulate(&profile, &shape, middle, &mut rng, &mut |_, _| {}).1;
    for (stage, &q) in profile.stages.iter_mut().zip(&queue_ms) {
        stage.queue_ms = q;
    }
    let (mut remaining_ms, mut interval_ms, mut reserve_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut spread_ms = Vec::new();
    for (i, &a) in request.allocations.iter().enumerate() {
        let sampled = {
            let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); BUCKETS];
            for _ in 0..request.runs.max(1) {
                let mut seen: Vec<(f64, u64)> = Vec::new();
                let (end, _) = simulate(&profile, &shape, a, &mut rng, &mut |done, at| {
                    seen.push((request.indicator.progress(&profile, done), at));
                });
                for (p, at) in seen {
                    let b = ((p * BUCKETS as f64) as usize).min(BUCKETS - 1);
                    buckets[b].push(end.saturating_sub(at) as f64);
                }
            }
            for samples in &mut buckets {
                samples.sort_by(f64::total_cmp);
            }
            buckets
        };
        let kept = quantiles(&sampled, request.quantile);
        if i + 1 == request.allocations.len() && request.tail_quantile > request.quantile {
            let tail = quantiles(&sampled, request.tail_quantile);
            reserve_ms = tail.iter().zip(&kept).map(|(t, k)| (t - k).max(0.0)).collect();
        }
        remaining_ms.push(kept);
        if request.spread_points > 0 {
            let n = request.spread_points;
            let points: Vec<Vec<f64>> =
                (0..n).map(|k| quantiles(&sampled, (f64::from(k) + 0.5) / f64::from(n))).collect();
            spread_ms.push((0..BUCKETS).map(|b| points.iter().map(|q| q[b]).collect()).collect());
        }
        let (low, high) = (quantiles(&sampled, INTERVAL.0), quantiles(&sampled, INTERVAL.1));
        interval_ms.push(low.into_iter().zip(high).collect());
    }
    CompletionModel {
        name: profile.name.clone(),
        newest_run: profile.newest_run,
        allocations: request.allocations.clone(),
        remaining_ms,
        queue_ms,
        interval_ms,
        reserve_ms,
        spread_ms,
    }
}

/// Where a simulated run draws task times: from `spread` (times the stage's mean) for
/// the stages marked `pooled`, from the stage's own samples for the others.
struct Shape {
    /// Per stage, whether it draws from `spread`.
    pooled: Vec<bool>,
    /// The job's pooled spread ([`pooled_shape`]); empty when no stage draws from it.
    spread: Vec<f64>,
}

/// Every task time of the profile over its stage's mean, ascending: the job's spread,
/// for [`ModelRequest::pooled_tail`].
fn pooled_shape(profile: &JobProfile) -> Vec<f64> {
    let mut shape: Vec<f64> = profile
        .stages
        .iter()
        .map(|s| (s, s.mean_ms()))
        .filter(|&(_, mean)| mean > 0.0)
        .flat_map(|(s, mean)| s.run_ms.iter().map(move |&ms| ms as f64 / mean))
        .collect();
    shape.sort_by(f64::total_cmp);
    shape
}

/// Each bucket's quantile (its samples sorted); an empty bucket takes the value of the
/// nearest bucket below it that has one (less progress: more time left, the safe side),
/// or above it.
fn quantiles(buckets: &[Vec<f64>], q: f64) -> Vec<f64> {
    let mut out: Vec<Option<f64>> = buckets
        .iter()
        .map(|samples| {
            if samples.is_empty() {
                return None;
            }
            let ix = ((samples.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
            Some(samples[ix])
        })
        .collect();
    let mut last = None;
    for v in out.iter_mut() {
        if v.is_none() {
            *v = last;
        }
        last = *v;
    }
    let first = out.iter().flatten().next().copied().unwrap_or(0.0);
    out.into_iter().map(|v| v.unwrap_or(first)).collect()
}

/// One simulated run of `profile` on `slots` slots (of any kind: Jockey's tokens): ready
/// tasks start in the order they became ready as slots free up (the core starts the
/// lowest stage first; simulating that made the model less pessimistic about DAGs and
/// missed more deadlines for the allocation it saved, `docs/experiments/jockey.md`,
/// twenty-first session), each draws its run time from its stage's
/// samples (or, for a stage `shape` pools, its mean times a draw from the pooled spread) and fails
/// (and runs again) with the stage's failure probability. Calls
/// `step(done, at)` at the start and after every task completion with each stage's
/// completed fraction. Returns the finish time and each stage's total queueing.
fn simulate(
    profile: &JobProfile,
    shape: &Shape,
    slots: u32,
    rng: &mut SplitMix64,
    step: &mut dyn FnMut(&[f64], u64),
) -> (u64, Vec<f64>) {
    let n = profile.stages.len();
    let mut completed = vec![0u32; n];
    let mut released = vec![false; n];
    let mut queue_ms = vec![0.0; n];
    let mut ready: VecDeque<(usize, u64)> = VecDeque::new();
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut now = 0u64;
    let mut done = vec![0.0; n];
    let means: Vec<f64> = profile.stages.iter().map(StageProfile::mean_ms).collect();
    release(profile, &completed, &mut released, &mut ready, now);
    step(&done, now);
    loop {
        while running.len() < slots.max(1) as usize {
            let Some((s, since)) = ready.pop_front() else { break };
            queue_ms[s] += (now - since) as f64;
            let stage = &profile.stages[s];
            let spread = &shape.spread;
            let ms = if spread.is_empty() || !shape.pooled.get(s).copied().unwrap_or(false) {
                stage.run_ms[rng.below(stage.run_ms.len() as u64) as usize]
            } else {
                (means[s] * spread[rng.below(spread.len() as u64) as usize]).round() as u64
            };
            running.push(Reverse((now + ms.max(1), s)));
        }
        let Some(Reverse((end, s))) = running.pop() else { break };
        now = end;
        if rng.unit() < profile.stages[s].failure.min(0.9) {
            ready.push_back((s, now));
            continue;
        }
        completed[s] += 1;
        done[s] = f64::from(completed[s]) / f64::from(profile.stages[s].tasks.max(1));
        release(profile, &completed, &mut released, &mut ready, now);
        step(&done, now);
    }
    (now, queue_ms)
}

/// Queues the tasks of every stage whose dependencies have all completed.
fn release(
    profile: &JobProfile,
    completed: &[u32],
    released: &mut [bool],
    ready: &mut VecDeque<(usize, u64)>,
    now: u64,
) {
    for (s, stage) in profile.stages.iter().enumerate() {
        let deps_done =
            stage.after.iter().all(|&d| completed.get(d).is_some_and(|&c| c >= profile.stages[d].tasks));
        if !released[s] && deps_done {
            released[s] = true;
            ready.extend((0..stage.tasks).map(|_| (s, now)));
        }
    }
}

/// The Amdahl alternative (§4.1): remaining time `S_t + P_t / a`, with `S_t` the
/// remaining critical path and `P_t` the remaining work off it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Amdahl {
    /// Remaining critical path, in milliseconds.
    pub serial_ms: f64,
    /// Remaining total work, in slot-milliseconds.
    pub work_ms: f64,
}

impl Amdahl {
    /// `S_t` and `P_t` of `profile` with each stage's completed fraction `done`.
    pub fn of(profile: &JobProfile, done: &[f64]) -> Amdahl {
        let after = profile.path_after_ms();
        let f = |s: usize| done.get(s).copied().unwrap_or(0.0).clamp(0.0, 1.0);
        let open = || (0..profile.stages.len()).filter(|&s| f(s) < 1.0);
        let serial_ms = open()
            .map(|s| (1.0 - f(s)) * profile.stages[s].longest_ms() as f64 + after[s] as f64)
            .fold(0.0, f64::max);
        let work_ms: f64 = open().map(|s| (1.0 - f(s)) * profile.stages[s].work_ms()).sum();
        Amdahl { serial_ms, work_ms: (work_ms - serial_ms).max(0.0) }
    }

    /// The remaining time under `a` slots.
    pub fn remaining(&self, a: u32) -> f64 {
        self.serial_ms + self.work_ms / f64::from(a.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::profile::tests::{run, spec};
    use super::*;

    /// One stage of 12 tasks of exactly 1 s, then one of 1 task of 3 s.
    fn profile() -> JobProfile {
        profile_with_straggler(1_000)
    }

    /// [`profile`]'s job whose last map took `straggler_ms`.
    fn profile_with_straggler(straggler_ms: u64) -> JobProfile {
        let spec = spec("two", &[("map", 12, &[]), ("reduce", 1, &["map"])]);
        let mut maps = [1_000; 12];
        maps[11] = straggler_ms;
        let runs = [run(5, "two", &[("map", &maps, &[1; 12]), ("reduce", &[3_000], &[1])])];
        JobProfile::from_history(&spec, &runs).unwrap()
    }

    fn request(allocations: Vec<u32>) -> ModelRequest {
        ModelRequest {
            profile: profile(),
            indicator: Indicator::TotalWork,
            allocations,
            runs: 3,
            quantile: 0.9,
            seed: 1,
            pooled_tail: false,
            pooled_below: 0,
            tail_quantile: 0.0,
            spread_points: 0,
        }
    }

    #[test]
    fn a_deterministic_profile_gives_the_exact_remaining_times() {
        let model = build_completion_model(&request(vec![1, 4, 12]));
        // At the start: 12 s + 3 s on one slot, 3 s + 3 s on four, 1 s + 3 s on twelve.
        assert_eq!(model.remaining(0.0, 1), 15_000.0);
        assert_eq!(model.remaining(0.0, 4), 6_000.0);
        assert_eq!(model.remaining(0.0, 12), 4_000.0);
        // Between modelled allocations the one below answers (the safe side)...
        assert_eq!(model.remaining(0.0, 11), 6_000.0);
        // ... or the two around it, in 1 / a: 1/6 is halfway from 1/4 to 1/12, so
        // halfway from 6 s to 4 s.
        assert!((model.remaining_between(0.0, 6) - 5_000.0).abs() < 1e-9);
        assert_eq!(model.remaining_between(0.0, 12), 4_000.0);
        assert_eq!(model.remaining_between(0.0, 40), 4_000.0);
        // Maps done (12 of 15 s of work): only the reducer's 3 s remain.
        assert_eq!(model.remaining(0.8, 4), 3_000.0);
        // On four slots the maps start in waves at 0, 1 and 2 s: 4 × (0 + 1 + 2) s queued.
        assert_eq!(model.queue_ms, vec![12_000.0, 0.0]);
        // Deterministic: the interval closes on the one value.
        assert_eq!(model.interval(0.0, 4), (6_000.0, 6_000.0));
        // Same request, same model.
        assert_eq!(model, build_completion_model(&request(vec![1, 4, 12])));
    }

    #[test]
    fn failures_lengthen_the_modelled_time() {
        let mut failing = request(vec![4]);
        failing.profile.stages[0].failure = 0.5;
        failing.runs = 20;
        let model = build_completion_model(&failing);
        assert!(model.remaining(0.0, 4) > 6_000.0, "{}", model.remaining(0.0, 4));
        let (low, high) = model.interval(0.0, 4);
        assert!(low < high && high <= model.remaining(0.0, 4) + 1e-9, "{low} {high}");
    }

    #[test]
    fn a_pooled_tail_lends_one_stages_straggler_to_the_others() {
        // Maps of 1 s with one straggler of 5 s (3.75 × their mean), then one reduce of
        // exactly 3 s: its own samples never show it slower than 3 s.
        let profile = profile_with_straggler(5_000);
        let mut slowest = ModelRequest {
            profile,
            indicator: Indicator::TotalWork,
            allocations: vec![1],
            runs: 200,
            quantile: 1.0,
            seed: 1,
            pooled_tail: false,
            pooled_below: 0,
            tail_quantile: 0.0,
            spread_points: 0,
        };
        // Maps done is progress 16/19 (0.84): only the reduce is left.
        assert_eq!(build_completion_model(&slowest).remaining(0.85, 1), 3_000.0);
        // Pooled, the reduce may straggle like the maps: 3 s × 3.75 at worst.
        slowest.pooled_tail = true;
        assert_eq!(build_completion_model(&slowest).remaining(0.85, 1), 11_250.0);
        // Pooling only the stages of fewer than 12 samples: the reduce (1 sample) borrows
        // the maps' straggler.
        slowest.pooled_tail = false;
        slowest.pooled_below = 12;
        let small = build_completion_model(&slowest);
        assert_eq!(small.remaining(0.85, 1), 11_250.0);
        // A stage of 1 sample is not below 1: nothing is pooled.
        slowest.pooled_below = 1;
        assert_eq!(build_completion_model(&slowest).remaining(0.85, 1), 3_000.0);
    }

    #[test]
    fn the_tail_reserve_is_the_critical_paths_straggler_risk_above_the_kept_quantile() {
        // Maps of 1 s with one straggler of 10 s in twelve, then one reduce of 3 s.
        let profile = profile_with_straggler(10_000);
        let mut reserved = ModelRequest {
            profile,
            indicator: Indicator::TotalWork,
            allocations: vec![1, 12],
            runs: 200,
            quantile: 0.2,
            seed: 1,
            pooled_tail: false,
            pooled_below: 0,
            tail_quantile: 0.0,
            spread_points: 0,
        };
        let plain = build_completion_model(&reserved);
        assert!(plain.reserve_ms.is_empty());
        assert_eq!(plain.tail_reserve(0.0), 0.0);
        reserved.tail_quantile = 1.0;
        let model = build_completion_model(&reserved);
        // On twelve slots the maps run at once: a third of the runs draw no straggler
        // ((11/12)^12), taking 1 s + 3 s, which the 0.2 quantile keeps; the slowest draws
        // one (10 s + 3 s): 9 s to keep in hand at the start.
        assert_eq!(model.remaining(0.0, 12), 4_000.0);
        assert_eq!(model.tail_reserve(0.0), 9_000.0);
        // The reserve does not change C(p, a) itself.
        assert_eq!(model.remaining_ms, plain.remaining_ms);
        // With the maps done only the deterministic reduce is left: nothing to keep.
        assert_eq!(model.tail_reserve(0.9), 0.0);
        // A tail quantile at or below the kept one keeps nothing.
        reserved.tail_quantile = 0.2;
        assert!(build_completion_model(&reserved).reserve_ms.is_empty());
    }

    #[test]
    fn the_spread_keeps_c_of_p_a_s_distribution_and_interpolates_it_like_the_quantile() {
        // Maps of 1 s with one straggler of 10 s in twelve, then one reduce of 3 s.
        let profile = profile_with_straggler(10_000);
        let mut spread = request(vec![1, 12]);
        spread.profile = profile;
        spread.runs = 200;
        assert!(build_completion_model(&spread).spread_ms.is_empty());
        spread.spread_points = 10;
        let model = build_completion_model(&spread);
        let at_twelve = model.spread_between(0.0, 12);
        // On twelve slots about a third of the runs draw no straggler (1 s + 3 s) and
        // the rest one (10 s + 3 s): the lowest point is the one, the highest the other.
        assert_eq!(at_twelve.len(), 10);
        assert!(at_twelve.windows(2).all(|w| w[0] <= w[1]), "{at_twelve:?}");
        assert_eq!((at_twelve[0], at_twelve[9]), (4_000.0, 13_000.0));
        // Between allocations each point lies between its neighbours' points.
        let (one, six) = (model.spread_between(0.0, 1), model.spread_between(0.0, 6));
        for ((l, m), h) in one.iter().zip(&six).zip(&at_twelve) {
            assert!(h <= m && m <= l, "{l} {m} {h}");
        }
        // The kept quantile is unchanged by keeping the spread.
        spread.spread_points = 0;
        assert_eq!(model.remaining_ms, build_completion_model(&spread).remaining_ms);
    }

    #[test]
    fn amdahl_is_critical_path_plus_the_rest_over_the_slots() {
        let p = profile();
        let start = Amdahl::of(&p, &[0.0, 0.0]);
        // Critical path 1 s + 3 s; total work 15 s, 11 s of it off the path.
        assert_eq!(start, Amdahl { serial_ms: 4_000.0, work_ms: 11_000.0 });
        assert_eq!(start.remaining(11), 5_000.0);
        let maps_done = Amdahl::of(&p, &[1.0, 0.0]);
        assert_eq!(maps_done.remaining(4), 3_000.0);
    }

    #[test]
    fn the_allocation_grid_is_dense_low_and_ends_at_the_maximum() {
        assert_eq!(allocation_grid(5), vec![1, 2, 3, 4, 5]);
        let grid = allocation_grid(100);
        assert_eq!(&grid[..9], &[1, 2, 3, 4, 5, 6, 7, 8, 10]);
        assert_eq!(grid.last(), Some(&100));
        assert!(grid.windows(2).all(|w| w[0] < w[1]));
        assert!(grid.len() < 30, "{}", grid.len());
        assert!(allocation_grid(0).is_empty());
    }
}
