//! `slotmarket submit JOB.toml [--wait]`: validates the spec locally (so typos are caught
//! before any connection is made), submits it and prints the job id; with `--wait`,
//! follows the job until it ends.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobState, JobStatus};
use slotmarket_common::spec::{JobSpec, SpecError, TimeLimit, validate};
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, JobStatusJson};
use crate::wait;

/// Exit code for a job spec that does not validate, like clap's for bad arguments.
const EXIT_INVALID_SPEC: u8 = 2;

/// Arguments of `submit`.
#[derive(Debug, Args)]
pub(crate) struct SubmitArgs {
    /// The job spec (TOML; see configs/jobs/ for examples).
    #[arg(value_name = "JOB.toml")]
    pub(crate) spec: PathBuf,
    /// Follow the job until it ends; exit 0 only if it completed.
    #[arg(long)]
    pub(crate) wait: bool,
    /// Start only once these jobs completed (fail if one does not); added to the spec's
    /// `after`; repeatable.
    #[arg(long, value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) after: Vec<JobId>,
    /// Kill the tasks and fail the job once it has run this long (`10m`, `1h30m`);
    /// overrides the spec's `time_limit`.
    #[arg(long, value_name = "DURATION")]
    pub(crate) time_limit: Option<TimeLimit>,
}

/// The `--json` answer: the id, plus the final status with `--wait`.
#[derive(Debug, Serialize)]
struct SubmitJson {
    /// `j7`.
    job: String,
    /// The final status, with `--wait`.
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<JobStatusJson>,
}

/// Runs `submit`.
pub(crate) async fn run(conn: &ConnectionArgs, args: SubmitArgs, json: bool) -> Result<ExitCode> {
    let shown = args.spec.display();
    let text = std::fs::read_to_string(&args.spec).with_context(|| format!("reading job spec {shown}"))?;
    let spec = match JobSpec::from_toml(&text).and_then(|spec| with_flags(spec, &args)) {
        Ok(spec) => spec,
        Err(err) => {
            // The error already names the field and the fix; add which file.
            eprintln!("error: {shown}: {err}");
            return Ok(ExitCode::from(EXIT_INVALID_SPEC));
        }
    };
    submit_spec(conn, spec, args.wait, json).await
}

/// `spec` with the `--after` and `--time-limit` flags applied, validated again.
fn with_flags(mut spec: JobSpec, args: &SubmitArgs) -> Result<JobSpec, SpecError> {
    spec.after.extend(&args.after);
    spec.time_limit = args.time_limit.or(spec.time_limit);
    validate(&spec)?;
    Ok(spec)
}

