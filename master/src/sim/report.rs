//! Results of a run: per-job outcomes and times, slot use over time, and the run's
//! metrics (overall and per class) as a human summary, JSON and CSV.
//!
//! Definitions (DRESS §V-A3, MRM §6): waiting time is submit → first task running;
//! completion time is submit → last task done (completed jobs only); makespan is first
//! submit → last end; a job with a deadline violates it unless it completed by then;
//! tardiness is `max(0, end − deadline)`, earliness `max(0, deadline − end)`; slack is
//! `deadline − submit − critical path`, the critical path being the job's length on an
//! idle, unbounded cluster (longest chain of stages, each as long as its longest task).
//! Medians average the middle two values; p95 is the nearest-rank percentile.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;
use slotmarket_common::ids::JobId;
use slotmarket_common::time::Timestamp;

use super::workload::{Trace, TraceJob, task_key};
use super::{SimConfig, SimRun};

/// How a trace job ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Never submitted (the job it follows never ended, or the horizon came first).
    NotSubmitted,
    /// The core refused the spec.
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
    /// Lower-case name used in CSV.
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
}

/// What happened to one trace job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobResult {
    /// Its index in the trace.
    pub ix: usize,
    /// The core's id for it, once admitted.
    pub job: Option<JobId>,
    /// When it was submitted.
    pub submitted: Option<Timestamp>,
    /// When its first task ran.
    pub started: Option<Timestamp>,
    /// When it ended (or was rejected).
    pub ended: Option<Timestamp>,
    /// How it ended.
    pub outcome: Outcome,
    /// Its critical path in milliseconds (see the module header).
    pub critical_path_ms: u64,
    /// Attempts launched.
    pub attempts: u32,
    /// Attempts preempted.
    pub kills: u32,
}

impl JobResult {
    pub(super) fn new(ix: usize) -> JobResult {
        JobResult {
            ix,
            job: None,
            submitted: None,
            started: None,
            ended: None,
            outcome: Outcome::NotSubmitted,
            critical_path_ms: 0,
            attempts: 0,
            kills: 0,
        }
    }

    /// Submit → first task running, in seconds.
    pub fn wait_s(&self) -> Option<f64> {
        Some(secs(self.started?.0.saturating_sub(self.submitted?.0)))
    }

    /// Submit → end, in seconds, for completed jobs.
    pub fn completion_s(&self) -> Option<f64> {
        let ended = self.ended.filter(|_| self.outcome == Outcome::Completed)?;
        Some(secs(ended.0.saturating_sub(self.submitted?.0)))
    }

    /// Whether it missed `deadline`: anything but completing by then.
    pub fn violates(&self, deadline: Timestamp) -> bool {
        self.outcome != Outcome::Completed || self.ended.is_none_or(|e| e > deadline)
    }
}

/// The critical path of trace job `ix` under `seed`, in milliseconds.
pub fn critical_path_ms(job: &TraceJob, ix: usize, seed: u64) -> u64 {
    critical_path(job, &task_durations(job, ix as u32, seed))
}

/// Every task's duration of trace job `ix` under `seed`, in milliseconds, stage after
/// stage in trace order.
pub fn task_durations(job: &TraceJob, ix: u32, seed: u64) -> Vec<u64> {
    let mut durations = Vec::with_capacity(job.tasks() as usize);
    for (s, stage) in job.stages.iter().enumerate() {
        durations
            .extend((0..stage.tasks).map(|t| stage.duration_s.task_ms(t, task_key(seed, ix, s as u32, t))));
    }
    durations
}

/// The critical path of `job` given its task durations (as from [`task_durations`]).
pub fn critical_path(job: &TraceJob, durations: &[u64]) -> u64 {
    let mut longest = Vec::with_capacity(job.stages.len());
    let mut rest = durations;
    for stage in &job.stages {
        let (mine, others) = rest.split_at((stage.tasks as usize).min(rest.len()));
        longest.push(mine.iter().copied().max().unwrap_or(0));
        rest = others;
    }
    // Stages are validated to form a DAG but may be listed in any order: relax until
    // stable (stage counts are tiny).
    let mut finish = vec![0u64; job.stages.len()];
    for _ in 0..job.stages.len() {
        for (s, st) in job.stages.iter().enumerate() {
            let ready = st
                .after
                .iter()
                .filter_map(|name| job.stages.iter().position(|x| &x.name == name))
                .map(|d| finish[d])
                .max()
                .unwrap_or(0);
            finish[s] = ready + longest[s];
        }
    }
    finish.into_iter().max().unwrap_or(0)
}

