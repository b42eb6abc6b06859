//! The demo's Jockey scenario (`demo --slo`): the master runs the `jockey` policy with a
//! control step every second. A pi job named `slo-pi` first runs alone, which leaves its
//! profile; then best-effort jobs fill the cluster and the same job comes back with a
//! deadline and map tasks three times as long as profiled. Once a second the deadline job's
//! progress, guaranteed and running slots and predicted finish are printed: the
//! guarantee the control loop starts it with falls behind, rises once the run shows it
//! is slower than its profile, and falls again near the end. The report adds the
//! guarantee second by second.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobState, JobStatus, JobSummary};
use slotmarket_common::spec::JobSpec;

use super::cluster::Cluster;
use super::{report, workload};
use crate::connection;
use crate::output::secs_between;
use crate::submit;

/// The master's policy: Jockey, re-sizing guarantees every second (the paper's minute
/// is for jobs of hours) with a dead zone of a second.
pub(crate) const MASTER_TOML: &str = "[policy]\nname = \"jockey\"\ninterval_s = 1\ndead_zone_s = 1\n";

/// The job as it runs alone first, leaving its profile.
const PROFILED: (&str, &str) = ("slo-pi.toml", include_str!("jobs/slo-pi.toml"));
/// The same job (same name, so the same profile) with a deadline and slower tasks.
const DEADLINE_RUN: (&str, &str) = ("slo-pi-deadline.toml", include_str!("jobs/slo-pi-deadline.toml"));
/// The best-effort work, submitted [`BATCH_JOBS`] times.
const BATCH: (&str, &str) = ("pi-batch.toml", include_str!("jobs/pi-batch.toml"));
/// Best-effort jobs submitted just before the deadline run: enough to keep the default
/// three agents' six map slots busy for as long as it runs.
const BATCH_JOBS: usize = 6;

/// The scenario's job specs, parsed before anything starts.
pub(crate) struct Specs {
    profiled: JobSpec,
    deadline_run: JobSpec,
    batch: Vec<JobSpec>,
}

/// Parses the embedded specs.
pub(crate) fn specs() -> Result<Specs> {
    let parse = |(file, text)| workload::parse_embedded(file, text);
    let batch = parse(BATCH)?;
    let batch =
        (1..=BATCH_JOBS).map(|k| JobSpec { name: format!("{}-{k}", batch.name), ..batch.clone() }).collect();
    Ok(Specs { profiled: parse(PROFILED)?, deadline_run: parse(DEADLINE_RUN)?, batch })
}

/// The deadline job's control in one sample.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct SloSample {
    /// Seconds since the deadline job's submission (the demo's clock), to a tenth.
    pub(crate) t_s: f64,
    /// Its progress by the policy's indicator, 0 to 1.
    pub(crate) progress: f64,
    /// Slots guaranteed to it.
    pub(crate) guaranteed: u32,
    /// Its tasks running.
    pub(crate) running: u64,
}

/// What the control loop did with the deadline job.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct SloReport {
    /// `j7`.
    pub(crate) job: String,
    /// Its deadline, seconds after its submission.
    pub(crate) deadline_s: Option<f64>,
    /// When it ended, seconds after its submission, or null.
    pub(crate) finished_s: Option<f64>,
    /// Whether it completed by its deadline.
    pub(crate) met: bool,
    /// The work its profile holds, slot-seconds.
    pub(crate) profiled_work_s: f64,
    /// The control loop's last estimate of how much longer than profiled its tasks run
    /// (its completed tasks' times pooled with ten tasks' worth of "as profiled", so
    /// below what they took), or null if the policy never took the job on.
    pub(crate) slowdown: Option<f64>,
    /// The largest guarantee it had, or null as `slowdown`.
    pub(crate) peak_guaranteed: Option<u32>,
    /// One sample a second from its submission to its end.
    pub(crate) samples: Vec<SloSample>,
}

