//! Jockey's control step (§4.3): a piecewise-linear utility of the finish time, the raw
//! allocation (the smallest allocation that maximises the utility of the predicted
//! finish with slack), then the dead zone and hysteresis that keep the guaranteed
//! allocation from chasing noise.

use serde::{Deserialize, Serialize};
use slotmarket_common::spec::UtilityCurve;

/// Milliseconds in a minute, for the default utility.
const MINUTE_MS: i64 = 60_000;

/// A piecewise-linear utility of the finish time, given as points `(ms after the
/// deadline, utility)` sorted by time; flat before the first point and after the last.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Utility {
    /// The breakpoints, by time after the deadline (negative: before it).
    pub points: Vec<(i64, f64)>,
}

impl Default for Utility {
    /// The paper's: 1 up to the deadline, −1 ten minutes late, −1000 a thousand minutes late.
    fn default() -> Utility {
        Utility { points: vec![(0, 1.0), (10 * MINUTE_MS, -1.0), (1_000 * MINUTE_MS, -1_000.0)] }
    }
}

impl Utility {
    /// The utility of finishing `late_ms` after the deadline.
    pub fn at(&self, late_ms: i64) -> f64 {
        let Some(&(first_t, first_u)) = self.points.first() else { return 0.0 };
        if late_ms <= first_t {
            return first_u;
        }
        for pair in self.points.windows(2) {
            let ((t0, u0), (t1, u1)) = (pair[0], pair[1]);
            if late_ms <= t1 {
                if t1 == t0 {
                    return u1;
                }
                return u0 + (u1 - u0) * (late_ms - t0) as f64 / (t1 - t0) as f64;
            }
        }
        self.points.last().map_or(0.0, |p| p.1)
    }
}

impl From<&UtilityCurve> for Utility {
    /// A job spec's curve (minutes after the deadline) in milliseconds.
    fn from(curve: &UtilityCurve) -> Utility {
        Utility { points: curve.points_ms().collect() }
    }
}

/// The control loop's settings (§4.3 and §5.5).
#[derive(Clone, PartialEq, Debug)]
pub struct Control {
    /// Predictions are multiplied by this (`S`, default 1.2).
    pub slack: f64,
    /// Share of the gap to the raw allocation closed per step (`α`, default 0.5; the
    /// paper's 0.2 held more slots for as many misses in the simulator's §5 runs).
    pub hysteresis: f64,
    /// The utility is shifted this much earlier, and the allocation is raised only when
    /// the job is predicted to finish past the real deadline (`D`, default 3 min).
    pub dead_zone_ms: i64,
    /// The utility curve.
    pub utility: Utility,
    /// Share of the gap closed per step when the raw allocation is below the smoothed
    /// one (`None`: `hysteresis` both ways). §4.3 smooths against oscillation when
    /// raising; coming down faster frees what a job found ahead no longer needs.
    pub hysteresis_down: Option<f64>,
    /// Raise as soon as the predicted finish passes the shifted deadline `d − D`, not
    /// only once it passes `d` itself; the dead zone still holds cuts. §4.3's band
    /// holds both ways: a job predicted just inside it keeps its guarantee while the
    /// raw allocation asks for twice as much, and a straggler later finds no margin.
    pub raise_early: bool,
}

impl Default for Control {
    fn default() -> Control {
        Control {
            slack: 1.2,
            hysteresis: 0.5,
            dead_zone_ms: 3 * MINUTE_MS,
            utility: Utility::default(),
            hysteresis_down: None,
            raise_early: false,
        }
    }
}

