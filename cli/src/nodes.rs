//! `slotmarket nodes`: the agents the master knows, with slot use and whether each takes
//! new work (connected, draining, leaving, quarantined with its reason). Every user sees
//! the whole list (node names and slots, no jobs or accounts; README "Who sees what").

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use slotmarket_common::protocol::NodeSummary;
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, NodeJson, Table};

/// The `--json` document.
#[derive(Debug, Serialize)]
struct List {
    /// One entry per agent.
    nodes: Vec<NodeJson>,
}

/// Runs `nodes`.
pub(crate) async fn run(conn: &ConnectionArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let nodes = connection::bounded(client.nodes()).await.context("listing nodes")?;
    connection::close(client).await;
    if json {
        output::print_json(&List { nodes: nodes.iter().map(NodeJson::from).collect() })?;
    } else if nodes.is_empty() {
        println!("no agents registered");
    } else {
        let now = output::now();
        print!("{}", table(&nodes, now).render());
        print!("{}", quarantine_notes(&nodes, now));
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per agent; slots as used/offered.
fn table(nodes: &[NodeSummary], now: Timestamp) -> Table {
    let mut table = Table::new(&[
        ("agent", Align::Left),
        ("node", Align::Left),
        ("state", Align::Left),
        ("map", Align::Right),
        ("reduce", Align::Right),
        ("last seen", Align::Right),
    ]);
    for node in nodes {
        table.row(vec![
            node.agent.to_string(),
            node.node.clone(),
            output::node_state(node).into(),
            format!("{}/{}", node.map_used, node.map_slots),
            format!("{}/{}", node.reduce_used, node.reduce_slots),
            format!("{}s ago", output::secs(now.saturating_since(node.last_seen))),
        ]);
    }
    table
}

/// One line per quarantined node: how much longer, and why.
fn quarantine_notes(nodes: &[NodeSummary], now: Timestamp) -> String {
    let mut notes = String::new();
    for node in nodes {
        if let Some(q) = &node.quarantine {
            let left = output::secs(q.until.saturating_since(now));
            notes.push_str(&format!("{} is quarantined for another {left}s: {}\n", node.node, q.reason));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::AgentId;
    use slotmarket_common::protocol::{DrainCause, Quarantine};

    use super::*;

    #[test]
    fn nodes_table_shows_slot_use() {
        let node = NodeSummary {
            agent: AgentId(2),
            node: "node-1".into(),
            connected: true,
            map_slots: 2,
            map_used: 1,
            reduce_slots: 1,
            reduce_used: 0,
            last_seen: Timestamp(1_000),
            draining: None,
            quarantine: None,
        };
        let text = table(&[node], Timestamp(2_500)).render();
        assert_eq!(
            text,
            "agent  node    state      map  reduce  last seen\n\
             n2     node-1  connected  1/2     0/1   1.5s ago\n"
        );
    }

    #[test]
    fn draining_leaving_and_quarantined_nodes_say_so_with_the_reason() {
        let base = NodeSummary {
            agent: AgentId(1),
            node: "a".into(),
            connected: true,
            map_slots: 1,
            map_used: 0,
            reduce_slots: 0,
            reduce_used: 0,
            last_seen: Timestamp(1_000),
            draining: None,
            quarantine: None,
        };
        let quarantine = Quarantine { until: Timestamp(61_000), reason: "3 tasks failed fast".into() };
        let nodes = [
            NodeSummary { draining: Some(DrainCause::Admin), ..base.clone() },
            NodeSummary {
                agent: AgentId(2),
                node: "b".into(),
                draining: Some(DrainCause::Leaving),
                ..base.clone()
            },
            NodeSummary { agent: AgentId(3), node: "c".into(), quarantine: Some(quarantine), ..base.clone() },
            NodeSummary { agent: AgentId(4), node: "d".into(), connected: false, ..base },
        ];
        let states: Vec<&str> = nodes.iter().map(output::node_state).collect();
        assert_eq!(states, ["draining", "leaving", "quarantined", "disconnected"]);
        assert_eq!(
            quarantine_notes(&nodes, Timestamp(1_000)),
            "c is quarantined for another 60.0s: 3 tasks failed fast\n"
        );
        let json = NodeJson::from(&nodes[2]);
        assert_eq!((json.state, json.quarantined_until_ms), ("quarantined", Some(61_000)));
        assert_eq!(json.quarantine_reason.as_deref(), Some("3 tasks failed fast"));
    }
}
