//! `slotmarket status JOB`: one job's summary and per-stage task counts.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::JobStatus;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, JobStatusJson, Table};

/// Arguments of `status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The job: `j7` or `7`.
    #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) job: JobId,
}

/// Runs `status`.
pub(crate) async fn run(conn: &ConnectionArgs, args: StatusArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let status = connection::job_status(&client, args.job).await?;
    connection::close(client).await;
    if json {
        output::print_json(&JobStatusJson::from(&status))?;
    } else {
        print!("{}", render(&status));
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
        ));
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
        status.summary.predicted_finish = Some(slotmarket_common::time::Timestamp(1_800_000_000_000));
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
            predicted_finish: Some(slotmarket_common::time::Timestamp(1_800_000_000_000)),
            guaranteed: 12,
            peak_guaranteed: 20,
            finish_interval: Some((
                slotmarket_common::time::Timestamp(1_799_999_400_000),
                slotmarket_common::time::Timestamp(1_800_000_300_000),
            )),
            slowdown_permille: 1_250,
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
        assert!(!text.contains("class"), "no class outside dress: {text}");
    }

    #[test]
    fn a_job_under_dress_shows_its_demand_class() {
        let mut status =
            JobStatus { summary: summary(7, JobState::Running), stages: vec![], message: None, slo: None };
        status.summary.demand_class = Some(slotmarket_common::protocol::DemandClass::Small);
        let text = render(&status);
        assert!(text.contains("tasks      4/11 done, 3 running\nclass      SD\n"), "{text}");
    }
}
