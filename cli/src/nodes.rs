//! `slotmarket nodes`: the agents the master knows, with slot use. Every user sees the
//! whole list (node names and slots, no jobs or accounts; README "Who sees what").

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
        print!("{}", table(&nodes, output::now()).render());
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
            if node.connected { "connected" } else { "disconnected" }.into(),
            format!("{}/{}", node.map_used, node.map_slots),
            format!("{}/{}", node.reduce_used, node.reduce_slots),
            format!("{}s ago", output::secs(now.saturating_since(node.last_seen))),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::AgentId;

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
        };
        let text = table(&[node], Timestamp(2_500)).render();
        assert_eq!(
            text,
            "agent  node    state      map  reduce  last seen\n\
             n2     node-1  connected  1/2     0/1   1.5s ago\n"
        );
    }
}
