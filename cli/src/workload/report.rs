//! What a run leaves behind: the shared per-job records (`slotmarket_common::metrics`)
//! built from the master's job listings, the plan and usage CSVs, the lines printed above
//! the summary table, and the JSON document. The summary itself, its table and `jobs.csv`
//! are the simulator's, so live and simulated runs compare line by line.

use std::fmt::Write as _;

use serde::Serialize;
use slotmarket_common::metrics::{self, JobRecord, Outcome as JobOutcome, round, secs_cell};
use slotmarket_common::protocol::JobState;
use slotmarket_common::time::Timestamp;

use super::file::ClusterSlots;
use super::plan::{Plan, PlannedJob};
use super::run::{Ending, Followed, Outcome, UsageSample};
use crate::output::secs_between;

/// Facts of a live run that a simulation does not have.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RunInfo {
    /// The workload's name.
    pub(crate) workload: String,
    /// The seed of the plan.
    pub(crate) seed: u64,
    /// Jobs in the plan.
    pub(crate) planned: usize,
    /// Jobs submitted.
    pub(crate) submitted: usize,
    /// `all-ended`, `timed-out` or `interrupted`.
    pub(crate) ending: &'static str,
    /// Wall-clock seconds of the whole command, first poll to last.
    pub(crate) elapsed_s: f64,
    /// Slots (map + reduce) the utilisation is relative to.
    pub(crate) slots: Option<u32>,
    /// Where `slots` came from: `nodes` (polled) or `workload file`.
    pub(crate) slots_source: &'static str,
    /// How slot use was measured.
    pub(crate) utilisation_source: &'static str,
    /// Map slots in use over the makespan, from the agents' counts (all jobs, not just ours).
    pub(crate) map_utilisation: Option<f64>,
    /// Reduce slots in use over the makespan, likewise.
    pub(crate) reduce_utilisation: Option<f64>,
    /// What the price column holds.
    pub(crate) price: &'static str,
}

/// The JSON document: the shared summary's fields (as `slotmarket-sim run --json` has
/// them), then `run`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RunDocument {
    /// The summary, overall and per class (`classes`).
    #[serde(flatten)]
    pub(crate) summary: metrics::Summary,
    /// The live run's own facts.
    pub(crate) run: RunInfo,
}

/// What the `utilisation_source` says (the period is [`super::run::POLL`]).
pub(crate) const UTILISATION_SOURCE: &str = "sampled every 0.25 s from each job's running tasks";
/// What the `price` field says.
pub(crate) const PRICE_NOTE: &str =
    "what each job paid for a deadline it bought (`--alpha`, MRM admission); empty for the others";

/// A record per planned job, in plan order, with times relative to the first submit the
/// master listed; also that first submit. Jobs never submitted (the run stopped first)
/// are `not-submitted`, as in the simulator, so `jobs` counts the whole workload.
pub(crate) fn records(plan: &Plan, outcome: &Outcome) -> (Vec<JobRecord>, Option<Timestamp>) {
    let origin = outcome.jobs.iter().filter_map(|job| job.last.as_ref()).map(|s| s.submitted).min();
    let records = plan
        .jobs
        .iter()
        .map(|planned| match outcome.jobs.iter().find(|job| job.index == planned.index) {
            Some(job) => record(planned, job, origin),
            None => JobRecord { outcome: JobOutcome::NotSubmitted, ..unlisted(planned, None) },
        })
        .collect();
    (records, origin)
}

