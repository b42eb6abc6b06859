//! What the demo shows: a progress line while the workload runs and, at the end, a
//! per-job table (or one JSON document) with times relative to the workload's start.

use std::time::Duration;

use serde::Serialize;
use slotmarket_common::protocol::{JobState, JobSummary};
use slotmarket_common::time::Timestamp;

use crate::output::{Align, Table, secs_between};

/// One job in the final report. Times are seconds since the workload started
/// (just before the first submit), on the master's clock.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct DemoJob {
    /// `j7`.
    pub(crate) id: String,
    /// The spec's name.
    pub(crate) name: String,
    /// `completed`, `failed`, ... as in `slotmarket jobs`.
    pub(crate) state: &'static str,
    /// When the master admitted it.
    pub(crate) submitted_s: f64,
    /// When its first task started, or null.
    pub(crate) started_s: Option<f64>,
    /// When it ended, or null.
    pub(crate) finished_s: Option<f64>,
    /// Queueing delay: from submission to the first task starting, or null.
    pub(crate) wait_s: Option<f64>,
    /// Tasks over all stages.
    pub(crate) tasks: u64,
    /// Tasks completed.
    pub(crate) tasks_completed: u64,
    /// The deadline it bought (MRM), or absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) deadline_s: Option<f64>,
    /// Whether it completed by its deadline, or absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) met: Option<bool>,
    /// The credits it paid for its deadline, or absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) paid: Option<String>,
}

/// The demo's JSON document (and the data behind its table).
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct DemoReport {
    /// Every submitted job, in submission order.
    pub(crate) jobs: Vec<DemoJob>,
    /// Whether every job completed; the demo's exit code follows this.
    pub(crate) all_completed: bool,
    /// Seconds from the workload's start until the last job ended (or the demo gave up).
    pub(crate) elapsed_s: f64,
    /// With `--rates`: how the users' slots split while both had work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) shares: Option<super::rates::SharesReport>,
    /// With `--slo`: what Jockey's control loop did with the deadline job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) slo: Option<super::slo::SloReport>,
}

/// Builds the report from the jobs' last summaries; `expected` jobs were submitted, so a
/// missing one counts as not completed.
pub(crate) fn build(jobs: &[JobSummary], expected: usize, start: Timestamp, elapsed: Duration) -> DemoReport {
    // Times count from the first submit as the master stamped it: the client's own start
    // can be a hair later, which showed the first job as submitted at -0.0 s.
    let start = jobs.iter().map(|j| j.submitted).min().map_or(start, |first| first.min(start));
    let since_start = |t: Timestamp| round_ms(secs_between(t, start));
    let rows: Vec<DemoJob> = jobs
        .iter()
        .map(|job| DemoJob {
            id: job.id.to_string(),
            name: job.name.clone(),
            state: job.state.name(),
            submitted_s: since_start(job.submitted),
            started_s: job.started.map(since_start),
            finished_s: job.finished.map(since_start),
            wait_s: job.started.map(|s| round_ms(secs_between(s, job.submitted))),
            tasks: job.tasks_total,
            tasks_completed: job.tasks_completed,
            deadline_s: job.deadline.map(since_start),
            met: met(job),
            paid: job.paid.map(|p| p.to_string()),
        })
        .collect();
    let all_completed = jobs.len() == expected && jobs.iter().all(|j| j.state == JobState::Completed);
    DemoReport {
        jobs: rows,
        all_completed,
        elapsed_s: round_ms(elapsed.as_secs_f64()),
        shares: None,
        slo: None,
    }
}

/// Whether `job` completed by its deadline; `None` without one.
pub(crate) fn met(job: &JobSummary) -> Option<bool> {
    job.deadline.map(|d| job.state == JobState::Completed && job.finished.is_some_and(|f| f <= d))
}

/// Rounds to milliseconds so the JSON does not carry float noise.
fn round_ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

