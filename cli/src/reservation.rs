//! `slotmarket reservation`: the slots the master's policy holds for a set of jobs (DRESS:
//! δ of each slot kind for small-demand jobs), with δ, reserved and free slots per kind,
//! the container releases predicted over the next interval per class, and the
//! small-demand jobs the caller may see (every other running job is large-demand).

use std::process::ExitCode;

use anyhow::{Context, Result};
use slotmarket_common::protocol::ReservationView;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// Runs `reservation`.
pub(crate) async fn run(conn: &ConnectionArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let view = connection::bounded(client.reservation()).await.context("reading the reservation")?;
    connection::close(client).await;
    if json {
        output::print_json(&view)?;
    } else {
        print!("{}", render(&view));
    }
    Ok(ExitCode::SUCCESS)
}

/// The human form: a header line, one row per reserved kind, the predictions and jobs.
fn render(view: &ReservationView) -> String {
    let mut text = format!("policy {}", view.policy);
    if let Some(delta) = view.delta {
        text.push_str(&format!(" · δ {:.1} %", delta * 100.0));
    }
    text.push('\n');
    if view.kinds.is_empty() {
        text.push_str("no slots reserved\n");
        return text;
    }
    let mut table = Table::new(&[
        ("slot", Align::Left),
        ("total", Align::Right),
        ("reserved", Align::Right),
        ("reserved in use", Align::Right),
        ("free", Align::Right),
    ]);
    for k in &view.kinds {
        table.row(vec![
            k.kind.to_string(),
            k.total.to_string(),
            k.reserved.to_string(),
            k.reserved_used.to_string(),
            k.free.to_string(),
        ]);
    }
    text.push_str(&table.render());
    if let (Some(small), Some(large)) = (view.predicted_small, view.predicted_large) {
        text.push_str(&format!(
            "predicted releases over the next interval: small-demand {small:.1}, large-demand {large:.1}\n"
        ));
    }
    let jobs: Vec<String> = view.small_jobs.iter().map(|j| j.to_string()).collect();
    let jobs = if jobs.is_empty() { "none".to_string() } else { jobs.join(" ") };
    text.push_str(&format!("small-demand jobs: {jobs}\n"));
    text
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::JobId;
    use slotmarket_common::protocol::ReservedKind;
    use slotmarket_common::spec::SlotKind;

    use super::*;

    #[test]
    fn the_table_shows_delta_the_partition_and_the_predictions() {
        let view = ReservationView {
            policy: "dress".into(),
            delta: Some(0.125),
            kinds: vec![ReservedKind {
                kind: SlotKind::Map,
                total: 40,
                reserved: 5,
                reserved_used: 3,
                free: 2,
            }],
            predicted_small: Some(1.0),
            predicted_large: Some(4.25),
            small_jobs: vec![JobId(3), JobId(7)],
        };
        assert_eq!(
            render(&view),
            "policy dress · δ 12.5 %\n\
             slot  total  reserved  reserved in use  free\n\
             map      40         5                3     2\n\
             predicted releases over the next interval: small-demand 1.0, large-demand 4.2\n\
             small-demand jobs: j3 j7\n"
        );
    }

    #[test]
    fn a_policy_without_reservations_says_so() {
        let view = ReservationView {
            policy: "fifo".into(),
            delta: None,
            kinds: Vec::new(),
            predicted_small: None,
            predicted_large: None,
            small_jobs: Vec::new(),
        };
        assert_eq!(render(&view), "policy fifo\nno slots reserved\n");
    }
}
