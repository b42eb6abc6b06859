//! A run on several threads, cut in time where the cluster drains.
//!
//! A core that forgets when idle ([`Core::forgets_when_idle`]: `fifo`, `fair`,
//! `priority`, `capacity`, `edf`, `gang-fifo`, without MRM admission) decides, once
//! every job submitted so far has ended, no task runs and no wakeup is asked for, exactly
//! as a fresh core would; and a task's duration, noise and failure are drawn by key
//! (trace index, stage, task, attempt), not in sequence. So the stretch of a run from
//! such a drained instant on does not depend on what came before it, and can be run
//! apart, at the same time as the stretches before it.
//!
//! The trace's arrivals are cut into a few segments per thread, in rounds of one segment
//! per thread, each round covering half of the tasks left and the last round all of them
//! (so the segments shrink towards the end), each cut put before the arrival that follows
//! the longest gap between arrivals near it (where the cluster has most likely drained).
//! The threads take the segments in order, each the next one not yet taken, so that a
//! faster core, or a thread whose segments were lighter, runs more of them, and the thread
//! that finishes last is behind the others by at most one of the small last segments.
//! A segment's run is a fresh simulation from its first arrival that stops at the first
//! later cut where it has drained; where it has not, it runs on through the next segment's
//! arrivals, as the whole run would. Then, from the first segment on, each run is taken for
//! the arrivals it covered, and the next run taken is the one that starts where it
//! stopped: that one started from a drained instant of the whole run, so it is the whole
//! run from there. Runs that a previous one ran through are thrown away, and not started
//! where that is already known.
//!
//! The merged result is the whole run's: the same per-job results, slot use over time,
//! attempts, failures, lost work and stopping time (checked against the one-thread run
//! in the tests below and on 500,000-job traces). Two counters may differ: `core_calls`
//! counts each segment's agents joining, and `steps` does not count stale events (a
//! superseded wakeup, the end of a killed attempt) that a segment leaves behind its cut.
//!
//! Where the run cannot be cut (a policy that keeps state, MRM admission, jobs that
//! follow other jobs, account events, deadline moves, a horizon or step bound, too few
//! jobs per thread) it runs whole, as [`super::run`] did before.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use slotmarket_common::ids::JobId;
use tracing::debug;

use super::report::{JobResult, SlotUsage};
use super::{Advanced, RunStats, SimConfig, SimError, SimRun, Simulation};
use crate::core::Core;
use crate::sim::workload::Trace;

/// Fewer jobs than this per segment are not cut: a segment costs its own agents joining
/// and its own result table, sized to the trace.
const MIN_JOBS_PER_SEGMENT: usize = 200;

/// Rounds of one segment per thread ([`shares`]): enough that a thread on a slower core,
/// or one whose segments ran heavier, takes fewer of them than the others (the cores of a
/// shared machine are not always equal) and that the last segments are short; few enough
/// that each segment's fresh tables stay a small share of its run.
const ROUNDS: usize = 5;

/// Where to cut, as positions in the arrival order: each segment's first arrival after
/// the first segment's. `None`: the run is not to be cut.
pub(super) fn plan(trace: &Trace, config: &SimConfig, arrivals: &[u32]) -> Option<Vec<usize>> {
    let shares = shares(config.threads, arrivals.len() / MIN_JOBS_PER_SEGMENT);
    if config.threads < 2 || shares.len() < 2 || !can_cut(trace, config, arrivals) {
        return None;
    }
    let tasks: Vec<u64> = arrivals.iter().map(|&ix| trace.jobs[ix as usize].total_tasks()).collect();
    let total: u64 = tasks.iter().sum();
    // Look for a gap among this many arrivals on either side of a cut's target: about a
    // hundredth of the smallest segment, so that the segments keep their shares.
    let smallest = shares.iter().copied().fold(1.0, f64::min);
    let window = ((arrivals.len() as f64 * smallest / 100.0) as usize).max(50);
    let mut cuts = Vec::with_capacity(shares.len() - 1);
    let (mut done, mut at) = (0u64, 0usize);
    let mut before = 0.0;
    for share in &shares[..shares.len() - 1] {
        before += share;
        let target = (total as f64 * before) as u64;
        while at < arrivals.len() && done < target {
            done += tasks[at];
            at += 1;
        }
        let lowest = cuts.last().map_or(1, |&c: &usize| c + 1).max(at.saturating_sub(window));
        let highest = (at + window).min(arrivals.len() - 1);
        let gap = |i: &usize| {
            let before = trace.jobs[arrivals[i - 1] as usize].arrival();
            trace.jobs[arrivals[*i] as usize].arrival().0 - before.0
        };
        // The longest gap, the earliest of equals (`max_by_key` keeps the last).
        let Some(cut) = (lowest..=highest).rev().max_by_key(gap) else { break };
        cuts.push(cut);
    }
    Some(cuts)
}

