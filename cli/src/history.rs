//! `slotmarket history [--name NAME]`: recorded runs of ended jobs, newest first: when
//! they ran, how long they waited and took, what their tasks took and the slot time they
//! used. Estimates and profiles learn from the same records.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::protocol::{HistoryQuery, JobHistory, StageHistory};

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// Arguments of `history`.
#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Only runs of jobs with this name.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Most runs to show, newest first (fetched in as many pages as the master needs).
    #[arg(long, default_value_t = 50, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
}

/// The `--json` document.
#[derive(Debug, Serialize)]
struct List {
    /// Newest first.
    runs: Vec<RunJson>,
}

/// One recorded run, for JSON: ids and states spelled as in `jobs --json`, times in
/// milliseconds since the Unix epoch.
#[derive(Debug, Serialize, PartialEq)]
struct RunJson {
    id: String,
    name: String,
    account: String,
    class: Option<&'static str>,
    state: &'static str,
    submitted_ms: u64,
    started_ms: Option<u64>,
    finished_ms: u64,
    deadline_ms: Option<u64>,
    input_bytes: Option<u64>,
    wait_ms: Option<u64>,
    completion_ms: u64,
    map_slot_ms: u64,
    reduce_slot_ms: u64,
    /// Per stage: the stage's own record (`run_ms` and `attempts` per task, by index).
    stages: Vec<StageHistory>,
}

impl From<&JobHistory> for RunJson {
    fn from(run: &JobHistory) -> RunJson {
        RunJson {
            id: run.job.to_string(),
            name: run.name.clone(),
            account: run.account.0.clone(),
            class: run.class.map(|c| c.name()),
            state: run.state.name(),
            submitted_ms: run.submitted.as_millis(),
            started_ms: run.started.map(|t| t.as_millis()),
            finished_ms: run.finished.as_millis(),
            deadline_ms: run.deadline.map(|t| t.as_millis()),
            input_bytes: run.input_bytes,
            wait_ms: run.wait_ms(),
            completion_ms: run.completion_ms(),
            map_slot_ms: run.slot_ms[0],
            reduce_slot_ms: run.slot_ms[1],
            stages: run.stages.clone(),
        }
    }
}

