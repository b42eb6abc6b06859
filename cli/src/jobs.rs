//! `slotmarket jobs`: the caller's jobs (every job for admins), oldest first.

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use slotmarket_common::protocol::JobSummary;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, JobJson, Table};

/// The `--json` document.
#[derive(Debug, Serialize)]
struct List {
    /// One entry per job, oldest first.
    jobs: Vec<JobJson>,
}

/// Runs `jobs`.
pub(crate) async fn run(conn: &ConnectionArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let jobs = connection::bounded(client.jobs()).await.context("listing jobs")?;
    connection::close(client).await;
    if json {
        output::print_json(&List { jobs: jobs.iter().map(JobJson::from).collect() })?;
    } else if jobs.is_empty() {
        println!("no jobs");
    } else {
        print!("{}", table(&jobs).render());
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per job; start and end are shown relative to submission.
fn table(jobs: &[JobSummary]) -> Table {
    let mut table = Table::new(&[
        ("job", Align::Left),
        ("name", Align::Left),
        ("account", Align::Left),
        ("state", Align::Left),
        ("submitted", Align::Left),
        ("started", Align::Right),
        ("finished", Align::Right),
        ("tasks", Align::Right),
        ("running", Align::Right),
    ]);
    for job in jobs {
        table.row(vec![
            job.id.to_string(),
            job.name.clone(),
            job.account.to_string(),
            job.state.to_string(),
            output::clock(job.submitted),
            output::relative(job.started, job.submitted),
            output::relative(job.finished, job.submitted),
            format!("{}/{}", job.tasks_completed, job.tasks_total),
            job.tasks_running.to_string(),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::JobState;

    use super::*;
    use crate::output::tests::summary;

    #[test]
    fn jobs_table_has_one_row_per_job() {
        let text = table(&[summary(1, JobState::Running), summary(12, JobState::Pending)]).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("job  name       account  state    submitted"), "{text}");
        assert!(lines[1].starts_with("j1   wordcount  demo     running  "), "{text}");
        assert!(lines[2].ends_with("+0.4s         -   4/11        3"), "{text}");
    }
}
