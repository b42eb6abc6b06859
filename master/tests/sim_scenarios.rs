//! Simulator scenarios small enough to work out by hand (STYLE layer 3): each test states
//! the schedule the policy must produce and checks the simulator's per-job times and run
//! metrics against it. Times are in seconds from the start of the trace.

use std::collections::BTreeMap;

use slotmarket_common::spec::JobClass;
use slotmarket_master::core::{CoreConfig, PolicySettings};
use slotmarket_master::sim::report::{Outcome, Summary};
use slotmarket_master::sim::workload::{Durations, Trace, TraceJob, TraceStage};
use slotmarket_master::sim::{self, SimConfig, SimRun};

/// A job of `maps` map tasks of `map_s` seconds (and `reduces` reduce tasks of
/// `reduce_s` behind a barrier if `reduces > 0`) arriving at `at`.
fn job(id: &str, at: f64, maps: u32, map_s: f64, reduces: u32, reduce_s: f64) -> TraceJob {
    let stages = TraceStage::map_reduce(maps, Durations::Fixed(map_s), reduces, Durations::Fixed(reduce_s));
    TraceJob::new(id, at, "alice", stages)
}

/// One node with the given slots, the given policy, invariants checked after every step.
fn cluster(policy: PolicySettings, map_slots: u32, reduce_slots: u32) -> SimConfig {
    SimConfig {
        core: CoreConfig { policy, ..CoreConfig::default() },
        nodes: 1,
        map_slots,
        reduce_slots,
        check_invariants: true,
        ..SimConfig::default()
    }
}

fn run(jobs: Vec<TraceJob>, config: &SimConfig) -> (Trace, SimRun, Summary) {
    let trace = Trace::new(jobs).expect("valid trace");
    let run = sim::run(&trace, config).expect("run finishes");
    let summary = Summary::new(&trace, &run, config);
    (trace, run, summary)
}

/// (wait, completion) of every job, in trace order, as the summary sees them.
fn times(trace: &Trace, run: &SimRun) -> Vec<(f64, f64)> {
    let records = sim::report::records(trace, run);
    records.iter().map(|j| (j.wait_s().expect("started"), j.completion_s().expect("completed"))).collect()
}

/// DRESS Figure 1's four jobs (3 containers × 10 s, 4 × 20 s, 3 × 10 s, 2 × 10 s, one
/// second apart, 6 containers) under Slotmarket's FIFO, which hands out *tasks*, not
/// whole jobs:
///
/// ```text
/// t=0   J1 takes 3 slots (0–10)
/// t=1   J2 takes the other 3 (1–21); its 4th task waits
/// t=10  J1's slots go to J2's 4th task (10–30) and two of J3's (10–20)
/// t=20  J3's slots go to J3's last task (20–30) and one of J4's (20–30)
/// t=21  J2's three slots: J4's last task (21–31); two slots idle
/// ```
///
/// Waits 0, 0, 8, 17 (mean 6.25 s), completions 10, 29, 28, 28, makespan 31 s. DRESS's
/// FCFS (makespan 40 s, mean wait 16 s) starts a job only when all its containers are
/// free, so J2 waits for J1 and J3 and J4 wait behind J2; the greedy task-level FIFO
/// overlaps them.
#[test]
fn dress_figure_1_under_task_level_fifo() {
    let jobs = vec![
        job("j1", 0.0, 3, 10.0, 0, 0.0),
        job("j2", 1.0, 4, 20.0, 0, 0.0),
        job("j3", 2.0, 3, 10.0, 0, 0.0),
        job("j4", 3.0, 2, 10.0, 0, 0.0),
    ];
    let (trace, run, summary) = run(jobs, &cluster(PolicySettings::Fifo {}, 6, 0));
    assert_eq!(times(&trace, &run), vec![(0.0, 10.0), (0.0, 29.0), (8.0, 28.0), (17.0, 28.0)]);
    assert_eq!(summary.metrics.all.makespan_s, Some(31.0));
    assert_eq!(summary.metrics.all.mean_wait_s, Some(6.25));
    assert_eq!(summary.metrics.all.median_wait_s, Some(4.0));
    assert_eq!(summary.metrics.all.mean_completion_s, Some(23.75));
    // Busy: 3×10 + 4×20 + 3×10 + 2×10 = 160 slot-s of 6 slots × 31 s.
    assert_eq!(summary.map_utilisation, (160.0_f64 / 186.0 * 1e6).round() / 1e6);
    assert_eq!((summary.metrics.all.attempts, summary.metrics.all.preemptions), (Some(12), Some(0)));
    // The shared figure counts map and reduce slots together: the same 160 of 6 × 31.
    assert_eq!(summary.metrics.all.slot_utilisation, Some(summary.map_utilisation));
}

