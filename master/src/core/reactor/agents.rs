//! Agent handlers: registration (replacing an older registration of the same node and
//! adopting the containers that kept running), heartbeats, disconnects, and the loss of
//! agents and recovered containers whose silence passed the timeout (with the outputs a
//! local-mode agent held, see `outputs`).

use std::time::Duration;

use slotmarket_common::ids::{AgentId, ContainerId};
use slotmarket_common::protocol::{ContainerReport, DataMode, DrainCause};
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::reports::{apply_transition, lose_container};
use super::{Ctx, health, outputs};
use crate::core::command::{Command, KillReason};
use crate::core::state::{Agent, Holder, State, kind_ix};

/// The fields of `Event::AgentJoined`.
pub(super) struct Join {
    pub(super) agent: AgentId,
    pub(super) node: String,
    pub(super) map_slots: u32,
    pub(super) reduce_slots: u32,
    pub(super) live_containers: Vec<ContainerReport>,
    pub(super) data_mode: DataMode,
    pub(super) data_dir_id: String,
}

/// Registers an agent. An older registration of the same node is replaced: containers
/// the new one lists are adopted, the rest of the old one's are lost; recovered
/// containers of the node that it does not list are lost too.
pub(super) fn on_agent_joined(state: &mut State, cx: &mut Ctx, join: Join) {
    if state.agents.contains_key(&join.agent) {
        // The driver never reuses a registration id; a repeat is a duplicate delivery.
        return;
    }
    let Join { agent, node, map_slots, reduce_slots, live_containers, data_mode, data_dir_id } = join;
    let disk = (data_mode.clone(), data_dir_id.clone());
    step_over_listed_ids(state, &live_containers);
    let old = state.nodes.get(&node).copied();
    let mut registration = Agent::new(node.clone(), map_slots, reduce_slots, cx.now);
    registration.data_mode = data_mode;
    registration.data_dir_id = data_dir_id;
    if state.drained_nodes.contains(&node) {
        registration.drain = Some(DrainCause::Admin);
    }
    state.agents.insert(agent, registration);
    state.sync_free_index(agent);
    state.nodes.insert(node.clone(), agent);
    for report in live_containers {
        adopt(state, cx, agent, old, &node, report);
    }
    if let Some(old) = old {
        retire(state, cx, old, &format!("replaced by a new registration {agent} of node {node}"), None);
    }
    let unlisted: Vec<ContainerId> = state.orphans.get(&node).into_iter().flatten().copied().collect();
    for container in unlisted {
        lose_container(state, cx, container, "not running on its node after the master restarted", None);
    }
    outputs::on_registered(state, cx, &node, (&disk.0, &disk.1), old.is_some());
}

/// Moves the next container id above every id the agent lists, so that even a master
/// whose clock stepped back since an earlier lifetime (see `CoreConfig::container_epoch`)
/// does not hand out an id the agent still knows. Ids far beyond any epoch are ignored
/// rather than allowed to exhaust the id space.
fn step_over_listed_ids(state: &mut State, listed: &[ContainerReport]) {
    const PLAUSIBLE: u64 = 1 << 62;
    let highest = listed.iter().map(|r| r.container.0).filter(|&id| id < PLAUSIBLE).max();
    if let Some(highest) = highest {
        state.next_container = state.next_container.max(highest + 1);
    }
}

