//! `slotmarket jobs`: a page of the caller's jobs (every job for admins). By default the
//! newest few, oldest of them first; `--all` walks every job page by page; `--state` and
//! `--account` filter. The master answers in pages that fit its frame limit, whatever the
//! number of jobs.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::AccountId;
use slotmarket_common::protocol::{DemandClass, JobState, JobSummary, JobsQuery};
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, JobJson, Table};

/// Arguments of `jobs`.
#[derive(Debug, Args)]
pub(crate) struct JobsArgs {
    /// How many of the newest jobs to list.
    #[arg(
        long,
        default_value_t = JobsQuery::DEFAULT_LIMIT,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..),
        conflicts_with = "all"
    )]
    limit: u32,
    /// List every job, oldest first (fetched page by page).
    #[arg(long)]
    all: bool,
    /// Only jobs in these states (comma-separated: pending, running, completed, failed, cancelled).
    #[arg(long, value_delimiter = ',', value_parser = parse_state, value_name = "STATE")]
    state: Vec<JobState>,
    /// Only jobs running on this account.
    #[arg(long, value_name = "NAME")]
    account: Option<String>,
}

/// The `--json` document.
#[derive(Debug, Serialize)]
struct List {
    /// One entry per job, oldest first.
    jobs: Vec<JobJson>,
}

/// Runs `jobs`.
pub(crate) async fn run(conn: &ConnectionArgs, args: JobsArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let listed = list(&client, args).await;
    connection::close(client).await;
    let jobs = listed.context("listing jobs")?;
    if json {
        output::print_json(&List { jobs: jobs.iter().map(JobJson::from).collect() })?;
    } else if jobs.is_empty() {
        println!("no jobs");
    } else {
        print!("{}", table(&jobs).render());
    }
    Ok(ExitCode::SUCCESS)
}

/// The jobs `args` select, oldest first: every one with `--all`, else the newest
/// `--limit` (over as many pages as the master needs to send them).
async fn list(client: &Client, args: JobsArgs) -> Result<Vec<JobSummary>> {
    let query = JobsQuery {
        newest_first: !args.all,
        after: None,
        limit: args.limit,
        states: args.state,
        account: args.account.map(AccountId),
    };
    if args.all {
        return connection::bounded(client.all_jobs(query)).await;
    }
    let newest = connection::bounded(client.first_jobs(query)).await?;
    Ok(newest.into_iter().rev().collect())
}

/// A state's name as written in tables.
pub(crate) fn parse_state(text: &str) -> Result<JobState, String> {
    JobState::from_name(text).ok_or_else(|| {
        let known: Vec<&str> = JobState::ALL.iter().map(|s| s.name()).collect();
        format!("unknown state \"{text}\"; use one of {}", known.join(", "))
    })
}

/// One row per job; start, end and deadline are shown relative to submission. When a
/// job in the list bought a deadline (MRM), three more columns: the predicted finish
/// (also relative), the price and what was paid. A `class` column (DRESS's SD/LD) is
/// added when any listed job has one.
fn table(jobs: &[JobSummary]) -> Table {
    let market = jobs.iter().any(|j| j.price.is_some() || j.predicted_finish.is_some());
    let mut columns = vec![
        ("job", Align::Left),
        ("name", Align::Left),
        ("account", Align::Left),
        ("state", Align::Left),
        ("submitted", Align::Left),
        ("started", Align::Right),
        ("finished", Align::Right),
        ("deadline", Align::Right),
        ("tasks", Align::Right),
        ("running", Align::Right),
    ];
    if market {
        columns.extend([("predicted", Align::Right), ("price", Align::Right), ("paid", Align::Right)]);
    }
    let classed = jobs.iter().any(|j| j.demand_class.is_some());
    if classed {
        columns.push(("class", Align::Left));
    }
    let mut table = Table::new(&columns);
    for job in jobs {
        let mut row = vec![
            job.id.to_string(),
            job.name.clone(),
            job.account.to_string(),
            job.state.to_string(),
            output::clock(job.submitted),
            output::relative(job.started, job.submitted),
            output::relative(job.finished, job.submitted),
            deadline_cell(job),
            format!("{}/{}", job.tasks_completed, job.tasks_total),
            job.tasks_running.to_string(),
        ];
        if market {
            row.extend(market_cells(job));
        }
        if classed {
            row.push(job.demand_class.map_or("-", DemandClass::abbreviation).to_string());
        }
        table.row(row);
    }
    table
}

/// Predicted finish (relative to submission), price and paid, `-` where there is none.
pub(crate) fn market_cells(job: &JobSummary) -> [String; 3] {
    let credits =
        |c: Option<slotmarket_common::money::Credits>| c.map_or_else(|| "-".into(), |c| c.to_string());
    let predicted = match job.predicted_finish {
        Some(at) => output::relative(Some(at), job.submitted),
        None => "-".into(),
    };
    [predicted, credits(job.price), credits(job.paid)]
}

