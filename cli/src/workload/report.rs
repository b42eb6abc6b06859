//! What a run leaves behind: per-job records built from the master's job summaries, the
//! per-job CSV, the plan and usage CSVs, the summary as a table (metrics down, classes
//! across, so two runs diff line by line) and the JSON document.

use std::fmt::Write as _;

use serde::Serialize;
use slotmarket_common::protocol::JobState;
use slotmarket_common::time::Timestamp;

use super::file::ClusterSlots;
use super::plan::Plan;
use super::run::{Ending, Outcome, UsageSample};
use super::summary::{JobRecord, Stats, Summary, round};
use crate::output::{Align, Table, secs_between};

/// The per-job CSV's header; the simulator writes the same columns.
pub(crate) const JOB_COLUMNS: &str =
    "id,name,class,account,submit_s,start_s,finish_s,deadline_s,met,wait_s,completion_s,tasks,price";

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
    /// Why the price column is empty.
    pub(crate) price: &'static str,
}

/// The JSON document: the summary's fields, then `run`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RunDocument {
    /// The summary (same shape as the simulator's).
    #[serde(flatten)]
    pub(crate) summary: Summary,
    /// The live run's own facts.
    pub(crate) run: RunInfo,
}

/// What the `utilisation_source` says (the period is [`super::run::POLL`]).
pub(crate) const UTILISATION_SOURCE: &str =
    "sampled every 0.25 s from each job's running tasks (the protocol has no per-task times)";
/// What the `price` field says.
pub(crate) const PRICE_NOTE: &str = "none yet (MRM pricing is a later issue); the price column is empty";

