//! `slotmarket deadline set JOB T` and `deadline clear JOB`: move a running job's deadline
//! (or drop it). Under the `jockey` policy the job's allocation follows at the next
//! control step.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use serde::Serialize;
use slotmarket_common::ids::JobId;
use slotmarket_common::spec::{DeadlineSpec, format_rfc3339};
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output;

/// The `deadline` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum DeadlineCommand {
    /// Give a job a new deadline: `+20m` from now, or an RFC 3339 time.
    Set {
        /// The job: `j7` or `7`.
        #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
        job: JobId,
        /// `+30m`, `+1h30m` (from now, by this machine's clock) or `2026-11-22T18:00:00Z`.
        #[arg(value_name = "T")]
        deadline: DeadlineSpec,
    },
    /// Drop a job's deadline.
    Clear {
        /// The job: `j7` or `7`.
        #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
        job: JobId,
    },
}

/// The `--json` answer.
#[derive(Debug, Serialize)]
struct DeadlineJson {
    /// `j7`.
    job: String,
    /// The deadline now in force, in milliseconds since the Unix epoch, or null.
    deadline_ms: Option<u64>,
}

/// Runs `deadline set` or `deadline clear`.
pub(crate) async fn run(conn: &ConnectionArgs, command: DeadlineCommand, json: bool) -> Result<ExitCode> {
    let (job, deadline) = match command {
        DeadlineCommand::Set { job, deadline } => (job, Some(deadline.resolve(output::now()))),
        DeadlineCommand::Clear { job } => (job, None),
    };
    let client = connection::connect_from_args(conn).await?;
    let now_in_force = connection::bounded(client.set_deadline(job, deadline))
        .await
        .with_context(|| format!("setting the deadline of {job}"))?;
    connection::close(client).await;
    if json {
        output::print_json(&DeadlineJson {
            job: job.to_string(),
            deadline_ms: now_in_force.map(Timestamp::as_millis),
        })?;
    } else {
        match now_in_force {
            Some(at) => println!("{job} deadline {}", format_rfc3339(at)),
            None => println!("{job} has no deadline"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
