//! `slotmarket profile NAME`: the Jockey profile of a job name (§4.1) that the master
//! builds from the recorded runs you may see: per stage its tasks, the stages it waits
//! for, task run times (mean, median, 90th percentile, longest), the share of attempts
//! that failed and its work; with the job's total work and critical path.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use slotmarket_common::protocol::ProfileView;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// Arguments of `profile`.
#[derive(Debug, Args)]
pub(crate) struct ProfileArgs {
    /// The job name (the `name` of its spec).
    name: String,
}

/// Runs `profile`.
pub(crate) async fn run(conn: &ConnectionArgs, args: ProfileArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let view = connection::bounded(client.profile(args.name.clone()))
        .await
        .with_context(|| format!("reading the profile of {:?}", args.name))?;
    connection::close(client).await;
    if json {
        output::print_json(&view)?;
    } else {
        print!("{}", render(&view));
    }
    Ok(ExitCode::SUCCESS)
}

/// The human form: a header line and one row per stage.
fn render(view: &ProfileView) -> String {
    let mut text = format!(
        "{} · {} run{} (newest {}) · work {} slot-s · critical path {}\n",
        output::sanitize(&view.name),
        view.runs,
        if view.runs == 1 { "" } else { "s" },
        view.newest_run,
        slot_secs(view.work_ms),
        secs(view.critical_path_ms),
    );
    if !view.dag_known {
        text.push_str("(no job of this name is held: stages from the newest run, barriers unknown)\n");
    }
    let mut table = Table::new(&[
        ("stage", Align::Left),
        ("slot", Align::Left),
        ("tasks", Align::Right),
        ("after", Align::Left),
        ("samples", Align::Right),
        ("mean", Align::Right),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("max", Align::Right),
        ("failed", Align::Right),
        ("work slot-s", Align::Right),
    ]);
    for s in &view.stages {
        let after = if s.after.is_empty() { "-".to_string() } else { s.after.join(",") };
        table.row(vec![
            output::sanitize(&s.name).into_owned(),
            s.slot.to_string(),
            s.tasks.to_string(),
            output::sanitize(&after).into_owned(),
            s.samples.to_string(),
            secs(s.mean_ms),
            secs(s.p50_ms),
            secs(s.p90_ms),
            secs(s.max_ms),
            format!("{:.1} %", f64::from(s.failure_permille) / 10.0),
            slot_secs(s.work_ms),
        ]);
    }
    text.push_str(&table.render());
    text
}

/// Slot-milliseconds as slot-seconds with one decimal (the unit is in the label).
fn slot_secs(ms: u64) -> String {
    format!("{:.1}", ms as f64 / 1000.0)
}

/// Milliseconds as seconds with one decimal.
fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::JobId;
    use slotmarket_common::protocol::StageProfileView;
    use slotmarket_common::spec::SlotKind;

    use super::*;

    #[test]
    fn the_table_shows_every_stage_with_its_barriers() {
        let stage = |name: &str, after: &[&str]| StageProfileView {
            name: name.into(),
            slot: SlotKind::Map,
            tasks: 4,
            after: after.iter().map(|a| a.to_string()).collect(),
            samples: 8,
            mean_ms: 2_500,
            p50_ms: 2_000,
            p90_ms: 4_000,
            max_ms: 4_500,
            failure_permille: 125,
            work_ms: 10_000,
        };
        let view = ProfileView {
            name: "etl".into(),
            runs: 2,
            newest_run: JobId(7),
            dag_known: false,
            work_ms: 20_000,
            critical_path_ms: 9_000,
            stages: vec![stage("extract", &[]), stage("load", &["extract"])],
        };
        let text = render(&view);
        assert!(
            text.starts_with("etl · 2 runs (newest j7) · work 20.0 slot-s · critical path 9.0s\n"),
            "{text}"
        );
        assert!(text.contains("barriers unknown"), "{text}");
        let load = text.lines().find(|l| l.starts_with("load")).unwrap_or_default();
        assert!(load.contains("extract") && load.contains("12.5 %") && load.contains("4.5s"), "{load}");
    }
}
