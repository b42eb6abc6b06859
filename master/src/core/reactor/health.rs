//! Node health: an agent whose tasks keep failing fast (a node without the task binary,
//! a full disk, a broken mount) is quarantined for a while, so it stops taking and
//! burning the attempts of task after task. What counts, and for how long, is
//! [`NodeHealth`].
//!
//! A fast failure is a `Failed` report within `fast_failure_within` of the process
//! starting (or before it started: a spawn error). `fast_failures` of them in a row on
//! one agent, with no completion in between, quarantine it, provided that
//! - the streak spans at least two jobs: one broken job fails fast everywhere, and that
//!   says nothing about the nodes (its retries already go to other nodes, and it fails
//!   once it has used its attempts); and
//! - another agent still takes work: quarantining every node would only stall the
//!   cluster.
//!
//! Quarantine lasts `quarantine_for`; `slotmarket node undrain` lifts it sooner, and a
//! new registration of the node (an agent restarted after a fix) starts clean.

use std::time::Duration;

use slotmarket_common::ids::AgentId;
use slotmarket_common::protocol::{ContainerReport, Quarantine};
use slotmarket_common::time::Timestamp;

use super::Ctx;
use super::reports::failure_text;
use crate::core::state::{FailStreak, State};

/// When an agent counts as unhealthy and how long it is set aside.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NodeHealth {
    /// Fast failures in a row (spanning two or more jobs) that quarantine an agent;
    /// 0 turns quarantine off.
    pub fast_failures: u32,
    /// A failure this soon after the process started counts as fast.
    pub fast_failure_within: Duration,
    /// How long a quarantined agent gets no new work.
    pub quarantine_for: Duration,
    /// Whether a failed task's retries keep off the nodes it failed on (see
    /// `reactor::placement`).
    pub retry_elsewhere: bool,
}

impl Default for NodeHealth {
    fn default() -> NodeHealth {
        NodeHealth {
            fast_failures: 3,
            fast_failure_within: Duration::from_secs(2),
            quarantine_for: Duration::from_secs(300),
            retry_elsewhere: true,
        }
    }
}

/// A task completed on `agent`: whatever failed before was not the node's fault.
// Inlined: every completion comes here.
#[inline]
pub(super) fn on_task_completed(state: &mut State, agent: AgentId) {
    if let Some(a) = state.agents.get_mut(&agent) {
        a.streak = FailStreak::default();
    }
}

/// A task failed on `agent`, `fast` or not; quarantines the agent when the streak of
/// fast failures reaches the limit (see the module header for the conditions).
pub(super) fn on_task_failed(
    state: &mut State,
    cx: &mut Ctx,
    agent: AgentId,
    report: &ContainerReport,
    fast: bool,
) {
    let limit = cx.health.fast_failures;
    let Some(a) = state.agents.get_mut(&agent) else { return };
    if !fast {
        a.streak = FailStreak::default();
        return;
    }
    let job = report.task.job;
    let streak = &mut a.streak;
    streak.count += 1;
    streak.several_jobs |= streak.first_job.is_some_and(|first| first != job);
    streak.first_job.get_or_insert(job);
    if limit == 0 || streak.count < limit || !streak.several_jobs || a.quarantine.is_some() {
        return;
    }
    // Walked only when a streak is complete, which is rare.
    if !state.agents.iter().any(|(id, other)| id != agent && other.takes_work()) {
        return;
    }
    let Some(a) = state.agents.get_mut(&agent) else { return };
    let streak = &a.streak;
    let within = cx.health.fast_failure_within.as_millis();
    let reason = format!(
        "{} tasks of several jobs in a row failed within {within} ms of starting; the last, {}, ended with {}",
        streak.count,
        report.task,
        failure_text(report)
    );
    a.quarantine = Some(Quarantine { until: cx.now + cx.health.quarantine_for, reason });
    a.streak = FailStreak::default();
    state.quarantined.insert(agent);
    state.sync_free_index(agent);
}

/// Lifts every quarantine whose time is up.
pub(super) fn on_tick(state: &mut State, now: Timestamp) {
    let expired: Vec<AgentId> =
        state.quarantined.iter().copied().filter(|id| until(state, *id).is_none_or(|u| now >= u)).collect();
    for agent in expired {
        lift(state, agent);
    }
}

/// Ends `agent`'s quarantine (its time is up, or an admin undrained it) and its streak.
pub(super) fn lift(state: &mut State, agent: AgentId) {
    if let Some(a) = state.agents.get_mut(&agent) {
        a.quarantine = None;
        a.streak = FailStreak::default();
    }
    state.quarantined.remove(&agent);
    state.sync_free_index(agent);
}

/// When the next quarantine ends. Walks only the quarantined agents: the simulator asks
/// after every event.
pub(super) fn next_deadline(state: &State) -> Option<Timestamp> {
    state.quarantined.iter().filter_map(|&id| until(state, id)).min()
}

fn until(state: &State, agent: AgentId) -> Option<Timestamp> {
    state.agents.get(&agent)?.quarantine.as_ref().map(|q| q.until)
}
