//! MRM's market in the simulator: small runs worked out by hand. A delay-sensitive job
//! buys a deadline ahead of queued delay-tolerant jobs (which paid for nothing but their
//! work and so offered slack), EDF keeps every promise, and FCFS promises under FIFO hold
//! with nobody jumping ahead.

use slotmarket_common::spec::JobClass;
use slotmarket_master::core::pricing::PriceCurve;
use slotmarket_master::core::{AdmissionMode, AdmissionSettings, CoreConfig, PolicySettings};
use slotmarket_master::sim::market::{ClassFigures, MarketConfig, MarketSummary, SimAdmission};
use slotmarket_master::sim::report::Outcome;
use slotmarket_master::sim::workload::{Durations, Trace, TraceJob, TraceStage};
use slotmarket_master::sim::{self, SimConfig};

/// `maps` 10 s map tasks arriving at `at` seconds.
fn job(id: &str, at: f64, maps: u32, class: JobClass) -> TraceJob {
    let stages = TraceStage::map_reduce(maps, Durations::Fixed(10.0), 0, Durations::Fixed(0.0));
    TraceJob { class: Some(class), ..TraceJob::new(id, at, "alice", stages) }
}

/// Three delay-tolerant jobs of two tasks at 0, 1 and 2 s, then a delay-sensitive one of
/// one task at 3 s: half their size, so it fits in the slack they offered.
fn trace() -> Trace {
    Trace::new(vec![
        job("dt1", 0.0, 2, JobClass::DelayTolerant),
        job("dt2", 1.0, 2, JobClass::DelayTolerant),
        job("dt3", 2.0, 2, JobClass::DelayTolerant),
        job("ds", 3.0, 1, JobClass::DelaySensitive),
    ])
    .unwrap()
}

/// One node with two map slots, exact estimates, invariants checked.
fn config(policy: PolicySettings, admission: SimAdmission) -> SimConfig {
    let settings = AdmissionSettings {
        mode: AdmissionMode::Mrm,
        pi_level: 0.95,
        price: PriceCurve::Eq13 { kappa: 2.0 },
    };
    SimConfig {
        core: CoreConfig { policy, admission: settings, ..CoreConfig::default() },
        nodes: 1,
        map_slots: 2,
        reduce_slots: 0,
        check_invariants: true,
        market: Some(MarketConfig { admission, alpha: 2.0, estimate_noise: 0.0, trace_deadlines: false }),
        ..SimConfig::default()
    }
}

fn figures<'a>(summary: &'a MarketSummary, class: &str) -> &'a ClassFigures {
    &summary.classes.iter().find(|(name, _)| name == class).expect("class present").1
}

#[test]
fn a_delay_sensitive_job_jumps_ahead_of_slack_and_edf_keeps_every_deadline() {
    let trace = trace();
    let run = sim::run(&trace, &config(PolicySettings::Edf {}, SimAdmission::Mrm)).unwrap();
    assert!(run.jobs.iter().all(|j| j.outcome == Outcome::Completed));
    let summary = MarketSummary::new(&trace, &run.jobs, &run.purchases);
    let (ds, dt) = (figures(&summary, "delay-sensitive"), figures(&summary, "delay-tolerant"));
    assert_eq!((ds.admitted, dt.admitted), (1, 3));
    assert_eq!((ds.violation_pct, dt.violation_pct), (0.0, 0.0));
    // Nobody starts before an earlier job has: ds starts with dt3 at 20 s (the metric
    // counts strict overtaking at the start only).
    assert_eq!((ds.jumped_pct, dt.jumped_pct), (0.0, 0.0));
    // Delay-tolerant jobs paid only their work, so each took one average job of slack.
    assert!((dt.median_slack_s - 10.165).abs() < 0.01, "{dt:?}");
    assert!((dt.median_premium - 1.0).abs() < 0.05, "pays its PI-upper work: {dt:?}");
    assert!(ds.median_premium > 1.0 && ds.median_premium <= 2.0 + 0.05, "{ds:?}");
    // It bought a deadline between dt2's and dt3's, so at 20 s EDF gave it a slot before
    // dt3's second task: it finished at 30 s, ahead of dt3 (40 s), which still met its own.
    let deadline = |ix: usize| run.purchases[ix].unwrap().offer.deadline;
    assert!(deadline(1) < deadline(3) && deadline(3) < deadline(2));
    let end = |ix: usize| run.jobs[ix].ended.unwrap().0;
    assert_eq!((end(3), end(2)), (30_000, 40_000));
}

