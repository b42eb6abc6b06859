//! Draining: an agent that says it is leaving, and admins draining or undraining a node.
//!
//! - **Leaving** (the agent got SIGTERM): it takes no new work, and its containers are
//!   handed back at once: their tasks are requeued elsewhere without counting an attempt
//!   (not against `max_attempts`, not in `failed_attempts`); the agent kills them itself,
//!   and its `Killed` reports are then ignored as late. When it disconnects it is
//!   forgotten at once, without waiting for the silence timeout.
//! - **Admin drain** (`slotmarket node drain NAME`): the node takes no new work; its
//!   running tasks are left to finish. It stays drained across reconnects of its agent
//!   (not across a master restart) until `slotmarket node undrain NAME`, which also lifts
//!   a quarantine.

use slotmarket_common::identity::Role;
use slotmarket_common::ids::AgentId;
use slotmarket_common::protocol::{DrainCause, ErrorKind, Response};

use super::reports::lose_container;
use super::{Ctx, health};
use crate::core::state::State;
use crate::core::view::node_summary;
use crate::core::{Caller, RequestId};

/// The agent said it is stopping: no new work, and its tasks go elsewhere now.
pub(super) fn on_agent_leaving(state: &mut State, cx: &mut Ctx, agent: AgentId) {
    let Some(a) = state.agents.get_mut(&agent) else { return };
    a.last_seen = cx.now;
    a.drain = Some(DrainCause::Leaving);
    let containers = a.containers.clone();
    state.sync_free_index(agent);
    for container in containers {
        lose_container(state, cx, container, "handed back: its agent is leaving", None);
    }
}

/// An admin drains (`drain`) or undrains a node; answered with the node's state.
pub(super) fn on_node_drain_requested(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    node: &str,
    drain: bool,
) {
    let verb = if drain { "drain" } else { "undrain" };
    if caller.role != Role::Admin {
        let message = format!("{caller} may not {verb} nodes; only admins may");
        return cx.reply(request, Response::error(ErrorKind::Forbidden, message));
    }
    let Some(&agent) = state.nodes.get(node) else {
        let message = format!("no agent is registered as node \"{node}\"; see `slotmarket nodes`");
        return cx.reply(request, Response::error(ErrorKind::NotFound, message));
    };
    let Some(a) = state.agents.get_mut(&agent) else { return };
    match (drain, a.drain) {
        (_, Some(DrainCause::Leaving)) => {
            let message = format!("node \"{node}\" is leaving (its agent is stopping)");
            return cx.reply(request, Response::error(ErrorKind::BadRequest, message));
        }
        (true, _) => {
            a.drain = Some(DrainCause::Admin);
            state.drained_nodes.insert(node.to_string());
            state.sync_free_index(agent);
        }
        (false, _) => {
            a.drain = None;
            state.drained_nodes.remove(node);
            health::lift(state, agent);
        }
    }
    let Some(a) = state.agents.get(&agent) else { return };
    cx.reply(request, Response::Node(node_summary(agent, a)));
}