/// Each segment's share of the tasks, in order: rounds of one segment per thread, each
/// round covering half of what is left and the last all of it (for two threads, 1/4, 1/4,
/// 1/8, 1/8, ..., ending with four of 1/32), so that a thread that finishes its last
/// segment finds the others at most one short segment from the end. At most `most`
/// segments: fewer rounds, or one segment per thread, where the trace is small.
fn shares(threads: usize, most: usize) -> Vec<f64> {
    let rounds = (most / threads.max(1)).min(ROUNDS);
    let mut shares = Vec::with_capacity(threads * rounds);
    let mut left = 1.0;
    for round in 1..=rounds {
        let covered = if round == rounds { left } else { left / 2.0 };
        shares.extend(std::iter::repeat_n(covered / threads as f64, threads));
        left -= covered;
    }
    shares
}

/// Whether a run of `trace` under `config` may be cut: its core forgets when idle, and
/// nothing in it ties one stretch to an earlier one or stops it early.
fn can_cut(trace: &Trace, config: &SimConfig, arrivals: &[u32]) -> bool {
    config.market.is_none()
        && config.account_events.is_empty()
        && config.horizon.is_none()
        && config.max_steps.is_none()
        && arrivals.len() == trace.len()
        && trace.jobs.iter().all(|job| job.deadline_moves.is_empty())
        && Core::new(config.core.clone()).forgets_when_idle()
}

/// Runs the segments that `cuts` make on [`SimConfig::threads`] threads, and merges what
/// they found.
pub(super) fn run(
    trace: &Trace,
    config: &SimConfig,
    arrivals: &[u32],
    cuts: &[usize],
) -> Result<SimRun, SimError> {
    let starts: Vec<usize> = std::iter::once(0).chain(cuts.iter().copied()).collect();
    let pool = Pool::new(&starts);
    let work = || pool.work(trace, config, arrivals, cuts);
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..config.threads.min(starts.len())).map(|_| scope.spawn(work)).collect();
        work();
        for helper in helpers {
            helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
    });
    merge(pool.finished.into_inner().unwrap_or_else(|e| e.into_inner()), &starts, arrivals)
}

/// The segments, handed to the threads in order.
struct Pool<'s> {
    starts: &'s [usize],
    /// The next segment no thread has taken.
    next: AtomicUsize,
    /// Each segment's run, once finished (`None` while it runs, or where it was skipped).
    finished: Mutex<Vec<Option<Result<Segment, SimError>>>>,
}