/// Takes over one container the joining agent says is alive: it must be one the core
/// still tracks on the old registration of this node (or as a recovered orphan of it),
/// for the same task and attempt. Anything else is killed.
fn adopt(
    state: &mut State,
    cx: &mut Ctx,
    agent: AgentId,
    old: Option<AgentId>,
    node: &str,
    report: ContainerReport,
) {
    let container = report.container;
    let known = state.containers.get(&container).filter(|rec| {
        let ours = match &rec.holder {
            Holder::Agent(a) => Some(*a) == old || *a == agent,
            Holder::Orphan { node: n, .. } => n == node,
        };
        ours && rec.task == report.task && rec.attempt == report.attempt
    });
    let Some(rec) = known.cloned() else {
        if !report.state.is_terminal() {
            hold_stray(state, agent, &report);
            cx.push(Command::Kill { agent, container, reason: KillReason::Unknown });
        }
        return;
    };
    if report.state.is_terminal() {
        // It ended while the agent was away; its last report settles the task (a task
        // that completed must not run again) and frees the old holder's slot.
        if report.state > rec.state && !rec.state.is_terminal() {
            let node = state.holder_node(&rec.holder);
            apply_transition(state, cx, report, &node);
        }
        return;
    }
    if rec.holder != Holder::Agent(agent) {
        let has_slot = state.agents.get(&agent).is_some_and(|a| a.free(rec.kind) > 0);
        if !has_slot {
            let reason = KillReason::NoSlotToAdopt;
            lose_container(state, cx, container, &reason.to_string(), None);
            return cx.push(Command::Kill { agent, container, reason });
        }
        let Some(mut moved) = state.detach(container) else { return };
        moved.holder = Holder::Agent(agent);
        // A kill sent to the old connection may never have arrived.
        moved.kill_sent = false;
        state.attach(container, moved);
    }
    // The agent lists its latest state, possibly several steps ahead of ours.
    if report.state > rec.state {
        let node = state.holder_node(&Holder::Agent(agent));
        apply_transition(state, cx, report, &node);
    }
    if let Some(rec) = state.containers.get_mut(&container) {
        if rec.draining && !rec.kill_sent {
            rec.kill_sent = true;
            cx.push(Command::Kill { agent, container, reason: KillReason::JobEnded });
        }
    }
}

/// Counts a container the master is about to kill as unknown against the agent's slots
/// until it reports it ended. Its slot kind comes from its job; a container of a job the
/// master no longer has (say, its database was lost) could hold either kind, so it holds
/// one free slot of each: otherwise launches sent there until the kill lands would only
/// be refused, over and over.
fn hold_stray(state: &mut State, agent: AgentId, report: &ContainerReport) {
    let task = report.task;
    let kind = state.jobs.get(&task.job).and_then(|j| j.stages.get(task.stage.0 as usize)).map(|s| s.kind);
    let Some(a) = state.agents.get_mut(&agent) else { return };
    if a.strays.contains_key(&report.container) {
        return;
    }
    let kinds: Vec<SlotKind> = match kind {
        Some(kind) => vec![kind],
        None => SlotKind::ALL.to_vec(),
    };
    let held: Vec<SlotKind> = kinds.into_iter().filter(|&k| a.free(k) > 0).collect();
    if held.is_empty() {
        return;
    }
    for &kind in &held {
        a.used[kind_ix(kind)] += 1;
    }
    a.strays.insert(report.container, held);
    state.sync_free_index(agent);
}

/// Frees the slot of a stray container once the agent reports it ended.
pub(super) fn release_stray(state: &mut State, agent: AgentId, report: &ContainerReport) -> bool {
    let Some(a) = state.agents.get_mut(&agent) else { return false };
    if !report.state.is_terminal() {
        return false;
    }
    let Some(kinds) = a.strays.remove(&report.container) else { return false };
    for kind in kinds {
        a.used[kind_ix(kind)] -= 1;
    }
    state.sync_free_index(agent);
    true
}

/// Notes a sign of life.
pub(super) fn on_agent_heartbeat(state: &mut State, cx: &mut Ctx, agent: AgentId) {
    if let Some(a) = state.agents.get_mut(&agent) {
        a.last_seen = cx.now;
    }
}

