//! `slotmarket submit JOB.toml [--wait]`: validates the spec locally (so typos are caught
//! before any connection is made), submits it and prints the job id; with `--wait`,
//! follows the job until it ends.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobState, JobStatus};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, JobStatusJson};

/// Exit code for a job spec that does not validate, like clap's for bad arguments.
const EXIT_INVALID_SPEC: u8 = 2;

/// Arguments of `submit`.
#[derive(Debug, Args)]
pub(crate) struct SubmitArgs {
    /// The job spec (TOML; see configs/jobs/ for examples).
    #[arg(value_name = "JOB.toml")]
    pub(crate) spec: PathBuf,
    /// More job specs: all are submitted over one connection, many requests in flight at
    /// once, and their ids printed in order; `--wait` then follows every one.
    #[arg(value_name = "MORE.toml")]
    pub(crate) more: Vec<PathBuf>,
    /// Follow the job until it ends; exit 0 only if it completed.
    #[arg(long)]
    pub(crate) wait: bool,
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
    if !args.more.is_empty() {
        return run_many(conn, args, json).await;
    }
    let shown = args.spec.display();
    let text = std::fs::read_to_string(&args.spec).with_context(|| format!("reading job spec {shown}"))?;
    let spec = match JobSpec::from_toml(&text) {
        Ok(spec) => spec,
        Err(err) => {
            // The error already names the field and the fix; add which file.
            eprintln!("error: {shown}: {err}");
            return Ok(ExitCode::from(EXIT_INVALID_SPEC));
        }
    };
    let client = connection::connect_from_args(conn).await?;
    let job = submit(&client, spec).await?;
    if !args.wait {
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
    let status = wait_for_end(&client, job).await?;
    connection::close(client).await;
    report_end(&status, json)?;
    Ok(if status.summary.state == JobState::Completed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Sends the spec; answers the new job's id.
pub(crate) async fn submit(client: &Client, spec: JobSpec) -> Result<JobId> {
    let name = spec.name.clone();
    connection::bounded(client.submit(spec)).await.with_context(|| format!("submitting job \"{name}\""))
}

/// Follows `job` over a watch stream, printing a progress line on stderr whenever it
/// changes, until it ends.
async fn wait_for_end(client: &Client, job: JobId) -> Result<JobStatus> {
    let mut watch = client.watch(job).await.with_context(|| format!("watching {job}"))?;
    let mut last_line = String::new();
    while let Some(status) = watch.next().await.with_context(|| format!("watching {job}"))? {
        let line = progress_line(&status, output::now());
        if line != last_line {
            eprintln!("{line}");
            last_line = line;
        }
        if status.summary.state.is_terminal() {
            return Ok(status);
        }
    }
    // The stream ended without a final state (e.g. the master restarted): ask once.
    let status = connection::job_status(client, job).await?;
    if !status.summary.state.is_terminal() {
        bail!(
            "the watch stream for {job} ended while it was {}; follow it with `slotmarket status {job}`",
            status.summary.state
        );
    }
    Ok(status)
}

/// `j7 running: 4/11 tasks done, 2 running (+3.2s after submit)`; the time is when it
/// ended, or `now` while it runs.
fn progress_line(status: &JobStatus, now: Timestamp) -> String {
    let job = &status.summary;
    let since = job.finished.unwrap_or(now);
    format!(
        "{} {}: {}/{} tasks done, {} running ({} after submit)",
        job.id,
        job.state,
        job.tasks_completed,
        job.tasks_total,
        job.tasks_running,
        output::relative(Some(since), job.submitted)
    )
}

/// Prints how the job ended.
fn report_end(status: &JobStatus, json: bool) -> Result<()> {
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

/// `submit A.toml B.toml ...`: validates every spec first (exit 2 before connecting if
/// one does not validate), then runs [`submit_many`] over one connection.
async fn run_many(conn: &ConnectionArgs, args: SubmitArgs, json: bool) -> Result<ExitCode> {
    let mut specs = Vec::with_capacity(1 + args.more.len());
    for path in std::iter::once(&args.spec).chain(&args.more) {
        match read_spec(path)? {
            Some(spec) => specs.push(spec),
            None => return Ok(ExitCode::from(EXIT_INVALID_SPEC)),
        }
    }
    let client = connection::connect_from_args(conn).await?;
    let code = submit_many(&client, specs, args.wait, json).await;
    connection::close(client).await;
    code
}

/// Submits several specs over one connection and prints their ids in order (a JSON
/// array with `--json`); a refused spec is reported on stderr and makes the exit code 1,
/// the others are still submitted. With `wait`, follows every submitted job to its end.
async fn submit_many(client: &Client, specs: Vec<JobSpec>, wait: bool, json: bool) -> Result<ExitCode> {
    let names: Vec<String> = specs.iter().map(|spec| spec.name.clone()).collect();
    let outcomes = connection::bounded(async { Ok(client.submit_many(specs).await) }).await?;
    let mut all_ok = true;
    let mut jobs = Vec::with_capacity(outcomes.len());
    for (outcome, name) in outcomes.into_iter().zip(&names) {
        match outcome {
            Ok(job) => jobs.push(job),
            Err(err) => {
                all_ok = false;
                let err = anyhow::Error::from(err).context(format!("submitting job \"{name}\""));
                eprintln!("error: {}", output::sanitize(&format!("{err:#}")));
            }
        }
    }
    let mut answers = Vec::with_capacity(jobs.len());
    for &job in &jobs {
        if !json {
            println!("{job}");
        }
        answers.push(SubmitJson { job: job.to_string(), status: None });
    }
    if wait {
        for (answer, &job) in answers.iter_mut().zip(&jobs) {
            let status = wait_for_end(client, job).await?;
            all_ok &= status.summary.state == JobState::Completed;
            if !json {
                report_end(&status, false)?;
            }
            answer.status = Some((&status).into());
        }
    }
    if json {
        output::print_json(&answers)?;
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Reads and validates one spec file; `None` (after saying why on stderr) if it does
/// not validate.
fn read_spec(path: &std::path::Path) -> Result<Option<JobSpec>> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading job spec {shown}"))?;
    match JobSpec::from_toml(&text) {
        Ok(spec) => Ok(Some(spec)),
        Err(err) => {
            // The error already names the field and the fix; add which file.
            eprintln!("error: {shown}: {err}");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::{ErrorKind, ErrorReply, JobState, Request, Response};

    use super::*;
    use crate::fake_master::{FakeMaster, status};
    use crate::output::tests::summary;

    const SPEC: &str =
        "name = \"x\"\n[[stage]]\nname = \"a\"\ntasks = 2\nslot = \"map\"\ncommand = \"true\"\n";

    /// `submit FIRST MORE...` arguments.
    fn many(files: &[PathBuf], wait: bool) -> SubmitArgs {
        SubmitArgs { spec: files[0].clone(), more: files[1..].to_vec(), wait }
    }

    #[tokio::test]
    async fn several_specs_go_over_one_connection_and_a_refusal_spares_the_others() {
        let fake = FakeMaster::start(|request| match request {
            Request::Submit { spec } if spec.name == "bad" => {
                vec![Response::Error(ErrorReply { kind: ErrorKind::Forbidden, message: "no budget".into() })]
            }
            Request::Submit { spec } => {
                let n: u64 = spec.name.trim_start_matches('x').parse().unwrap();
                vec![Response::Submitted { job: JobId(n) }]
            }
            Request::Watch { job } => vec![Response::Job(status(job, "x", JobState::Completed))],
            _ => vec![],
        });
        let names: Vec<String> =
            (0..150).map(|n| if n == 70 { "bad".into() } else { format!("x{n}") }).collect();
        let files: Vec<PathBuf> = names
            .iter()
            .map(|name| {
                let file = fake.certs.path().join(format!("{name}.toml"));
                std::fs::write(&file, SPEC.replace("name = \"x\"", &format!("name = \"{name}\""))).unwrap();
                file
            })
            .collect();
        let conn = ConnectionArgs {
            master: Some(fake.addr.to_string()),
            cert_dir: Some(fake.certs.path().to_path_buf()),
            identity: Some("alice".into()),
            ..ConnectionArgs::default()
        };
        let got = run(&conn, many(&files, true), true).await.unwrap();
        // One spec was refused: exit 1, yet every other one was submitted and followed.
        assert_eq!(got, ExitCode::FAILURE);
        let requests = fake.requests();
        let submitted: Vec<&str> = requests
            .iter()
            .filter_map(|r| match r {
                Request::Submit { spec } => Some(spec.name.as_str()),
                _ => None,
            })
            .collect();
        let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut sorted = submitted.clone();
        sorted.sort_unstable();
        expected.sort_unstable();
        assert_eq!(sorted, expected);
        let watched = requests.iter().filter(|r| matches!(r, Request::Watch { .. })).count();
        assert_eq!(watched, 149);

        // Without the bad spec, all complete and the exit code is 0.
        let good: Vec<PathBuf> = files.into_iter().filter(|f| !f.ends_with("bad.toml")).collect();
        let got = run(&conn, many(&good, false), false).await.unwrap();
        assert_eq!(got, ExitCode::SUCCESS);
    }

    #[tokio::test]
    async fn submit_answers_the_id_and_wait_follows_the_watch_to_the_end() {
        let fake = FakeMaster::start(|request| match request {
            Request::Submit { .. } => vec![Response::Submitted { job: JobId(5) }],
            Request::Watch { job } => [JobState::Pending, JobState::Running, JobState::Completed]
                .map(|state| Response::Job(status(job, "x", state)))
                .into(),
            _ => vec![],
        });
        let client = fake.options("alice").connect().await.unwrap();
        let spec = JobSpec::from_toml(SPEC).unwrap();
        let job = submit(&client, spec.clone()).await.unwrap();
        assert_eq!(job, JobId(5));
        let end = wait_for_end(&client, job).await.unwrap();
        assert_eq!(end.summary.state, JobState::Completed);
        connection::close(client).await;
        assert_eq!(fake.requests(), vec![Request::Submit { spec }, Request::Watch { job }]);
    }

    #[tokio::test]
    async fn a_watch_that_ends_early_falls_back_to_one_status() {
        let fake = FakeMaster::start(|request| match request {
            Request::Watch { job } => vec![Response::Job(status(job, "x", JobState::Running))],
            Request::Status { job } => vec![Response::Job(status(job, "x", JobState::Failed))],
            _ => vec![],
        });
        let client = fake.options("alice").connect().await.unwrap();
        let end = wait_for_end(&client, JobId(2)).await.unwrap();
        assert_eq!(end.summary.state, JobState::Failed);
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
            let got = run(&conn, SubmitArgs { spec: file, more: vec![], wait: true }, true).await.unwrap();
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
        let got = run(&conn, SubmitArgs { spec: file, more: vec![], wait: false }, false).await.unwrap();
        assert_eq!(got, ExitCode::from(EXIT_INVALID_SPEC));
    }

    #[test]
    fn progress_lines_count_tasks() {
        let status =
            JobStatus { summary: summary(7, JobState::Running), stages: vec![], message: None, slo: None };
        let line = progress_line(&status, Timestamp(12_500));
        assert_eq!(line, "j7 running: 4/11 tasks done, 3 running (+2.5s after submit)");
    }

    #[test]
    fn submit_json_omits_status_without_wait() {
        let value = serde_json::to_value(SubmitJson { job: "j3".into(), status: None }).unwrap();
        assert_eq!(value, serde_json::json!({"job": "j3"}));
    }
}
