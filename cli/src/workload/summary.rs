//! The run summary: per-job records in, [`summarise`] (one pure function) and a summary
//! out, overall and per class. Nothing here knows whether the records come from a live
//! cluster or a simulation, so the simulator can print the very same summary.
//!
//! Times are seconds relative to the first submit. Percentiles interpolate linearly
//! between order statistics (numpy's default, "type 7"), so the median of an even count
//! is the mean of the middle two.

use std::collections::BTreeMap;

use serde::Serialize;
use slotmarket_common::spec::JobClass;

/// The `by_class` key of jobs without a class.
pub(crate) const NO_CLASS: &str = "none";

/// One job as the summary sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JobRecord {
    /// The master's id, `j7`.
    pub(crate) id: String,
    /// The spec's name.
    pub(crate) name: String,
    /// Its service class.
    pub(crate) class: Option<JobClass>,
    /// The submitting account.
    pub(crate) account: String,
    /// When it was admitted.
    pub(crate) submit_s: f64,
    /// When its first task started.
    pub(crate) start_s: Option<f64>,
    /// When it ended (completed, failed or cancelled); `None` while it runs.
    pub(crate) finish_s: Option<f64>,
    /// Whether it completed (rather than failed or was cancelled).
    pub(crate) completed: bool,
    /// Its absolute deadline.
    pub(crate) deadline_s: Option<f64>,
    /// Tasks over all stages.
    pub(crate) tasks: u64,
    /// What it was charged (no pricing yet: always `None`).
    pub(crate) price: Option<f64>,
    /// Slot-seconds its tasks held (allocated to ended).
    pub(crate) slot_s: Option<f64>,
}

impl JobRecord {
    /// Queueing delay: submit to first task start.
    pub(crate) fn wait_s(&self) -> Option<f64> {
        self.start_s.map(|start| start - self.submit_s)
    }

    /// Response time: submit to completion; `None` if it did not complete.
    pub(crate) fn completion_s(&self) -> Option<f64> {
        self.finish_s.filter(|_| self.completed).map(|finish| finish - self.submit_s)
    }

    /// Whether it completed by its deadline; `None` without a deadline. A job that did
    /// not complete missed it.
    pub(crate) fn met(&self) -> Option<bool> {
        self.deadline_s
            .map(|deadline| self.completed && self.finish_s.is_some_and(|finish| finish <= deadline))
    }
}

/// The figures of a set of jobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Stats {
    /// Jobs in the set.
    pub(crate) jobs: usize,
    /// Jobs that completed.
    pub(crate) completed: usize,
    /// First submit (of the whole run) to the set's last end, completed or not: the
    /// span its slots were used in.
    pub(crate) makespan_s: Option<f64>,
    /// Mean wait over the jobs that started.
    pub(crate) mean_wait_s: Option<f64>,
    /// Median wait.
    pub(crate) median_wait_s: Option<f64>,
    /// 95th percentile wait.
    pub(crate) p95_wait_s: Option<f64>,
    /// Mean completion time over the jobs that completed.
    pub(crate) mean_completion_s: Option<f64>,
    /// Median completion time.
    pub(crate) median_completion_s: Option<f64>,
    /// 95th percentile completion time.
    pub(crate) p95_completion_s: Option<f64>,
    /// Share of the jobs with a deadline that missed it; `None` if none has one.
    pub(crate) violation_rate: Option<f64>,
    /// The set's slot-seconds ÷ (slots × the whole run's makespan), so the classes'
    /// figures add up to the overall one.
    pub(crate) slot_utilisation: Option<f64>,
}

/// The summary of a run: every job, then each class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Summary {
    /// Every job.
    #[serde(flatten)]
    pub(crate) all: Stats,
    /// By class name (`delay-sensitive`, `delay-tolerant`, [`NO_CLASS`]); classes with no
    /// job are left out.
    pub(crate) by_class: BTreeMap<String, Stats>,
}