/// The record of a submitted job, from its latest listing; `origin` is the first submit
/// (known once any job was listed).
fn record(planned: &PlannedJob, job: &Followed, origin: Option<Timestamp>) -> JobRecord {
    let (Some(summary), Some(origin)) = (&job.last, origin) else {
        // Submitted, but the master never listed it: nothing is known beyond that.
        return JobRecord { outcome: JobOutcome::Unfinished, ..unlisted(planned, Some(job)) };
    };
    let since = |t: Timestamp| round(secs_between(t, origin), 3);
    let submit_s = since(summary.submitted);
    // A job the run itself cancelled when it stopped had not finished: it counts as
    // unfinished (never as failed or met), and its cancel time is no finish.
    let stopped_by_run = job.cancelled_by_run && summary.state == JobState::Cancelled;
    JobRecord {
        account: summary.account.to_string(),
        outcome: if stopped_by_run { JobOutcome::Unfinished } else { summary.state.into() },
        submit_s: Some(submit_s),
        start_s: summary.started.map(since),
        finish_s: summary.finished.map(since).filter(|_| !stopped_by_run),
        // A bought deadline (`--alpha`) is the master's; a planned one is the file's.
        deadline_s: match planned.deadline_after_s {
            Some(d) => Some(round(submit_s + d, 3)),
            None => summary.deadline.map(since),
        },
        tasks: summary.tasks_total,
        slot_s: Some(round(job.slot_s, 3)),
        price: summary.price.map(|p| p.as_f64()),
        ..unlisted(planned, Some(job))
    }
}

/// What the plan and the submit alone say about a job.
fn unlisted(planned: &PlannedJob, followed: Option<&Followed>) -> JobRecord {
    JobRecord {
        name: planned.spec.name.clone(),
        class: planned.class,
        queue: planned.spec.queue.clone(),
        tasks: planned.spec.total_tasks(),
        ..JobRecord::new(followed.map_or(String::new(), |job| job.id.to_string()))
    }
}

/// When the run stopped following its jobs (the last poll), in seconds since `origin`.
pub(crate) fn stopped_s(usage: &[UsageSample], origin: Option<Timestamp>) -> Option<f64> {
    let last = usage.last()?;
    Some(round(secs_between(last.at, origin?), 3))
}

/// The slots to relate use to: the most the agents offered while polled, else the file's.
pub(crate) fn slots(usage: &[UsageSample], file: ClusterSlots) -> (u32, &'static str) {
    let polled = usage.iter().filter_map(|s| s.slots).map(|s| s.map_slots + s.reduce_slots).max();
    match polled {
        Some(slots) if slots > 0 => (slots, "nodes"),
        _ => (file.map_slots + file.reduce_slots, "workload file"),
    }
}

/// Map and reduce slot use from the agents' counts between `from` and `to`: the
/// trapezoid integral of used slots ÷ (most slots offered × the window).
pub(crate) fn node_utilisation(
    usage: &[UsageSample],
    from: Timestamp,
    to: Timestamp,
) -> (Option<f64>, Option<f64>) {
    let window = secs_between(to, from);
    let samples: Vec<(Timestamp, _)> = usage
        .iter()
        .filter(|s| s.at >= from && s.at <= to)
        .filter_map(|s| s.slots.map(|n| (s.at, n)))
        .collect();
    if window <= 0.0 || samples.len() < 2 {
        return (None, None);
    }
    let (mut map, mut reduce) = (0.0, 0.0);
    for pair in samples.windows(2) {
        let ((t0, a), (t1, b)) = (pair[0], pair[1]);
        let dt = secs_between(t1, t0);
        map += f64::from(a.map_used + b.map_used) / 2.0 * dt;
        reduce += f64::from(a.reduce_used + b.reduce_used) / 2.0 * dt;
    }
    let most = |f: fn(&super::run::Slots) -> u32| samples.iter().map(|(_, s)| f(s)).max().unwrap_or(0);
    let share = |busy: f64, slots: u32| (slots > 0).then(|| round(busy / (f64::from(slots) * window), 4));
    (share(map, most(|s| s.map_slots)), share(reduce, most(|s| s.reduce_slots)))
}

/// The name of an ending in the JSON.
pub(crate) fn ending_name(ending: Ending) -> &'static str {
    match ending {
        Ending::AllEnded => "all-ended",
        Ending::TimedOut => "timed-out",
        Ending::Interrupted => "interrupted",
    }
}