/// Busy slot time per kind in fixed-width time buckets. The width starts at a second
/// and doubles (merging neighbours) whenever the run outgrows the bucket count, so the
/// series stays small for runs of any length.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotUsage {
    /// Bucket width in milliseconds.
    pub width_ms: u64,
    /// Busy slot-milliseconds per bucket, per kind (map, reduce).
    pub buckets: Vec<[u64; 2]>,
}

/// Most buckets kept; plots need no more.
const MAX_BUCKETS: usize = 1024;

impl SlotUsage {
    pub(super) fn new() -> SlotUsage {
        SlotUsage { width_ms: 1000, buckets: Vec::new() }
    }

    /// Adds a slot of kind `k` busy from `start` to `end`.
    pub(super) fn add(&mut self, k: usize, start: Timestamp, end: Timestamp) {
        if end <= start {
            return;
        }
        while end.0.div_ceil(self.width_ms) as usize > MAX_BUCKETS {
            self.coarsen();
        }
        let last = end.0.div_ceil(self.width_ms) as usize;
        if self.buckets.len() < last {
            self.buckets.resize(last, [0; 2]);
        }
        let mut t = start.0;
        while t < end.0 {
            let b = (t / self.width_ms) as usize;
            let until = ((b as u64 + 1) * self.width_ms).min(end.0);
            self.buckets[b][k] += until - t;
            t = until;
        }
    }

    fn coarsen(&mut self) {
        self.width_ms *= 2;
        let merged = self.buckets.chunks(2).map(|c| {
            let second = c.get(1).copied().unwrap_or([0; 2]);
            [c[0][0] + second[0], c[0][1] + second[1]]
        });
        self.buckets = merged.collect();
    }
}

/// Metrics over a set of jobs (all of them, or one class).
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
    /// First submit → last end.
    pub makespan_s: f64,
    /// Mean waiting time.
    pub mean_wait_s: f64,
    /// Median waiting time.
    pub median_wait_s: f64,
    /// 95th-percentile waiting time.
    pub p95_wait_s: f64,
    /// Mean completion time.
    pub mean_completion_s: f64,
    /// Median completion time.
    pub median_completion_s: f64,
    /// 95th-percentile completion time.
    pub p95_completion_s: f64,
    /// Jobs with a deadline.
    pub deadline_jobs: u64,
    /// Share of `deadline_jobs` that missed it (0 when there are none).
    pub violation_rate: f64,
    /// Mean tardiness over completed jobs with a deadline.
    pub mean_tardiness_s: f64,
    /// Mean earliness over completed jobs with a deadline.
    pub mean_earliness_s: f64,
    /// Median slack over jobs with a deadline.
    pub median_slack_s: f64,
}

/// A run's summary: how it was set up, metrics overall and per class, cluster use.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Policy name.
    pub policy: String,
    /// Run seed.
    pub seed: u64,
    /// Simulated nodes.
    pub nodes: u32,
    /// Map slots per node.
    pub map_slots: u32,
    /// Reduce slots per node.
    pub reduce_slots: u32,
    /// Metrics over every job.
    #[serde(flatten)]
    pub all: Metrics,
    /// Busy share of map slots over the makespan.
    pub map_utilisation: f64,
    /// Busy share of reduce slots over the makespan.
    pub reduce_utilisation: f64,
    /// Attempts launched.
    pub attempts: u64,
    /// Attempts killed while their job ran.
    pub preemptions: u64,
    /// Attempts that failed.
    pub failed_attempts: u64,
    /// Slot time thrown away by kills and failures.
    pub lost_work_s: f64,
    /// Metrics per class (`delay-sensitive`, `delay-tolerant`, `none`), classes present only.
    pub classes: BTreeMap<String, Metrics>,
}

/// The class name a job is reported under.
pub fn class_name(job: &TraceJob) -> &'static str {
    job.class.map_or("none", |c| c.name())
}

impl Summary {
    /// Summarises `run` of `trace` under `config`.
    pub fn new(trace: &Trace, run: &SimRun, config: &SimConfig) -> Summary {
        let all = metrics(trace, run, |_| true);
        let mut names: Vec<&str> = trace.jobs.iter().map(class_name).collect();
        names.sort_unstable();
        names.dedup();
        let classes =
            names.into_iter().map(|c| (c.to_string(), metrics(trace, run, |j| class_name(j) == c))).collect();
        let span_ms = (all.makespan_s * 1000.0).max(1.0);
        let util = |k: usize, per_node: u32| {
            let capacity = span_ms * f64::from(config.nodes * per_node);
            if capacity > 0.0 { round6(run.stats.busy_ms[k] as f64 / capacity) } else { 0.0 }
        };
        Summary {
            policy: config.core.policy.name().to_string(),
            seed: config.seed,
            nodes: config.nodes,
            map_slots: config.map_slots,
            reduce_slots: config.reduce_slots,
            map_utilisation: util(0, config.map_slots),
            reduce_utilisation: util(1, config.reduce_slots),
            all,
            attempts: run.stats.attempts,
            preemptions: run.stats.preemptions,
            failed_attempts: run.stats.failed_attempts,
            lost_work_s: round3(secs(run.stats.lost_work_ms)),
            classes,
        }
    }

