//! `slotmarket submit JOB.toml [MORE.toml…] [--wait] [--after JOB] [--time-limit D]
//! [--earliest | --deadline T | --max-price P]`: validates every spec locally (so typos
//! are caught before any connection is made), submits it and prints the job id; with a
//! choice, buys that deadline under MRM admission (a refusal names the best alternative
//! now); several specs go over one connection; with `--wait`, follows the jobs until they
//! end.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{ChoiceRefusal, DeadlineChoice, JobState, JobStatus, Purchase, QuotePoint};
use slotmarket_common::spec::{DeadlineSpec, JobSpec, SpecError, TimeLimit, format_rfc3339, validate};
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
    /// More job specs: all are submitted over one connection, many requests in flight at
    /// once, and their ids printed in order; `--wait` then follows every one.
    #[arg(value_name = "MORE.toml")]
    pub(crate) more: Vec<PathBuf>,
    /// Follow the job until it ends; exit 0 only if it completed.
    #[arg(long)]
    pub(crate) wait: bool,
    /// Buy the earliest feasible deadline, whatever it costs (MRM admission).
    #[arg(long, conflicts_with_all = ["deadline", "max_price"])]
    pub(crate) earliest: bool,
    /// Buy this deadline: `+20m` from now or an RFC 3339 time (refused if infeasible).
    #[arg(long, value_name = "T", conflicts_with = "max_price")]
    pub(crate) deadline: Option<DeadlineSpec>,
    /// Buy the earliest deadline costing at most P credits.
    #[arg(long, value_name = "P")]
    pub(crate) max_price: Option<Credits>,
    /// Start only once these jobs completed (fail if one does not); added to the spec's
    /// `after`; repeatable.
    #[arg(long, value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) after: Vec<JobId>,
    /// Kill the tasks and fail the job once it has run this long (`10m`, `1h30m`);
    /// overrides the spec's `time_limit`.
    #[arg(long, value_name = "DURATION")]
    pub(crate) time_limit: Option<TimeLimit>,
}

impl SubmitArgs {
    /// The deadline to buy, if the user chose one.
    fn choice(&self, now: Timestamp) -> Option<DeadlineChoice> {
        match (self.earliest, self.deadline, self.max_price) {
            (true, _, _) => Some(DeadlineChoice::Earliest),
            (_, Some(at), _) => Some(DeadlineChoice::Deadline(at.resolve(now))),
            (_, _, Some(max)) => Some(DeadlineChoice::MaxPrice(max)),
            _ => None,
        }
    }
}

/// Exit code for a choice the master refused (nothing was admitted or charged).
const EXIT_REFUSED: u8 = 3;

/// The `--json` answer: the id, plus the final status with `--wait`.
#[derive(Debug, Serialize)]
struct SubmitJson {
    /// `j7`.
    job: String,
    /// With a choice: the deadline bought (ms since the Unix epoch) and its price.
    #[serde(skip_serializing_if = "Option::is_none")]
    purchase: Option<PurchaseJson>,
    /// The final status, with `--wait`.
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<JobStatusJson>,
}

/// Runs `submit`.
pub(crate) async fn run(conn: &ConnectionArgs, args: SubmitArgs, json: bool) -> Result<ExitCode> {
    if !args.more.is_empty() {
        return run_many(conn, args, json).await;
    }
    let Some(spec) = read_spec(&args.spec, &args)? else {
        return Ok(ExitCode::from(EXIT_INVALID_SPEC));
    };
    let choice = args.choice(output::now());
    submit_spec(conn, spec, choice, args.wait, json).await
}

/// `spec` with the `--after` and `--time-limit` flags applied, validated again.
fn with_flags(mut spec: JobSpec, args: &SubmitArgs) -> Result<JobSpec, SpecError> {
    spec.after.extend(&args.after);
    spec.time_limit = args.time_limit.or(spec.time_limit);
    validate(&spec)?;
    Ok(spec)
}