/// The records of every submitted job the master listed, in plan order, with times
/// relative to the first submit; also that first submit.
pub(crate) fn records(plan: &Plan, outcome: &Outcome) -> (Vec<JobRecord>, Option<Timestamp>) {
    let listed: Vec<_> =
        outcome.jobs.iter().filter_map(|job| job.last.as_ref().map(|summary| (job, summary))).collect();
    let Some(origin) = listed.iter().map(|(_, summary)| summary.submitted).min() else {
        return (Vec::new(), None);
    };
    let since = |t: Timestamp| round(secs_between(t, origin), 3);
    let records = listed
        .into_iter()
        .map(|(job, summary)| {
            let planned = plan.jobs.get(job.index as usize);
            let submit_s = since(summary.submitted);
            JobRecord {
                id: job.id.to_string(),
                name: summary.name.clone(),
                class: planned.and_then(|p| p.class),
                account: summary.account.to_string(),
                submit_s,
                start_s: summary.started.map(since),
                finish_s: summary.finished.map(since),
                completed: summary.state == JobState::Completed,
                deadline_s: planned.and_then(|p| p.deadline_after_s).map(|d| round(submit_s + d, 3)),
                tasks: summary.tasks_total,
                price: None,
                slot_s: Some(round(job.slot_s, 3)),
            }
        })
        .collect();
    (records, Some(origin))
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

/// The per-job CSV: [`JOB_COLUMNS`], one line per record, empty cells for missing values.
pub(crate) fn jobs_csv(records: &[JobRecord]) -> String {
    let mut out = format!("{JOB_COLUMNS}\n");
    for r in records {
        let cells = [
            csv_text(&r.id),
            csv_text(&r.name),
            r.class.map_or(String::new(), |c| c.name().to_string()),
            csv_text(&r.account),
            secs(Some(r.submit_s)),
            secs(r.start_s),
            secs(r.finish_s),
            secs(r.deadline_s),
            r.met().map_or(String::new(), |met| met.to_string()),
            secs(r.wait_s()),
            secs(r.completion_s()),
            r.tasks.to_string(),
            secs(r.price),
        ];
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
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
            csv_text(&j.spec.name),
            j.program.name(),
            j.bin,
            secs(Some(j.arrival_s)),
            j.maps,
            j.reduces,
            j.spec.total_tasks(),
            j.input_bytes,
            secs(Some(j.estimate_s)),
            secs(j.deadline_after_s)
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

/// Seconds with millisecond precision, or an empty cell.
fn secs(value: Option<f64>) -> String {
    value.map_or(String::new(), |v| format!("{v:.3}"))
}

/// A text cell, quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_text(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.into()
    }
}

/// The summary as a table: one line per metric, a column for all jobs and one per class.
pub(crate) fn render_summary(summary: &Summary) -> String {
    let columns: Vec<(&str, &Stats)> = std::iter::once(("all", &summary.all))
        .chain(summary.by_class.iter().map(|(class, stats)| (class.as_str(), stats)))
        .collect();
    let mut headers = vec![("metric", Align::Left)];
    // Table headers are 'static; the class names are too, except an unknown one.
    headers.extend(columns.iter().map(|(name, _)| (static_name(name), Align::Right)));
    let mut table = Table::new(&headers);
    type Metric = (&'static str, fn(&Stats) -> String);
    let metrics: [Metric; 11] = [
        ("jobs", |s| s.jobs.to_string()),
        ("completed", |s| s.completed.to_string()),
        ("makespan_s", |s| fixed(s.makespan_s, 1)),
        ("mean_wait_s", |s| fixed(s.mean_wait_s, 1)),
        ("median_wait_s", |s| fixed(s.median_wait_s, 1)),
        ("p95_wait_s", |s| fixed(s.p95_wait_s, 1)),
        ("mean_completion_s", |s| fixed(s.mean_completion_s, 1)),
        ("median_completion_s", |s| fixed(s.median_completion_s, 1)),
        ("p95_completion_s", |s| fixed(s.p95_completion_s, 1)),
        ("violation_rate", |s| fixed(s.violation_rate, 3)),
        ("slot_utilisation", |s| fixed(s.slot_utilisation, 3)),
    ];
    for (name, value) in metrics {
        let mut row = vec![name.to_string()];
        row.extend(columns.iter().map(|(_, stats)| value(stats)));
        table.row(row);
    }
    table.render()
}

/// A class column's header.
fn static_name(name: &str) -> &'static str {
    match name {
        "delay-sensitive" => "delay-sensitive",
        "delay-tolerant" => "delay-tolerant",
        "all" => "all",
        _ => "none",
    }
}

/// A number with `decimals` places, or `-`.
fn fixed(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.decimals$}"))
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
    use slotmarket_common::spec::JobClass;

    use super::*;
    use crate::workload::run::Slots;
    use crate::workload::summary::summarise;
    use crate::workload::summary::tests::{hand_made, record};

    #[test]
    fn the_job_csv_has_the_agreed_columns_and_empty_cells() {
        let mut records = hand_made();
        records[0].name = "a,b".into();
        let text = jobs_csv(&records);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), records.len() + 1);
        assert_eq!(lines[0], JOB_COLUMNS);
        assert_eq!(lines[0].split(',').count(), 13);
        assert_eq!(lines[1], "j1,\"a,b\",delay-sensitive,demo,0.000,1.000,5.000,6.000,true,1.000,5.000,3,");
        assert_eq!(lines[2], "j2,w002,delay-sensitive,demo,2.000,5.000,12.000,10.000,false,3.000,10.000,3,");
        // A job without class that failed: its end, but no deadline, verdict or completion.
        assert_eq!(lines[4], "j4,w004,,demo,4.000,8.000,9.000,,,4.000,,3,");
        for line in &lines[2..] {
            assert_eq!(line.split(',').count(), 13, "{line}");
        }
    }

    #[test]
    fn the_summary_table_has_a_line_per_metric_and_a_column_per_class() {
        let text = render_summary(&summarise(&hand_made(), Some(4)));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 12);
        assert_eq!(lines[0], "metric                 all  delay-sensitive  delay-tolerant   none");
        assert_eq!(lines[3], "makespan_s            20.0             12.0            20.0    9.0");
        assert_eq!(lines[10], "violation_rate       0.500            0.500               -      -");
        assert!(lines[11].starts_with("slot_utilisation"), "{}", lines[11]);
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
    }

    #[test]
    fn the_sampling_note_names_the_poll_period() {
        let period = format!("every {} s", crate::workload::run::POLL.as_secs_f64());
        assert!(UTILISATION_SOURCE.contains(&period), "{UTILISATION_SOURCE}");
    }

    #[test]
    fn text_cells_are_quoted_only_when_needed() {
        assert_eq!(csv_text("plain"), "plain");
        assert_eq!(csv_text("say \"hi\", twice"), "\"say \"\"hi\"\", twice\"");
        let one = record(1, Some(JobClass::DelayTolerant), (0.0, 0.5, 1.25));
        assert!(
            jobs_csv(&[one]).ends_with("j1,w001,delay-tolerant,demo,0.000,0.500,1.250,,,0.500,1.250,3,\n")
        );
    }
}
