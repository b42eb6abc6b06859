//! `slotmarket status JOB [--tasks]`: one job's summary and per-stage task counts; with
//! `--tasks`, every task with its node, container, attempts, state, times and exit code.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobStatus, TaskList, TaskRow};
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, JobStatusJson, Table};

/// Arguments of `status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The job: `j7` or `7`.
    #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) job: JobId,
    /// Also list every task: node, container, attempts, state, times and exit code of its
    /// latest attempt.
    #[arg(long)]
    pub(crate) tasks: bool,
}

/// Runs `status`.
pub(crate) async fn run(conn: &ConnectionArgs, args: StatusArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let status = connection::job_status(&client, args.job).await?;
    let tasks = if args.tasks {
        let job = args.job;
        Some(connection::bounded(client.tasks(job)).await.with_context(|| format!("tasks of {job}"))?)
    } else {
        None
    };
    connection::close(client).await;
    if json {
        let mut value = serde_json::to_value(JobStatusJson::from(&status)).context("encoding JSON output")?;
        if let (Some(list), Some(object)) = (&tasks, value.as_object_mut()) {
            let rows: Vec<TaskJson> = list.tasks.iter().map(TaskJson::from).collect();
            object.insert("tasks".into(), serde_json::to_value(rows).context("encoding JSON output")?);
            object.insert("tasks_truncated".into(), list.truncated.into());
        }
        output::print_json(&value)?;
    } else {
        print!("{}", render(&status));
        if let Some(list) = &tasks {
            print!("\n{}", task_table(list, status.summary.submitted).render());
            if list.truncated {
                println!("(more tasks than fit one answer; the first {} are shown)", list.tasks.len());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The human form: a key/value head, then a table of stages.
fn render(status: &JobStatus) -> String {
    let job = &status.summary;
    let mut head = vec![
        ("job", job.id.to_string()),
        ("name", job.name.clone()),
        ("account", job.account.to_string()),
        ("state", job.state.to_string()),
        ("submitted", output::clock(job.submitted)),
        ("started", output::relative(job.started, job.submitted)),
        ("finished", output::relative(job.finished, job.submitted)),
        ("deadline", crate::jobs::deadline_at(job.deadline)),
        ("owner", job.owner.to_string()),
        ("tasks", format!("{}/{} done, {} running", job.tasks_completed, job.tasks_total, job.tasks_running)),
    ];
    if job.price.is_some() || job.predicted_finish.is_some() {
        // MRM: the deadline was bought; the master's model says when it will finish.
        head.push(("predicted", crate::jobs::deadline_at(job.predicted_finish)));
        head.push(("price", job.price.map_or_else(|| "-".into(), |p| p.to_string())));
        head.push(("paid", job.paid.map_or_else(|| "-".into(), |p| p.to_string())));
    }
    if let Some(class) = job.demand_class {
        head.push(("class", class.abbreviation().to_string()));
    }
    if let Some(slo) = &status.slo {
        let finish = slo.predicted_finish.map_or_else(|| "-".into(), slotmarket_common::spec::format_rfc3339);
        head.push(("progress", format!("{:.1} %", f64::from(slo.progress_permille) / 10.0)));
        head.push(("predicted", format!("{finish} (with slack)")));
        if let Some((low, high)) = slo.finish_interval {
            let at = slotmarket_common::spec::format_rfc3339;
            head.push(("interval", format!("{} .. {} (10th-90th percentile)", at(low), at(high))));
        }
        head.push((
            "slowdown",
            format!("{:.2} × profiled task times", f64::from(slo.slowdown_permille) / 1000.0),
        ));
        head.push((
            "slots",
            format!(
                "{} guaranteed (peak {}), {} running",
                slo.guaranteed, slo.peak_guaranteed, job.tasks_running
            ),
        )); // Which curve the control loop maximises: the submitter's, or the master's.
        let utility = if slo.utility_from_spec { "own (the job spec's)" } else { "policy default" };
        head.push(("utility", utility.to_string()));
    }
    if let Some(message) = &status.message {
        head.push(("message", message.clone()));
    }
    let mut out = String::new();
    for (key, value) in head {
        // Names and the message are other people's text: never raw on the terminal.
        out.push_str(&format!("{key:<10} {}\n", output::sanitize(&value)));
    }
    out.push('\n');
    out.push_str(&stage_table(status).render());
    out
}

/// One row per stage, in spec order.
fn stage_table(status: &JobStatus) -> Table {
    let mut table = Table::new(&[
        ("stage", Align::Left),
        ("slot", Align::Left),
        ("tasks", Align::Right),
        ("pending", Align::Right),
        ("running", Align::Right),
        ("completed", Align::Right),
        ("failed", Align::Right),
    ]);
    for stage in &status.stages {
        table.row(vec![
            stage.name.clone(),
            stage.slot.to_string(),
            stage.tasks.to_string(),
            stage.pending.to_string(),
            stage.running.to_string(),
            stage.completed.to_string(),
            stage.failed_attempts.to_string(),
        ]);
    }
    table
}

/// One row per task, in stage and index order; times relative to the job's submission.
fn task_table(list: &TaskList, submitted: Timestamp) -> Table {
    let mut table = Table::new(&[
        ("task", Align::Left),
        ("state", Align::Left),
        ("node", Align::Left),
        ("container", Align::Left),
        ("attempts", Align::Right),
        ("started", Align::Right),
        ("finished", Align::Right),
        ("exit", Align::Right),
        ("message", Align::Left),
    ]);
    for task in &list.tasks {
        table.row(vec![
            output::sanitize(&format!("{}:{}", task.stage, task.index)).into_owned(),
            task.state.clone(),
            output::sanitize(task.node.as_deref().unwrap_or("-")).into_owned(),
            task.container.map_or_else(|| "-".into(), |c| c.to_string()),
            task.attempts.to_string(),
            output::relative(task.started, submitted),
            output::relative(task.finished, submitted),
            task.exit_code.map_or_else(|| "-".into(), |c| c.to_string()),
            output::sanitize(task.message.as_deref().unwrap_or("")).into_owned(),
        ]);
    }
    table
}

/// A task in `--json`: ids as printed, times in milliseconds since the epoch.
#[derive(Debug, Serialize)]
struct TaskJson {
    stage: String,
    index: u32,
    state: String,
    node: Option<String>,
    container: Option<String>,
    attempts: u32,
    started_ms: Option<u64>,
    finished_ms: Option<u64>,
    exit_code: Option<i32>,
    message: Option<String>,
}

impl From<&TaskRow> for TaskJson {
    fn from(task: &TaskRow) -> TaskJson {
        TaskJson {
            stage: task.stage.clone(),
            index: task.index,
            state: task.state.clone(),
            node: task.node.clone(),
            container: task.container.map(|c| c.to_string()),
            attempts: task.attempts,
            started_ms: task.started.map(Timestamp::as_millis),
            finished_ms: task.finished.map(Timestamp::as_millis),
            exit_code: task.exit_code,
            message: task.message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::{JobState, StageStatus};
    use slotmarket_common::spec::SlotKind;

    use super::*;
    use crate::output::tests::summary;

    #[test]
    fn status_shows_the_head_and_a_stage_table() {
        let stage = |name: &str, slot, tasks, completed| StageStatus {
            name: name.into(),
            slot,
            tasks,
            pending: tasks - completed,
            running: 0,
            completed,
            failed_attempts: 0,
        };
        let status = JobStatus {
            summary: summary(7, JobState::Failed),
            stages: vec![stage("map", SlotKind::Map, 6, 6), stage("reduce", SlotKind::Reduce, 2, 0)],
            message: Some("task j7.s1.t0 failed 4 times".into()),
            slo: None,
        };
        let text = render(&status);
        assert!(text.contains("job        j7\n"), "{text}");
        assert!(text.contains("started    +0.4s\n"), "{text}");
        assert!(text.contains("message    task j7.s1.t0 failed 4 times\n"), "{text}");
        assert!(text.contains("stage   slot    tasks  pending  running  completed  failed\n"), "{text}");
        assert!(text.contains("reduce  reduce      2        2        0          0       0\n"), "{text}");
    }

    #[test]
    fn status_shows_escape_sequences_in_names_and_messages_as_text() {
        let mut status =
            JobStatus { summary: summary(7, JobState::Failed), stages: vec![], message: None, slo: None };
        status.summary.name = "\x1b]0;pwned\x07name\nstate      completed".into();
        status.message = Some("bad\x1b[2Jthing".into());
        let text = render(&status);
        assert!(text.contains("name       \\x1b]0;pwned\\x07name\\nstate      completed\n"), "{text}");
        assert!(text.contains("message    bad\\x1b[2Jthing\n"), "{text}");
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    }

    #[test]
    fn a_job_that_bought_a_deadline_shows_its_prediction_price_and_paid() {
        let mut status =
            JobStatus { summary: summary(7, JobState::Running), stages: vec![], message: None, slo: None };
        status.summary.predicted_finish = Some(Timestamp(1_800_000_000_000));
        status.summary.price = Some("0.022223".parse().unwrap());
        status.summary.paid = status.summary.price;
        let text = render(&status);
        assert!(text.contains("predicted  2027-01-15T08:00:00Z\n"), "{text}");
        assert!(text.contains("price      0.022223\n"), "{text}");
        assert!(text.contains("paid       0.022223\n"), "{text}");
    }

    #[test]
    fn a_deadline_job_under_jockey_shows_progress_prediction_and_guarantee() {
        let mut status =
            JobStatus { summary: summary(7, JobState::Running), stages: vec![], message: None, slo: None };
        status.slo = Some(slotmarket_common::protocol::SloStatus {
            progress_permille: 425,
            predicted_finish: Some(Timestamp(1_800_000_000_000)),
            guaranteed: 12,
            peak_guaranteed: 20,
            finish_interval: Some((Timestamp(1_799_999_400_000), Timestamp(1_800_000_300_000))),
            slowdown_permille: 1_250,
            utility_from_spec: false,
        });
        let text = render(&status);
        assert!(text.contains("progress   42.5 %\n"), "{text}");
        assert!(text.contains("predicted  2027-01-15T08:00:00Z (with slack)\n"), "{text}");
        assert!(text.contains("slots      12 guaranteed (peak 20), 3 running\n"), "{text}");
        assert!(
            text.contains("interval   2027-01-15T07:50:00Z .. 2027-01-15T08:05:00Z (10th-90th percentile)\n"),
            "{text}"
        );
        assert!(text.contains("slowdown   1.25 × profiled task times\n"), "{text}");
        assert!(text.contains("utility    policy default\n"), "{text}");
        assert!(!text.contains("class"), "no class outside dress: {text}");
        if let Some(slo) = status.slo.as_mut() {
            slo.utility_from_spec = true;
        }
        assert!(render(&status).contains("utility    own (the job spec's)\n"));
    }

    #[test]
    fn a_job_under_dress_shows_its_demand_class() {
        let mut status =
            JobStatus { summary: summary(7, JobState::Running), stages: vec![], message: None, slo: None };
        status.summary.demand_class = Some(slotmarket_common::protocol::DemandClass::Small);
        let text = render(&status);
        assert!(text.contains("tasks      4/11 done, 3 running\nclass      SD\n"), "{text}");
    }

    #[test]
    fn the_task_table_shows_where_and_how_each_task_ran() {
        let ran = TaskRow {
            stage: "map".into(),
            index: 1,
            attempts: 2,
            container: Some(slotmarket_common::ids::ContainerId(5)),
            node: Some("n1".into()),
            state: "failed".into(),
            started: Some(Timestamp(1_500)),
            finished: Some(Timestamp(3_000)),
            exit_code: Some(3),
            message: Some("exit\x1b[2J 3".into()),
        };
        let waiting = TaskRow {
            index: 0,
            attempts: 0,
            container: None,
            node: None,
            state: "pending".into(),
            started: None,
            finished: None,
            exit_code: None,
            message: None,
            ..ran.clone()
        };
        let list = TaskList { tasks: vec![waiting, ran.clone()], truncated: false };
        let text = task_table(&list, Timestamp(1_000)).render();
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        assert_eq!(lines[0], "task   state    node  container  attempts  started  finished  exit  message");
        assert_eq!(lines[1], "map:0  pending  -     -                 0        -         -     -");
        assert_eq!(
            lines[2],
            "map:1  failed   n1    c5                2    +0.5s     +2.0s     3  exit\\x1b[2J 3"
        );
        let json = serde_json::to_value(TaskJson::from(&ran)).unwrap();
        assert_eq!(json["container"], "c5");
        assert_eq!(json["finished_ms"], 3_000);
    }
}