/// Summarises `records` on a cluster of `slots` slots (map and reduce together); without
/// `slots` there is no utilisation.
pub(crate) fn summarise(records: &[JobRecord], slots: Option<u32>) -> Summary {
    let origin = records.iter().map(|r| r.submit_s).reduce(f64::min).unwrap_or(0.0);
    let all: Vec<&JobRecord> = records.iter().collect();
    let makespan = last_finish(&all).map(|end| end - origin);
    let capacity = match (slots, makespan) {
        (Some(slots), Some(span)) if slots > 0 && span > 0.0 => Some(f64::from(slots) * span),
        _ => None,
    };
    let mut classes: BTreeMap<String, Vec<&JobRecord>> = BTreeMap::new();
    for record in records {
        let key = record.class.map_or(NO_CLASS, JobClass::name);
        classes.entry(key.to_string()).or_default().push(record);
    }
    Summary {
        all: stats(&all, origin, capacity),
        by_class: classes.into_iter().map(|(class, set)| (class, stats(&set, origin, capacity))).collect(),
    }
}

/// The figures of one set; `capacity` is slots × the whole run's makespan.
fn stats(set: &[&JobRecord], origin: f64, capacity: Option<f64>) -> Stats {
    let waits: Vec<f64> = set.iter().filter_map(|r| r.wait_s()).collect();
    let completions: Vec<f64> = set.iter().filter_map(|r| r.completion_s()).collect();
    let verdicts: Vec<bool> = set.iter().filter_map(|r| r.met()).collect();
    let missed = verdicts.iter().filter(|met| !**met).count();
    let busy: Vec<f64> = set.iter().filter_map(|r| r.slot_s).collect();
    let utilisation = match capacity {
        Some(capacity) if !busy.is_empty() => Some(busy.iter().sum::<f64>() / capacity),
        _ => None,
    };
    Stats {
        jobs: set.len(),
        completed: completions.len(),
        makespan_s: last_finish(set).map(|end| round(end - origin, 3)),
        mean_wait_s: mean(&waits).map(|v| round(v, 3)),
        median_wait_s: percentile(&waits, 0.5).map(|v| round(v, 3)),
        p95_wait_s: percentile(&waits, 0.95).map(|v| round(v, 3)),
        mean_completion_s: mean(&completions).map(|v| round(v, 3)),
        median_completion_s: percentile(&completions, 0.5).map(|v| round(v, 3)),
        p95_completion_s: percentile(&completions, 0.95).map(|v| round(v, 3)),
        violation_rate: (!verdicts.is_empty()).then(|| round(missed as f64 / verdicts.len() as f64, 4)),
        slot_utilisation: utilisation.map(|v| round(v, 4)),
    }
}

/// The latest end in the set.
fn last_finish(set: &[&JobRecord]) -> Option<f64> {
    set.iter().filter_map(|r| r.finish_s).reduce(f64::max)
}

/// The arithmetic mean; `None` for no values.
fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The `q` quantile (0..=1), interpolating linearly between order statistics.
pub(crate) fn percentile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (below, above) = (position.floor() as usize, position.ceil() as usize);
    let fraction = position - below as f64;
    Some(sorted[below] + (sorted[above] - sorted[below]) * fraction)
}