impl<'s> Pool<'s> {
    fn new(starts: &'s [usize]) -> Pool<'s> {
        Pool {
            starts,
            next: AtomicUsize::new(0),
            finished: Mutex::new(starts.iter().map(|_| None).collect()),
        }
    }

    /// Runs segments until none is left to take.
    fn work(&self, trace: &Trace, config: &SimConfig, arrivals: &[u32], cuts: &[usize]) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&first) = self.starts.get(k) else {
                // With its time, this says how long the other threads ran on alone.
                debug!("no time segment left for this thread");
                return;
            };
            if self.taken_past(first) {
                debug!(segment = k, first, "time segment skipped: an earlier run ran through it");
                continue;
            }
            let segment = run_segment(trace, config, arrivals, cuts, first);
            self.lock()[k] = Some(segment);
        }
    }

    /// Whether the runs finished so far, taken in order from the first as the merge will
    /// take them, already reach past arrival position `first`: then the segment starting
    /// there would be thrown away.
    fn taken_past(&self, first: usize) -> bool {
        let finished = self.lock();
        let mut at = 0;
        while at < first {
            let Some(k) = self.starts.iter().position(|&s| s == at) else { return false };
            match &finished[k] {
                Some(Ok(segment)) => at = segment.covered.end,
                _ => return false,
            }
        }
        at > first
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Result<Segment, SimError>>>> {
        // A thread that panicked while holding the lock panics the whole run at its join.
        self.finished.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What one segment's run found: the positions in the arrival order it submitted, and
/// its result (complete for those jobs). A later segment's `run.jobs` holds only those
/// jobs' results, in arrival order: it waits for the merge beside the others, and a
/// table sized to the trace for each would add up.
struct Segment {
    covered: Range<usize>,
    run: SimRun,
}

/// A fresh simulation from arrival position `first`, run until it has drained at a cut
/// or the arrivals run out.
fn run_segment(
    trace: &Trace,
    config: &SimConfig,
    arrivals: &[u32],
    cuts: &[usize],
    first: usize,
) -> Result<Segment, SimError> {
    let mut sim = Simulation::new(trace, config, arrivals)?;
    sim.start_segment_at(first);
    sim.start()?;
    let mut next_cuts = cuts.iter().copied().filter(|&cut| cut > first);
    loop {
        sim.pause = next_cuts.next();
        if sim.advance()? == Advanced::Done || sim.idle() {
            break;
        }
    }
    let covered = first..sim.next_arrival;
    let mut run = sim.finish();
    if first > 0 {
        run.jobs = arrivals[covered.clone()]
            .iter()
            .map(|&ix| std::mem::replace(&mut run.jobs[ix as usize], JobResult::new(ix as usize)))
            .collect();
    }
    Ok(Segment { covered, run })
}

/// The whole run from the segments' runs, in order of their first arrival: each taken
/// run is followed by the one that starts where it stopped.
fn merge(
    mut runs: Vec<Option<Result<Segment, SimError>>>,
    starts: &[usize],
    arrivals: &[u32],
) -> Result<SimRun, SimError> {
    let mut whole: Option<SimRun> = None;
    let mut at = 0;
    while at < arrivals.len() {
        let k = starts.iter().position(|&s| s == at).expect("a run stops at a segment's start or the end");
        let Segment { covered, run } = runs[k].take().expect("a segment the merge takes was run")?;
        debug!(segment = k, first = covered.start, end = covered.end, "time segment taken");
        whole = Some(match whole {
            None => run,
            Some(mut whole) => {
                append(&mut whole, run, &arrivals[covered.clone()]);
                whole
            }
        });
        at = covered.end;
    }
    Ok(whole.expect("a trace that is cut has arrivals"))
}

/// Adds a later segment's `run`, which submitted the jobs `owned` (its results, in that
/// order), to `whole`.
fn append(whole: &mut SimRun, mut run: SimRun, owned: &[u32]) {
    // The whole run's core would have handed out its job ids after those of every job
    // admitted before the cut; the segment's fresh core started at the first.
    let admitted_before = whole.jobs.iter().filter(|j| j.job.is_some()).count() as u64;
    for (&ix, mut result) in owned.iter().zip(std::mem::take(&mut run.jobs)) {
        result.job = result.job.map(|id| JobId(id.0 + admitted_before));
        whole.jobs[ix as usize] = result;
    }
    whole.usage = add_usage(std::mem::replace(&mut whole.usage, SlotUsage::new()), run.usage);
    add_stats(&mut whole.stats, &run.stats);
    whole.history.append(&mut run.history);
}

/// Busy slot time of two runs in one series, at the coarser width of the two (a bucket of
/// a finer width lies whole inside one of a coarser, both starting at time zero).
fn add_usage(a: SlotUsage, b: SlotUsage) -> SlotUsage {
    let (mut coarse, mut fine) = if a.width_ms >= b.width_ms { (a, b) } else { (b, a) };
    while fine.width_ms < coarse.width_ms {
        fine.coarsen();
    }
    if coarse.buckets.len() < fine.buckets.len() {
        coarse.buckets.resize(fine.buckets.len(), [0; 2]);
    }
    for (into, from) in coarse.buckets.iter_mut().zip(&fine.buckets) {
        into[0] += from[0];
        into[1] += from[1];
    }
    coarse
}

/// Counters of a later segment added to the earlier ones'; the run stopped when the
/// later one did.
fn add_stats(whole: &mut RunStats, later: &RunStats) {
    whole.steps += later.steps;
    whole.core_calls += later.core_calls;
    whole.attempts += later.attempts;
    whole.preemptions += later.preemptions;
    whole.failed_attempts += later.failed_attempts;
    whole.lost_work_ms += later.lost_work_ms;
    whole.busy_ms[0] += later.busy_ms[0];
    whole.busy_ms[1] += later.busy_ms[1];
    whole.models_built += later.models_built;
    whole.stopped_at = later.stopped_at;
    whole.hit_horizon |= later.hit_horizon;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{AdmissionMode, CoreConfig, PolicySettings};
    use crate::sim::generate::Mrm;
    use crate::sim::run_whole;
    use crate::sim::workload::TraceJob;
    use slotmarket_common::time::Timestamp;

    /// `jobs` of MRM's mix arriving every `interarrival_s` on average.
    fn mrm(jobs: u64, interarrival_s: f64) -> Trace {
        let mut all = Vec::new();
        Mrm { jobs, interarrival_s, seed: 7, ..Mrm::default() }
            .generate(|job: TraceJob| -> Result<(), ()> {
                all.push(job);
                Ok(())
            })
            .unwrap();
        Trace::new(all).unwrap()
    }

    /// MRM's cluster under `policy`, with noise and failures, on `threads`.
    fn config(policy: PolicySettings, threads: usize) -> SimConfig {
        SimConfig {
            core: CoreConfig { policy, ..CoreConfig::default() },
            noise: 0.2,
            fail_prob: 0.05,
            threads,
            ..SimConfig::default()
        }
    }

    /// Asserts that two runs found the same, but for the two counters a cut changes (see
    /// the module header).
    fn assert_same(whole: &SimRun, cut: &SimRun) {
        assert_eq!(whole.jobs, cut.jobs);
        assert_eq!(whole.usage, cut.usage);
        assert_eq!(whole.history, cut.history);
        let counted = |run: &SimRun| RunStats { core_calls: 0, steps: 0, ..run.stats.clone() };
        assert_eq!(counted(whole), counted(cut));
    }

    #[test]
    fn a_run_cut_where_the_cluster_drains_finds_what_the_whole_run_finds() {
        let trace = mrm(1200, 50.0);
        for policy in
            [PolicySettings::Fifo {}, PolicySettings::Fair { preemption: true }, PolicySettings::Edf {}]
        {
            // Three threads, two rounds of segments of at least 200 jobs: each thread
            // runs two or more.
            let cut = config(policy, 3);
            let arrivals = crate::sim::arrival_order(&trace);
            let cuts = plan(&trace, &cut, &arrivals).expect("cut");
            assert_eq!(cuts.len(), 5);
            // The first segment drained at its cut: the second's run is taken.
            assert_eq!(run_segment(&trace, &cut, &arrivals, &cuts, 0).unwrap().covered, 0..cuts[0]);
            let whole = run_whole(&trace, &SimConfig { threads: 1, ..cut.clone() }).unwrap();
            let segmented = run(&trace, &cut, &arrivals, &cuts).unwrap();
            assert_same(&whole, &segmented);
            assert_eq!(segmented.jobs.iter().filter(|j| j.ended.is_some()).count(), 1200);
        }
    }

    #[test]
    fn a_segment_that_has_not_drained_at_a_cut_runs_on_through_the_next() {
        // Jobs every two seconds keep the cluster busy: it never drains at a cut, so the
        // first segment runs the whole trace and the others are thrown away.
        let trace = mrm(600, 2.0);
        let cut = config(PolicySettings::Fifo {}, 2);
        let arrivals = crate::sim::arrival_order(&trace);
        let cuts = plan(&trace, &cut, &arrivals).expect("cut");
        let first = run_segment(&trace, &cut, &arrivals, &cuts, 0).unwrap();
        assert_eq!(first.covered, 0..600);
        let whole = run_whole(&trace, &SimConfig { threads: 1, ..cut.clone() }).unwrap();
        assert_same(&whole, &run(&trace, &cut, &arrivals, &cuts).unwrap());
    }

    #[test]
    fn a_run_is_cut_only_where_nothing_ties_a_stretch_to_an_earlier_one() {
        let trace = mrm(900, 50.0);
        let arrivals = crate::sim::arrival_order(&trace);
        let fifo = config(PolicySettings::Fifo {}, 2);
        assert!(plan(&trace, &fifo, &arrivals).is_some());
        // One thread; too few jobs for two; a policy that keeps state; a horizon.
        assert!(plan(&trace, &config(PolicySettings::Fifo {}, 1), &arrivals).is_none());
        let small = mrm(300, 50.0);
        assert!(plan(&small, &fifo, &crate::sim::arrival_order(&small)).is_none());
        for stateful in ["dress", "proportional", "jockey"] {
            let policy: PolicySettings = toml::from_str(&format!("name = \"{stateful}\"")).unwrap();
            assert!(plan(&trace, &config(policy, 2), &arrivals).is_none(), "{stateful}");
        }
        // MRM admission prices from the jobs that ran.
        let mut mrm_admission = fifo.clone();
        mrm_admission.core.admission.mode = AdmissionMode::Mrm;
        assert!(plan(&trace, &mrm_admission, &arrivals).is_none());
        let horizon = SimConfig { horizon: Some(Timestamp(1_000)), ..fifo.clone() };
        assert!(plan(&trace, &horizon, &arrivals).is_none());
        // A job that follows another.
        let mut jobs = trace.jobs.clone();
        jobs[10].follows = Some(jobs[9].id.clone());
        let followed = Trace::new(jobs).unwrap();
        assert!(plan(&followed, &fifo, &crate::sim::arrival_order(&followed)).is_none());
    }

    #[test]
    fn a_segment_is_skipped_only_once_the_runs_the_merge_will_take_have_passed_it() {
        let starts = [0, 100, 200, 300];
        let pool = Pool::new(&starts);
        let finish = |k: usize, covered: Range<usize>| {
            let run = SimRun {
                jobs: Vec::new(),
                usage: SlotUsage::new(),
                stats: RunStats::default(),
                purchases: Vec::new(),
                history: Vec::new(),
            };
            pool.lock()[k] = Some(Ok(Segment { covered, run }));
        };
        // Nothing finished: nothing is known to be passed.
        assert!(!pool.taken_past(100));
        // The second segment's run went on past the third's start, but the first has not
        // finished: it may stop at 100 or at 200, and the merge may need either.
        finish(1, 100..300);
        assert!(!pool.taken_past(200));
        // The first stopped where the second starts: the merge takes the second, which
        // passed the third's start but stopped at the fourth's.
        finish(0, 0..100);
        assert!(pool.taken_past(200));
        assert!(!pool.taken_past(300));
        assert!(!pool.taken_past(100));
    }

    #[test]
    fn segments_shrink_by_halves_towards_the_end_of_the_run() {
        let two = shares(2, 100);
        let quarter = 0.25;
        let expected = [1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125, 0.125, 0.125].map(|s| s * quarter);
        assert_eq!(two, expected);
        assert!((shares(3, 100).iter().sum::<f64>() - 1.0).abs() < 1e-12);
        // A small trace: as many rounds as it has segments for, the last taking the rest.
        assert_eq!(shares(2, 5), [0.25, 0.25, 0.25, 0.25]);
        assert_eq!(shares(2, 3), [0.5, 0.5]);
        assert!(shares(2, 1).is_empty());
    }

    #[test]
    fn usage_added_across_widths_is_the_usage_of_both_runs_together() {
        let spans = [(0, 0, 700), (1, 300, 2_900), (0, 5_000, 9_000), (0, 600_000, 2_100_000)];
        let mut both = SlotUsage::new();
        let (mut early, mut late) = (SlotUsage::new(), SlotUsage::new());
        for (n, &(k, start, end)) in spans.iter().enumerate() {
            both.add(k, Timestamp(start), Timestamp(end));
            let part = if n < 3 { &mut early } else { &mut late };
            part.add(k, Timestamp(start), Timestamp(end));
        }
        assert!(late.width_ms > early.width_ms);
        assert_eq!(add_usage(early.clone(), late.clone()), both);
        assert_eq!(add_usage(late, early), both);
    }
}
