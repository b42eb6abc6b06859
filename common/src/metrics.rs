//! Run metrics shared by the simulator (`slotmarket-sim run`) and the live workload runner
//! (`slotmarket workload run`): one [`JobRecord`] per job in, one [`Summary`] out (all jobs,
//! then each class), printed as a table with one metric per line, as JSON (serde) and, per
//! job, as CSV ([`write_jobs_csv`]). Both tools summarise through [`summarise`] and print
//! through the same [`Display`](std::fmt::Display), so a simulated and a live run of one
//! workload compare line by line. Pure: no clock, no files; writers take any `Write`.
//!
//! # Definitions
//!
//! Times are seconds since the run's start (virtual time 0 in the simulator, the first
//! submit in a live run), on a millisecond grid. Over a set of jobs (all, or one class):
//!
//! - **wait**: submit → first task running, over the jobs that started;
//! - **completion**: submit → end, over the jobs that completed;
//! - **makespan**: the set's first submit → its last end, a job not ended when the run
//!   stopped counting as running until then (DRESS §V-A3, MRM §6);
//! - **violation**: a job with a deadline violates it unless it completed by then; the
//!   rate is over the jobs with a deadline;
//! - **tardiness** `max(0, end − deadline)` and **earliness** `max(0, deadline − end)`:
//!   means over the completed jobs with a deadline;
//! - **slack** `deadline − submit − critical path` (the job's length alone on an idle,
//!   unbounded cluster): its median over the jobs with a deadline and a known critical path;
//! - **slot utilisation**: the set's busy slot-seconds ÷ (slots × the whole run's
//!   makespan), so the classes add up to the overall figure;
//! - **attempts** and **preemptions** (attempts killed while their job ran): sums, where
//!   the tool knows them (the simulator does, a live run does not yet).
//!
//! # Statistics
//!
//! One definition for every tool: the **mean** is summed in ascending order (so it does
//! not depend on the order jobs are listed in); the **median** is the middle value, the
//! mean of the middle two for an even count; **p95** is the nearest-rank percentile, the
//! ⌈0.95·n⌉-th smallest value, so it is always a time some job had. Per-job durations are
//! rounded to the millisecond before anything is computed from them, so figures computed
//! from a `jobs.csv` read back equal the ones computed from the run itself. Figures are
//! rounded to milliseconds (seconds) and six places (shares). A figure over no values is
//! `None` (JSON `null`, `-` in the table) rather than a misleading zero.

mod csv;

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::protocol::JobState;
use crate::spec::JobClass;

pub use self::csv::{CsvError, JOB_COLUMNS, csv_field, parse_csv, read_jobs_csv, secs_cell, write_jobs_csv};

/// The class key of jobs without a class.
pub const NO_CLASS: &str = "none";

/// How a job ended, or why it did not.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Never submitted (the simulator's horizon came first, or the job it follows never ended).
    NotSubmitted,
    /// The master refused the spec.
    Rejected,
    /// Submitted, not ended when the run stopped.
    Unfinished,
    /// Every task completed.
    Completed,
    /// A task failed every attempt.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl Outcome {
    /// Every outcome, for parsing.
    const ALL: [Outcome; 6] = [
        Outcome::NotSubmitted,
        Outcome::Rejected,
        Outcome::Unfinished,
        Outcome::Completed,
        Outcome::Failed,
        Outcome::Cancelled,
    ];

    /// The lower-case name in the CSV's `state` column.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::NotSubmitted => "not-submitted",
            Outcome::Rejected => "rejected",
            Outcome::Unfinished => "unfinished",
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// The outcome called `name` (as [`Outcome::name`] writes it).
    pub fn from_name(name: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.name() == name)
    }
}

impl From<JobState> for Outcome {
    /// How a job the master knows stands: ended, or [`Outcome::Unfinished`] while it is
    /// pending or running.
    fn from(state: JobState) -> Outcome {
        match state {
            JobState::Pending | JobState::Running => Outcome::Unfinished,
            JobState::Completed => Outcome::Completed,
            JobState::Failed => Outcome::Failed,
            JobState::Cancelled => Outcome::Cancelled,
        }
    }
}

