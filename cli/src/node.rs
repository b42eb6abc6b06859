//! `slotmarket node drain|undrain NAME` (admins): stop giving a node new work while its
//! running tasks finish, or give it work again. Draining outlives reconnects of the
//! node's agent, not a master restart; undrain also lifts a quarantine.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use serde::Serialize;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, NodeJson};

/// What to do to a node.
#[derive(Debug, Subcommand)]
pub(crate) enum NodeCommand {
    /// Give the node no new work; its running tasks finish (admin only).
    Drain {
        /// The node's name, as `slotmarket nodes` shows it.
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Give a drained or quarantined node work again (admin only).
    Undrain {
        /// The node's name, as `slotmarket nodes` shows it.
        #[arg(value_name = "NAME")]
        name: String,
    },
}

/// The `--json` answer.
#[derive(Debug, Serialize)]
struct NodeAnswer {
    /// The node after the request.
    node: NodeJson,
}

/// Runs `node drain` or `node undrain`.
pub(crate) async fn run(conn: &ConnectionArgs, command: NodeCommand, json: bool) -> Result<ExitCode> {
    let (name, drain) = match &command {
        NodeCommand::Drain { name } => (name.as_str(), true),
        NodeCommand::Undrain { name } => (name.as_str(), false),
    };
    let verb = if drain { "draining" } else { "undraining" };
    let client = connection::connect_from_args(conn).await?;
    let node =
        connection::bounded(client.drain(name, drain)).await.with_context(|| format!("{verb} node {name}"));
    connection::close(client).await;
    let node = node?;
    if json {
        output::print_json(&NodeAnswer { node: NodeJson::from(&node) })?;
    } else {
        println!("{} ({}): {}", node.node, node.agent, output::node_state(&node));
    }
    Ok(ExitCode::SUCCESS)
}