/// A map-reduce job and a later map-only job on 2 map slots and 1 reduce slot:
///
/// ```text
/// t=0   A: m0, m1 (0–10)             t=5  B arrives, no free map slot
/// t=10  A: m2 (10–20); B: m0 (10–20)
/// t=20  A's maps are done: its reduce r0 (20–25); B: m1 in A's freed map slot (20–30)
/// t=25  A completes (completion 25, wait 0); t=30 B completes (wait 5, completion 25)
/// ```
///
/// With deadlines A 20 (missed by 5) and B 40 (met 10 early), half the deadlines are
/// violated; slack is deadline − submit − critical path: A 20 − 0 − 15, B 40 − 5 − 10.
#[test]
fn a_reduce_waits_for_its_barrier_and_deadlines_are_scored() {
    let mut a = job("a", 0.0, 3, 10.0, 1, 5.0);
    a.deadline_s = Some(20.0);
    let mut b = job("b", 5.0, 2, 10.0, 0, 0.0);
    b.deadline_s = Some(40.0);
    let (trace, run, summary) = run(vec![a, b], &cluster(PolicySettings::Fifo {}, 2, 1));
    assert_eq!(times(&trace, &run), vec![(0.0, 25.0), (5.0, 25.0)]);
    assert_eq!(summary.metrics.all.makespan_s, Some(30.0));
    let all = &summary.metrics.all;
    assert_eq!((all.deadline_jobs, all.violation_rate), (2, Some(0.5)));
    assert_eq!((all.mean_tardiness_s, all.mean_earliness_s), (Some(2.5), Some(5.0)));
    // 55 slot-s (A: 30 map + 5 reduce, B: 20) of 3 slots × 30 s.
    assert_eq!(all.slot_utilisation, Some(0.611111));
    assert_eq!(sim::report::records(&trace, &run)[0].slot_s, Some(35.0));
    assert_eq!(summary.metrics.all.median_slack_s, Some(15.0));
    assert_eq!(run.jobs[0].critical_path_ms, 15_000);
    // Map slots: 50 slot-s busy of 2 × 30; reduce: 5 of 1 × 30.
    assert_eq!((summary.map_utilisation, summary.reduce_utilisation), (0.833333, 0.166667));
    let mut csv = Vec::new();
    sim::report::write_jobs_csv(&trace, &run, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let a_row = csv.lines().nth(1).unwrap();
    assert_eq!(
        a_row,
        "a,a,alice,none,,completed,0.000,0.000,25.000,20.000,0.000,25.000,false,5.000,0.000,5.000,15.000,4,35.000,4,0,"
    );
}

/// Three one-task jobs on one slot: X (delay-tolerant) at 0, Y (delay-tolerant) at 1,
/// Z (delay-sensitive) at 2. FIFO runs X, Y, Z; priority runs X (it is not preempted),
/// then Z, then Y. Waits: FIFO 0, 9, 18; priority 0, 19, 8.
#[test]
fn priority_serves_delay_sensitive_jobs_first_without_preempting() {
    let classed =
        |id: &str, at: f64, class: JobClass| TraceJob { class: Some(class), ..job(id, at, 1, 10.0, 0, 0.0) };
    let jobs = || {
        vec![
            classed("x", 0.0, JobClass::DelayTolerant),
            classed("y", 1.0, JobClass::DelayTolerant),
            classed("z", 2.0, JobClass::DelaySensitive),
        ]
    };
    let (trace, fifo, _) = run(jobs(), &cluster(PolicySettings::Fifo {}, 1, 0));
    assert_eq!(times(&trace, &fifo), vec![(0.0, 10.0), (9.0, 19.0), (18.0, 28.0)]);
    let (trace, priority, summary) = run(jobs(), &cluster(PolicySettings::Priority {}, 1, 0));
    assert_eq!(times(&trace, &priority), vec![(0.0, 10.0), (19.0, 29.0), (8.0, 18.0)]);
    let classes = &summary.metrics.classes;
    assert_eq!(classes["delay-sensitive"].mean_wait_s, Some(8.0));
    assert_eq!(classes["delay-tolerant"].mean_wait_s, Some(9.5));
    // Each class's makespan runs from its own first submit: z 2–20, x and y 0–30.
    assert_eq!(
        (classes["delay-sensitive"].makespan_s, classes["delay-tolerant"].makespan_s),
        (Some(18.0), Some(30.0))
    );
    // 10 of 30 slot-s for z, 20 for x and y: the classes add up to the whole.
    assert_eq!(
        (classes["delay-sensitive"].slot_utilisation, summary.metrics.all.slot_utilisation),
        (Some(0.333333), Some(1.0))
    );
    assert_eq!(summary.metrics.all.makespan_s, Some(30.0));
}

/// Two map slots; A (4 tasks × 10 s) at 0, B (2 tasks × 10 s) at 1. FIFO gives A's
/// remaining tasks the slots at 10, so B starts at 20. Fair gives each slot freed at 10
/// to the job running fewer tasks: B's first task, then A's third; at 20 again B, then A.
#[test]
fn fair_gives_a_freed_slot_to_the_job_running_fewest_tasks() {
    let jobs = || vec![job("a", 0.0, 4, 10.0, 0, 0.0), job("b", 1.0, 2, 10.0, 0, 0.0)];
    let (trace, fifo, _) = run(jobs(), &cluster(PolicySettings::Fifo {}, 2, 0));
    assert_eq!(times(&trace, &fifo), vec![(0.0, 20.0), (19.0, 29.0)]);
    let (trace, fair, summary) = run(jobs(), &cluster(PolicySettings::Fair { preemption: false }, 2, 0));
    assert_eq!(times(&trace, &fair), vec![(0.0, 30.0), (9.0, 29.0)]);
    assert_eq!(summary.metrics.all.makespan_s, Some(30.0));
}

/// Two map slots; A (2 tasks × 100 s) at 0, B (1 task × 10 s) at 10. Without
/// preemption B waits for A's tasks (until 100). With it, B's max-min share is one
/// slot, so A's newest task is killed at 10 (losing 10 s of work), B runs 10–20, and A's
/// killed task runs again 20–120.
#[test]
fn fair_preemption_kills_the_newest_task_of_an_over_share_job() {
    let jobs = || vec![job("a", 0.0, 2, 100.0, 0, 0.0), job("b", 10.0, 1, 10.0, 0, 0.0)];
    let (trace, plain, _) = run(jobs(), &cluster(PolicySettings::Fair { preemption: false }, 2, 0));
    assert_eq!(times(&trace, &plain), vec![(0.0, 100.0), (90.0, 100.0)]);
    let config = cluster(PolicySettings::Fair { preemption: true }, 2, 0);
    let (trace, preempted, summary) = run(jobs(), &config);
    assert_eq!(times(&trace, &preempted), vec![(0.0, 120.0), (0.0, 10.0)]);
    let all = &summary.metrics.all;
    assert_eq!((all.preemptions, summary.lost_work_s, all.attempts), (Some(1), 10.0, Some(4)));
    assert_eq!((preempted.jobs[0].kills, preempted.jobs[0].attempts), (1, 3));
}

/// Four map slots, queues a and b with half each. A1 (queue a, 4 tasks × 10 s) at 0
/// borrows b's idle half; B1 (queue b, 2 tasks × 10 s) arrives at 1. Without preemption
/// B1 gets the first two slots freed at 10 (b is below its guarantee, a above). With
/// preemption, A1's two newest tasks are killed at 1 (losing 1 s each), B1 runs 1–11 and
/// A1's two tasks run again 10–20.
#[test]
fn capacity_lends_idle_shares_and_takes_them_back_with_preemption() {
    let queued = |id: &str, at: f64, tasks: u32, queue: &str| TraceJob {
        queue: Some(queue.into()),
        ..job(id, at, tasks, 10.0, 0, 0.0)
    };
    let jobs = || vec![queued("a1", 0.0, 4, "a"), queued("b1", 1.0, 2, "b")];
    let queues: BTreeMap<String, f64> = [("a".to_string(), 0.5), ("b".to_string(), 0.5)].into();
    let lending = PolicySettings::Capacity { queues: queues.clone(), preemption: false };
    let (trace, lent, _) = run(jobs(), &cluster(lending, 4, 0));
    assert_eq!(times(&trace, &lent), vec![(0.0, 10.0), (9.0, 19.0)]);
    let taking = PolicySettings::Capacity { queues, preemption: true };
    let (trace, taken, summary) = run(jobs(), &cluster(taking, 4, 0));
    assert_eq!(times(&trace, &taken), vec![(0.0, 20.0), (0.0, 10.0)]);
    assert_eq!((summary.metrics.all.preemptions, summary.lost_work_s), (Some(2), 2.0));
}

/// A job that follows another is submitted when it ends (plus think time), as a DP user
/// resubmits; a task failing every attempt fails its job and the follower still runs.
#[test]
fn followers_start_when_their_leader_ends_and_failures_are_reported() {
    let first = TraceJob { max_attempts: Some(1), ..job("first", 0.0, 1, 10.0, 0, 0.0) };
    let second =
        TraceJob { follows: Some("first".into()), think_s: Some(5.0), ..job("second", 0.0, 1, 10.0, 0, 0.0) };
    let mut config = cluster(PolicySettings::Fifo {}, 1, 0);
    config.fail_prob = 1.0;
    let (_, run, summary) = run(vec![first, second], &config);
    assert_eq!(run.jobs[0].outcome, Outcome::Failed);
    // A failure strikes part-way, so the first job ends before 10 s.
    let failed_at = run.jobs[0].ended.expect("ended").0;
    assert!(failed_at > 0 && failed_at < 10_000, "{failed_at}");
    assert_eq!(run.jobs[1].submitted.map(|t| t.0), Some(failed_at + 5_000));
    assert_eq!(summary.metrics.all.failed, 2);
    assert_eq!(summary.failed_attempts, 1 + 4);
}

/// The horizon stops the run with work left; unfinished jobs are reported as such.
#[test]
fn the_horizon_leaves_unfinished_jobs() {
    let mut config = cluster(PolicySettings::Fifo {}, 1, 0);
    config.horizon = Some(slotmarket_common::time::Timestamp(15_000));
    let (_, run, summary) =
        run(vec![job("a", 0.0, 1, 10.0, 0, 0.0), job("b", 1.0, 1, 10.0, 0, 0.0)], &config);
    assert_eq!((run.jobs[0].outcome, run.jobs[1].outcome), (Outcome::Completed, Outcome::Unfinished));
    assert_eq!((summary.metrics.all.completed, summary.metrics.all.unfinished), (1, 1));
    // The run stops at its last event before the horizon (a's end at 10 s, when b
    // starts); b counts as running until then.
    assert_eq!((summary.metrics.all.makespan_s, run.stats.stopped_at.0), (Some(10.0), 10_000));
    assert!(run.stats.hit_horizon);
    // a's 10 slot-s fill the one slot over those 10 s; b has held it for none yet.
    assert_eq!(summary.map_utilisation, 1.0);
}