impl Control {
    /// The raw allocation: the smallest of `allocations` (ascending) whose predicted
    /// finish, `now + slack × remaining(a)`, has the highest utility against the
    /// deadline moved `dead_zone_ms` earlier. `None` when `allocations` is empty.
    pub fn raw_allocation(
        &self,
        now_ms: i64,
        deadline_ms: i64,
        allocations: &[u32],
        remaining_ms: impl Fn(u32) -> f64,
    ) -> Option<u32> {
        let target = deadline_ms - self.dead_zone_ms;
        let mut best: Option<(u32, f64)> = None;
        for &a in allocations {
            let finish = now_ms as f64 + self.slack * remaining_ms(a);
            let utility = self.utility.at((finish - target as f64).round() as i64);
            // Strictly better only: among equals the smallest (first) allocation stays.
            if best.is_none_or(|(_, u)| utility > u + 1e-9) {
                best = Some((a, utility));
            }
        }
        best.map(|(a, _)| a)
    }

    /// The raw allocation by expected utility: the smallest of `allocations` whose
    /// mean utility over C(p, a)'s spread (`remaining_ms(a)`: equally likely remaining
    /// times) is within `tolerance` of the best, each finish `now + slack × sample`
    /// against the deadline moved `dead_zone_ms` earlier. §4.3 takes U at one point
    /// estimate, which prices a tail of late samples at nothing until the quantile
    /// itself is late; here each late sample costs what U says its lateness costs, so
    /// an allocation where the tail is heavy pays for it and one where it is not does
    /// not. The tolerance stops the search where more slots only shave a few late
    /// samples (U keeps rising with `a` while any sample is late). `None` when
    /// `allocations` is empty.
    pub fn expected_allocation(
        &self,
        now_ms: i64,
        deadline_ms: i64,
        allocations: &[u32],
        remaining_ms: impl Fn(u32) -> Vec<f64>,
        tolerance: f64,
    ) -> Option<u32> {
        self.nearest_best(allocations, tolerance, |a| {
            let samples = remaining_ms(a);
            let total: f64 = samples.iter().map(|&r| self.utility_of(now_ms, deadline_ms, r)).sum();
            total / samples.len().max(1) as f64
        })
    }

    /// [`expected_allocation`](Self::expected_allocation) over outcomes of unequal
    /// chance: `outcomes(a)` gives `(probability, remaining ms)` pairs whose
    /// probabilities sum to 1. The stage reserve priced by its chance
    /// ([`JockeyConfig::stage_reserve_chance`](super::JockeyConfig::stage_reserve_chance))
    /// is read through it: a straggler that adds minutes where the job has hours costs
    /// nothing, and one that would make it late costs what U says, times its chance.
    pub fn weighted_allocation(
        &self,
        now_ms: i64,
        deadline_ms: i64,
        allocations: &[u32],
        outcomes: impl Fn(u32) -> Vec<(f64, f64)>,
        tolerance: f64,
    ) -> Option<u32> {
        self.nearest_best(allocations, tolerance, |a| {
            outcomes(a).iter().map(|&(p, r)| p * self.utility_of(now_ms, deadline_ms, r)).sum()
        })
    }

    /// U of the finish `now + slack × remaining`, against the deadline moved `dead_zone_ms`
    /// earlier.
    fn utility_of(&self, now_ms: i64, deadline_ms: i64, remaining_ms: f64) -> f64 {
        let target = (deadline_ms - self.dead_zone_ms) as f64;
        self.utility.at((now_ms as f64 + self.slack * remaining_ms - target).round() as i64)
    }

    /// The smallest of `allocations` whose expected utility is within `tolerance` of the
    /// best; `None` when `allocations` is empty.
    fn nearest_best(
        &self,
        allocations: &[u32],
        tolerance: f64,
        expected: impl Fn(u32) -> f64,
    ) -> Option<u32> {
        let expected: Vec<(u32, f64)> = allocations.iter().map(|&a| (a, expected(a))).collect();
        let best = expected.iter().map(|e| e.1).fold(f64::NEG_INFINITY, f64::max);
        expected.iter().find(|e| e.1 >= best - tolerance - 1e-9).map(|e| e.0)
    }