/// Connects, submits `spec` (buying `choice`, if any) and prints the id; with `wait`,
/// follows the job to its end (reconnecting across a master restart) and exits 0 only if
/// it completed. `run` shares it.
pub(crate) async fn submit_spec(
    conn: &ConnectionArgs,
    spec: JobSpec,
    choice: Option<DeadlineChoice>,
    wait: bool,
    json: bool,
) -> Result<ExitCode> {
    let options = connection::ClientOptions::from_args(conn)?;
    let mut client = options.connect().await?;
    if wait && choice.is_none() {
        return submit_and_follow(&options, client, spec, json).await;
    }
    let (job, purchase) = match choice {
        None => (submit(&client, spec).await?, None),
        Some(choice) => match buy(&client, spec, choice).await? {
            Ok(bought) => (bought.job, Some(PurchaseJson::from(&bought))),
            Err(refusal) => {
                connection::close(client).await;
                return refused(&refusal, json);
            }
        },
    };
    if !wait {
        connection::close(client).await;
        if json {
            output::print_json(&SubmitJson { job: job.to_string(), purchase, status: None })?;
        } else {
            println!("{}", bought_line(job, purchase.as_ref()));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut ctrl_c = wait::CtrlC::listen()?;
    if !json {
        println!("{}", bought_line(job, purchase.as_ref()));
    }
    let status = wait::follow(&options, &mut client, job, wait::FollowTimes::default(), &mut ctrl_c).await?;
    connection::close(client).await;
    report_end(&status, purchase, json)?;
    Ok(if status.summary.state == JobState::Completed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `submit --wait` without a deadline choice: submits and follows over one stream
/// ([`Client::submit_watch`]), so the master makes the admission and, for a short job,
/// its end durable in one sync; prints what `submit` and then `wait` would.
async fn submit_and_follow(
    options: &connection::ClientOptions,
    mut client: Client,
    spec: JobSpec,
    json: bool,
) -> Result<ExitCode> {
    let name = spec.name.clone();
    let (job, watch) = connection::bounded(client.submit_watch(spec))
        .await
        .with_context(|| format!("submitting job \"{name}\""))?;
    let mut ctrl_c = wait::CtrlC::listen()?;
    if !json {
        println!("{job}");
    }
    let times = wait::FollowTimes::default();
    let status = wait::follow_from(options, &mut client, job, times, Some(watch), &mut ctrl_c).await?;
    connection::close(client).await;
    report_end(&status, None, json)?;
    Ok(if status.summary.state == JobState::Completed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Sends the spec; answers the new job's id.
pub(crate) async fn submit(client: &Client, spec: JobSpec) -> Result<JobId> {
    let name = spec.name.clone();
    connection::bounded(client.submit(spec)).await.with_context(|| format!("submitting job \"{name}\""))
}

/// Sends the spec buying `choice`: the purchase, or the master's refusal.
async fn buy(
    client: &Client,
    spec: JobSpec,
    choice: DeadlineChoice,
) -> Result<Result<Purchase, ChoiceRefusal>> {
    let name = spec.name.clone();
    connection::bounded(client.submit_choosing(spec, choice))
        .await
        .with_context(|| format!("submitting job \"{name}\" with a deadline choice"))
}

/// Prints a refusal (its reason names the alternatives) and answers [`EXIT_REFUSED`].
fn refused(refusal: &ChoiceRefusal, json: bool) -> Result<ExitCode> {
    if json {
        let point =
            |p: &QuotePoint| PointJson { deadline_ms: p.deadline.as_millis(), price: p.price.to_string() };
        output::print_json(&RefusalJson {
            refused: refusal.reason.clone(),
            earliest: refusal.earliest.as_ref().map(point),
            affordable: refusal.affordable.as_ref().map(point),
        })?;
    } else {
        eprintln!("error: the master refused the choice: {}", output::sanitize(&refusal.reason));
    }
    Ok(ExitCode::from(EXIT_REFUSED))
}

/// `j7`, or `j7 deadline 2026-…Z price 0.02` after a purchase.
fn bought_line(job: JobId, purchase: Option<&PurchaseJson>) -> String {
    match purchase {
        Some(p) => format!("{job} deadline {} price {}", format_rfc3339(Timestamp(p.deadline_ms)), p.price),
        None => job.to_string(),
    }
}

/// What a purchase bought, for JSON.
#[derive(Debug, Serialize)]
pub(crate) struct PurchaseJson {
    /// The deadline, in milliseconds since the Unix epoch.
    deadline_ms: u64,
    /// Its price in credits, charged to the job's account.
    price: String,
    /// The earliest feasible finish at the time, in milliseconds since the Unix epoch.
    earliest_ms: u64,
}

impl From<&Purchase> for PurchaseJson {
    fn from(p: &Purchase) -> PurchaseJson {
        PurchaseJson {
            deadline_ms: p.deadline.as_millis(),
            price: p.price.to_string(),
            earliest_ms: p.earliest.as_millis(),
        }
    }
}

/// A deadline and its price, for JSON.
#[derive(Debug, Serialize)]
struct PointJson {
    /// Milliseconds since the Unix epoch.
    deadline_ms: u64,
    /// Credits.
    price: String,
}

/// A refused choice, for JSON.
#[derive(Debug, Serialize)]
struct RefusalJson {
    /// Why, with the alternatives named.
    refused: String,
    /// The earliest feasible finish now and its price.
    earliest: Option<PointJson>,
    /// The earliest deadline the balance (or the maximum asked) buys.
    affordable: Option<PointJson>,
}

/// `j7 running: 4/11 tasks done, 2 running (+3.2s after submit)`; the time is when it
/// ended, or `now` while it runs. A job that bought a deadline adds its predicted finish,
/// which moves when its tasks run slower than estimated.
pub(crate) fn progress_line(status: &JobStatus, now: Timestamp) -> String {
    let job = &status.summary;
    let since = job.finished.unwrap_or(now);
    // Tasks are counted from placement, the job runs from the first task's start: in
    // between say "starting", not "pending … 1 running".
    let state =
        if job.state == JobState::Pending && job.tasks_running > 0 { "starting" } else { job.state.name() };
    let mut line = format!(
        "{} {}: {}/{} tasks done, {} running ({} after submit)",
        job.id,
        state,
        job.tasks_completed,
        job.tasks_total,
        job.tasks_running,
        output::relative(Some(since), job.submitted)
    );
    if let (Some(predicted), Some(deadline)) = (job.predicted_finish, job.deadline) {
        line.push_str(&format!(
            "; predicted finish {} (deadline {})",
            output::relative(Some(predicted), job.submitted),
            output::relative(Some(deadline), job.submitted)
        ));
    }
    line
}

/// Prints how the job ended.
pub(crate) fn report_end(status: &JobStatus, purchase: Option<PurchaseJson>, json: bool) -> Result<()> {
    let job = &status.summary;
    if json {
        let answer = SubmitJson { job: job.id.to_string(), purchase, status: Some(status.into()) };
        return output::print_json(&answer);
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
    if args.earliest || args.deadline.is_some() || args.max_price.is_some() {
        bail!("--earliest, --deadline and --max-price buy one job's deadline: submit one spec with them");
    }
    let mut specs = Vec::with_capacity(1 + args.more.len());
    for path in std::iter::once(&args.spec).chain(&args.more) {
        match read_spec(path, &args)? {
            Some(spec) => specs.push(spec),
            None => return Ok(ExitCode::from(EXIT_INVALID_SPEC)),
        }
    }
    let options = connection::ClientOptions::from_args(conn)?;
    let mut client = options.connect().await?;
    let code = submit_many(&options, &mut client, specs, args.wait, json).await;
    connection::close(client).await;
    code
}

/// Submits several specs over one connection and prints their ids in order (a JSON
/// array with `--json`); a refused spec is reported on stderr and makes the exit code 1,
/// the others are still submitted. With `wait`, follows every submitted job to its end.
async fn submit_many(
    options: &connection::ClientOptions,
    client: &mut Client,
    specs: Vec<JobSpec>,
    wait: bool,
    json: bool,
) -> Result<ExitCode> {
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
    let mut ctrl_c = if wait { Some(wait::CtrlC::listen()?) } else { None };
    let mut answers = Vec::with_capacity(jobs.len());
    for &job in &jobs {
        if !json {
            println!("{job}");
        }
        answers.push(SubmitJson { job: job.to_string(), purchase: None, status: None });
    }
    if let Some(ctrl_c) = &mut ctrl_c {
        for (answer, &job) in answers.iter_mut().zip(&jobs) {
            let status = wait::follow(options, client, job, wait::FollowTimes::default(), ctrl_c).await?;
            all_ok &= status.summary.state == JobState::Completed;
            if !json {
                report_end(&status, None, false)?;
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
fn read_spec(path: &std::path::Path, args: &SubmitArgs) -> Result<Option<JobSpec>> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading job spec {shown}"))?;
    match JobSpec::from_toml(&text).and_then(|spec| with_flags(spec, args)) {
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
        SubmitArgs {
            spec: files[0].clone(),
            more: files[1..].to_vec(),
            wait,
            earliest: false,
            deadline: None,
            max_price: None,
            after: vec![],
            time_limit: None,
        }
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
        let conn = fake.conn_args("alice");
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
        let options = fake.options("alice");
        let mut client = options.connect().await.unwrap();
        let spec = JobSpec::from_toml(SPEC).unwrap();
        let job = submit(&client, spec.clone()).await.unwrap();
        assert_eq!(job, JobId(5));
        let mut ctrl_c = wait::CtrlC::listen().unwrap();
        let end = wait::follow(&options, &mut client, job, wait::FollowTimes::default(), &mut ctrl_c)
            .await
            .unwrap();
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
                Request::SubmitWatch { .. } => {
                    vec![Response::Submitted { job: JobId(1) }, Response::Job(status(JobId(1), "x", state))]
                }
                _ => vec![],
            });
            let file = fake.certs.path().join("job.toml");
            std::fs::write(&file, SPEC).unwrap();
            let conn = fake.conn_args("alice");
            let got = run(
                &conn,
                SubmitArgs {
                    spec: file,
                    more: vec![],
                    wait: true,
                    earliest: false,
                    deadline: None,
                    max_price: None,
                    after: vec![],
                    time_limit: None,
                },
                true,
            )
            .await
            .unwrap();
            assert_eq!(got, code, "{state}");
        }
    }

    #[tokio::test]
    async fn submit_wait_submits_and_follows_over_one_stream_and_a_lost_stream_is_followed_again() {
        // The first stream ends after the id while the job runs (a master restarting);
        // the status says running, so the CLI watches again until the end.
        let fake = FakeMaster::start(|request| match request {
            Request::SubmitWatch { .. } => vec![
                Response::Submitted { job: JobId(3) },
                Response::Job(status(JobId(3), "x", JobState::Pending)),
            ],
            Request::Status { job } => vec![Response::Job(status(job, "x", JobState::Running))],
            Request::Watch { job } => vec![Response::Job(status(job, "x", JobState::Completed))],
            _ => vec![],
        });
        let options = fake.options("alice");
        let client = options.connect().await.unwrap();
        let spec = JobSpec::from_toml(SPEC).unwrap();
        let got = submit_and_follow(&options, client, spec.clone(), true).await.unwrap();
        assert_eq!(got, ExitCode::SUCCESS);
        let requests = fake.requests();
        assert_eq!(requests[0], Request::SubmitWatch { spec });
        assert!(!requests.iter().any(|r| matches!(r, Request::Submit { .. })), "{requests:?}");
        assert_eq!(requests.last(), Some(&Request::Watch { job: JobId(3) }));
    }

    #[tokio::test]
    async fn a_refused_choice_exits_three_and_a_bought_one_sends_the_choice() {
        use slotmarket_common::protocol::{ChoiceRefusal, Purchase};
        let fake = FakeMaster::start(|request| match request {
            Request::SubmitChoosing { choice: DeadlineChoice::Earliest, .. } => {
                vec![Response::Purchased(Purchase {
                    job: JobId(4),
                    deadline: Timestamp(9_000),
                    price: Credits(5),
                    earliest: Timestamp(9_000),
                })]
            }
            Request::SubmitChoosing { .. } => vec![Response::ChoiceRefused(ChoiceRefusal {
                reason: "too dear; the earliest feasible finish now is X".into(),
                earliest: None,
                affordable: None,
            })],
            _ => vec![],
        });
        let file = fake.certs.path().join("job.toml");
        std::fs::write(&file, SPEC).unwrap();
        let conn = fake.conn_args("alice");
        let args = |earliest, max_price| SubmitArgs {
            spec: file.clone(),
            more: vec![],
            wait: false,
            earliest,
            deadline: None,
            max_price,
            after: vec![],
            time_limit: None,
        };
        assert_eq!(run(&conn, args(true, None), true).await.unwrap(), ExitCode::SUCCESS);
        let refused = run(&conn, args(false, Some(Credits(1))), false).await.unwrap();
        assert_eq!(refused, ExitCode::from(EXIT_REFUSED));
        let sent: Vec<_> = fake
            .requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::SubmitChoosing { choice, .. } => Some(choice),
                _ => None,
            })
            .collect();
        assert_eq!(sent, vec![DeadlineChoice::Earliest, DeadlineChoice::MaxPrice(Credits(1))]);
    }

    #[tokio::test]
    async fn an_invalid_spec_exits_two_before_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, SPEC.replace("tasks = 2", "tasks = 0")).unwrap();
        // No master and no certificates: validation must fail first.
        let conn = ConnectionArgs { master: Some("127.0.0.1:1".into()), ..ConnectionArgs::default() };
        let got = run(
            &conn,
            SubmitArgs {
                spec: file,
                more: vec![],
                wait: false,
                earliest: false,
                deadline: None,
                max_price: None,
                after: vec![],
                time_limit: None,
            },
            false,
        )
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
    fn progress_lines_of_a_bought_deadline_show_the_predicted_finish() {
        let mut status =
            JobStatus { summary: summary(7, JobState::Running), stages: vec![], message: None, slo: None };
        status.summary.predicted_finish = Some(Timestamp(72_500));
        let line = progress_line(&status, Timestamp(12_500));
        assert_eq!(
            line,
            "j7 running: 4/11 tasks done, 3 running (+2.5s after submit); predicted finish +62.5s (deadline +60.0s)"
        );
    }

    #[test]
    fn submit_json_omits_status_without_wait() {
        let value =
            serde_json::to_value(SubmitJson { job: "j3".into(), purchase: None, status: None }).unwrap();
        assert_eq!(value, serde_json::json!({"job": "j3"}));
    }
}
