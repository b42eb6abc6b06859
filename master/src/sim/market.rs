//! MRM's market in the simulator (§6.3): each arriving job gets a runtime estimate (its
//! drawn task times with Gaussian estimation noise), is quoted by the core, and buys a
//! deadline by the buyer model — a delay-sensitive job the earliest deadline costing at
//! most α × its work, a delay-tolerant job the earliest costing only its work, or with
//! `trace_deadlines` the trace's own deadline (refused if infeasible). `Fcfs` is the
//! baseline's promise: the finish behind every admitted job, as FCFS would give.
//! The summary holds the paper's figures per class (Tables 5–8, Figure 9).

use serde::Serialize;
use slotmarket_common::spec::{EstimateSpec, JobClass, JobSpec, SlotKind};
use slotmarket_common::time::Timestamp;

use super::report::{JobResult, Outcome};
use super::rng::{hash, normal};
use super::workload::{Trace, TraceJob};
use crate::core::{Choice, Core, Offer};

/// How deadlines are bought in a simulated run.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct MarketConfig {
    /// Which promise a job gets.
    pub admission: SimAdmission,
    /// A delay-sensitive job pays at most α times its work.
    pub alpha: f64,
    /// Relative standard deviation of a job's estimate around its true mean task time.
    pub estimate_noise: f64,
    /// Ask for the trace's `deadline_s` instead of buying by class.
    pub trace_deadlines: bool,
}

/// The promise a simulated job buys.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SimAdmission {
    /// MRM: a deadline from the price–deadline curve by the buyer model.
    Mrm,
    /// The finish time behind every admitted job (what FCFS promises), at its price.
    Fcfs,
}

/// What one job bought.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Purchase {
    /// The offer it took.
    pub offer: Offer,
}

/// Per kind, the mean and standard deviation of the job's drawn task times, in ms, or
/// `None` without tasks.
fn true_means(job: &TraceJob, ix: u32, seed: u64) -> [Option<(f64, f64)>; 2] {
    SlotKind::ALL.map(|kind| {
        let times: Vec<u64> = job
            .stages
            .iter()
            .enumerate()
            .filter(|(_, s)| s.slot == kind)
            .flat_map(|(s, stage)| (0..stage.tasks).map(move |t| job.task_ms(ix, s as u32, t, seed)))
            .collect();
        (!times.is_empty()).then(|| {
            let n = times.len() as f64;
            let mean = times.iter().sum::<u64>() as f64 / n;
            let var = times.iter().map(|&t| (t as f64 - mean).powi(2)).sum::<f64>() / n;
            (mean, var.sqrt())
        })
    })
}

/// The `[estimate]` of trace job `ix`: its true mean task times, each scaled by one
/// draw of `1 + σ·N(0, 1)` for the job, with a spread of σ; the task spread is the
/// largest relative spread of its stages' drawn times (what its history would show).
pub fn estimate_for(job: &TraceJob, ix: u32, seed: u64, sigma: f64) -> EstimateSpec {
    let key = hash(&[seed, u64::from(ix), 0xe571]);
    let error = (1.0 + sigma * normal(hash(&[key, 1]), hash(&[key, 2]))).max(0.05);
    let truth = true_means(job, ix, seed);
    let [map, reduce] = truth.map(|m| m.map(|(mean, _)| (mean * error).round().max(1.0) as u64));
    let task_spread = truth.iter().flatten().map(|&(mean, sd)| sd / mean.max(1.0)).fold(0.0, f64::max);
    EstimateSpec {
        map_task_ms: map,
        reduce_task_ms: reduce,
        spread_pct: Some((sigma * 100.0).round().max(1.0) as u32),
        task_spread_pct: Some((task_spread * 100.0).ceil() as u32),
    }
}

/// Quotes `spec` and buys a deadline for it by the buyer model; `None` when refused
/// (only a trace deadline can be).
pub fn buy(
    core: &mut Core,
    now: Timestamp,
    job: &TraceJob,
    spec: &JobSpec,
    config: &MarketConfig,
) -> Option<Offer> {
    let choice = match (config.admission, config.trace_deadlines) {
        (_, true) => Choice::Deadline(job.deadline().filter(|&d| d > now)?),
        (SimAdmission::Fcfs, false) => Choice::BehindAll,
        (SimAdmission::Mrm, false) => {
            let work = core.quote(now, spec).ok()?.work_ms;
            let factor = if job.class == Some(JobClass::DelaySensitive) { config.alpha } else { 1.0 };
            Choice::MaxPrice(factor * work)
        }
    };
    core.offer(now, spec, choice).ok().map(|(_, offer)| offer)
}

