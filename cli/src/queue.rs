//! `slotmarket queue`: the jobs with pending tasks in the order the master's policy serves
//! them, with the reason each waits (like `squeue`'s REASON): `dependency` (on jobs it runs
//! after), `barrier` (its later stages wait for earlier ones), `priority` (a job ahead
//! wants the same slots), `resources` (no slot of its kind is free) or `policy` (slots are
//! free but the policy holds them back). Other users' jobs show their place, not their
//! name or owner.

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use slotmarket_common::protocol::{QueueEntry, QueueView};
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// The `--json` answer.
#[derive(Debug, Serialize)]
struct QueueJson {
    /// The policy whose order this is.
    policy: String,
    /// First served first.
    jobs: Vec<EntryJson>,
}

/// One job of the queue, for JSON.
#[derive(Debug, Serialize)]
struct EntryJson {
    /// `j7`.
    job: String,
    /// Null for a job the caller may not see.
    name: Option<String>,
    /// Null for a job the caller may not see.
    owner: Option<String>,
    /// `pending` or `running`.
    state: &'static str,
    /// Map tasks neither running nor completed.
    pending_map: u32,
    /// Reduce tasks neither running nor completed.
    pending_reduce: u32,
    /// `dependency`, `barrier`, `priority`, `resources` or `policy`.
    reason: &'static str,
    /// The jobs it still waits for (`dependency`), as `j3`.
    waiting_for: Vec<String>,
    /// Milliseconds since the Unix epoch, or null.
    deadline_ms: Option<u64>,
}

impl From<&QueueEntry> for EntryJson {
    fn from(entry: &QueueEntry) -> EntryJson {
        EntryJson {
            job: entry.job.to_string(),
            name: entry.name.clone(),
            owner: entry.owner.as_ref().map(|o| o.0.clone()),
            state: entry.state.name(),
            pending_map: entry.pending_map,
            pending_reduce: entry.pending_reduce,
            reason: entry.reason.name(),
            waiting_for: entry.waiting_for.iter().map(|j| j.to_string()).collect(),
            deadline_ms: entry.deadline.map(|d| d.0),
        }
    }
}

/// Runs `queue`.
pub(crate) async fn run(conn: &ConnectionArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let view = connection::bounded(client.queue()).await.context("reading the queue")?;
    connection::close(client).await;
    if json {
        let jobs = view.entries.iter().map(EntryJson::from).collect();
        output::print_json(&QueueJson { policy: view.policy.clone(), jobs })?;
    } else {
        print!("{}", render(&view, output::now()));
    }
    Ok(ExitCode::SUCCESS)
}

/// The human form: the policy, then one row per job.
fn render(view: &QueueView, now: Timestamp) -> String {
    if view.entries.is_empty() {
        return format!("policy {}: no pending work\n", view.policy);
    }
    let mut table = Table::new(&[
        ("job", Align::Left),
        ("name", Align::Left),
        ("owner", Align::Left),
        ("state", Align::Left),
        ("map", Align::Right),
        ("reduce", Align::Right),
        ("deadline", Align::Right),
        ("reason", Align::Left),
    ]);
    for entry in &view.entries {
        let mut reason = entry.reason.name().to_string();
        if !entry.waiting_for.is_empty() {
            let jobs: Vec<String> = entry.waiting_for.iter().map(|j| j.to_string()).collect();
            reason.push_str(&format!(" ({})", jobs.join(", ")));
        }
        table.row(vec![
            entry.job.to_string(),
            entry.name.clone().unwrap_or_else(|| "-".into()),
            entry.owner.as_ref().map_or_else(|| "-".into(), |o| o.0.clone()),
            entry.state.name().into(),
            entry.pending_map.to_string(),
            entry.pending_reduce.to_string(),
            entry.deadline.map_or_else(|| "-".into(), |d| output::relative(Some(d), now)),
            reason,
        ]);
    }
    format!("policy {}\n{}", view.policy, table.render())
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::{AccountId, JobId};
    use slotmarket_common::protocol::{JobState, WaitReason};

    use super::*;

    fn entry(job: u64, reason: WaitReason, waiting_for: Vec<JobId>) -> QueueEntry {
        QueueEntry {
            job: JobId(job),
            name: (job != 3).then(|| format!("n{job}")),
            owner: (job != 3).then(|| AccountId("alice".into())),
            state: JobState::Pending,
            pending_map: 2,
            pending_reduce: 1,
            reason,
            waiting_for,
            deadline: (job == 1).then_some(Timestamp(70_000)),
        }
    }

    #[test]
    fn rows_show_order_reasons_and_hide_what_others_own() {
        let view = QueueView {
            policy: "fifo".into(),
            entries: vec![
                entry(1, WaitReason::Resources, vec![]),
                entry(3, WaitReason::Priority, vec![]),
                entry(4, WaitReason::Dependency, vec![JobId(1), JobId(3)]),
            ],
        };
        let text = render(&view, Timestamp(10_000));
        let expected = "policy fifo\n\
            job  name  owner  state    map  reduce  deadline  reason\n\
            j1   n1    alice  pending    2       1    +60.0s  resources\n\
            j3   -     -      pending    2       1         -  priority\n\
            j4   n4    alice  pending    2       1         -  dependency (j1, j3)\n";
        assert_eq!(text, expected);
        let json = serde_json::to_value(EntryJson::from(&view.entries[2])).unwrap();
        assert_eq!(json["waiting_for"], serde_json::json!(["j1", "j3"]));
        assert_eq!(json["reason"], "dependency");
        let empty = QueueView { policy: "edf".into(), entries: vec![] };
        assert_eq!(render(&empty, Timestamp(0)), "policy edf: no pending work\n");
    }
}