/// One job as the summary sees it. Tools fill what they know; the rest stays `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// The tool's id: the trace's job id in the simulator, the master's (`j7`) in a live run.
    pub id: String,
    /// The spec's name.
    pub name: String,
    /// The submitting account.
    pub account: String,
    /// Its service class.
    pub class: Option<JobClass>,
    /// The `capacity` queue it named.
    pub queue: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// When it was submitted.
    pub submit_s: Option<f64>,
    /// When its first task started.
    pub start_s: Option<f64>,
    /// When it ended (completed, failed, cancelled or rejected).
    pub finish_s: Option<f64>,
    /// Its absolute deadline.
    pub deadline_s: Option<f64>,
    /// Tasks over all stages.
    pub tasks: u64,
    /// Slot-seconds its task attempts held, lost work included.
    pub slot_s: Option<f64>,
    /// Its length alone on an idle, unbounded cluster (simulator only).
    pub critical_path_s: Option<f64>,
    /// Task attempts launched (simulator only).
    pub attempts: Option<u32>,
    /// Attempts killed while it ran (simulator only).
    pub kills: Option<u32>,
    /// What it was charged (no pricing yet).
    pub price: Option<f64>,
}

impl JobRecord {
    /// A record of job `id` that knows nothing else yet (not submitted, no times).
    pub fn new(id: impl Into<String>) -> JobRecord {
        JobRecord {
            id: id.into(),
            name: String::new(),
            account: String::new(),
            class: None,
            queue: None,
            outcome: Outcome::NotSubmitted,
            submit_s: None,
            start_s: None,
            finish_s: None,
            deadline_s: None,
            tasks: 0,
            slot_s: None,
            critical_path_s: None,
            attempts: None,
            kills: None,
            price: None,
        }
    }

    /// Whether it completed.
    pub fn completed(&self) -> bool {
        self.outcome == Outcome::Completed
    }

    /// The key of its class in [`Summary::classes`].
    pub fn class_key(&self) -> &'static str {
        self.class.map_or(NO_CLASS, JobClass::name)
    }

    /// Submit → first task running.
    pub fn wait_s(&self) -> Option<f64> {
        Some(round(self.start_s? - self.submit_s?, 3))
    }

    /// Submit → end, for completed jobs.
    pub fn completion_s(&self) -> Option<f64> {
        let finish = self.finish_s.filter(|_| self.completed())?;
        Some(round(finish - self.submit_s?, 3))
    }

    /// Whether it completed by its deadline; `None` without one. Anything but completing
    /// in time misses it.
    pub fn met(&self) -> Option<bool> {
        let deadline = self.deadline_s?;
        Some(self.completed() && self.finish_s.is_some_and(|finish| finish <= deadline))
    }

    /// `max(0, end − deadline)`, for completed jobs with a deadline.
    pub fn tardiness_s(&self) -> Option<f64> {
        let finish = self.finish_s.filter(|_| self.completed())?;
        Some(round((finish - self.deadline_s?).max(0.0), 3))
    }

    /// `max(0, deadline − end)`, for completed jobs with a deadline.
    pub fn earliness_s(&self) -> Option<f64> {
        let finish = self.finish_s.filter(|_| self.completed())?;
        Some(round((self.deadline_s? - finish).max(0.0), 3))
    }

    /// `deadline − submit − critical path`.
    pub fn slack_s(&self) -> Option<f64> {
        Some(round(self.deadline_s? - self.submit_s? - self.critical_path_s?, 3))
    }

    /// When it stopped counting towards a makespan: its end, or `stopped_s` if it was
    /// submitted and had not ended by then.
    fn last_moment(&self, stopped_s: Option<f64>) -> Option<f64> {
        match self.outcome {
            Outcome::Unfinished => stopped_s.or(self.finish_s),
            _ => self.finish_s,
        }
    }
}