/// Figures of one class of jobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassFigures {
    /// Jobs that bought a deadline.
    pub admitted: usize,
    /// Jobs refused (an infeasible trace deadline).
    pub refused: usize,
    /// Share of completed jobs that finished after their deadline, in percent.
    pub violation_pct: f64,
    /// Mean wait from submission to the first task, in seconds.
    pub mean_wait_s: f64,
    /// 95th percentile of that wait.
    pub p95_wait_s: f64,
    /// Mean earliness (deadline − finish) of jobs that met their deadline, in seconds.
    pub mean_earliness_s: f64,
    /// Median slack offered (deadline − earliest feasible finish), in seconds.
    pub median_slack_s: f64,
    /// 95th percentile of the slack offered.
    pub p95_slack_s: f64,
    /// Median price over the job's actual slot time.
    pub median_premium: f64,
    /// 95th percentile of that ratio.
    pub p95_premium: f64,
    /// Share that started before some job submitted earlier had started, in percent.
    pub jumped_pct: f64,
    /// The paper's jump-ahead (§6.3, after Table 8): share of the class's jobs that
    /// finished before some job that finished before them when the same trace ran under
    /// FCFS, in percent; `None` without that run (`run --compare-fcfs`).
    pub jumped_vs_fcfs_pct: Option<f64>,
    /// The same share among the jobs that found a delay-tolerant job submitted before
    /// them still waiting to start when they arrived (the paper's restricted figure).
    pub jumped_vs_fcfs_queued_pct: Option<f64>,
    /// Share of the class's jobs that found such a waiting delay-tolerant job, in percent.
    pub found_queued_pct: Option<f64>,
}

/// The market figures of a run: per class (`delay-sensitive`, `delay-tolerant`, `none`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MarketSummary {
    /// Figures by class name.
    pub classes: Vec<(String, ClassFigures)>,
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 }
}

fn secs(ms: f64) -> f64 {
    (ms / 1000.0 * 1000.0).round() / 1000.0
}

/// For each job, whether it started before some job submitted earlier had started.
fn jumped(jobs: &[JobResult]) -> Vec<bool> {
    let mut order: Vec<&JobResult> = jobs.iter().filter(|j| j.submitted.is_some()).collect();
    order.sort_by_key(|j| (j.submitted, j.ix));
    let mut out = vec![false; jobs.len()];
    // In submission order, keep the latest start among the jobs submitted so far (one
    // that never started counts as later than any): a job jumped if that is after its own.
    let mut latest_earlier = Timestamp::ZERO;
    let mut earlier_unstarted = false;
    for job in order {
        if let Some(start) = job.started {
            out[job.ix] = earlier_unstarted || latest_earlier > start;
            latest_earlier = latest_earlier.max(start);
        } else {
            earlier_unstarted = true;
        }
    }
    out
}

/// For each job, whether it finished before some job `k` that finished strictly before
/// it in `fcfs` (the same trace run first-come first-served): the paper's pairwise
/// comparison of completion orders. A job that did not finish in both runs never counts.
pub fn jumped_vs_fcfs(jobs: &[JobResult], fcfs: &[JobResult]) -> Vec<bool> {
    let mut out = vec![false; jobs.len()];
    let mut order: Vec<(Timestamp, Timestamp, usize)> =
        jobs.iter().zip(fcfs).filter_map(|(j, f)| Some((f.ended?, j.ended?, j.ix))).collect();
    order.sort_unstable();
    // In FCFS finishing order, a job jumped when some job that finished strictly earlier
    // under FCFS finished later here: the latest such finish is all that matters.
    let mut latest_before = Timestamp::ZERO;
    let mut group = 0;
    while group < order.len() {
        let fcfs_end = order[group].0;
        let next = order[group..].iter().position(|o| o.0 != fcfs_end).map_or(order.len(), |p| group + p);
        for &(_, end, ix) in &order[group..next] {
            out[ix] = latest_before > end;
        }
        for &(_, end, _) in &order[group..next] {
            latest_before = latest_before.max(end);
        }
        group = next;
    }
    out
}

/// For each job, whether a delay-tolerant job submitted before it had not started when
/// it was submitted (only then can it jump ahead of one, §6.3).
pub fn found_queued_tolerant(trace: &Trace, jobs: &[JobResult]) -> Vec<bool> {
    let mut order: Vec<&JobResult> = jobs.iter().filter(|j| j.submitted.is_some()).collect();
    order.sort_by_key(|j| (j.submitted, j.ix));
    let mut out = vec![false; jobs.len()];
    // The latest start of the delay-tolerant jobs submitted so far (never: the end of time).
    let mut latest_start = Timestamp::ZERO;
    for job in order {
        let submitted = job.submitted.unwrap_or(Timestamp::ZERO);
        out[job.ix] = latest_start > submitted;
        if trace.jobs[job.ix].class == Some(JobClass::DelayTolerant) {
            latest_start = latest_start.max(job.started.unwrap_or(Timestamp(u64::MAX)));
        }
    }
    out
}