    /// The summary as pretty JSON (stable field order), newline-terminated.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A human summary: set-up, a table of metrics per class, cluster use.
    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let a = &self.all;
        writeln!(
            out,
            "policy {} · seed {} · {} nodes × {} map + {} reduce slots",
            self.policy, self.seed, self.nodes, self.map_slots, self.reduce_slots
        )?;
        writeln!(
            out,
            "jobs {}: {} completed, {} failed, {} unfinished; makespan {:.1} s",
            a.jobs, a.completed, a.failed, a.unfinished, a.makespan_s
        )?;
        writeln!(
            out,
            "{:<16} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "class",
            "jobs",
            "wait mean",
            "median",
            "p95",
            "compl mean",
            "median",
            "p95",
            "deadlines",
            "violated"
        )?;
        let rows = std::iter::once(("all", a)).chain(self.classes.iter().map(|(c, m)| (c.as_str(), m)));
        for (name, m) in rows {
            write_row(out, name, m)?;
        }
        writeln!(
            out,
            "slot use: map {:.1} %, reduce {:.1} %; attempts {}, preemptions {}, failed attempts {}, lost work {:.1} s",
            self.map_utilisation * 100.0,
            self.reduce_utilisation * 100.0,
            self.attempts,
            self.preemptions,
            self.failed_attempts,
            self.lost_work_s
        )
    }
}

/// One line of the summary table.
fn write_row(out: &mut impl Write, name: &str, m: &Metrics) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<16} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9} {:>8.1}%",
        name,
        m.jobs,
        m.mean_wait_s,
        m.median_wait_s,
        m.p95_wait_s,
        m.mean_completion_s,
        m.median_completion_s,
        m.p95_completion_s,
        m.deadline_jobs,
        m.violation_rate * 100.0
    )
}

/// Metrics over the jobs `keep` accepts.
fn metrics(trace: &Trace, run: &SimRun, keep: impl Fn(&TraceJob) -> bool) -> Metrics {
    let mut m = Metrics::default();
    let (mut waits, mut completions, mut slacks) = (Vec::new(), Vec::new(), Vec::new());
    let (mut first, mut last) = (u64::MAX, 0u64);
    let (mut violations, mut tardiness, mut earliness, mut on_time_or_late) = (0u64, 0.0, 0.0, 0u64);
    for (r, job) in run.jobs.iter().zip(&trace.jobs).filter(|(_, j)| keep(j)) {
        m.jobs += 1;
        match r.outcome {
            Outcome::Completed => m.completed += 1,
            Outcome::Failed | Outcome::Cancelled | Outcome::Rejected => m.failed += 1,
            Outcome::Unfinished | Outcome::NotSubmitted => m.unfinished += 1,
        }
        if let Some(s) = r.submitted {
            first = first.min(s.0);
        }
        let end = if r.outcome == Outcome::Unfinished { Some(run.stats.stopped_at) } else { r.ended };
        last = last.max(end.map_or(0, |e| e.0));
        waits.extend(r.wait_s());
        completions.extend(r.completion_s());
        let Some(deadline) = job.deadline() else { continue };
        m.deadline_jobs += 1;
        violations += u64::from(r.violates(deadline));
        if let (Outcome::Completed, Some(end)) = (r.outcome, r.ended) {
            on_time_or_late += 1;
            tardiness += secs(end.0.saturating_sub(deadline.0));
            earliness += secs(deadline.0.saturating_sub(end.0));
        }
        if let Some(s) = r.submitted {
            slacks.push((deadline.0 as f64 - s.0 as f64 - r.critical_path_ms as f64) / 1000.0);
        }
    }
    m.makespan_s = if first == u64::MAX { 0.0 } else { round3(secs(last.saturating_sub(first))) };
    (m.mean_wait_s, m.median_wait_s, m.p95_wait_s) = mean_median_p95(&mut waits);
    (m.mean_completion_s, m.median_completion_s, m.p95_completion_s) = mean_median_p95(&mut completions);
    m.median_slack_s = mean_median_p95(&mut slacks).1;
    if m.deadline_jobs > 0 {
        m.violation_rate = round6(violations as f64 / m.deadline_jobs as f64);
    }
    if on_time_or_late > 0 {
        m.mean_tardiness_s = round3(tardiness / on_time_or_late as f64);
        m.mean_earliness_s = round3(earliness / on_time_or_late as f64);
    }
    m
}

