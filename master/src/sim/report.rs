//! Results of a simulated run: what happened to each trace job (in virtual milliseconds),
//! critical paths, slot use over time, and the run's summary.
//!
//! The metrics themselves (definitions, statistics, the table, the JSON fields and the
//! per-job CSV) are [`slotmarket_common::metrics`], shared with `slotmarket workload run`
//! so that simulated and live runs compare line by line. This module turns results into
//! its records and adds what only a simulation knows: the cluster's set-up, map and reduce
//! utilisation, failed attempts, lost work and `slots.csv`. The critical path of a job is
//! its length on an idle, unbounded cluster ([`TraceJob::critical_path_ms`]).

use std::io::Write;

use serde::Serialize;
use slotmarket_common::ids::JobId;
use slotmarket_common::metrics::{self, JobRecord, RunFacts, round, summarise};
use slotmarket_common::time::Timestamp;

use super::workload::{Trace, TraceJob};
use super::{SimConfig, SimRun};

/// How a trace job ended (the shared metrics' outcome).
pub use slotmarket_common::metrics::Outcome;

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
    /// Slot time its attempts held, lost work included, in milliseconds.
    pub slot_ms: u64,
    /// Under `jockey`, for a deadline job: the guaranteed slot time (the guarantee
    /// integrated over its run) in milliseconds and the largest guarantee.
    pub guaranteed: Option<(u64, u32)>,
    /// Under `jockey`, for a deadline job: the slot time, in milliseconds, it ran above
    /// its guarantee (on spare slots).
    pub spare_ms: Option<u64>,
    /// Under `jockey`, for a deadline job: the controller's state after every tick
    /// while it ran (Fig. 6's allocation over time).
    pub slo_timeline: Vec<SloSample>,
    /// Under `jockey`, for a deadline job: the controller's state at its end, its slot
    /// time accounts brought up to then. Boxed: every job's result carries the field,
    /// and only deadline jobs under `jockey` fill it.
    pub slo_final: Option<Box<crate::core::policy::jockey::SloState>>,
}

/// The SLO controller's view of a deadline job at one tick of a simulated run.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct SloSample {
    /// Virtual time, in milliseconds.
    pub at_ms: u64,
    /// Guaranteed slots.
    pub guarantee: u32,
    /// Tasks running at the last control step.
    pub running: u32,
    /// Progress at the last control step, in [0, 1].
    pub progress: f64,
    /// Predicted finish (with slack) at the last control step, in milliseconds.
    pub predicted_finish_ms: Option<u64>,
    /// The raw allocation of the last control step, before smoothing.
    pub raw: u32,
    /// The observed slowdown the last control step scaled its predictions by.
    pub slowdown: f64,
    /// Tasks ready but not running at the last control step.
    pub ready: u32,
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
            slot_ms: 0,
            guaranteed: None,
            spare_ms: None,
            slo_timeline: Vec::new(),
            slo_final: None,
        }
    }
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

    pub(super) fn coarsen(&mut self) {
        self.width_ms *= 2;
        let merged = self.buckets.chunks(2).map(|c| {
            let second = c.get(1).copied().unwrap_or([0; 2]);
            [c[0][0] + second[0], c[0][1] + second[1]]
        });
        self.buckets = merged.collect();
    }
}

/// A simulated run's summary: how it was set up, what only a simulation measures, then
/// the shared metrics (overall and per class).
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
    /// Busy share of map slots over the makespan.
    pub map_utilisation: f64,
    /// Busy share of reduce slots over the makespan.
    pub reduce_utilisation: f64,
    /// Attempts that failed.
    pub failed_attempts: u64,
    /// Slot time thrown away by kills and failures.
    pub lost_work_s: f64,
    /// The metrics both tools print, overall and per class (`classes`).
    #[serde(flatten)]
    pub metrics: metrics::Summary,
}

/// The shared per-job records of `run` of `trace`, in trace order; times are seconds of
/// virtual time.
pub fn records(trace: &Trace, run: &SimRun) -> Vec<JobRecord> {
    run.jobs.iter().zip(&trace.jobs).map(|(r, job)| record(r, job)).collect()
}