/// The final table and a one-line verdict.
pub(crate) fn render(report: &DemoReport) -> String {
    let mut table = Table::new(&[
        ("job", Align::Left),
        ("name", Align::Left),
        ("state", Align::Left),
        ("submitted", Align::Right),
        ("started", Align::Right),
        ("finished", Align::Right),
        ("wait", Align::Right),
        ("tasks", Align::Right),
        ("deadline", Align::Right),
        ("met", Align::Left),
        ("paid", Align::Right),
    ]);
    let secs = |value: Option<f64>| value.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    for job in &report.jobs {
        table.row(vec![
            job.id.clone(),
            job.name.clone(),
            job.state.into(),
            secs(Some(job.submitted_s)),
            secs(job.started_s),
            secs(job.finished_s),
            secs(job.wait_s),
            format!("{}/{}", job.tasks_completed, job.tasks),
            secs(job.deadline_s),
            job.met.map_or("-", |met| if met { "met" } else { "missed" }).into(),
            job.paid.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    let completed = report.jobs.iter().filter(|j| j.state == JobState::Completed.name()).count();
    let verdict = if report.all_completed {
        format!("all {} jobs completed in {:.1}s", report.jobs.len(), report.elapsed_s)
    } else {
        format!("{completed} of {} jobs completed ({:.1}s)", report.jobs.len(), report.elapsed_s)
    };
    let shares = report.shares.as_ref().map(super::rates::render).unwrap_or_default();
    let slo = report.slo.as_ref().map(super::slo::render).unwrap_or_default();
    format!("times in seconds since the first submit\n{}\n{shares}{slo}{verdict}\n", table.render())
}

/// `[12.0s] 3/6 jobs done, 5 tasks running`, plus how many failed if any did.
pub(crate) fn progress_line(elapsed: Duration, jobs: &[JobSummary], expected: usize) -> String {
    let done = jobs.iter().filter(|j| j.state.is_terminal()).count();
    let failed = jobs.iter().filter(|j| j.state.is_terminal() && j.state != JobState::Completed).count();
    let running: u64 = jobs.iter().map(|j| j.tasks_running).sum();
    let mut line = format!(
        "[{:.1}s] {done}/{expected} jobs done, {running} task{} running",
        elapsed.as_secs_f64(),
        if running == 1 { "" } else { "s" }
    );
    if failed > 0 {
        line.push_str(&format!(" ({failed} did not complete)"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::summary;

    /// A job without a deadline (the shared summary has one).
    fn plain(id: u64, state: JobState) -> JobSummary {
        JobSummary { deadline: None, ..summary(id, state) }
    }

    fn finished(id: u64, state: JobState, finished: u64) -> JobSummary {
        JobSummary {
            finished: Some(Timestamp(finished)),
            tasks_completed: 11,
            tasks_running: 0,
            ..plain(id, state)
        }
    }

    #[test]
    fn the_report_has_the_documented_json_shape() {
        let jobs = [finished(1, JobState::Completed, 14_000), plain(2, JobState::Running)];
        let report = build(&jobs, 2, Timestamp(9_000), Duration::from_millis(5_500));
        let value = serde_json::to_value(&report).unwrap();
        let expected = serde_json::json!({
            "jobs": [
                {"id": "j1", "name": "wordcount", "state": "completed", "submitted_s": 1.0,
                 "started_s": 1.4, "finished_s": 5.0, "wait_s": 0.4, "tasks": 11, "tasks_completed": 11},
                {"id": "j2", "name": "wordcount", "state": "running", "submitted_s": 1.0,
                 "started_s": 1.4, "finished_s": null, "wait_s": 0.4, "tasks": 11, "tasks_completed": 4}
            ],
            "all_completed": false,
            "elapsed_s": 5.5
        });
        assert_eq!(value, expected);
    }

    #[test]
    fn all_completed_needs_every_expected_job() {
        let jobs = [finished(1, JobState::Completed, 14_000)];
        assert!(build(&jobs, 1, Timestamp(9_000), Duration::ZERO).all_completed);
        assert!(!build(&jobs, 2, Timestamp(9_000), Duration::ZERO).all_completed);
        let failed = [finished(1, JobState::Failed, 14_000)];
        assert!(!build(&failed, 1, Timestamp(9_000), Duration::ZERO).all_completed);
    }

    #[test]
    fn the_table_shows_seconds_and_a_verdict() {
        let jobs = [finished(1, JobState::Completed, 14_000)];
        let text = render(&build(&jobs, 1, Timestamp(9_000), Duration::from_secs(6)));
        assert!(
            text.contains(
                "job  name       state      submitted  started  finished  wait  tasks  deadline  met  paid\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "j1   wordcount  completed        1.0      1.4       5.0   0.4  11/11         -  -       -\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("all 1 jobs completed in 6.0s\n"), "{text}");
    }

    #[test]
    fn a_bought_deadline_shows_met_or_missed_and_the_price_paid() {
        let mut met = finished(1, JobState::Completed, 14_000);
        (met.deadline, met.paid) = (Some(Timestamp(15_000)), Some("0.014446".parse().unwrap()));
        let mut missed = finished(2, JobState::Completed, 16_000);
        missed.deadline = Some(Timestamp(15_000));
        let report = build(&[met, missed], 2, Timestamp(9_000), Duration::from_secs(7));
        assert_eq!((report.jobs[0].met, report.jobs[1].met), (Some(true), Some(false)));
        let text = render(&report);
        assert!(text.contains("11/11       6.0  met     0.014446\n"), "{text}");
        assert!(text.contains("11/11       6.0  missed         -\n"), "{text}");
    }

    #[test]
    fn times_count_from_the_first_submit_even_when_the_client_started_after_it() {
        let early = JobSummary { submitted: Timestamp(8_990), ..finished(1, JobState::Completed, 14_000) };
        let report = build(&[early], 1, Timestamp(9_000), Duration::from_secs(5));
        assert_eq!((report.jobs[0].submitted_s, report.jobs[0].finished_s), (0.0, Some(5.01)));
    }

    #[test]
    fn progress_lines_count_jobs_and_tasks() {
        let jobs = [finished(1, JobState::Completed, 14_000), summary(2, JobState::Running)];
        assert_eq!(
            progress_line(Duration::from_secs(12), &jobs, 6),
            "[12.0s] 1/6 jobs done, 3 tasks running"
        );
        let failed = [finished(1, JobState::Failed, 14_000)];
        assert_eq!(
            progress_line(Duration::from_millis(500), &failed, 1),
            "[0.5s] 1/1 jobs done, 0 tasks running (1 did not complete)"
        );
    }
}