/// The figures of a set of jobs (all of them, or one class).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Jobs in the set.
    pub jobs: u64,
    /// Jobs that completed.
    pub completed: u64,
    /// Jobs that failed, were cancelled or rejected.
    pub failed: u64,
    /// Jobs not ended when the run stopped (or never submitted).
    pub unfinished: u64,
    /// The set's first submit → its last end.
    pub makespan_s: Option<f64>,
    /// Mean wait.
    pub mean_wait_s: Option<f64>,
    /// Median wait.
    pub median_wait_s: Option<f64>,
    /// 95th-percentile wait.
    pub p95_wait_s: Option<f64>,
    /// Mean completion time.
    pub mean_completion_s: Option<f64>,
    /// Median completion time.
    pub median_completion_s: Option<f64>,
    /// 95th-percentile completion time.
    pub p95_completion_s: Option<f64>,
    /// Jobs with a deadline.
    pub deadline_jobs: u64,
    /// Share of `deadline_jobs` that missed it.
    pub violation_rate: Option<f64>,
    /// Mean tardiness over completed jobs with a deadline.
    pub mean_tardiness_s: Option<f64>,
    /// Mean earliness over completed jobs with a deadline.
    pub mean_earliness_s: Option<f64>,
    /// Median slack over jobs with a deadline and a known critical path.
    pub median_slack_s: Option<f64>,
    /// The set's busy slot-seconds ÷ (slots × the whole run's makespan).
    pub slot_utilisation: Option<f64>,
    /// Task attempts launched.
    pub attempts: Option<u64>,
    /// Attempts killed while their job ran.
    pub preemptions: Option<u64>,
}

/// A run's summary: every job, then each class.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Every job.
    #[serde(flatten)]
    pub all: Metrics,
    /// By class (`delay-sensitive`, `delay-tolerant`, [`NO_CLASS`]); classes with no job are
    /// left out.
    pub classes: BTreeMap<String, Metrics>,
}

/// What a summary needs to know about the run besides its jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunFacts {
    /// Slots (map and reduce together) utilisation is relative to; `None`: no utilisation.
    pub slots: Option<u32>,
    /// When the run stopped following its jobs; unfinished jobs count as running until then.
    pub stopped_s: Option<f64>,
}

/// Summarises `records` (see the module header for the definitions).
pub fn summarise(records: &[JobRecord], facts: RunFacts) -> Summary {
    // One pass over the records gathers every set's values (a pass per figure read half a
    // million 200-byte records a dozen times); the sorts, most of what is left, are split
    // between two threads: the overall figures here, the classes' beside them.
    let mut all = Gathered::default();
    let mut classes: BTreeMap<&str, Gathered> = BTreeMap::new();
    for record in records {
        all.add(record, facts.stopped_s);
        classes.entry(record.class_key()).or_default().add(record, facts.stopped_s);
    }
    let capacity = match (facts.slots, all.makespan()) {
        // The makespan as printed (whole milliseconds), so the share can be checked by hand.
        (Some(slots), Some(span)) if slots > 0 && span > 0.0 => Some(f64::from(slots) * round(span, 3)),
        _ => None,
    };
    std::thread::scope(|scope| {
        let classes = scope.spawn(|| {
            classes.into_iter().map(|(class, set)| (class.to_string(), set.metrics(capacity))).collect()
        });
        let all = all.metrics(capacity);
        Summary { all, classes: classes.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)) }
    })
}

/// What one set's figures are made of, gathered record by record in the records' order.
#[derive(Default)]
struct Gathered {
    jobs: u64,
    completed: u64,
    failed: u64,
    unfinished: u64,
    first_submit_s: Option<f64>,
    last_moment_s: Option<f64>,
    waits: Vec<f64>,
    completions: Vec<f64>,
    deadline_jobs: u64,
    missed: u64,
    tardiness: Vec<f64>,
    earliness: Vec<f64>,
    slacks: Vec<f64>,
    busy: Vec<f64>,
    attempts: Option<u64>,
    kills: Option<u64>,
}

impl Gathered {
    /// Adds one record; `stopped_s` is when the run stopped following its jobs.
    fn add(&mut self, r: &JobRecord, stopped_s: Option<f64>) {
        self.jobs += 1;
        match r.outcome {
            Outcome::Completed => self.completed += 1,
            Outcome::Failed | Outcome::Cancelled | Outcome::Rejected => self.failed += 1,
            Outcome::Unfinished | Outcome::NotSubmitted => self.unfinished += 1,
        }
        if let Some(submit) = r.submit_s {
            self.first_submit_s = Some(self.first_submit_s.map_or(submit, |first| first.min(submit)));
        }
        if let Some(moment) = r.last_moment(stopped_s) {
            self.last_moment_s = Some(self.last_moment_s.map_or(moment, |last| last.max(moment)));
        }
        self.waits.extend(r.wait_s());
        self.completions.extend(r.completion_s());
        if let Some(met) = r.met() {
            self.deadline_jobs += 1;
            self.missed += u64::from(!met);
        }
        self.tardiness.extend(r.tardiness_s());
        self.earliness.extend(r.earliness_s());
        self.slacks.extend(r.slack_s());
        self.busy.extend(r.slot_s);
        let add = |sum: Option<u64>, value: Option<u32>| match (sum, value) {
            (sum, None) => sum,
            (sum, Some(v)) => Some(sum.unwrap_or(0) + u64::from(v)),
        };
        self.attempts = add(self.attempts, r.attempts);
        self.kills = add(self.kills, r.kills);
    }