/// Connects, submits `spec` and prints the id; with `wait`, follows the job to its end
/// (reconnecting across a master restart) and exits 0 only if it completed. `run` shares
/// it.
pub(crate) async fn submit_spec(
    conn: &ConnectionArgs,
    spec: JobSpec,
    wait: bool,
    json: bool,
) -> Result<ExitCode> {
    let options = connection::ClientOptions::from_args(conn)?;
    let mut client = options.connect().await?;
    let job = submit(&client, spec).await?;
    if !wait {
        connection::close(client).await;
        if json {
            output::print_json(&SubmitJson { job: job.to_string(), status: None })?;
        } else {
            println!("{job}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        println!("{job}");
    }
    let status = wait::follow(&options, &mut client, job, wait::FollowTimes::default()).await?;
    connection::close(client).await;
    report_end(&status, json)?;
    Ok(if status.summary.state == JobState::Completed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Sends the spec; answers the new job's id.
pub(crate) async fn submit(client: &Client, spec: JobSpec) -> Result<JobId> {
    let name = spec.name.clone();
    connection::bounded(client.submit(spec)).await.with_context(|| format!("submitting job \"{name}\""))
}

/// `j7 running: 4/11 tasks done, 2 running (+3.2s after submit)`; the time is when it
/// ended, or `now` while it runs.
pub(crate) fn progress_line(status: &JobStatus, now: Timestamp) -> String {
    let job = &status.summary;
    let since = job.finished.unwrap_or(now);
    // Tasks are counted from placement, the job runs from the first task's start: in
    // between say "starting", not "pending … 1 running".
    let state =
        if job.state == JobState::Pending && job.tasks_running > 0 { "starting" } else { job.state.name() };
    format!(
        "{} {}: {}/{} tasks done, {} running ({} after submit)",
        job.id,
        state,
        job.tasks_completed,
        job.tasks_total,
        job.tasks_running,
        output::relative(Some(since), job.submitted)
    )
}

/// Prints how the job ended.
pub(crate) fn report_end(status: &JobStatus, json: bool) -> Result<()> {
    let job = &status.summary;
    if json {
        return output::print_json(&SubmitJson { job: job.id.to_string(), status: Some(status.into()) });
    }
    let took = output::relative(job.finished, job.submitted);
    match &status.message {
        Some(message) => {
            let message = output::sanitize(message);
            println!("{} {} ({took} after submit): {message}", job.id, job.state)
        }
        None => println!("{} {} ({took} after submit)", job.id, job.state),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::{JobState, Request, Response};

    use super::*;
    use crate::fake_master::{FakeMaster, status};
    use crate::output::tests::summary;

    const SPEC: &str =
        "name = \"x\"\n[[stage]]\nname = \"a\"\ntasks = 2\nslot = \"map\"\ncommand = \"true\"\n";

    #[tokio::test]
    async fn submit_answers_the_id_and_wait_follows_the_watch_to_the_end() {
        let fake = FakeMaster::start(|request| match request {
            Request::Submit { .. } => vec![Response::Submitted { job: JobId(5) }],
            Request::Watch { job } => [JobState::Pending, JobState::Running, JobState::Completed]
                .map(|state| Response::Job(status(job, "x", state)))
                .into(),
            _ => vec![],
        });
        let options = fake.options("alice");
        let mut client = options.connect().await.unwrap();
        let spec = JobSpec::from_toml(SPEC).unwrap();
        let job = submit(&client, spec.clone()).await.unwrap();
        assert_eq!(job, JobId(5));
        let end = wait::follow(&options, &mut client, job, wait::FollowTimes::default()).await.unwrap();
        assert_eq!(end.summary.state, JobState::Completed);
        connection::close(client).await;
        assert_eq!(fake.requests(), vec![Request::Submit { spec }, Request::Watch { job }]);
    }

    #[tokio::test]
    async fn wait_exits_zero_only_for_a_completed_job() {
        for (state, code) in
            [(JobState::Completed, ExitCode::SUCCESS), (JobState::Cancelled, ExitCode::FAILURE)]
        {
            let fake = FakeMaster::start(move |request| match request {
                Request::Submit { .. } => vec![Response::Submitted { job: JobId(1) }],
                Request::Watch { job } => vec![Response::Job(status(job, "x", state))],
                _ => vec![],
            });
            let file = fake.certs.path().join("job.toml");
            std::fs::write(&file, SPEC).unwrap();
            let conn = ConnectionArgs {
                master: Some(fake.addr.to_string()),
                cert_dir: Some(fake.certs.path().to_path_buf()),
                identity: Some("alice".into()),
                ..ConnectionArgs::default()
            };
            let got =
                run(&conn, SubmitArgs { spec: file, wait: true, after: vec![], time_limit: None }, true)
                    .await
                    .unwrap();
            assert_eq!(got, code, "{state}");
        }
    }

    #[tokio::test]
    async fn an_invalid_spec_exits_two_before_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, SPEC.replace("tasks = 2", "tasks = 0")).unwrap();
        // No master and no certificates: validation must fail first.
        let conn = ConnectionArgs { master: Some("127.0.0.1:1".into()), ..ConnectionArgs::default() };
        let got = run(&conn, SubmitArgs { spec: file, wait: false, after: vec![], time_limit: None }, false)
            .await
            .unwrap();
        assert_eq!(got, ExitCode::from(EXIT_INVALID_SPEC));
    }

    #[test]
    fn progress_lines_count_tasks() {
        let status =
            JobStatus { summary: summary(7, JobState::Running), stages: vec![], message: None, slo: None };
        let line = progress_line(&status, Timestamp(12_500));
        assert_eq!(line, "j7 running: 4/11 tasks done, 3 running (+2.5s after submit)");
        let placed = JobStatus { summary: summary(7, JobState::Pending), ..status };
        assert!(
            progress_line(&placed, Timestamp(12_500)).starts_with("j7 starting: 4/11 tasks done, 3 running")
        );
    }

    #[test]
    fn submit_json_omits_status_without_wait() {
        let value = serde_json::to_value(SubmitJson { job: "j3".into(), status: None }).unwrap();
        assert_eq!(value, serde_json::json!({"job": "j3"}));
    }
}
