//! Unit tests of the shared metrics: the statistics on hand values, the derived per-job
//! figures, a hand-made summary and its table.

use super::*;

/// A completed job submitted, started and finished at the given seconds, holding a
/// slot for 10 s.
pub(crate) fn record(id: u32, class: Option<JobClass>, times: (f64, f64, f64)) -> JobRecord {
    JobRecord {
        name: format!("w{id:03}"),
        account: "demo".into(),
        class,
        outcome: Outcome::Completed,
        submit_s: Some(times.0),
        start_s: Some(times.1),
        finish_s: Some(times.2),
        tasks: 3,
        slot_s: Some(10.0),
        ..JobRecord::new(format!("j{id}"))
    }
}

/// Four jobs: two delay-sensitive with deadlines (one met, one missed), one
/// delay-tolerant, one without class that started at 8 s and failed at 9 s.
pub(crate) fn hand_made() -> Vec<JobRecord> {
    let ds = Some(JobClass::DelaySensitive);
    let a = JobRecord { deadline_s: Some(6.0), ..record(1, ds, (0.0, 1.0, 5.0)) };
    let b = JobRecord { deadline_s: Some(10.0), ..record(2, ds, (2.0, 5.0, 12.0)) };
    let c = record(3, Some(JobClass::DelayTolerant), (3.0, 3.0, 20.0));
    let d = JobRecord { outcome: Outcome::Failed, slot_s: Some(2.0), ..record(4, None, (4.0, 8.0, 9.0)) };
    vec![a, b, c, d]
}

#[test]
fn statistics_follow_the_one_documented_definition() {
    // Even count: the median averages the middle two; p95 is the ⌈3.8⌉ = 4th value.
    let mut v = vec![4.0, 1.0, 3.0, 2.0];
    assert_eq!(spread(&mut v), Some(Spread { mean: 2.5, median: 2.5, p95: 4.0 }));
    // Odd count: the middle value; ⌈0.95 × 5⌉ = 5th.
    assert_eq!(spread(&mut [10.0, 0.0, 7.0, 3.0, 1.0]), Some(Spread { mean: 4.2, median: 3.0, p95: 10.0 }));
    // 1..=100: ⌈95⌉ = 95th value exactly, not 95.05 as linear interpolation gives.
    let mut hundred: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(spread(&mut hundred), Some(Spread { mean: 50.5, median: 50.5, p95: 95.0 }));
    // Twenty values: 0.95 × 20 is a whole rank, the 19th.
    let mut twenty: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(percentile(&mut twenty, 0.95), Some(19.0));
    assert_eq!(percentile(&mut [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 0.1), Some(1.0));
    assert_eq!(percentile(&mut [7.0], 0.95), Some(7.0));
    assert_eq!(percentile(&mut [3.0, 1.0], 0.0), Some(1.0));
    assert_eq!((spread(&mut []), percentile(&mut [], 0.5), median(&mut [])), (None, None, None));
    assert_eq!(round(2.0 / 3.0, 3), 0.667);
}

#[test]
fn values_sort_as_total_cmp_orders_them_bit_for_bit() {
    let mut values = vec![
        3.5,
        -0.0,
        0.0,
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -2.25,
        f64::MIN_POSITIVE / 2.0,
        -1e300,
        3.5,
        1e-3,
        -2.25,
        0.0,
    ];
    let mut expected = values.clone();
    expected.sort_by(f64::total_cmp);
    sort(&mut values);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&values), bits(&expected));
    // Sorted already, it is left as it is.
    sort(&mut values);
    assert_eq!(bits(&values), bits(&expected));
}

#[test]
fn records_derive_wait_completion_deadline_figures() {
    let records = hand_made();
    let b = &records[1];
    assert_eq!((b.wait_s(), b.completion_s(), b.met()), (Some(3.0), Some(10.0), Some(false)));
    assert_eq!((b.tardiness_s(), b.earliness_s(), b.slack_s()), (Some(2.0), Some(0.0), None));
    let b = JobRecord { critical_path_s: Some(4.5), ..b.clone() };
    assert_eq!(b.slack_s(), Some(3.5));
    assert_eq!(records[0].met(), Some(true));
    let failed = JobRecord { deadline_s: Some(100.0), ..records[3].clone() };
    assert_eq!((failed.completion_s(), failed.met(), failed.tardiness_s()), (None, Some(false), None));
    let running = JobRecord { outcome: Outcome::Unfinished, finish_s: None, ..failed };
    assert_eq!((running.completion_s(), running.met()), (None, Some(false)));
    assert_eq!(Outcome::from_name("not-submitted"), Some(Outcome::NotSubmitted));
    assert_eq!(Outcome::from_name("done"), None);
}