/// The plan as CSV, one line per job.
pub(crate) fn plan_csv(plan: &Plan) -> String {
    let mut out = String::from(
        "index,name,program,bin,class,arrival_s,maps,reduces,tasks,input_bytes,estimate_s,deadline_after_s\n",
    );
    for j in &plan.jobs {
        let class = j.class.map_or("", |c| c.name());
        let _ = writeln!(
            out,
            "{},{},{},{},{class},{},{},{},{},{},{},{}",
            j.index,
            metrics::csv_field(&j.spec.name),
            j.program.name(),
            j.bin,
            secs_cell(Some(j.arrival_s)),
            j.maps,
            j.reduces,
            j.spec.total_tasks(),
            j.input_bytes,
            secs_cell(Some(j.estimate_s)),
            secs_cell(j.deadline_after_s)
        );
    }
    out
}

/// The polls as CSV; `t_s` is relative to the first submit (negative before it).
pub(crate) fn usage_csv(usage: &[UsageSample], origin: Option<Timestamp>) -> String {
    let mut out = String::from("t_s,map_used,map_slots,reduce_used,reduce_slots,running,submitted,ended\n");
    let origin = origin.or(usage.first().map(|s| s.at)).unwrap_or(Timestamp(0));
    for s in usage {
        let slots = s.slots.map_or(",,,".to_string(), |n| {
            format!("{},{},{},{}", n.map_used, n.map_slots, n.reduce_used, n.reduce_slots)
        });
        let t = secs_between(s.at, origin);
        let _ = writeln!(out, "{t:.3},{slots},{},{},{}", s.running, s.submitted, s.ended);
    }
    out
}