    /// One control step: the next smoothed allocation from the previous one (`None` on
    /// the first step, which jumps to the raw allocation), the raw allocation, and the
    /// predicted finish under the previous allocation (with slack).
    pub fn smooth(
        &self,
        previous: Option<f64>,
        raw: u32,
        finish_at_previous_ms: f64,
        deadline_ms: i64,
    ) -> f64 {
        let Some(previous) = previous else { return f64::from(raw) };
        let raw = f64::from(raw);
        // Dead zone: predicted to finish between d − D and d, leave the allocation be;
        // a job is only sped up once it is predicted past the deadline itself (with
        // `raise_early`, past d − D: the band then holds cuts only).
        let raise_from = if self.raise_early { deadline_ms - self.dead_zone_ms } else { deadline_ms };
        let in_dead_zone = finish_at_previous_ms <= deadline_ms as f64
            && finish_at_previous_ms >= (deadline_ms - self.dead_zone_ms) as f64;
        let hold_raise = raw > previous && finish_at_previous_ms <= raise_from as f64;
        let hold_cut = raw <= previous && in_dead_zone;
        if hold_raise || hold_cut {
            return previous;
        }
        let alpha =
            if raw < previous { self.hysteresis_down.unwrap_or(self.hysteresis) } else { self.hysteresis };
        previous + alpha * (raw - previous)
    }

    /// Whether a job predicted to finish at `finish_at_most_ms` (with slack) under the
    /// largest allocation it can use is late by the measure of
    /// [`JockeyConfig::all_in_within_ms`](super::JockeyConfig::all_in_within_ms): that
    /// finish is later than `within_ms` before the deadline. With `within_ms` the dead
    /// zone, no allocation is predicted on time against the shifted deadline, so the
    /// control law's raw allocation is the smallest of the equally late ones; §4.4 has
    /// Jockey raise the guarantee until the model finds the deadline met or a hard
    /// limit is reached.
    pub fn late_even_at_most(&self, finish_at_most_ms: f64, deadline_ms: i64, within_ms: i64) -> bool {
        finish_at_most_ms > (deadline_ms - within_ms) as f64
    }

    /// [`smooth`](Self::smooth) for a job found running ahead of its model: a cut
    /// closes `alpha` of the gap to the raw allocation and is not held by the dead zone
    /// (the job has shown it needs less than predicted, so the margins that smooth out
    /// a noisy estimate would only hold slots it will not need); a raise is smoothed as
    /// ever.
    pub fn smooth_ahead(
        &self,
        previous: Option<f64>,
        raw: u32,
        finish_at_previous_ms: f64,
        deadline_ms: i64,
        alpha: f64,
    ) -> f64 {
        match previous {
            Some(previous) if f64::from(raw) < previous => previous + alpha * (f64::from(raw) - previous),
            _ => self.smooth(previous, raw, finish_at_previous_ms, deadline_ms),
        }
    }
}

/// The slack at `progress` when it runs linearly from `start` at progress 0 to `end` at
/// progress 1 ([`JockeyConfig::slack_at_end`](super::JockeyConfig::slack_at_end));
/// `start` throughout when `end` is `None`. §4.3 keeps one slack S for the whole run.
pub(super) fn slack_at(start: f64, end: Option<f64>, progress: f64) -> f64 {
    match end {
        Some(end) => start + (end - start) * progress.clamp(0.0, 1.0),
        None => start,
    }
}