#[test]
fn the_summary_of_a_hand_made_run() {
    let summary = summarise(&hand_made(), RunFacts { slots: Some(4), stopped_s: None });
    let all = &summary.all;
    assert_eq!((all.jobs, all.completed, all.failed, all.makespan_s), (4, 3, 1, Some(20.0)));
    // Waits 1, 3, 0, 4: mean 2, median (1+3)/2, p95 the 4th of [0, 1, 3, 4].
    assert_eq!((all.mean_wait_s, all.median_wait_s, all.p95_wait_s), (Some(2.0), Some(2.0), Some(4.0)));
    // Completions 5, 10, 17.
    assert_eq!(all.mean_completion_s, Some(10.667));
    assert_eq!((all.median_completion_s, all.p95_completion_s), (Some(10.0), Some(17.0)));
    assert_eq!((all.deadline_jobs, all.violation_rate), (2, Some(0.5)));
    // a is 1 s early, b 2 s late.
    assert_eq!(
        (all.mean_tardiness_s, all.mean_earliness_s, all.median_slack_s),
        (Some(1.0), Some(0.5), None)
    );
    // 32 slot-seconds over 4 slots × 20 s; nothing knows attempts.
    assert_eq!((all.slot_utilisation, all.attempts, all.preemptions), (Some(0.4), None, None));

    let keys: Vec<&str> = summary.classes.keys().map(String::as_str).collect();
    assert_eq!(keys, ["delay-sensitive", "delay-tolerant", "none"]);
    let ds = &summary.classes["delay-sensitive"];
    assert_eq!(
        (ds.jobs, ds.makespan_s, ds.violation_rate, ds.slot_utilisation),
        (2, Some(12.0), Some(0.5), Some(0.25))
    );
    let none = &summary.classes["none"];
    // The failed job's own span: submitted at 4 s, ended at 9 s.
    assert_eq!((none.completed, none.makespan_s, none.mean_completion_s), (0, Some(5.0), None));
    assert_eq!((none.violation_rate, none.mean_wait_s), (None, Some(4.0)));
    let shares: f64 = summary.classes.values().filter_map(|m| m.slot_utilisation).sum();
    assert!((shares - 0.4).abs() < 1e-9, "class utilisations add up to the overall one");
}

#[test]
fn unfinished_jobs_run_until_the_run_stopped_and_empty_sets_have_no_figures() {
    let mut records = hand_made();
    records[2] = JobRecord { outcome: Outcome::Unfinished, finish_s: None, ..records[2].clone() };
    records.push(JobRecord::new("never"));
    let summary = summarise(&records, RunFacts { slots: None, stopped_s: Some(30.0) });
    assert_eq!((summary.all.makespan_s, summary.all.unfinished, summary.all.jobs), (Some(30.0), 2, 5));
    assert_eq!(summary.all.slot_utilisation, None);
    let empty = summarise(&[], RunFacts { slots: Some(9), stopped_s: None });
    assert_eq!((empty.all.jobs, empty.all.makespan_s, empty.all.mean_wait_s), (0, None, None));
    assert!(empty.classes.is_empty());
}

#[test]
fn the_table_has_a_line_per_metric_and_a_column_per_class() {
    let text = summarise(&hand_made(), RunFacts { slots: Some(4), stopped_s: None }).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), ROWS.len() + 1);
    assert_eq!(lines[0], "metric                 all  delay-sensitive  delay-tolerant   none");
    assert_eq!(lines[5], "makespan_s            20.0             12.0            17.0    5.0");
    assert_eq!(lines[13], "violation_rate       0.500            0.500               -      -");
    assert_eq!(lines[17], "slot_utilisation     0.400            0.250           0.125  0.025");
    assert_eq!(lines[19], "preemptions              -                -               -      -");
    for (line, (name, _)) in lines[1..].iter().zip(ROWS) {
        assert!(line.starts_with(name), "{line}");
    }
}

#[test]
fn a_job_state_maps_to_its_outcome() {
    let outcomes: Vec<Outcome> = JobState::ALL.into_iter().map(Outcome::from).collect();
    assert_eq!(
        outcomes,
        [Outcome::Unfinished, Outcome::Unfinished, Outcome::Completed, Outcome::Failed, Outcome::Cancelled]
    );
}