/// Runs the scenario as the demo user: the profiling run to its end, then the
/// best-effort jobs and the deadline run, followed until every job ends or `timeout`
/// passes. Answers the ids in submission order, the jobs' last summaries and the report.
pub(crate) async fn run(
    client: &Client,
    cluster: &mut Cluster,
    specs: Specs,
    started: Instant,
    timeout: Duration,
) -> Result<(Vec<JobId>, Vec<JobSummary>, SloReport)> {
    let (first, profiled_work_s) = profile_alone(client, cluster, specs.profiled, started, timeout).await?;
    let mut ids = vec![first];
    let batch_tasks: u64 = specs.batch.iter().map(JobSpec::total_tasks).sum();
    for spec in specs.batch {
        ids.push(submit::submit(client, spec).await?);
    }
    eprintln!(
        "[{:.1}s] submitted {} best-effort jobs ({batch_tasks} tasks) to fill the cluster",
        started.elapsed().as_secs_f64(),
        ids.len() - 1
    );
    let (name, deadline) = (specs.deadline_run.name.clone(), specs.deadline_run.deadline);
    let deadline_job = submit::submit(client, specs.deadline_run).await?;
    let submitted = Instant::now();
    ids.push(deadline_job);
    eprintln!(
        "[{:.1}s] submitted {deadline_job} {name} again, deadline {}, its map tasks sleeping three times as long",
        started.elapsed().as_secs_f64(),
        deadline.map(|d| d.to_string()).unwrap_or_default()
    );

    let mut samples = Vec::new();
    let mut last: Option<JobStatus> = None;
    loop {
        cluster.check_alive()?;
        let jobs = workload::our_jobs(client, &ids).await?;
        if last.as_ref().is_none_or(|status| !status.summary.state.is_terminal()) {
            let status = connection::bounded(client.status(deadline_job))
                .await
                .with_context(|| format!("reading {deadline_job}"))?;
            let others: u64 =
                jobs.iter().filter(|job| job.id != deadline_job).map(|job| job.tasks_running).sum();
            eprintln!("{}", status_line(started.elapsed(), &status, others));
            samples.extend(sample(&status, submitted.elapsed()));
            last = Some(status);
        } else {
            eprintln!("{}", report::progress_line(started.elapsed(), &jobs, ids.len()));
        }
        let ended = jobs.len() == ids.len() && jobs.iter().all(|job| job.state.is_terminal());
        if ended || started.elapsed() > timeout {
            if !ended {
                eprintln!("gave up waiting after {}s (raise it with --timeout)", timeout.as_secs());
            }
            let status = last.context("the deadline job was never read")?;
            return Ok((ids, jobs, summarize(&status, profiled_work_s, samples)));
        }
        tokio::time::sleep(workload::PROGRESS_INTERVAL).await;
    }
}

/// Runs `spec` alone to its end, which leaves its profile; answers the job and the work
/// its profile holds, slot-seconds.
async fn profile_alone(
    client: &Client,
    cluster: &mut Cluster,
    spec: JobSpec,
    started: Instant,
    timeout: Duration,
) -> Result<(JobId, f64)> {
    let name = spec.name.clone();
    let job = submit::submit(client, spec).await?;
    eprintln!("[{:.1}s] submitted {job} {name} alone, to leave its profile", started.elapsed().as_secs_f64());
    let ran = workload::follow(client, cluster, &[job], started, timeout).await?;
    if ran.first().map(|job| job.state) != Some(JobState::Completed) {
        bail!("the profiling run {job} did not complete");
    }
    let profile = connection::bounded(client.profile(name.clone()))
        .await
        .with_context(|| format!("reading {name}'s profile"))?;
    let work_s = profile.work_ms as f64 / 1000.0;
    eprintln!(
        "profile of {name}: {} run, {work_s:.1} slot-seconds of work, critical path {:.1}s",
        profile.runs,
        profile.critical_path_ms as f64 / 1000.0
    );
    Ok((job, work_s))
}

/// The deadline job's control `since` its submission, if the policy has taken it on.
fn sample(status: &JobStatus, since: Duration) -> Option<SloSample> {
    let slo = status.slo.as_ref()?;
    Some(SloSample {
        t_s: (since.as_secs_f64() * 10.0).round() / 10.0,
        progress: f64::from(slo.progress_permille) / 1000.0,
        guaranteed: slo.guaranteed,
        running: status.summary.tasks_running,
    })
}