/// `value` rounded to `decimals` places, so JSON and tables carry no float noise.
pub(crate) fn round(value: f64, decimals: i32) -> f64 {
    let factor = 10f64.powi(decimals);
    (value * factor).round() / factor
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A completed job for tests: submitted, started and finished at the given seconds.
    pub(crate) fn record(id: u32, class: Option<JobClass>, times: (f64, f64, f64)) -> JobRecord {
        JobRecord {
            id: format!("j{id}"),
            name: format!("w{id:03}"),
            class,
            account: "demo".into(),
            submit_s: times.0,
            start_s: Some(times.1),
            finish_s: Some(times.2),
            completed: true,
            deadline_s: None,
            tasks: 3,
            price: None,
            slot_s: Some(10.0),
        }
    }

    /// Four jobs: two delay-sensitive with deadlines (one met, one missed), one
    /// delay-tolerant, one without class that started at 8 s and failed at 9 s.
    pub(crate) fn hand_made() -> Vec<JobRecord> {
        let ds = Some(JobClass::DelaySensitive);
        let mut a = record(1, ds, (0.0, 1.0, 5.0));
        a.deadline_s = Some(6.0);
        let mut b = record(2, ds, (2.0, 5.0, 12.0));
        b.deadline_s = Some(10.0);
        let c = record(3, Some(JobClass::DelayTolerant), (3.0, 3.0, 20.0));
        let mut d = record(4, None, (4.0, 8.0, 9.0));
        d.completed = false;
        d.slot_s = Some(2.0);
        vec![a, b, c, d]
    }

    #[test]
    fn records_derive_wait_completion_and_met() {
        let records = hand_made();
        assert_eq!(
            (records[1].wait_s(), records[1].completion_s(), records[1].met()),
            (Some(3.0), Some(10.0), Some(false))
        );
        assert_eq!(records[0].met(), Some(true));
        assert_eq!((records[3].completion_s(), records[3].met()), (None, None));
        let mut failed = records[3].clone();
        failed.deadline_s = Some(100.0);
        assert_eq!(failed.met(), Some(false), "a job that did not complete missed its deadline");
        let running = JobRecord { finish_s: None, ..failed };
        assert_eq!((running.completion_s(), running.met()), (None, Some(false)));
    }

    #[test]
    fn the_summary_of_a_hand_made_run() {
        let summary = summarise(&hand_made(), Some(4));
        let all = &summary.all;
        assert_eq!((all.jobs, all.completed, all.makespan_s), (4, 3, Some(20.0)));
        // Waits 1, 3, 0, 4: mean 2, median (1+3)/2, p95 at position 2.85 of [0,1,3,4].
        assert_eq!((all.mean_wait_s, all.median_wait_s, all.p95_wait_s), (Some(2.0), Some(2.0), Some(3.85)));
        // Completions 5, 10, 17.
        assert_eq!(all.mean_completion_s, Some(round(32.0 / 3.0, 3)));
        assert_eq!((all.median_completion_s, all.p95_completion_s), (Some(10.0), Some(16.3)));
        assert_eq!(all.violation_rate, Some(0.5));
        // 32 slot-seconds over 4 slots x 20 s.
        assert_eq!(all.slot_utilisation, Some(0.4));

        let keys: Vec<&str> = summary.by_class.keys().map(String::as_str).collect();
        assert_eq!(keys, ["delay-sensitive", "delay-tolerant", "none"]);
        let ds = &summary.by_class["delay-sensitive"];
        assert_eq!((ds.jobs, ds.completed, ds.makespan_s, ds.violation_rate), (2, 2, Some(12.0), Some(0.5)));
        assert_eq!(ds.slot_utilisation, Some(0.25));
        let none = &summary.by_class["none"];
        // The failed job ended at 9 s: its class's span, though nothing completed.
        assert_eq!((none.completed, none.makespan_s, none.mean_completion_s), (0, Some(9.0), None));
        assert_eq!((none.violation_rate, none.mean_wait_s), (None, Some(4.0)));
        let shares: f64 = summary.by_class.values().filter_map(|s| s.slot_utilisation).sum();
        assert!((shares - 0.4).abs() < 1e-9, "class utilisations add up to the overall one");
    }

    #[test]
    fn empty_and_slotless_runs_have_no_figures_rather_than_nonsense() {
        let empty = summarise(&[], Some(9));
        assert_eq!((empty.all.jobs, empty.all.makespan_s, empty.all.mean_wait_s), (0, None, None));
        assert!(empty.by_class.is_empty());
        assert_eq!(summarise(&hand_made(), None).all.slot_utilisation, None);
    }

    #[test]
    fn percentiles_interpolate() {
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
        assert_eq!(percentile(&[7.0], 0.95), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 0.95).map(|v| round(v, 2)), Some(95.05));
    }

    #[test]
    fn the_json_shape_is_flat_with_by_class() {
        let value = serde_json::to_value(summarise(&hand_made(), Some(4))).unwrap();
        // serde_json's map sorts keys; the printed document keeps the struct's order.
        let keys: std::collections::BTreeSet<&str> =
            value.as_object().unwrap().keys().map(String::as_str).collect();
        let wanted = [
            "jobs",
            "completed",
            "makespan_s",
            "mean_wait_s",
            "median_wait_s",
            "p95_wait_s",
            "mean_completion_s",
            "median_completion_s",
            "p95_completion_s",
            "violation_rate",
            "slot_utilisation",
            "by_class",
        ];
        assert_eq!(keys, wanted.into_iter().collect());
        assert_eq!(value["by_class"]["none"]["mean_completion_s"], serde_json::Value::Null);
    }
}