/// Mean, median and nearest-rank p95, rounded to milliseconds; zeros for no values.
pub fn mean_median_p95(values: &mut [f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    let rank = (0.95 * n as f64).ceil() as usize;
    let p95 = values[rank.clamp(1, n) - 1];
    (round3(mean), round3(median), round3(p95))
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Column names of the per-job CSV.
pub const JOBS_CSV_HEADER: &str = "id,user,class,queue,state,submit_s,start_s,end_s,wait_s,completion_s,\
deadline_s,tardiness_s,earliness_s,slack_s,critical_path_s,tasks,attempts,kills";

/// One line per trace job, in trace order; empty cells for what does not apply.
pub fn write_jobs_csv(trace: &Trace, run: &SimRun, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{JOBS_CSV_HEADER}")?;
    let t = |ts: Option<Timestamp>| ts.map(|t| format!("{:.3}", secs(t.0))).unwrap_or_default();
    let f = |x: Option<f64>| x.map(|x| format!("{x:.3}")).unwrap_or_default();
    for (r, job) in run.jobs.iter().zip(&trace.jobs) {
        let deadline = job.deadline();
        let ended = r.ended.filter(|_| r.outcome == Outcome::Completed);
        let late = deadline.zip(ended).map(|(d, e)| secs(e.0.saturating_sub(d.0)));
        let early = deadline.zip(ended).map(|(d, e)| secs(d.0.saturating_sub(e.0)));
        let slack = deadline
            .zip(r.submitted)
            .map(|(d, s)| (d.0 as f64 - s.0 as f64 - r.critical_path_ms as f64) / 1000.0);
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{},{},{}",
            csv_field(&job.id),
            csv_field(&job.user),
            class_name(job),
            csv_field(job.queue.as_deref().unwrap_or("default")),
            r.outcome.name(),
            t(r.submitted),
            t(r.started),
            t(r.ended),
            f(r.wait_s()),
            f(r.completion_s()),
            t(deadline),
            f(late),
            f(early),
            f(slack),
            secs(r.critical_path_ms),
            job.tasks(),
            r.attempts,
            r.kills
        )?;
    }
    Ok(())
}

/// Slot use over time: per bucket its start, width, mean busy slots and utilisation.
pub fn write_slots_csv(run: &SimRun, config: &SimConfig, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "t_s,width_s,map_busy,reduce_busy,map_util,reduce_util")?;
    let width = run.usage.width_ms as f64;
    let total = [f64::from(config.nodes * config.map_slots), f64::from(config.nodes * config.reduce_slots)];
    for (b, busy) in run.usage.buckets.iter().enumerate() {
        let mean = [busy[0] as f64 / width, busy[1] as f64 / width];
        let util = |k: usize| if total[k] > 0.0 { mean[k] / total[k] } else { 0.0 };
        writeln!(
            out,
            "{:.3},{:.3},{:.3},{:.3},{:.4},{:.4}",
            b as f64 * width / 1000.0,
            width / 1000.0,
            mean[0],
            mean[1],
            util(0),
            util(1)
        )?;
    }
    Ok(())
}

/// Quotes a CSV cell if it holds a comma, quote or line break (RFC 4180).
pub fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_documented_definitions() {
        let mut v = vec![4.0, 1.0, 3.0, 2.0];
        assert_eq!(mean_median_p95(&mut v), (2.5, 2.5, 4.0));
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(mean_median_p95(&mut v), (50.5, 50.5, 95.0));
        assert_eq!(mean_median_p95(&mut []), (0.0, 0.0, 0.0));
    }

    #[test]
    fn slot_usage_splits_intervals_over_buckets_and_coarsens() {
        let mut u = SlotUsage::new();
        u.add(0, Timestamp(500), Timestamp(2500));
        assert_eq!(u.buckets, vec![[500, 0], [1000, 0], [500, 0]]);
        u.add(1, Timestamp(0), Timestamp(MAX_BUCKETS as u64 * 1000 + 1));
        assert_eq!(u.width_ms, 2000);
        assert_eq!(u.buckets[0], [1500, 2000]);
        let total: u64 = u.buckets.iter().map(|b| b[0] + b[1]).sum();
        assert_eq!(total, 2000 + MAX_BUCKETS as u64 * 1000 + 1);
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