/// `[9.0s] slo-pi j7: 42 % done, 3 slots guaranteed, 3 running, predicted 2.1s before
/// its deadline; best-effort tasks running: 3`.
fn status_line(elapsed: Duration, status: &JobStatus, others_running: u64) -> String {
    let summary = &status.summary;
    let mut line = format!("[{:.1}s] {} {}: ", elapsed.as_secs_f64(), summary.name, summary.id);
    match &status.slo {
        Some(slo) if !summary.state.is_terminal() => {
            line.push_str(&format!(
                "{:.0} % done, {} slot{} guaranteed, {} running",
                f64::from(slo.progress_permille) / 10.0,
                slo.guaranteed,
                if slo.guaranteed == 1 { "" } else { "s" },
                summary.tasks_running
            ));
            if let (Some(predicted), Some(deadline)) = (slo.predicted_finish, summary.deadline) {
                let margin = secs_between(deadline, predicted);
                let side = if margin >= 0.0 { "before" } else { "after" };
                line.push_str(&format!(", predicted {:.1}s {side} its deadline", margin.abs()));
            }
        }
        _ => line.push_str(summary.state.name()),
    }
    line.push_str(&format!("; best-effort tasks running: {others_running}"));
    line
}

/// The report from the deadline job's last status and the samples.
fn summarize(status: &JobStatus, profiled_work_s: f64, samples: Vec<SloSample>) -> SloReport {
    let summary = &status.summary;
    let since_submit = |t| (secs_between(t, summary.submitted) * 10.0).round() / 10.0;
    let slo = status.slo.as_ref();
    SloReport {
        job: summary.id.to_string(),
        deadline_s: summary.deadline.map(since_submit),
        finished_s: summary.finished.map(since_submit),
        met: report::met(summary) == Some(true),
        profiled_work_s,
        slowdown: slo.map(|slo| f64::from(slo.slowdown_permille) / 1000.0),
        peak_guaranteed: slo.map(|slo| slo.peak_guaranteed),
        samples,
    }
}

