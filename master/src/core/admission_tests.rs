//! Tests of the admission model: MRM's Figure 7 and the property that admission never
//! makes an admitted job infeasible.

use slotmarket_common::rng::SplitMix64;

use super::*;

const S: u64 = 1_000;

/// A job of `work_s` seconds on a one-slot server, with no tail.
fn single(work_s: u64) -> Demand {
    Demand::new((work_s * S) as f64, 0.0, 0.0, 1, 0)
}

fn admitted(job: u64, work_s: u64, deadline_s: u64) -> Admitted {
    Admitted { job: JobId(job), deadline: Timestamp(deadline_s * S), demand: single(work_s) }
}

/// Figure 7: A (10 s, due 70) and B (20 s, due 110) are admitted at t = 0; C of 80 s can
/// finish at 90 (60 s before A's lazy slot, 20 s between A's and B's), C of 100 s at 130.
#[test]
fn figure_7_earliest_finish_fills_the_lazy_schedules_gaps() {
    let schedule = Schedule::new(Timestamp(0), vec![admitted(1, 10, 70), admitted(2, 20, 110)]);
    assert_eq!(schedule.earliest_feasible_finish(&single(80)), Timestamp(90 * S));
    assert_eq!(schedule.earliest_feasible_finish(&single(100)), Timestamp(130 * S));
    // One millisecond earlier would take time A or B needs.
    assert!(!schedule.is_feasible(&single(80), Timestamp(90 * S - 1)));
    assert!(schedule.is_feasible(&single(80), Timestamp(90 * S)));
    // Both promises hold once C is admitted at 90.
    assert!(schedule.with(JobId(3), single(80), Timestamp(90 * S)).all_feasible());
    // A small job fits before A: it goes first and finishes at once.
    assert_eq!(schedule.earliest_feasible_finish(&single(5)), Timestamp(5 * S));
}

#[test]
fn an_empty_cluster_finishes_a_job_after_its_fluid_time_or_its_span() {
    let schedule = Schedule::new(Timestamp(1_000), Vec::new());
    // 40 s of map work on 4 slots and 10 s of reduce on 2: 10 + 5 s; a span of 20 s wins.
    let wide = Demand::new(40_000.0, 10_000.0, 0.0, 4, 2);
    assert_eq!(schedule.earliest_feasible_finish(&wide), Timestamp(16_000));
    let narrow = Demand::new(40_000.0, 10_000.0, 20_000.0, 4, 2);
    assert_eq!(narrow.tail_ms, 5_000.0);
    assert_eq!(schedule.earliest_feasible_finish(&narrow), Timestamp(21_000));
}

#[test]
fn a_job_already_late_in_the_model_is_never_jumped() {
    // Job 1 is due at 10 s but needs 20 s: nothing may go ahead of it.
    let schedule = Schedule::new(Timestamp(0), vec![admitted(1, 20, 10)]);
    assert!(!schedule.all_feasible());
    assert_eq!(schedule.earliest_feasible_finish(&single(1)), Timestamp(21 * S));
}

/// A random demand: a fluid size and sometimes a tail.
fn random_demand(rng: &mut SplitMix64) -> Demand {
    let slots = rng.range(1, 8);
    let work = rng.between(100, 60_000) as f64 * f64::from(slots);
    let span = if rng.below(2) == 0 { rng.between(0, 80_000) as f64 } else { 0.0 };
    Demand::new(work, rng.between(0, 20_000) as f64, span, slots, rng.range(1, 4))
}

/// Property: over random arrivals, each admitted at a random deadline the model calls
/// feasible (from its earliest feasible finish on), every admitted job stays feasible;
/// no deadline before the earliest feasible finish is feasible; and `is_feasible` agrees
/// with re-checking the whole schedule after admission.
#[test]
fn admission_never_makes_an_admitted_job_infeasible() {
    let mut admitted = 0;
    for seed in 0..200 {
        let mut rng = SplitMix64::new(seed);
        let mut now = Timestamp(0);
        let mut schedule = Schedule::new(now, Vec::new());
        for job in 1..40u64 {
            let elapsed = rng.between(0, 5_000);
            now = now + std::time::Duration::from_millis(elapsed);
            schedule = run_edf(&schedule, now, elapsed as f64);
            assert!(schedule.all_feasible(), "seed {seed}: EDF in the model broke a promise");
            let demand = random_demand(&mut rng);
            let earliest = schedule.earliest_feasible_finish(&demand);
            assert!(schedule.is_feasible(&demand, earliest), "seed {seed} job {job}");
            for _ in 0..5 {
                let before = Timestamp(rng.between(now.0, earliest.0));
                assert!(
                    before == earliest || !schedule.is_feasible(&demand, before),
                    "seed {seed} job {job}: {before:?} before the earliest {earliest:?} is feasible"
                );
                let later = Timestamp(earliest.0 + rng.between(0, 200_000));
                let after = schedule.with(JobId(job), demand, later);
                assert_eq!(
                    schedule.is_feasible(&demand, later),
                    after.all_feasible(),
                    "seed {seed} job {job}"
                );
            }
            let mut chosen = Timestamp(earliest.0 + rng.between(0, 100_000));
            while !schedule.is_feasible(&demand, chosen) {
                chosen = chosen + std::time::Duration::from_millis(1_000);
            }
            schedule = schedule.with(JobId(job), demand, chosen);
            admitted += 1;
            assert!(
                schedule.all_feasible(),
                "seed {seed}: admitting job {job} at {chosen:?} broke a promise"
            );
        }
    }
    assert_eq!(admitted, 200 * 39, "every arrival is admitted at some deadline");
}

/// The model after the fluid server ran `elapsed_ms` of work in EDF order until `now`;
/// a job whose work is done leaves (its tail only made the model stricter for it).
fn run_edf(schedule: &Schedule, now: Timestamp, mut elapsed_ms: f64) -> Schedule {
    let mut jobs = Vec::new();
    for job in schedule.jobs() {
        let done = job.demand.fluid_ms.min(elapsed_ms);
        elapsed_ms -= done;
        if job.demand.fluid_ms - done > 0.0 {
            let demand = Demand { fluid_ms: job.demand.fluid_ms - done, tail_ms: job.demand.tail_ms };
            jobs.push(Admitted { demand, ..*job });
        }
    }
    Schedule::new(now, jobs)
}