/// The lines printed above the summary table.
pub(crate) fn render_head(run: &RunInfo) -> String {
    let verdict = match run.ending {
        "all-ended" => "all ended".to_string(),
        other => format!("stopped: {other}"),
    };
    let percent = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0));
    let slots = run.slots.map_or("-".into(), |s| s.to_string());
    format!(
        "workload {} (seed {}): {} of {} jobs submitted, {verdict}, {:.1}s in all\n\
         times in seconds since the first submit\n\
         slot_utilisation: busy slot-seconds / ({slots} slots from {} x makespan); slot use {}\n\
         agents' slots in use over the makespan: map {}, reduce {}\n\
         price: {}\n\n",
        run.workload,
        run.seed,
        run.submitted,
        run.planned,
        run.elapsed_s,
        run.slots_source,
        run.utilisation_source,
        percent(run.map_utilisation),
        percent(run.reduce_utilisation),
        run.price
    )
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::JobId;
    use slotmarket_common::money::Credits;
    use slotmarket_common::protocol::JobState;
    use slotmarket_common::spec::JobClass;

    use super::*;
    use crate::fake_master::status;
    use crate::workload::file::{WorkloadFile, tests::SMALL};
    use crate::workload::plan;
    use crate::workload::run::Slots;

    #[test]
    fn records_follow_the_plan_and_the_masters_listing() {
        let plan = plan::generate(&WorkloadFile::parse(SMALL).unwrap(), 5).unwrap();
        // Jobs 0 and 1 were listed (completed, running), job 2 submitted but never listed;
        // the rest were never submitted.
        let listed = |index: u32, state, submitted_ms| {
            let mut summary = status(JobId(u64::from(index) + 7), "x", state).summary;
            summary.submitted = Timestamp(submitted_ms);
            let mut job = Followed::new(index, JobId(u64::from(index) + 7));
            (job.last, job.slot_s) = (Some(summary), 1.23456);
            job
        };
        let jobs = vec![
            listed(0, JobState::Completed, 1_000),
            listed(1, JobState::Running, 1_250),
            Followed::new(2, JobId(9)),
        ];
        let mut jobs = jobs;
        // Job 1 bought a deadline: the master's deadline and price are its record's when
        // the plan has no deadline for it.
        if let Some(summary) = jobs[1].last.as_mut() {
            (summary.deadline, summary.price) = (Some(Timestamp(9_250)), Some(Credits(2_500)));
        }
        let outcome = Outcome { jobs, usage: vec![], ending: Ending::TimedOut, refused: vec![] };
        let (records, origin) = records(&plan, &outcome);
        assert_eq!(records[1].price, Some(0.0025));
        let planned = plan.jobs[1].deadline_after_s.map(|d| round(0.25 + d, 3));
        assert_eq!(records[1].deadline_s, planned.or(Some(8.25)));
        assert_eq!(records[0].price, None);
        assert_eq!((records.len(), origin), (plan.jobs.len(), Some(Timestamp(1_000))));
        let first = &records[0];
        assert_eq!((first.id.as_str(), first.name.as_str()), ("j7", plan.jobs[0].spec.name.as_str()));
        assert_eq!(
            (first.outcome, first.submit_s, first.start_s, first.finish_s),
            (JobOutcome::Completed, Some(0.0), Some(0.5), Some(3.0))
        );
        assert_eq!((first.class, first.slot_s, first.tasks), (plan.jobs[0].class, Some(1.235), 2));
        let deadline = plan.jobs[0].deadline_after_s.map(|d| round(d, 3));
        assert_eq!(first.deadline_s, deadline);
        if plan.jobs[0].class == Some(JobClass::DelaySensitive) {
            assert_eq!(first.queue.as_deref(), Some("fast"));
        }
        assert_eq!((records[1].outcome, records[1].submit_s), (JobOutcome::Unfinished, Some(0.25)));
        assert_eq!(
            (records[2].id.as_str(), records[2].outcome, records[2].submit_s),
            ("j9", JobOutcome::Unfinished, None)
        );
        assert!(records[3..].iter().all(|r| r.outcome == JobOutcome::NotSubmitted && r.id.is_empty()));
        assert_eq!(records[3].tasks, plan.jobs[3].spec.total_tasks());
        // Nothing a live run cannot know is made up.
        assert!(
            records.iter().all(|r| r.attempts.is_none() && r.kills.is_none() && r.critical_path_s.is_none())
        );
    }

    #[test]
    fn node_utilisation_integrates_used_slots_over_the_window() {
        let sample = |ms, map_used, reduce_used| UsageSample {
            at: Timestamp(ms),
            slots: Some(Slots { map_used, map_slots: 4, reduce_used, reduce_slots: 2 }),
            running: 0,
            submitted: 0,
            ended: 0,
        };
        let usage = [sample(0, 9, 9), sample(1_000, 4, 2), sample(2_000, 4, 2), sample(3_000, 0, 0)];
        // Map: 4 slots busy for 1 s, then 2 on average for 1 s, over 4 slots x 2 s.
        let (map, reduce) = node_utilisation(&usage, Timestamp(1_000), Timestamp(3_000));
        assert_eq!((map, reduce), (Some(0.75), Some(0.75)));
        assert_eq!(node_utilisation(&usage[..1], Timestamp(0), Timestamp(1)), (None, None));
        assert_eq!(slots(&usage, ClusterSlots { map_slots: 1, reduce_slots: 1 }), (6, "nodes"));
        assert_eq!(slots(&[], ClusterSlots { map_slots: 6, reduce_slots: 3 }), (9, "workload file"));
        assert_eq!(stopped_s(&usage, Some(Timestamp(500))), Some(2.5));
        assert_eq!(stopped_s(&usage, None), None);
    }

    #[test]
    fn the_sampling_note_names_the_poll_period() {
        let period = format!("every {} s", crate::workload::run::POLL.as_secs_f64());
        assert!(UTILISATION_SOURCE.contains(&period), "{UTILISATION_SOURCE}");
    }
}