/// The deadline job's outcome and its guarantee second by second.
pub(crate) fn render(report: &SloReport) -> String {
    let secs = |value: Option<f64>| value.map_or_else(|| "-".into(), |v| format!("{v:.1}s"));
    let outcome = match report.finished_s {
        Some(_) if report.met => "met",
        Some(_) => "missed",
        None => "not finished",
    };
    let guarantees: Vec<String> = report.samples.iter().map(|s| s.guaranteed.to_string()).collect();
    let estimate = match (report.slowdown, report.peak_guaranteed) {
        (Some(slowdown), Some(peak)) => format!(
            "the control loop's last estimate of its tasks' times: {slowdown:.2} × its profile's \
             ({:.1} slot-seconds in all); the guarantee peaked at {peak}\n",
            report.profiled_work_s
        ),
        _ => "the jockey policy never took it on\n".into(),
    };
    format!(
        "deadline job {}: deadline {} after its submission, finished at {}: {outcome}\n\
         its guaranteed slots, a second apart: {}\n{estimate}",
        report.job,
        secs(report.deadline_s),
        secs(report.finished_s),
        guarantees.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::SloStatus;
    use slotmarket_common::time::Timestamp;

    use super::*;
    use crate::output::tests::summary;

    /// The seconds a map task of `spec` sleeps before its work, and the work.
    fn map_sleep_s(spec: &JobSpec) -> (u32, &str) {
        let command = &spec.stages[spec.stage_index("map").unwrap()].command;
        let rest = command.strip_prefix("sleep ").expect("a map task sleeps first");
        let (secs, work) = rest.split_once(" && ").unwrap();
        (secs.parse().unwrap(), work)
    }

    /// A running deadline job submitted at 10 s with its deadline at 30 s.
    fn running(guaranteed: u32, predicted_ms: u64) -> JobStatus {
        JobStatus {
            summary: JobSummary {
                name: "slo-pi".into(),
                deadline: Some(Timestamp(30_000)),
                ..summary(7, JobState::Running)
            },
            stages: Vec::new(),
            message: None,
            slo: Some(SloStatus {
                progress_permille: 417,
                predicted_finish: Some(Timestamp(predicted_ms)),
                guaranteed,
                peak_guaranteed: 3,
                finish_interval: None,
                slowdown_permille: 2_950,
                utility_from_spec: false,
            }),
        }
    }

    #[test]
    fn the_deadline_run_is_the_profiled_job_slower_with_a_deadline() {
        let specs = specs().unwrap();
        let (profiled, deadline_run) = (&specs.profiled, &specs.deadline_run);
        // One name, so the deadline run is planned from the profiled run's profile.
        assert_eq!(profiled.name, deadline_run.name);
        let shape = |spec: &JobSpec| {
            spec.stages.iter().map(|s| (s.tasks, s.slot, s.after.clone())).collect::<Vec<_>>()
        };
        assert_eq!(shape(profiled), shape(deadline_run));
        assert_eq!(
            (profiled.deadline, deadline_run.deadline.map(|d| d.to_string())),
            (None, Some("+22s".into()))
        );
        let ((profiled_s, profiled_work), (slower_s, work)) =
            (map_sleep_s(profiled), map_sleep_s(deadline_run));
        assert_eq!((slower_s, work), (3 * profiled_s, profiled_work), "the same work, three times the sleep");
    }

    #[test]
    fn the_best_effort_jobs_are_named_apart_and_have_no_deadline() {
        let specs = specs().unwrap();
        let names: Vec<&str> = specs.batch.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["pi-batch-1", "pi-batch-2", "pi-batch-3", "pi-batch-4", "pi-batch-5", "pi-batch-6"]
        );
        assert!(specs.batch.iter().all(|s| s.deadline.is_none()));
    }

    #[test]
    fn a_status_line_shows_progress_slots_and_the_predicted_margin() {
        let line = status_line(Duration::from_secs(9), &running(3, 27_900), 2);
        assert_eq!(
            line,
            "[9.0s] slo-pi j7: 42 % done, 3 slots guaranteed, 3 running, predicted 2.1s before its deadline; \
             best-effort tasks running: 2"
        );
        let late = status_line(Duration::from_secs(9), &running(1, 31_500), 5);
        assert!(late.contains("1 slot guaranteed, 3 running, predicted 1.5s after its deadline;"), "{late}");
        let mut done = running(1, 27_900);
        done.summary.state = JobState::Completed;
        assert!(
            status_line(Duration::ZERO, &done, 0)
                .ends_with("slo-pi j7: completed; best-effort tasks running: 0")
        );
    }

    #[test]
    fn the_report_says_met_only_for_a_completion_by_the_deadline() {
        let mut status = running(1, 27_900);
        status.summary.state = JobState::Completed;
        status.summary.finished = Some(Timestamp(27_500));
        let samples = [1, 2, 3, 1].iter().enumerate().map(|(t, &guaranteed)| SloSample {
            t_s: t as f64,
            progress: 0.5,
            guaranteed,
            running: 2,
        });
        let report = summarize(&status, 12.6, samples.collect());
        assert_eq!(
            (report.job.as_str(), report.deadline_s, report.finished_s, report.met),
            ("j7", Some(20.0), Some(17.5), true)
        );
        assert_eq!((report.slowdown, report.peak_guaranteed), (Some(2.95), Some(3)));
        let text = render(&report);
        assert!(
            text.starts_with(
                "deadline job j7: deadline 20.0s after its submission, finished at 17.5s: met\n"
            ),
            "{text}"
        );
        assert!(text.contains("its guaranteed slots, a second apart: 1 2 3 1\n"), "{text}");
        let estimate = "estimate of its tasks' times: 2.95 × its profile's (12.6 slot-seconds in all); \
                        the guarantee peaked at 3\n";
        assert!(text.contains(estimate), "{text}");

        let mut never = JobStatus { slo: None, ..running(1, 0) };
        never.summary.finished = None;
        let text = render(&summarize(&never, 12.6, Vec::new()));
        assert_eq!(
            text,
            "deadline job j7: deadline 20.0s after its submission, finished at -: not finished\n\
             its guaranteed slots, a second apart: \nthe jockey policy never took it on\n"
        );

        status.summary.finished = Some(Timestamp(30_001));
        assert!(!summarize(&status, 12.6, Vec::new()).met, "a millisecond late");
        status.summary.state = JobState::Failed;
        status.summary.finished = Some(Timestamp(20_000));
        assert!(!summarize(&status, 12.6, Vec::new()).met, "failed in time");
    }

    #[test]
    fn a_sample_needs_the_policys_view() {
        let sample = sample(&running(2, 27_900), Duration::from_millis(4_600)).unwrap();
        assert_eq!(sample, SloSample { t_s: 4.6, progress: 0.417, guaranteed: 2, running: 3 });
        let plain = JobStatus { slo: None, ..running(2, 27_900) };
        assert_eq!(super::sample(&plain, Duration::ZERO), None);
    }
}
