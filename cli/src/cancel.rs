//! `slotmarket cancel JOB`: cancels a job; its running tasks are killed.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::JobState;

use crate::connection::{self, ConnectionArgs};
use crate::output;

/// Arguments of `cancel`.
#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The job: `j7` or `7`.
    #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) job: JobId,
}

/// The `--json` answer.
#[derive(Debug, Serialize)]
struct CancelJson {
    /// `j7`.
    job: String,
    /// The job's state after the request: `cancelled`, or how it had already ended.
    state: &'static str,
}

/// Runs `cancel`.
pub(crate) async fn run(conn: &ConnectionArgs, args: CancelArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let job = args.job;
    let state = connection::bounded(client.cancel(job)).await.with_context(|| format!("cancelling {job}"))?;
    connection::close(client).await;
    if json {
        output::print_json(&CancelJson { job: job.to_string(), state: state.name() })?;
    } else if state == JobState::Cancelled {
        println!("{job} cancelled");
    } else {
        // Cancelling a job that had already ended is not an error; say how it ended.
        println!("{job} had already ended: {state}");
    }
    Ok(ExitCode::SUCCESS)
}