    /// The set's first submit → its last end (or the run's stop for unfinished jobs).
    fn makespan(&self) -> Option<f64> {
        Some((self.last_moment_s? - self.first_submit_s?).max(0.0))
    }

    /// The set's figures; `capacity` is slots × the whole run's makespan.
    fn metrics(mut self, capacity: Option<f64>) -> Metrics {
        let (wait, completion) = (spread(&mut self.waits), spread(&mut self.completions));
        // Summed like the means, in ascending order: the listing order cannot reach the figure.
        let utilisation =
            capacity.filter(|_| !self.busy.is_empty()).map(|c| ascending_sum(&mut self.busy) / c);
        Metrics {
            jobs: self.jobs,
            completed: self.completed,
            failed: self.failed,
            unfinished: self.unfinished,
            makespan_s: self.makespan().map(|span| round(span, 3)),
            mean_wait_s: wait.map(|s| s.mean),
            median_wait_s: wait.map(|s| s.median),
            p95_wait_s: wait.map(|s| s.p95),
            mean_completion_s: completion.map(|s| s.mean),
            median_completion_s: completion.map(|s| s.median),
            p95_completion_s: completion.map(|s| s.p95),
            deadline_jobs: self.deadline_jobs,
            violation_rate: (self.deadline_jobs > 0)
                .then(|| round(self.missed as f64 / self.deadline_jobs as f64, 6)),
            mean_tardiness_s: mean(&mut self.tardiness).map(|v| round(v, 3)),
            mean_earliness_s: mean(&mut self.earliness).map(|v| round(v, 3)),
            median_slack_s: median(&mut self.slacks).map(|v| round(v, 3)),
            slot_utilisation: utilisation.map(|v| round(v, 6)),
            attempts: self.attempts,
            preemptions: self.kills,
        }
    }
}

/// Mean, median and p95 of some values, each rounded to the millisecond.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The mean.
    pub mean: f64,
    /// The median.
    pub median: f64,
    /// The nearest-rank 95th percentile.
    pub p95: f64,
}

/// [`Spread`] of `values` (sorted in place); `None` for no values.
pub fn spread(values: &mut [f64]) -> Option<Spread> {
    Some(Spread {
        mean: round(mean(values)?, 3),
        median: round(median(values)?, 3),
        p95: round(percentile(values, 0.95)?, 3),
    })
}

/// The mean, summed in ascending order (`values` are sorted in place); `None` for none.
pub fn mean(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    (n > 0).then(|| ascending_sum(values) / n as f64)
}

/// The sum in ascending order (`values` are sorted in place). Floating-point addition is
/// not associative: a fixed order makes sums independent of the order a tool listed its
/// jobs in.
fn ascending_sum(values: &mut [f64]) -> f64 {
    sort(values);
    values.iter().sum()
}

/// Sorts `values` ascending in `f64::total_cmp`'s order. Values equal under it are the
/// same bits, so an unstable sort leaves them as a stable one would. The sort runs on
/// integers that order as `total_cmp` does ([`total_order_key`]): a third faster than
/// comparing the floats (a summary of half a million jobs sorts a dozen such lists).
/// A list already sorted (a median after a mean) costs one pass.
fn sort(values: &mut [f64]) {
    if values.is_sorted_by(|a, b| a.total_cmp(b).is_le()) {
        return;
    }
    let mut keys: Vec<i64> = values.iter().map(|&v| total_order_key(v)).collect();
    keys.sort_unstable();
    for (value, key) in values.iter_mut().zip(keys) {
        // The key's mapping undoes itself: it flips the bits below the sign, which stays.
        *value = f64::from_bits(total_order_key(f64::from_bits(key as u64)) as u64);
    }
}