/// The connection closed: no new launches there, but its containers are kept until it
/// reconnects or its silence passes the timeout. An agent that said it is leaving is
/// forgotten at once: it handed its tasks back already and will not return as itself.
pub(super) fn on_agent_disconnected(state: &mut State, cx: &mut Ctx, agent: AgentId) {
    let Some(a) = state.agents.get_mut(&agent) else { return };
    a.connected = false;
    let leaving = a.drain == Some(DrainCause::Leaving);
    state.sync_free_index(agent);
    if leaving {
        retire(state, cx, agent, "its agent left", None);
    }
}

/// Loses every agent and recovered container whose silence passed the timeout.
pub(super) fn on_tick(state: &mut State, cx: &mut Ctx) {
    let timeout = cx.agent_timeout;
    let silent: Vec<AgentId> = state
        .agents
        .iter()
        .filter(|(_, a)| timeout != Duration::MAX && cx.now >= silence_deadline(a.last_seen, timeout))
        .map(|(id, _)| id)
        .collect();
    for agent in silent {
        let reason = KillReason::AgentSilent { agent, timeout };
        retire(state, cx, agent, &reason.to_string(), Some(reason));
    }
    let expired: Vec<ContainerId> = state
        .orphans
        .values()
        .flatten()
        .filter(|c| orphan_deadline(state, **c).is_some_and(|d| cx.now >= d))
        .copied()
        .collect();
    for container in expired {
        lose_container(state, cx, container, "its node did not return after the master restarted", None);
    }
    health::on_tick(state, cx.now);
    outputs::on_tick(state, cx);
}

/// The earliest time `on_tick` has something to do. With loss by silence turned off
/// (`Duration::MAX`) agents have no deadline, which also spares the simulator a walk over
/// every agent after every event. Inlined: the simulator asks after every step.
#[inline]
pub(crate) fn next_deadline(state: &State, timeout: Duration) -> Option<Timestamp> {
    let agents = if timeout == Duration::MAX {
        None
    } else {
        state.agents.values().map(|a| silence_deadline(a.last_seen, timeout)).min()
    };
    // The usual case, asked after every step: nothing recovered or quarantined.
    if state.orphans.is_empty() && state.quarantined.is_empty() && state.awaited_holders.is_empty() {
        return agents;
    }
    let orphans = state.orphans.values().flatten().filter_map(|&c| orphan_deadline(state, c)).min();
    let holders = state.awaited_holders.values().min().copied();
    agents.into_iter().chain(orphans).chain(health::next_deadline(state)).chain(holders).min()
}

/// The first instant at which an agent last heard from at `last_seen` has been silent
/// for *more than* `timeout`. Waking exactly then finds it lost, so drivers never spin.
pub(super) fn silence_deadline(last_seen: Timestamp, timeout: Duration) -> Timestamp {
    last_seen + timeout + Duration::from_millis(1)
}

fn orphan_deadline(state: &State, container: ContainerId) -> Option<Timestamp> {
    match state.containers.get(&container)?.holder {
        Holder::Orphan { deadline, .. } => Some(deadline),
        Holder::Agent(_) => None,
    }
}

/// Removes a registration. Its containers are lost with `why` (killed for `kill`'s
/// reason first, if given and it is still connected) and a connected agent is dropped.
pub(super) fn retire(state: &mut State, cx: &mut Ctx, agent: AgentId, why: &str, kill: Option<KillReason>) {
    let Some(a) = state.agents.get(&agent) else { return };
    let (connected, node) = (a.connected, a.node.clone());
    let containers = a.containers.clone();
    for container in containers {
        lose_container(state, cx, container, why, kill);
    }
    if connected {
        cx.push(Command::DropAgent { agent, reason: why.to_string() });
    }
    let removed = state.agents.remove(&agent);
    state.quarantined.remove(&agent);
    state.sync_free_index(agent);
    if state.nodes.get(&*node) == Some(&agent) {
        state.nodes.remove(&*node);
    }
    if removed.is_some_and(|old| outputs::lost_with(state, &old)) {
        outputs::rerun_outputs_on(state, cx, &node);
    }
}
