//! `slotmarket cancel JOB…` or `slotmarket cancel --all [--state STATE]…`: cancels jobs;
//! their running tasks are killed. `--all` picks the caller's own jobs (admins too: an
//! admin cancels someone else's jobs by naming them), optionally only in some states, like
//! `scancel --user me --state pending`.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobState, JobsQuery};

use crate::connection::{self, ConnectionArgs};
use crate::{jobs, output};

/// Arguments of `cancel`.
#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The jobs: `j7` or `7`, one or more.
    #[arg(value_name = "JOB", value_parser = connection::parse_job_id, required_unless_present_any = ["all", "state"], conflicts_with = "all")]
    pub(crate) jobs: Vec<JobId>,
    /// Cancel every job of yours that has not ended (or, with --state, those in a state).
    #[arg(long)]
    pub(crate) all: bool,
    /// With --all: only jobs in this state (`pending` or `running`); repeatable.
    #[arg(long, value_parser = parse_live_state, requires = "all")]
    pub(crate) state: Vec<JobState>,
}

/// A `--state` for `cancel --all`: only a job that has not ended can be cancelled.
fn parse_live_state(text: &str) -> Result<JobState, String> {
    match jobs::parse_state(text)? {
        state @ (JobState::Pending | JobState::Running) => Ok(state),
        state => {
            Err(format!("{} jobs have ended and cannot be cancelled; use pending or running", state.name()))
        }
    }
}

/// The `--json` answer for one job named alone (the original shape).
#[derive(Debug, Serialize)]
struct CancelJson {
    /// `j7`.
    job: String,
    /// The job's state after the request: `cancelled`, or how it had already ended.
    state: &'static str,
}

/// The `--json` answer for several jobs or `--all`: one entry per job, in order.
#[derive(Debug, Serialize)]
struct CancelManyJson {
    /// Every job the request named or `--all` found.
    jobs: Vec<CancelJson>,
}

/// Runs `cancel`.
pub(crate) async fn run(conn: &ConnectionArgs, args: CancelArgs, json: bool) -> Result<ExitCode> {
    if !args.all && !args.state.is_empty() {
        bail!("--state selects among --all; name jobs or add --all");
    }
    let client = connection::connect_from_args(conn).await?;
    let single = !args.all && args.jobs.len() == 1;
    let targets = if args.all { own_unended_jobs(&client, &args.state).await? } else { args.jobs };
    let mut answers = Vec::with_capacity(targets.len());
    let mut first_error = None;
    for job in targets {
        match connection::bounded(client.cancel(job)).await.with_context(|| format!("cancelling {job}")) {
            Ok(state) => answers.push(CancelJson { job: job.to_string(), state: state.name() }),
            // Go on with the other jobs; the exit code says one failed.
            Err(err) if !single => {
                eprintln!("error: {}", output::sanitize(&format!("{err:#}")));
                first_error.get_or_insert(err);
            }
            Err(err) => return Err(err),
        }
    }
    connection::close(client).await;
    print(&answers, single, json)?;
    Ok(if first_error.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The caller's jobs that have not ended, in `states` if any are given.
async fn own_unended_jobs(client: &Client, states: &[JobState]) -> Result<Vec<JobId>> {
    let states = if states.is_empty() { vec![JobState::Pending, JobState::Running] } else { states.to_vec() };
    let query = JobsQuery { states, ..JobsQuery::default() };
    let me = client.identity().principal.clone();
    let listed = connection::bounded(client.all_jobs(query)).await.context("listing your jobs")?;
    Ok(listed
        .into_iter()
        .filter(|job| job.owner.0 == me && !job.state.is_terminal())
        .map(|job| job.id)
        .collect())
}

fn print(answers: &[CancelJson], single: bool, json: bool) -> Result<()> {
    if json {
        return match answers {
            [only] if single => output::print_json(only),
            _ => output::print_json(&CancelManyJson {
                jobs: answers.iter().map(|a| CancelJson { job: a.job.clone(), state: a.state }).collect(),
            }),
        };
    }
    if answers.is_empty() && !single {
        println!("no jobs to cancel");
    }
    for answer in answers {
        if answer.state == JobState::Cancelled.name() {
            println!("{} cancelled", answer.job);
        } else {
            // Cancelling a job that had already ended is not an error; say how it ended.
            println!("{} had already ended: {}", answer.job, answer.state);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use slotmarket_common::protocol::{JobsPage, Request, Response};

    use super::*;
    use crate::fake_master::{FakeMaster, status};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: CancelArgs,
    }

    #[test]
    fn ids_or_all_but_not_both() {
        let cli = Cli::try_parse_from(["cancel", "j3", "4"]).unwrap();
        assert_eq!(cli.args.jobs, [JobId(3), JobId(4)]);
        let cli = Cli::try_parse_from(["cancel", "--all", "--state", "pending"]).unwrap();
        assert_eq!((cli.args.all, cli.args.state), (true, vec![JobState::Pending]));
        assert!(Cli::try_parse_from(["cancel"]).is_err());
        assert!(Cli::try_parse_from(["cancel", "j3", "--all"]).is_err());
    }

    #[tokio::test]
    async fn a_state_without_all_is_refused_before_connecting() {
        let conn = ConnectionArgs { master: Some("127.0.0.1:1".into()), ..ConnectionArgs::default() };
        let args = CancelArgs { jobs: vec![JobId(3)], all: false, state: vec![JobState::Pending] };
        let err = run(&conn, args, false).await.unwrap_err().to_string();
        assert!(err.contains("--state selects among --all"), "{err}");
    }

    #[tokio::test]
    async fn all_cancels_only_the_callers_unended_jobs_in_the_asked_states() {
        let fake = FakeMaster::start(|request| match request {
            Request::Jobs(query) => {
                assert_eq!(query.states, vec![JobState::Pending]);
                let mut mine = status(JobId(1), "a", JobState::Pending).summary;
                let mut theirs = status(JobId(2), "b", JobState::Pending).summary;
                theirs.owner.0 = "bob".into();
                mine.owner.0 = "alice".into();
                vec![Response::Jobs(JobsPage { jobs: vec![mine, theirs], next: None })]
            }
            Request::Cancel { job } => vec![Response::Cancelled { job, state: JobState::Cancelled }],
            _ => vec![],
        });
        let conn = fake.conn_args("alice");
        let args = CancelArgs { jobs: vec![], all: true, state: vec![JobState::Pending] };
        assert_eq!(run(&conn, args, true).await.unwrap(), ExitCode::SUCCESS);
        let cancels: Vec<Request> =
            fake.requests().into_iter().filter(|r| matches!(r, Request::Cancel { .. })).collect();
        assert_eq!(cancels, vec![Request::Cancel { job: JobId(1) }]);
    }
}