/// `value` as an integer in `f64::total_cmp`'s order (the same mapping `total_cmp`
/// compares by): a negative value's bits below the sign are flipped, so that larger
/// magnitudes sort lower.
fn total_order_key(value: f64) -> i64 {
    let bits = value.to_bits() as i64;
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// The middle value, the mean of the middle two for an even count (`values` are sorted
/// in place); `None` for none.
pub fn median(values: &mut [f64]) -> Option<f64> {
    sort(values);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The nearest-rank `q` quantile (`q` in 0..=1): the ⌈q·n⌉-th smallest value, at least the
/// first (`values` are sorted in place); `None` for none.
pub fn percentile(values: &mut [f64], q: f64) -> Option<f64> {
    sort(values);
    let n = values.len();
    // q·n may land a rounding error above a whole rank (0.1 × 10 is not exactly 1); the
    // tolerance keeps that rank.
    let rank = (q.clamp(0.0, 1.0) * n as f64 - 1e-9).ceil() as usize;
    values.get(rank.clamp(1, n.max(1)) - 1).copied()
}

/// `value` rounded to `decimals` places, so JSON and tables carry no float noise.
pub fn round(value: f64, decimals: i32) -> f64 {
    let factor = 10f64.powi(decimals);
    (value * factor).round() / factor
}

/// One line of the table: the metric's name and how to show it.
type Row = (&'static str, fn(&Metrics) -> String);

/// The table's lines, in [`Metrics`] order.
const ROWS: [Row; 19] = [
    ("jobs", |m| m.jobs.to_string()),
    ("completed", |m| m.completed.to_string()),
    ("failed", |m| m.failed.to_string()),
    ("unfinished", |m| m.unfinished.to_string()),
    ("makespan_s", |m| fixed(m.makespan_s, 1)),
    ("mean_wait_s", |m| fixed(m.mean_wait_s, 1)),
    ("median_wait_s", |m| fixed(m.median_wait_s, 1)),
    ("p95_wait_s", |m| fixed(m.p95_wait_s, 1)),
    ("mean_completion_s", |m| fixed(m.mean_completion_s, 1)),
    ("median_completion_s", |m| fixed(m.median_completion_s, 1)),
    ("p95_completion_s", |m| fixed(m.p95_completion_s, 1)),
    ("deadline_jobs", |m| m.deadline_jobs.to_string()),
    ("violation_rate", |m| fixed(m.violation_rate, 3)),
    ("mean_tardiness_s", |m| fixed(m.mean_tardiness_s, 1)),
    ("mean_earliness_s", |m| fixed(m.mean_earliness_s, 1)),
    ("median_slack_s", |m| fixed(m.median_slack_s, 1)),
    ("slot_utilisation", |m| fixed(m.slot_utilisation, 3)),
    ("attempts", |m| m.attempts.map_or("-".into(), |v| v.to_string())),
    ("preemptions", |m| m.preemptions.map_or("-".into(), |v| v.to_string())),
];

/// A number with `decimals` places, or `-`.
fn fixed(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.decimals$}"))
}

/// The table: a line per metric (named as in the JSON), a column for all jobs and one per
/// class; columns are right-aligned, two spaces apart, with no trailing spaces.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns: Vec<(&str, &Metrics)> = std::iter::once(("all", &self.all))
            .chain(self.classes.iter().map(|(class, m)| (class.as_str(), m)))
            .collect();
        let cells: Vec<Vec<String>> =
            ROWS.iter().map(|(_, show)| columns.iter().map(|(_, m)| show(m)).collect()).collect();
        let first = ROWS.iter().map(|(name, _)| name.len()).chain(["metric".len()]).max().unwrap_or(0);
        let widths: Vec<usize> = columns
            .iter()
            .enumerate()
            .map(|(c, (name, _))| cells.iter().map(|row| row[c].len()).chain([name.len()]).max().unwrap_or(0))
            .collect();
        let header: Vec<String> = columns.iter().map(|(name, _)| name.to_string()).collect();
        let lines = std::iter::once(("metric", &header)).chain(ROWS.iter().map(|(n, _)| *n).zip(&cells));
        for (name, row) in lines {
            let mut line = format!("{name:<first$}");
            for (cell, width) in row.iter().zip(&widths) {
                line.push_str(&format!("  {cell:>width$}"));
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

impl Summary {
    /// Writes the table ([`Display`](fmt::Display)) to `out`.
    pub fn write_text(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        write!(out, "{self}")
    }
}

#[cfg(test)]
pub(crate) mod tests;
