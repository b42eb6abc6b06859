//! Tests of the price–deadline curves: eq. 13's worked values, its charge for jumping
//! ahead, monotonicity over random schedules, and the buyer's search.

use slotmarket_common::ids::JobId;
use slotmarket_common::rng::SplitMix64;

use super::*;
use crate::core::admission::Admitted;

const S: f64 = 1_000.0;

fn single(work_s: f64) -> Demand {
    Demand::new(work_s * S, 0.0, 0.0, 1, 0)
}

fn priced(work_s: f64) -> Priced {
    Priced { demand: single(work_s), work_ms: work_s * S }
}

fn admitted(job: u64, work_s: f64, deadline_s: u64) -> Admitted {
    Admitted { job: JobId(job), deadline: Timestamp(deadline_s * 1_000), demand: single(work_s) }
}

const KAPPA2: PriceCurve = PriceCurve::Eq13 { kappa: 2.0 };

#[test]
fn on_an_empty_queue_no_slack_costs_kappa_times_the_work_and_one_average_job_of_slack_costs_the_work() {
    let schedule = Schedule::new(Timestamp(0), Vec::new());
    let quoter = Quoter::new(&schedule, priced(10.0), &[], KAPPA2, 20.0 * S);
    assert_eq!(quoter.earliest(), Timestamp(10_000));
    assert_eq!(quoter.price(Timestamp(10_000)), Some(20_000.0));
    // δ = 10 s / 20 s = 0.5: 2 × 10 / 1.5.
    let half = quoter.price(Timestamp(20_000)).unwrap();
    assert!((half - 2.0 * 10_000.0 / 1.5).abs() < 1e-6, "{half}");
    // δ = 1 = κ − 1: the floor, and it stays there.
    assert_eq!(quoter.price(Timestamp(30_000)), Some(10_000.0));
    assert_eq!(quoter.price(Timestamp(90_000)), Some(10_000.0));
    assert_eq!(quoter.price(Timestamp(9_999)), None, "before the earliest finish");
}

#[test]
fn jumping_ahead_of_a_queued_job_costs_the_slack_taken_from_it() {
    // Figure 7's queue: A (10 s, due 70), B (20 s, due 110); slacks 60 s and 80 s.
    let schedule = Schedule::new(Timestamp(0), vec![admitted(1, 10.0, 70), admitted(2, 20.0, 110)]);
    let g = 20.0 * S;
    let quoter = Quoter::new(&schedule, priced(5.0), &[10.0 * S, 20.0 * S], KAPPA2, g);
    assert_eq!(quoter.earliest(), Timestamp(5_000));
    // Ahead of both: A's δ goes 3 → 2.75, B's 4 → 3.75.
    let jump_a = 10.0 * S / 3.75 - 10.0 * S / 4.0;
    let jump_b = 20.0 * S / 4.75 - 20.0 * S / 5.0;
    let at_earliest = quoter.price(Timestamp(5_000)).unwrap();
    assert!((at_earliest - 2.0 * (5.0 * S + jump_a + jump_b)).abs() < 1e-6, "{at_earliest}");
    // Due after A: only B's slack is taken.
    let after_a = quoter.price(Timestamp(70_000)).unwrap();
    let own = 5.0 * S / ((70_000.0 - 5_000.0) / g + 1.0);
    assert!((after_a - (2.0 * (own + jump_b)).max(5.0 * S)).abs() < 1e-6, "{after_a}");
    // After both: the second term is zero and the floor is reached.
    assert_eq!(quoter.price(Timestamp(120_000)), Some(5.0 * S));
    // FCFS's promise: after B's deadline (110 s), later than all work (35 s) is done.
    assert_eq!(quoter.behind_all(), (Timestamp(110_000), 5.0 * S));
}

/// A random schedule of up to 30 admitted jobs built through admission, with works.
fn random_schedule(rng: &mut SplitMix64) -> (Schedule, Vec<f64>) {
    let mut schedule = Schedule::new(Timestamp(rng.between(0, 10_000)), Vec::new());
    for job in 1..rng.between(1, 30) {
        let demand = Demand::new(rng.between(100, 90_000) as f64, 0.0, rng.between(0, 30_000) as f64, 1, 1);
        let earliest = schedule.earliest_feasible_finish(&demand);
        let mut at = Timestamp(earliest.0 + rng.between(0, 60_000));
        while !schedule.is_feasible(&demand, at) {
            at = Timestamp(at.0 + 500);
        }
        schedule = schedule.with(JobId(job), demand, at);
    }
    let works = schedule.jobs().iter().map(|j| j.demand.fluid_ms * 2.0).collect();
    (schedule, works)
}

/// Property: eq. 13 and eq. 14 never rise with the deadline, and never go below the work.
#[test]
fn prices_never_rise_with_the_deadline() {
    for seed in 0..300 {
        let mut rng = SplitMix64::new(seed);
        let (schedule, works) = random_schedule(&mut rng);
        let work = rng.between(100, 60_000) as f64;
        let job = Priced { demand: Demand::new(work, 0.0, 0.0, 1, 1), work_ms: work };
        let g = rng.between(1_000, 40_000) as f64;
        for curve in [KAPPA2, PriceCurve::Eq13 { kappa: 5.0 }, PriceCurve::Eq14 { kappa: 2.0 }] {
            let quoter = Quoter::new(&schedule, job, &works, curve, g);
            let mut last = f64::INFINITY;
            let mut at = quoter.earliest().0;
            for _ in 0..200 {
                if let Some(price) = quoter.price(Timestamp(at)) {
                    assert!(price <= last + 1e-9, "seed {seed} {curve:?}: {price} after {last} at {at}");
                    assert!(price >= work - 1e-9);
                    last = price;
                }
                at += rng.between(1, 5_000);
            }
        }
    }
}

/// The buyer's search finds the first deadline within budget, and nothing earlier is.
#[test]
fn the_earliest_deadline_within_a_budget_is_the_first_affordable_feasible_one() {
    for seed in 0..200 {
        let mut rng = SplitMix64::new(seed);
        let (schedule, works) = random_schedule(&mut rng);
        let work = rng.between(100, 60_000) as f64;
        let job = Priced { demand: Demand::new(work, 0.0, 0.0, 1, 1), work_ms: work };
        let quoter = Quoter::new(&schedule, job, &works, KAPPA2, 10_000.0);
        assert_eq!(quoter.earliest_within(work * 0.99), None, "below the floor");
        for alpha in [1.0, 1.1, 1.5, 2.0, 3.0] {
            let budget = alpha * work;
            let (at, price) = quoter.earliest_within(budget).expect("the floor is always reached");
            assert!(price <= budget + 1e-9 && quoter.price(at) == Some(price), "seed {seed}");
            for back in [1, 7, 100, 1_000] {
                let before = Timestamp(at.0.saturating_sub(back));
                if before < at {
                    assert!(quoter.price(before).is_none_or(|p| p > budget), "seed {seed} α {alpha}");
                }
            }
        }
    }
}