impl MarketSummary {
    /// Adds the paper's jump-ahead figures per class, from `fcfs`: the same trace run
    /// first-come first-served (FIFO, no admission) with the same seed.
    pub fn compare_with_fcfs(&mut self, trace: &Trace, jobs: &[JobResult], fcfs: &[JobResult]) {
        let jumped = jumped_vs_fcfs(jobs, fcfs);
        let queued = found_queued_tolerant(trace, jobs);
        for (name, f) in &mut self.classes {
            let members: Vec<usize> = (0..jobs.len())
                .filter(|&ix| trace.jobs[ix].class.map_or("none", JobClass::name) == name.as_str())
                .filter(|&ix| jobs[ix].outcome != Outcome::Rejected)
                .collect();
            let share = |of: &[usize], who: &dyn Fn(usize) -> bool| {
                (!of.is_empty())
                    .then(|| 100.0 * of.iter().filter(|&&ix| who(ix)).count() as f64 / of.len() as f64)
            };
            let found: Vec<usize> = members.iter().copied().filter(|&ix| queued[ix]).collect();
            f.jumped_vs_fcfs_pct = share(&members, &|ix| jumped[ix]);
            f.jumped_vs_fcfs_queued_pct = share(&found, &|ix| jumped[ix]);
            f.found_queued_pct = share(&members, &|ix| queued[ix]);
        }
    }

    /// The figures of `jobs` (a run of `trace`) with what each bought.
    pub fn new(trace: &Trace, jobs: &[JobResult], purchases: &[Option<Purchase>]) -> MarketSummary {
        let jumps = jumped(jobs);
        let classes = [Some(JobClass::DelaySensitive), Some(JobClass::DelayTolerant), None];
        let classes = classes
            .into_iter()
            .filter_map(|class| {
                let members: Vec<usize> =
                    (0..jobs.len()).filter(|&ix| trace.jobs[ix].class == class).collect();
                (!members.is_empty()).then(|| {
                    (
                        class.map_or("none", JobClass::name).to_string(),
                        figures(&members, jobs, purchases, &jumps),
                    )
                })
            })
            .collect();
        MarketSummary { classes }
    }

    /// As a small table.
    pub fn write_text(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(
            out,
            "class            admitted refused viol%  wait_s  p95wait  early_s  slack_s p95slack premium p95prem jumped%"
        )?;
        for (name, f) in &self.classes {
            writeln!(
                out,
                "{name:<16} {:>8} {:>7} {:>5.2} {:>7.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>7.2} {:>7.2} {:>7.1}",
                f.admitted,
                f.refused,
                f.violation_pct,
                f.mean_wait_s,
                f.p95_wait_s,
                f.mean_earliness_s,
                f.median_slack_s,
                f.p95_slack_s,
                f.median_premium,
                f.p95_premium,
                f.jumped_pct
            )?;
        }
        if self.classes.iter().any(|(_, f)| f.jumped_vs_fcfs_pct.is_some()) {
            writeln!(
                out,
                "\nagainst the FCFS run: class, jumped ahead %, found a DT job queued %, jumped among those %"
            )?;
            let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
            for (name, f) in &self.classes {
                let (all, found, among) =
                    (f.jumped_vs_fcfs_pct, f.found_queued_pct, f.jumped_vs_fcfs_queued_pct);
                writeln!(out, "{name:<16} {:>8} {:>8} {:>8}", cell(all), cell(found), cell(among))?;
            }
        }
        Ok(())
    }
}

/// The figures of the jobs `members`.
fn figures(
    members: &[usize],
    jobs: &[JobResult],
    purchases: &[Option<Purchase>],
    jumps: &[bool],
) -> ClassFigures {
    let mut f = ClassFigures::default();
    let (mut waits, mut early, mut slack, mut premium) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut done, mut late, mut jumped) = (0usize, 0usize, 0usize);
    for &ix in members {
        let job = &jobs[ix];
        if job.outcome == Outcome::Rejected {
            f.refused += 1;
            continue;
        }
        if let (Some(s), Some(st)) = (job.submitted, job.started) {
            waits.push(secs(st.0 as f64 - s.0 as f64));
        }
        jumped += usize::from(jumps[ix]);
        let Some(Some(purchase)) = purchases.get(ix) else { continue };
        let offer = purchase.offer;
        f.admitted += 1;
        slack.push(secs(offer.deadline.0 as f64 - offer.earliest.0 as f64));
        if job.slot_ms > 0 {
            premium.push(offer.price_ms / job.slot_ms as f64);
        }
        if let (Outcome::Completed, Some(end)) = (job.outcome, job.ended) {
            done += 1;
            if end > offer.deadline {
                late += 1;
            } else {
                early.push(secs(offer.deadline.0 as f64 - end.0 as f64));
            }
        }
    }
    let counted = members.len() - f.refused;
    f.violation_pct = if done == 0 { 0.0 } else { 100.0 * late as f64 / done as f64 };
    f.mean_wait_s = mean(&waits);
    f.p95_wait_s = percentile(&mut waits, 95.0);
    f.mean_earliness_s = mean(&early);
    f.median_slack_s = percentile(&mut slack.clone(), 50.0);
    f.p95_slack_s = percentile(&mut slack, 95.0);
    f.median_premium = percentile(&mut premium.clone(), 50.0);
    f.p95_premium = percentile(&mut premium, 95.0);
    f.jumped_pct = if counted == 0 { 0.0 } else { 100.0 * jumped as f64 / counted as f64 };
    f
}