/// The deadline relative to submission, like the other times, with `met` or `missed`
/// once the job ended.
pub(crate) fn deadline_cell(job: &JobSummary) -> String {
    let Some(deadline) = job.deadline else { return "-".into() };
    let shown = output::relative(Some(deadline), job.submitted);
    match (job.state, job.finished) {
        (JobState::Completed, Some(end)) if end <= deadline => format!("{shown} met"),
        (_, Some(_)) => format!("{shown} missed"),
        _ => shown,
    }
}

/// When the job's deadline is, for the status head: an absolute UTC time.
pub(crate) fn deadline_at(deadline: Option<Timestamp>) -> String {
    deadline.map_or_else(|| "-".into(), slotmarket_common::spec::format_rfc3339)
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::JobId;
    use slotmarket_common::protocol::{JobsPage, Request, Response};

    use super::*;
    use crate::fake_master::FakeMaster;
    use crate::output::tests::summary;

    /// A fake master holding jobs 1..=`n`, answering newest first in pages of at most 2
    /// (as the real one cuts a page of long names short of the limit asked).
    fn paging_master(n: u64) -> FakeMaster {
        FakeMaster::start(move |request| {
            let Request::Jobs(query) = request else { return vec![] };
            let below = query.after.map_or(n + 1, |after| after.0);
            let ids: Vec<u64> = (1..below).rev().take(query.limit.clamp(1, 2) as usize).collect();
            let next = ids.last().filter(|&&last| last > 1).map(|&last| JobId(last));
            let jobs = ids.into_iter().map(|id| summary(id, JobState::Completed)).collect();
            vec![Response::Jobs(JobsPage { jobs, next })]
        })
    }

    fn newest(limit: u32) -> JobsArgs {
        JobsArgs { limit, all: false, state: vec![], account: None }
    }

    #[tokio::test]
    async fn a_limit_follows_short_pages_until_it_has_that_many_jobs() {
        let fake = paging_master(5);
        let client = fake.options("alice").connect().await.unwrap();
        let ids = |jobs: Vec<JobSummary>| jobs.iter().map(|j| j.id.0).collect::<Vec<_>>();
        assert_eq!(ids(list(&client, newest(3)).await.unwrap()), [3, 4, 5]);
        // Asking for more than there are stops at the last page.
        assert_eq!(ids(list(&client, newest(10)).await.unwrap()), [1, 2, 3, 4, 5]);
        client.close().await;
        let asked: Vec<(Option<JobId>, u32)> = fake
            .requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::Jobs(query) => Some((query.after, query.limit)),
                _ => None,
            })
            .collect();
        let after = |id| Some(JobId(id));
        assert_eq!(asked, [(None, 3), (after(4), 1), (None, 10), (after(4), 8), (after(2), 6)]);
    }

    #[test]
    fn jobs_table_has_one_row_per_job() {
        let text = table(&[summary(1, JobState::Running), summary(12, JobState::Pending)]).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("job  name       account  state    submitted"), "{text}");
        assert!(lines[1].starts_with("j1   wordcount  demo     running  "), "{text}");
        assert!(lines[2].ends_with("+0.4s         -    +60.0s   4/11        3"), "{text}");
        assert!(!lines[0].contains("class"), "no class column outside dress: {text}");
    }

    #[test]
    fn under_dress_the_jobs_table_has_a_class_column() {
        let classed = |id, class| JobSummary { demand_class: class, ..summary(id, JobState::Running) };
        let jobs =
            [classed(1, Some(DemandClass::Large)), classed(2, Some(DemandClass::Small)), classed(3, None)];
        let text = table(&jobs).render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("tasks  running  class"), "{text}");
        assert!(lines[1].ends_with("4/11        3  LD"), "{text}");
        assert!(lines[2].ends_with("4/11        3  SD"), "{text}");
        assert!(lines[3].ends_with("4/11        3  -"), "{text}");
    }

    #[test]
    fn a_job_that_bought_a_deadline_adds_predicted_price_and_paid_columns() {
        let mut bought = summary(2, JobState::Running);
        bought.predicted_finish = Some(Timestamp(65_000));
        (bought.price, bought.paid) = (Some("0.5".parse().unwrap()), Some("0.5".parse().unwrap()));
        let text = table(&[summary(1, JobState::Running), bought]).render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("running  predicted  price  paid"), "{text}");
        assert!(lines[1].ends_with("3          -      -     -"), "{text}");
        assert!(lines[2].ends_with("3     +55.0s   0.50  0.50"), "{text}");
    }

    #[test]
    fn the_deadline_cell_says_whether_an_ended_job_met_it() {
        let mut job = summary(1, JobState::Completed);
        job.finished = Some(Timestamp(69_000));
        assert_eq!(deadline_cell(&job), "+60.0s met");
        job.finished = Some(Timestamp(71_000));
        assert_eq!(deadline_cell(&job), "+60.0s missed");
        job.deadline = None;
        assert_eq!(deadline_cell(&job), "-");
    }

    #[test]
    fn states_parse_by_name() {
        assert_eq!(parse_state("running"), Ok(JobState::Running));
        assert!(parse_state("done").unwrap_err().contains("pending, running"));
    }
}
