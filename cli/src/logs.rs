//! `slotmarket logs JOB [STAGE[:TASK]] [--stderr] [--follow]`: a task's stdout (or
//! stderr) as written by its latest attempt, read in bounded chunks from the agent that
//! ran it, through the master. `--follow` keeps reading until the attempt has ended.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::protocol::{LogChunk, LogQuery, MAX_LOG_CHUNK};

use crate::connection::{self, ConnectionArgs};
use crate::output;

/// How long `--follow` waits before asking again when nothing new was written.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// Arguments of `logs`.
#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// The job: `j7` or `7`.
    #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) job: JobId,
    /// The task: `STAGE` (its task 0) or `STAGE:TASK`, e.g. `map:3`; the first stage's
    /// task 0 if left out.
    #[arg(value_name = "STAGE[:TASK]", value_parser = parse_task)]
    pub(crate) task: Option<TaskRef>,
    /// Show stderr instead of stdout.
    #[arg(long)]
    pub(crate) stderr: bool,
    /// Keep reading as the task writes, until its attempt ends.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
}

/// A task named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TaskRef {
    /// The stage's name.
    pub(crate) stage: String,
    /// The task's index; 0 if not given.
    pub(crate) index: Option<u32>,
}

/// Parses `STAGE` or `STAGE:TASK`; the clap value parser.
fn parse_task(text: &str) -> Result<TaskRef, String> {
    let (stage, index) = match text.rsplit_once(':') {
        Some((stage, index)) => {
            let index =
                index.parse::<u32>().map_err(|_| format!("\"{index}\" is not a task index; write map:3"))?;
            (stage, Some(index))
        }
        None => (text, None),
    };
    if stage.is_empty() {
        return Err("name the stage before the task index, e.g. map:3".into());
    }
    Ok(TaskRef { stage: stage.to_string(), index })
}

/// A log in `--json`: the container and its text (invalid UTF-8 replaced).
#[derive(Debug, Serialize)]
struct LogJson {
    container: String,
    stream: &'static str,
    text: String,
}

/// Runs `logs`.
pub(crate) async fn run(conn: &ConnectionArgs, args: LogsArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let mut query = LogQuery {
        job: args.job,
        stage: args.task.as_ref().map(|t| t.stage.clone()),
        task: args.task.as_ref().and_then(|t| t.index),
        stderr: args.stderr,
        offset: 0,
        max: MAX_LOG_CHUNK,
    };
    let result = if json {
        read_all(&client, &mut query).await.and_then(|(container, data)| {
            let stream = if args.stderr { "stderr" } else { "stdout" };
            let text = String::from_utf8_lossy(&data).into_owned();
            output::print_json(&LogJson { container: container.to_string(), stream, text })
        })
    } else {
        copy_to_stdout(&client, &mut query, args.follow).await
    };
    connection::close(client).await;
    result.map(|()| ExitCode::SUCCESS)
}

/// Asks for one chunk at `query.offset`.
async fn chunk(client: &Client, query: &LogQuery) -> Result<LogChunk> {
    let job = query.job;
    connection::bounded(client.log(query.clone())).await.with_context(|| format!("log of {job}"))
}

/// The whole log as it is now.
async fn read_all(client: &Client, query: &mut LogQuery) -> Result<(ContainerId, Vec<u8>)> {
    let mut data = Vec::new();
    loop {
        let read = chunk(client, query).await?;
        if read.data.is_empty() {
            return Ok((read.container, data));
        }
        query.offset = read.next_offset;
        data.extend_from_slice(&read.data);
    }
}

/// Writes the log to stdout as it is read; with `follow`, until the attempt has ended
/// and everything it wrote is out. A retry of the task (a new container) starts over
/// from its beginning, with a note on stderr.
async fn copy_to_stdout(client: &Client, query: &mut LogQuery, follow: bool) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    let mut container = None;
    loop {
        let read = chunk(client, query).await?;
        if container.is_some_and(|c| c != read.container) {
            eprintln!("-- the task was retried in {}; its log from the start --", read.container);
            query.offset = 0;
            container = Some(read.container);
            continue;
        }
        container = Some(read.container);
        if !read.data.is_empty() {
            // The caller's own task output, passed through as `cat` would.
            stdout.write_all(&read.data).context("writing to stdout")?;
            query.offset = read.next_offset;
            continue;
        }
        stdout.flush().context("writing to stdout")?;
        if !follow || read.ended {
            return Ok(());
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_a_stage_with_an_optional_index() {
        assert_eq!(parse_task("map"), Ok(TaskRef { stage: "map".into(), index: None }));
        assert_eq!(parse_task("map:3"), Ok(TaskRef { stage: "map".into(), index: Some(3) }));
        assert!(parse_task("map:x").unwrap_err().contains("not a task index"));
        assert!(parse_task(":3").is_err());
    }
}