#[test]
fn against_the_fcfs_run_the_delay_sensitive_job_jumped_ahead_and_nobody_else_did() {
    let trace = trace();
    let mrm = sim::run(&trace, &config(PolicySettings::Edf {}, SimAdmission::Mrm)).unwrap();
    let fcfs_config = SimConfig { market: None, ..config(PolicySettings::Fifo {}, SimAdmission::Fcfs) };
    let fcfs = sim::run(&trace, &fcfs_config).unwrap();
    // Under FCFS ds ran last (30–40 s), after dt3 (20–30 s); under MRM it ended at 30 s,
    // before dt3 (40 s): the pairwise comparison counts it, the start-based one does not.
    let end = |run: &sim::SimRun, ix: usize| run.jobs[ix].ended.unwrap().0;
    assert_eq!((end(&fcfs, 2), end(&fcfs, 3)), (30_000, 40_000));
    let mut summary = MarketSummary::new(&trace, &mrm.jobs, &mrm.purchases);
    summary.compare_with_fcfs(&trace, &mrm.jobs, &fcfs.jobs);
    let (ds, dt) = (figures(&summary, "delay-sensitive"), figures(&summary, "delay-tolerant"));
    assert_eq!(ds.jumped_pct, 0.0);
    assert_eq!(
        (ds.jumped_vs_fcfs_pct, ds.found_queued_pct, ds.jumped_vs_fcfs_queued_pct),
        (Some(100.0), Some(100.0), Some(100.0))
    );
    // dt1 found nobody queued; dt2 found dt1 running and dt3 found dt2 queued.
    assert_eq!(dt.jumped_vs_fcfs_pct, Some(0.0));
    let found = dt.found_queued_pct.unwrap();
    assert!((found - 100.0 / 3.0).abs() < 1e-9, "{dt:?}");
    // A run compared with itself has nobody jumping.
    let same = sim::run(&trace, &fcfs_config).unwrap();
    let mut summary = MarketSummary::new(&trace, &same.jobs, &same.purchases);
    summary.compare_with_fcfs(&trace, &same.jobs, &fcfs.jobs);
    assert!(summary.classes.iter().all(|(_, f)| f.jumped_vs_fcfs_pct == Some(0.0)));
}

#[test]
fn fcfs_promises_hold_under_fifo_and_nobody_jumps() {
    let trace = trace();
    let run = sim::run(&trace, &config(PolicySettings::Fifo {}, SimAdmission::Fcfs)).unwrap();
    let summary = MarketSummary::new(&trace, &run.jobs, &run.purchases);
    for class in ["delay-sensitive", "delay-tolerant"] {
        let f = figures(&summary, class);
        assert_eq!((f.violation_pct, f.jumped_pct), (0.0, 0.0), "{class}: {f:?}");
    }
    // The last one's promise is behind all the work before it: 3 jobs × 10 s, then its own.
    let last = run.purchases[3].unwrap().offer;
    assert!(last.deadline.0 >= 40_000, "{last:?}");
}

#[test]
fn trace_deadlines_are_asked_for_and_an_infeasible_one_is_refused_and_counted() {
    let mut tight = job("tight", 0.0, 2, JobClass::DelaySensitive);
    tight.deadline_s = Some(5.0);
    let mut loose = job("loose", 0.0, 2, JobClass::DelaySensitive);
    loose.deadline_s = Some(100.0);
    let trace = Trace::new(vec![tight, loose]).unwrap();
    let mut config = config(PolicySettings::Edf {}, SimAdmission::Mrm);
    if let Some(market) = config.market.as_mut() {
        market.trace_deadlines = true;
    }
    let run = sim::run(&trace, &config).unwrap();
    assert_eq!(run.jobs[0].outcome, Outcome::Rejected, "two 10 s tasks cannot end by 5 s");
    assert_eq!(run.jobs[1].outcome, Outcome::Completed);
    assert_eq!(run.purchases[1].unwrap().offer.deadline.0, 100_000, "the trace's deadline, as asked");
    let ds = MarketSummary::new(&trace, &run.jobs, &run.purchases);
    let f = figures(&ds, "delay-sensitive");
    assert_eq!((f.admitted, f.refused, f.violation_pct), (1, 1, 0.0));
}