/// The guarantee for a smoothed allocation of `smoothed` slots after earlier steps left
/// `carry` (their smoothed allocations less their guarantees): the nearest whole number
/// to both together, within 1..=`cap`, and the carry left for the next step. Over the
/// steps the guarantee averages the smoothed allocation, where rounding up at every step
/// adds up to one slot of margin the control law did not ask for.
pub(super) fn carry_round(smoothed: f64, carry: f64, cap: u32) -> (u32, f64) {
    let guarantee = (smoothed + carry).round().clamp(1.0, f64::from(cap.max(1)));
    (guarantee as u32, carry + smoothed - guarantee)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_utility_is_flat_until_the_deadline_then_falls() {
        let u = Utility::default();
        assert_eq!(u.at(-3_600_000), 1.0);
        assert_eq!(u.at(0), 1.0);
        assert_eq!(u.at(5 * MINUTE_MS), 0.0);
        assert_eq!(u.at(10 * MINUTE_MS), -1.0);
        assert!((u.at(505 * MINUTE_MS) - (-500.5)).abs() < 1e-9);
        assert_eq!(u.at(5_000 * MINUTE_MS), -1_000.0);
        // A step: 10 before the deadline, 0 after.
        let step = Utility { points: vec![(0, 10.0), (0, 0.0)] };
        assert_eq!(step.at(-1), 10.0);
        assert_eq!(step.at(1), 0.0);
        assert_eq!(Utility { points: vec![] }.at(0), 0.0);
    }

    #[test]
    fn a_job_specs_curve_is_read_in_minutes_after_the_deadline() {
        let curve = UtilityCurve(vec![(0.0, 1.0), (10.0, -1.0), (1_000.0, -1_000.0)]);
        assert_eq!(Utility::from(&curve), Utility::default());
        let own = Utility::from(&UtilityCurve(vec![(-1.0, 5.0), (0.5, 0.0)]));
        assert_eq!(own.points, vec![(-60_000, 5.0), (30_000, 0.0)]);
        assert_eq!(own.at(-15_000), 2.5);
    }

    /// A job of 100 slot-minutes: remaining = 100 min / a.
    fn hundred_slot_minutes(a: u32) -> f64 {
        100.0 * MINUTE_MS as f64 / f64::from(a)
    }

    #[test]
    fn the_raw_allocation_is_the_smallest_that_maximises_utility() {
        let control = Control { slack: 1.0, dead_zone_ms: 0, ..Control::default() };
        let allocations: Vec<u32> = (1..=40).collect();
        // 20 minutes to go: 5 slots just make it; 6 and more make it too, but are not smaller.
        let raw = control.raw_allocation(0, 20 * MINUTE_MS, &allocations, hundred_slot_minutes);
        assert_eq!(raw, Some(5));
        // Slack 1.2 asks for 20 % more time: 6 slots (120 / 6 = 20 minutes).
        let slack = Control { slack: 1.2, ..control.clone() };
        assert_eq!(slack.raw_allocation(0, 20 * MINUTE_MS, &allocations, hundred_slot_minutes), Some(6));
        // The dead zone moves the deadline 3 minutes earlier: 100 / 17 needs 6 slots.
        let dead = Control { dead_zone_ms: 3 * MINUTE_MS, ..control.clone() };
        assert_eq!(dead.raw_allocation(0, 20 * MINUTE_MS, &allocations, hundred_slot_minutes), Some(6));
        // Hopeless (1 minute left): the most slots lose the least utility.
        assert_eq!(control.raw_allocation(0, MINUTE_MS, &allocations, hundred_slot_minutes), Some(40));
        assert_eq!(control.raw_allocation(0, MINUTE_MS, &[], hundred_slot_minutes), None);
    }

    #[test]
    fn hysteresis_closes_a_share_of_the_gap_each_step() {
        let control = Control { dead_zone_ms: 0, hysteresis: 0.2, ..Control::default() };
        let deadline = 60 * MINUTE_MS;
        let late = (deadline + MINUTE_MS) as f64;
        assert_eq!(control.smooth(None, 30, late, deadline), 30.0);
        let first = control.smooth(Some(10.0), 30, late, deadline);
        assert!((first - 14.0).abs() < 1e-9, "{first}");
        let second = control.smooth(Some(first), 30, late, deadline);
        assert!((second - 17.2).abs() < 1e-9, "{second}");
        // Ahead of schedule, it comes down by the same share.
        let early = (deadline - 30 * MINUTE_MS) as f64;
        assert!((control.smooth(Some(30.0), 10, early, deadline) - 26.0).abs() < 1e-9);
        let jump = Control { hysteresis: 1.0, ..control };
        assert_eq!(jump.smooth(Some(10.0), 30, late, deadline), 30.0);
    }

    #[test]
    fn a_separate_hysteresis_when_lowering_leaves_raising_as_it_was() {
        let control =
            Control { dead_zone_ms: 0, hysteresis: 0.2, hysteresis_down: Some(0.5), ..Control::default() };
        let deadline = 60 * MINUTE_MS;
        // Ahead of schedule: half the gap down at once, not a fifth.
        let early = (deadline - 30 * MINUTE_MS) as f64;
        assert!((control.smooth(Some(30.0), 10, early, deadline) - 20.0).abs() < 1e-9);
        // Behind: still a fifth of the gap up.
        let late = (deadline + MINUTE_MS) as f64;
        assert!((control.smooth(Some(10.0), 30, late, deadline) - 14.0).abs() < 1e-9);
        // The dead zone still holds it in both directions.
        let near = (deadline - 2 * MINUTE_MS) as f64;
        let zoned = Control { dead_zone_ms: 3 * MINUTE_MS, ..control };
        assert_eq!(zoned.smooth(Some(30.0), 10, near, deadline), 30.0);
    }

    #[test]
    fn the_dead_zone_holds_the_allocation_near_the_deadline() {
        let control = Control::default();
        let deadline = 60 * MINUTE_MS;
        // Predicted 2 minutes before the deadline: inside [d − 3 min, d], nothing moves,
        // neither up nor down.
        let near = (deadline - 2 * MINUTE_MS) as f64;
        assert_eq!(control.smooth(Some(10.0), 30, near, deadline), 10.0);
        assert_eq!(control.smooth(Some(10.0), 2, near, deadline), 10.0);
        // Predicted before d − D: a raise is not needed, a cut goes ahead.
        let early = (deadline - 10 * MINUTE_MS) as f64;
        assert_eq!(control.smooth(Some(10.0), 30, early, deadline), 10.0);
        assert!(control.smooth(Some(10.0), 2, early, deadline) < 10.0);
        // Predicted past the deadline itself: it acts.
        let late = (deadline + 1) as f64;
        assert!(control.smooth(Some(10.0), 30, late, deadline) > 10.0);
    }

    #[test]
    fn raising_early_acts_inside_the_dead_zone_on_raises_only() {
        let control = Control { raise_early: true, ..Control::default() };
        let deadline = 60 * MINUTE_MS;
        // Predicted 2 minutes before the deadline, inside [d − 3 min, d]: a raise goes
        // ahead (the paper's band would hold it, as the test above shows)...
        let near = (deadline - 2 * MINUTE_MS) as f64;
        assert_eq!(control.smooth(Some(10.0), 30, near, deadline), 20.0);
        assert_eq!(Control::default().smooth(Some(10.0), 30, near, deadline), 10.0);
        // ...a cut is still held there.
        assert_eq!(control.smooth(Some(10.0), 2, near, deadline), 10.0);
        // Before d − D a raise is still not needed, and a cut goes ahead.
        let early = (deadline - 10 * MINUTE_MS) as f64;
        assert_eq!(control.smooth(Some(10.0), 30, early, deadline), 10.0);
        assert!(control.smooth(Some(10.0), 2, early, deadline) < 10.0);
    }

    #[test]
    fn a_job_ahead_of_its_model_cuts_at_once_past_the_dead_zone_and_raises_as_ever() {
        let control = Control::default();
        let deadline = 60 * MINUTE_MS;
        // Predicted 2 minutes before the deadline, inside the dead zone: the paper's
        // band holds the cut; ahead of its model, the job drops to its raw allocation.
        let near = (deadline - 2 * MINUTE_MS) as f64;
        assert_eq!(control.smooth(Some(20.0), 8, near, deadline), 20.0);
        assert_eq!(control.smooth_ahead(Some(20.0), 8, near, deadline, 1.0), 8.0);
        // Before the band: α closes half the gap; ahead, `alpha` of it.
        let early = (deadline - 10 * MINUTE_MS) as f64;
        assert_eq!(control.smooth(Some(20.0), 8, early, deadline), 14.0);
        assert!((control.smooth_ahead(Some(20.0), 8, early, deadline, 0.75) - 11.0).abs() < 1e-9);
        // A raise, and the first step, are the control law's as ever.
        let late = (deadline + MINUTE_MS) as f64;
        assert_eq!(control.smooth_ahead(Some(10.0), 30, late, deadline, 1.0), 20.0);
        assert_eq!(control.smooth_ahead(Some(10.0), 30, near, deadline, 1.0), 10.0);
        assert_eq!(control.smooth_ahead(None, 12, early, deadline, 1.0), 12.0);
    }

    #[test]
    fn a_job_is_late_even_at_the_most_it_can_use_past_the_margin_before_its_deadline() {
        let control = Control::default();
        let deadline = 60 * MINUTE_MS;
        // 100 slot-minutes, 40 slots at most: 2.5 minutes, 3 with slack. Forty minutes
        // in it ends at 43: on time by any margin up to 17 minutes.
        let finish = |now: i64| now as f64 + control.slack * hundred_slot_minutes(40);
        assert!(!control.late_even_at_most(finish(40 * MINUTE_MS), deadline, 0));
        assert!(!control.late_even_at_most(finish(40 * MINUTE_MS), deadline, 17 * MINUTE_MS));
        assert!(control.late_even_at_most(finish(40 * MINUTE_MS), deadline, 18 * MINUTE_MS));
        // 55 minutes in it ends at 58: late within the 3-minute dead zone, not past d.
        assert!(control.late_even_at_most(finish(55 * MINUTE_MS), deadline, 3 * MINUTE_MS));
        assert!(!control.late_even_at_most(finish(55 * MINUTE_MS), deadline, 0));
        // 58 minutes in, 61: past the deadline itself; a negative margin waits for more.
        assert!(control.late_even_at_most(finish(58 * MINUTE_MS), deadline, 0));
        assert!(!control.late_even_at_most(finish(58 * MINUTE_MS), deadline, -2 * MINUTE_MS));
        // Where no allocation is on time against d − D the control law's raw allocation
        // is the smallest of the equally late ones; all in, it is the most.
        let late = Control { dead_zone_ms: 3 * MINUTE_MS, slack: 1.0, ..control.clone() };
        let flat = |a: u32| if a >= 10 { 10.0 * MINUTE_MS as f64 } else { hundred_slot_minutes(a) };
        let allocations: Vec<u32> = (1..=40).collect();
        assert_eq!(late.raw_allocation(55 * MINUTE_MS, deadline, &allocations, flat), Some(10));
        assert!(late.late_even_at_most(55.0 * MINUTE_MS as f64 + flat(40), deadline, 3 * MINUTE_MS));
    }

    #[test]
    fn the_expected_utility_pays_for_a_heavy_tail_only_where_it_is_heavy() {
        let control = Control { slack: 1.0, dead_zone_ms: 0, ..Control::default() };
        let allocations: Vec<u32> = (1..=40).collect();
        // 20 minutes to go, 100 slot-minutes of work; one sample in ten takes 5 minutes
        // longer (a straggler no allocation shortens).
        let spread = |a: u32| {
            let mut samples = vec![hundred_slot_minutes(a); 10];
            samples[9] += 5.0 * MINUTE_MS as f64;
            samples
        };
        // Without tolerance every late sample must go: 100 / 15 needs 7 slots.
        assert_eq!(control.expected_allocation(0, 20 * MINUTE_MS, &allocations, spread, 0.0), Some(7));
        // A tenth of the runs late by at most a minute costs 0.02 of utility: with a
        // tolerance of 0.05, 6 slots do (16.7 + 5 min is 1.7 min late: 0.033).
        assert_eq!(control.expected_allocation(0, 20 * MINUTE_MS, &allocations, spread, 0.05), Some(6));
        // Without a tail it is the point estimate's answer.
        let narrow = |a: u32| vec![hundred_slot_minutes(a); 10];
        assert_eq!(control.expected_allocation(0, 20 * MINUTE_MS, &allocations, narrow, 0.05), Some(5));
        assert_eq!(control.expected_allocation(0, 20 * MINUTE_MS, &[], narrow, 0.05), None);
    }

    #[test]
    fn weighted_outcomes_price_a_straggler_by_its_chance() {
        let control = Control { slack: 1.0, dead_zone_ms: 0, ..Control::default() };
        let allocations: Vec<u32> = (1..=40).collect();
        // 20 minutes to go, 100 slot-minutes of work, and one chance in ten of a
        // straggler 5 minutes longer (no allocation shortens it).
        let outcomes = |a: u32| {
            vec![(0.9, hundred_slot_minutes(a)), (0.1, hundred_slot_minutes(a) + 5.0 * MINUTE_MS as f64)]
        };
        // Without tolerance the straggler must fit, as a reserve added to every
        // prediction makes it: 100 / 15 needs 7 slots.
        assert_eq!(control.weighted_allocation(0, 20 * MINUTE_MS, &allocations, outcomes, 0.0), Some(7));
        assert_eq!(
            control.raw_allocation(0, 20 * MINUTE_MS, &allocations, |a| hundred_slot_minutes(a)
                + 5.0 * MINUTE_MS as f64),
            Some(7)
        );
        // Its chance priced: 6 slots leave it 1.7 minutes late one time in ten (0.033 of
        // utility), 5 slots 5 minutes (0.1).
        assert_eq!(control.weighted_allocation(0, 20 * MINUTE_MS, &allocations, outcomes, 0.05), Some(6));
        // With an hour to go it fits at the smallest allocation either way.
        assert_eq!(control.weighted_allocation(0, 60 * MINUTE_MS, &allocations, outcomes, 0.0), Some(2));
        assert_eq!(control.weighted_allocation(0, 20 * MINUTE_MS, &[], outcomes, 0.05), None);
    }

    #[test]
    fn the_slack_runs_from_its_start_to_its_end_with_progress() {
        assert_eq!(slack_at(1.2, None, 0.0), 1.2);
        assert_eq!(slack_at(1.2, None, 0.9), 1.2);
        assert_eq!(slack_at(1.2, Some(1.0), 0.0), 1.2);
        assert!((slack_at(1.2, Some(1.0), 0.5) - 1.1).abs() < 1e-12);
        assert_eq!(slack_at(1.2, Some(1.0), 1.0), 1.0);
        // Progress outside [0, 1] is held at its ends.
        assert_eq!(slack_at(1.2, Some(1.0), 1.5), 1.0);
        assert_eq!(slack_at(1.2, Some(1.0), -0.5), 1.2);
    }

    #[test]
    fn carried_rounding_averages_the_smoothed_allocation() {
        // 4.3 slots, ten steps: rounding up guarantees 5 every step (50 slot-steps);
        // carried, 43, with each step's guarantee 4 or 5.
        let (mut carry, mut sum) = (0.0, 0);
        for _ in 0..10 {
            let (guarantee, next) = carry_round(4.3, carry, 100);
            assert!(guarantee == 4 || guarantee == 5, "{guarantee}");
            assert!(next.abs() <= 0.5 + 1e-9, "{next}");
            (carry, sum) = (next, sum + guarantee);
        }
        assert_eq!(sum, 43);
        // Never below one slot nor above the cap, whatever was carried.
        assert_eq!(carry_round(1.2, -0.9, 100).0, 1);
        assert_eq!(carry_round(9.8, 0.5, 10).0, 10);
    }
}