/// Runs `history`.
pub(crate) async fn run(conn: &ConnectionArgs, args: HistoryArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let query = HistoryQuery { name: args.name, before: None, limit: args.limit };
    let runs = connection::bounded(client.history(query)).await.context("reading job history")?;
    connection::close(client).await;
    if json {
        output::print_json(&List { runs: runs.iter().map(RunJson::from).collect() })?;
    } else if runs.is_empty() {
        println!("no recorded runs");
    } else {
        print!("{}", table(&runs).render());
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per run.
fn table(runs: &[JobHistory]) -> Table {
    let mut table = Table::new(&[
        ("job", Align::Left),
        ("name", Align::Left),
        ("account", Align::Left),
        ("state", Align::Left),
        ("finished", Align::Left),
        ("wait", Align::Right),
        ("took", Align::Right),
        ("tasks", Align::Right),
        ("task mean", Align::Right),
        ("slot-s", Align::Right),
    ]);
    for run in runs {
        table.row(vec![
            run.job.to_string(),
            run.name.clone(),
            run.account.to_string(),
            run.state.to_string(),
            output::clock(run.finished),
            run.wait_ms().map_or_else(|| "-".into(), millis),
            millis(run.completion_ms()),
            run.tasks().to_string(),
            mean_task_ms(run).map_or_else(|| "-".into(), millis),
            format!("{:.1}", run.slot_secs()),
        ]);
    }
    table
}

/// Mean run time of the tasks that completed.
fn mean_task_ms(run: &JobHistory) -> Option<u64> {
    let times: Vec<u64> = run.stages.iter().flat_map(|s| s.run_ms.iter().flatten().copied()).collect();
    (!times.is_empty()).then(|| times.iter().sum::<u64>() / times.len() as u64)
}

fn millis(ms: u64) -> String {
    format!("{}s", output::secs(std::time::Duration::from_millis(ms)))
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::{AccountId, JobId};
    use slotmarket_common::protocol::{HistoryPage, JobState, Request, Response, RunCursor};
    use slotmarket_common::spec::SlotKind;
    use slotmarket_common::time::Timestamp;

    use super::*;
    use crate::fake_master::FakeMaster;

    fn run(job: u64, finished: u64) -> JobHistory {
        JobHistory {
            job: JobId(job),
            name: "wc".into(),
            account: AccountId("alice".into()),
            class: None,
            state: JobState::Completed,
            submitted: Timestamp(0),
            started: None,
            finished: Timestamp(finished),
            deadline: None,
            input_bytes: None,
            slot_ms: [0, 0],
            stages: vec![],
        }
    }

    /// A fake master holding runs of jobs 1..=`n` (job k finished at k seconds),
    /// answering newest first in pages of at most 2 (as the real one cuts a page of large
    /// runs short of the limit asked).
    fn paging_master(n: u64) -> FakeMaster {
        FakeMaster::start(move |request| {
            let Request::History(query) = request else { return vec![] };
            let below = query.before.map_or(n + 1, |before| before.job.0);
            let runs: Vec<JobHistory> =
                (1..below).rev().take(query.limit.clamp(1, 2) as usize).map(|k| run(k, k * 1000)).collect();
            let next = runs.last().filter(|last| last.job.0 > 1).map(RunCursor::of);
            vec![Response::History(HistoryPage { runs, next })]
        })
    }

    #[tokio::test]
    async fn a_limit_follows_short_pages_until_it_has_that_many_runs() {
        let fake = paging_master(5);
        let client = fake.options("alice").connect().await.unwrap();
        let jobs = |runs: Vec<JobHistory>| runs.iter().map(|r| r.job.0).collect::<Vec<_>>();
        let newest = |limit| HistoryQuery { name: None, before: None, limit };
        assert_eq!(jobs(client.history(newest(3)).await.unwrap()), [5, 4, 3]);
        // Asking for more than there are stops at the last page.
        assert_eq!(jobs(client.history(newest(1500)).await.unwrap()), [5, 4, 3, 2, 1]);
        client.close().await;
        let asked: Vec<(Option<u64>, u32)> = fake
            .requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::History(query) => Some((query.before.map(|b| b.job.0), query.limit)),
                _ => None,
            })
            .collect();
        assert_eq!(asked, [(None, 3), (Some(4), 1), (None, 1500), (Some(4), 1498), (Some(2), 1496)]);
    }

    #[test]
    fn a_run_shows_its_wait_length_and_task_mean() {
        let run = JobHistory {
            job: JobId(4),
            name: "wc".into(),
            account: AccountId("alice".into()),
            class: None,
            state: JobState::Completed,
            submitted: Timestamp(10_000),
            started: Some(Timestamp(10_500)),
            finished: Timestamp(20_000),
            deadline: None,
            input_bytes: None,
            slot_ms: [6_000, 2_500],
            stages: vec![StageHistory {
                name: "map".into(),
                slot: SlotKind::Map,
                run_ms: vec![Some(3_000), Some(1_000), None],
                attempts: vec![1, 2, 4],
            }],
        };
        let text = table(std::slice::from_ref(&run)).render();
        let row = text.lines().nth(1).unwrap();
        assert!(row.starts_with("j4   wc    alice    completed"), "{text}");
        assert!(row.ends_with("0.5s  10.0s      3       2.0s     8.5"), "{text}");
        let json = serde_json::to_value(RunJson::from(&run)).unwrap();
        assert_eq!(
            (&json["id"], &json["state"], &json["wait_ms"]),
            (&"j4".into(), &"completed".into(), &500.into())
        );
        assert_eq!(
            (&json["map_slot_ms"], &json["stages"][0]["run_ms"][2]),
            (&6_000.into(), &serde_json::Value::Null)
        );
    }
}