/// One job's record: its figures, and the names a job list prints.
fn record(r: &JobResult, job: &TraceJob) -> JobRecord {
    JobRecord {
        id: job.id.clone(),
        // The core knows the job by its spec, whose name is the trace id.
        name: job.id.clone(),
        account: job.user.clone(),
        queue: job.queue.clone(),
        ..figures(r, job)
    }
}

/// What the summary needs of one job: its figures and class, without the names, which
/// [`summarise`] never reads (three string copies a job were about a fifth of a half-million-job
/// run's summary).
fn figures(r: &JobResult, job: &TraceJob) -> JobRecord {
    let at = Timestamp::as_secs_f64;
    JobRecord {
        class: job.class,
        outcome: r.outcome,
        submit_s: r.submitted.map(at),
        start_s: r.started.map(at),
        finish_s: r.ended.map(at),
        deadline_s: job.deadline().map(at),
        tasks: job.total_tasks(),
        slot_s: Some(ms_to_s(r.slot_ms)),
        critical_path_s: Some(ms_to_s(r.critical_path_ms)),
        attempts: Some(r.attempts),
        kills: Some(r.kills),
        price: None,
        ..JobRecord::new(String::new())
    }
}

/// What the shared summary needs to know about `run` under `config` besides its jobs:
/// every slot of the cluster, and when the run stopped.
pub fn run_facts(run: &SimRun, config: &SimConfig) -> RunFacts {
    RunFacts {
        slots: Some(config.nodes * (config.map_slots + config.reduce_slots)),
        stopped_s: Some(run.stats.stopped_at.as_secs_f64()),
    }
}

impl Summary {
    /// Summarises `run` of `trace` under `config`.
    pub fn new(trace: &Trace, run: &SimRun, config: &SimConfig) -> Summary {
        let figures: Vec<JobRecord> =
            run.jobs.iter().zip(&trace.jobs).map(|(r, job)| figures(r, job)).collect();
        let metrics = summarise(&figures, run_facts(run, config));
        let span_ms = (metrics.all.makespan_s.unwrap_or(0.0) * 1000.0).max(1.0);
        let util = |k: usize, per_node: u32| {
            let capacity = span_ms * f64::from(config.nodes * per_node);
            if capacity > 0.0 { round(run.stats.busy_ms[k] as f64 / capacity, 6) } else { 0.0 }
        };
        Summary {
            policy: config.core.policy.name().to_string(),
            seed: config.seed,
            nodes: config.nodes,
            map_slots: config.map_slots,
            reduce_slots: config.reduce_slots,
            map_utilisation: util(0, config.map_slots),
            reduce_utilisation: util(1, config.reduce_slots),
            failed_attempts: run.stats.failed_attempts,
            lost_work_s: round(ms_to_s(run.stats.lost_work_ms), 3),
            metrics,
        }
    }

    /// The summary as pretty JSON (stable field order), newline-terminated.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A human summary: the set-up and what only a simulation measures, a blank line, then
    /// the shared table (one metric per line, a column per class), as `slotmarket
    /// workload run` prints it.
    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            out,
            "policy {} · seed {} · {} nodes × {} map + {} reduce slots",
            self.policy, self.seed, self.nodes, self.map_slots, self.reduce_slots
        )?;
        writeln!(
            out,
            "slot use: map {:.1} %, reduce {:.1} %; failed attempts {}, lost work {:.1} s",
            self.map_utilisation * 100.0,
            self.reduce_utilisation * 100.0,
            self.failed_attempts,
            self.lost_work_s
        )?;
        writeln!(out)?;
        self.metrics.write_text(out)
    }
}

/// A duration in milliseconds in seconds (the arithmetic of [`Timestamp::as_secs_f64`],
/// for spans rather than points in time).
fn ms_to_s(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// One line per trace job, in trace order, with the columns both tools write
/// ([`metrics::JOB_COLUMNS`]).
pub fn write_jobs_csv(trace: &Trace, run: &SimRun, out: &mut impl Write) -> std::io::Result<()> {
    metrics::write_jobs_csv(&records(trace, run), out)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
