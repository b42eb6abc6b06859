//! `slotmarket cleanup [JOB…]`: removes ended jobs' directories (their outputs) and their
//! containers' logs from the agents now, instead of `[cleanup] retain_s` after they
//! ended. Without JOB: every ended job of yours not removed yet. The job's owner or an
//! admin only; a node that is away is told when it registers again.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::JobCleanup;

use crate::connection::{self, ConnectionArgs};
use crate::output;

/// Arguments of `cleanup`.
#[derive(Debug, Args)]
pub(crate) struct CleanupArgs {
    /// The jobs: `j7` or `7`; every ended job of yours not cleaned up yet if none.
    #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) jobs: Vec<JobId>,
}

/// One job in `--json`.
#[derive(Debug, Serialize)]
struct CleanupJson {
    job: String,
    removed_on: Vec<String>,
    pending_on: Vec<String>,
}

/// Runs `cleanup`.
pub(crate) async fn run(conn: &ConnectionArgs, args: CleanupArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let done = connection::bounded(client.cleanup(args.jobs)).await.context("cleaning up");
    connection::close(client).await;
    print(&done?, json)?;
    Ok(ExitCode::SUCCESS)
}

fn print(done: &[JobCleanup], json: bool) -> Result<()> {
    if json {
        let jobs: Vec<CleanupJson> = done
            .iter()
            .map(|d| CleanupJson {
                job: d.job.to_string(),
                removed_on: d.removed_on.clone(),
                pending_on: d.pending_on.clone(),
            })
            .collect();
        return output::print_json(&jobs);
    }
    if done.is_empty() {
        println!("no ended jobs left to clean up");
    }
    for job in done {
        let mut line = format!("{}: removed on {}", job.job, list(&job.removed_on));
        if !job.pending_on.is_empty() {
            line.push_str(&format!(
                "; pending on {} (not connected; removed when they return)",
                list(&job.pending_on)
            ));
        }
        println!("{}", output::sanitize(&line));
    }
    Ok(())
}

/// Node names joined, or `no node` for none.
fn list(nodes: &[String]) -> String {
    if nodes.is_empty() { "no node".into() } else { nodes.join(", ") }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::{Request, Response};

    use super::*;
    use crate::fake_master::FakeMaster;

    #[tokio::test]
    async fn the_named_jobs_are_sent_and_the_answer_is_shown() {
        let fake = FakeMaster::start(|request| match request {
            Request::Cleanup { jobs } => vec![Response::CleanedUp(
                jobs.into_iter()
                    .map(|job| JobCleanup {
                        job,
                        removed_on: vec!["n1".into()],
                        pending_on: vec!["n2".into()],
                    })
                    .collect(),
            )],
            _ => vec![],
        });
        let args = CleanupArgs { jobs: vec![JobId(3), JobId(4)] };
        assert_eq!(run(&fake.conn_args("alice"), args, true).await.unwrap(), ExitCode::SUCCESS);
        assert_eq!(fake.requests(), vec![Request::Cleanup { jobs: vec![JobId(3), JobId(4)] }]);
    }

    #[tokio::test]
    async fn a_refusal_is_an_error() {
        let fake = FakeMaster::start(|_| {
            vec![Response::error(slotmarket_common::protocol::ErrorKind::BadRequest, "job j3 is running")]
        });
        let err =
            run(&fake.conn_args("alice"), CleanupArgs { jobs: vec![JobId(3)] }, false).await.unwrap_err();
        assert!(format!("{err:#}").contains("job j3 is running"), "{err:#}");
    }

    #[test]
    fn nodes_are_listed_or_none_said() {
        assert_eq!(list(&[]), "no node");
        assert_eq!(list(&["a".into(), "b".into()]), "a, b");
    }
}
