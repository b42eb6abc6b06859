//! The agent's sans-IO core: the slot table and every container's state machine. It
//! decides what to spawn, kill and report; `driver` carries that out. Pure: no I/O, no
//! clock, no async runtime.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::ContainerId;
use slotmarket_common::protocol::{ContainerReport, Launch};
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;
use tracing::{debug, info, warn};

use crate::slots::SlotTable;

/// How far back finished containers are listed when registering again.
pub const RECENT_FINISHES: std::time::Duration = std::time::Duration::from_secs(60);

/// How many finished containers are remembered, so a repeated launch of one of them is
/// recognised as a duplicate instead of being run again.
const REMEMBERED_FINISHED: usize = 4096;

/// A fact the core is told about, from the master or from a task process. Connection
/// changes are not among them: tasks keep running either way and reports queue up in
/// the session, which also logs them.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum AgentEvent {
    /// The master asks to start these containers.
    Launch(Vec<Launch>),
    /// The master asks to terminate a container.
    Kill {
        /// The container.
        container: ContainerId,
        /// Why; echoed in the `Killed` report.
        reason: String,
    },
    /// A container's process started.
    Started {
        /// The container.
        container: ContainerId,
        /// Its process id, which is also its process group id.
        pid: u32,
    },
    /// A container's process could not be started (directory, template or exec error).
    SpawnFailed {
        /// The container.
        container: ContainerId,
        /// What went wrong, for the `Failed` report.
        error: String,
    },
    /// A container's process exited (after its whole process group was signalled).
    Exited {
        /// The container.
        container: ContainerId,
        /// How it ended.
        exit: TaskExit,
        /// The last lines of its stderr, if it did not exit with code 0.
        stderr_tail: Option<String>,
    },
    /// The agent is stopping: kill everything, refuse new launches.
    Shutdown,
}

/// How a task process ended.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum TaskExit {
    /// It exited with this status code.
    Code(i32),
    /// It was terminated by this signal.
    Signal(i32),
    /// Waiting for it failed, so its fate is unknown (it has been killed to be sure).
    Unknown(String),
}

/// What the driver must do, in the order returned.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum AgentAction {
    /// Create the container's directories, render its command and start its process;
    /// answer with `Started` or `SpawnFailed`, later `Exited`.
    Spawn(Launch),
    /// Run the kill sequence on the container's process group (SIGTERM, grace, SIGKILL);
    /// answer with `Exited` (or `SpawnFailed` if it never started).
    KillGroup {
        /// The container.
        container: ContainerId,
    },
    /// Send this report to the master (queued while disconnected).
    Report(ContainerReport),
}

/// Where a live container is. Terminal states are not kept here: a finished container
/// leaves the table and only its last report is remembered.
///
/// ```text
/// Launch ──> Acquired ──Started──> Running ──Exited──> Completed | Failed
///               │                     │
///               └────────Kill─────────┴──> Killing{reason} ──Exited──> Killed
/// ```
#[derive(Clone, PartialEq, Eq)]
enum Phase {
    /// The slot is taken and the spawn requested; no process yet.
    Acquired,
    /// The process is running.
    Running,
    /// The kill sequence is under way (the process may not have started yet).
    Killing { reason: String },
}

impl fmt::Debug for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Acquired => f.write_str("acquired"),
            Phase::Running => f.write_str("running"),
            Phase::Killing { reason } => write!(f, "killing({reason})"),
        }
    }
}

/// One live container.
#[derive(Clone, Debug)]
struct Container {
    slot: SlotKind,
    phase: Phase,
    /// The last report sent, re-sent in `Register` after a reconnect.
    last: ContainerReport,
}

/// The agent's decisions: which launches fit, what state each container is in, what to
/// report. No I/O, no clock.
///
/// Driving contract: feed every fact to [`AgentCore::handle`] with the current time (which
/// must not go backwards) and carry out the returned actions in order. Every action that
/// touches a process is answered later by a process event (`Started`, `SpawnFailed`,
/// `Exited`). [`AgentCore::live_containers`] is what to send in `Register`.
#[derive(Debug)]
pub struct AgentCore {
    slots: SlotTable,
    live: BTreeMap<ContainerId, Container>,
    /// Last reports of finished containers, oldest first in `finished_order`.
    finished: BTreeMap<ContainerId, ContainerReport>,
    finished_order: VecDeque<ContainerId>,
    shutting_down: bool,
}

impl AgentCore {
    /// A core offering `map_slots` map and `reduce_slots` reduce slots.
    pub fn new(map_slots: u32, reduce_slots: u32) -> AgentCore {
        AgentCore {
            slots: SlotTable::new(map_slots, reduce_slots),
            live: BTreeMap::new(),
            finished: BTreeMap::new(),
            finished_order: VecDeque::new(),
            shutting_down: false,
        }
    }

    /// Applies one event at time `now` and returns what to do, in order.
    #[must_use]
    pub fn handle(&mut self, now: Timestamp, event: AgentEvent) -> Vec<AgentAction> {
        let mut out = Vec::new();
        match event {
            AgentEvent::Launch(launches) => {
                for launch in launches {
                    self.on_launch(now, launch, &mut out);
                }
            }
            AgentEvent::Kill { container, reason } => self.on_kill(container, reason, &mut out),
            AgentEvent::Started { container, pid } => self.on_started(now, container, pid, &mut out),
            AgentEvent::SpawnFailed { container, error } => {
                self.on_spawn_failed(now, container, error, &mut out)
            }
            AgentEvent::Exited { container, exit, stderr_tail } => {
                self.on_exited(now, container, exit, stderr_tail, &mut out)
            }
            AgentEvent::Shutdown => self.on_shutdown(&mut out),
        }
        out
    }

    /// The last report of every live container, by container id.
    pub fn live_containers(&self) -> Vec<ContainerReport> {
        self.live.values().map(|c| c.last.clone()).collect()
    }

    /// What `Register` carries: every live container's last report, then the final
    /// reports of containers that ended within [`RECENT_FINISHES`] of `now`. One of those
    /// may have ended while the master was unreachable (or its report died with the
    /// connection); listing it lets the master settle the task instead of running it
    /// again. Older reports have arrived, or their agent timed out long ago.
    pub fn registration_reports(&self, now: Timestamp) -> Vec<ContainerReport> {
        let since = now - RECENT_FINISHES;
        let mut reports = self.live_containers();
        let recent = self.finished_order.iter().rev().filter_map(|id| self.finished.get(id));
        reports.extend(recent.take_while(|r| r.at >= since).cloned());
        reports
    }

    /// How many containers are live (acquired, running or being killed).
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// The slot table.
    pub fn slots(&self) -> &SlotTable {
        &self.slots
    }

    fn on_launch(&mut self, now: Timestamp, launch: Launch, out: &mut Vec<AgentAction>) {
        let id = launch.container;
        if let Some(known) = self.live.get(&id).map(|c| &c.last).or_else(|| self.finished.get(&id)) {
            if known.task == launch.task && known.attempt == launch.attempt {
                // A repeated launch (e.g. resent around a reconnect) must not run the task
                // twice, and a `Failed` report would wrongly end the real container:
                // re-send its state.
                warn!(container = %id, state = %known.state, "duplicate launch refused; re-reporting");
                out.push(AgentAction::Report(known.clone()));
                return;
            }
            // The id is in use for another task (a master that lost its state issuing
            // ids again): refuse this launch as an ended attempt of its own task, so the
            // master runs it again under a new id, and leave the other container alone.
            let message =
                format!("container id {id} is already in use here by {} ({})", known.task, known.attempt);
            warn!(container = %id, task = %launch.task, %message, "launch refused");
            out.push(AgentAction::Report(report(&launch, ContainerState::Killed, now, None, Some(message))));
            return;
        }
        let refusal = if self.shutting_down {
            Some("agent is shutting down".to_string())
        } else {
            self.slots.acquire(launch.slot).err().map(|e| e.to_string())
        };
        if let Some(message) = refusal {
            warn!(container = %id, task = %launch.task, %message, "launch refused");
            // A refusal says nothing about the task: `Killed` makes the master run it again
            // without spending one of its attempts.
            let report = report(&launch, ContainerState::Killed, now, None, Some(message));
            self.remember_finished(report.clone());
            out.push(AgentAction::Report(report));
            return;
        }
        debug!(container = %id, task = %launch.task, slot = %launch.slot, "launch accepted");
        let last = report(&launch, ContainerState::Acquired, now, None, None);
        out.push(AgentAction::Report(last.clone()));
        self.live.insert(id, Container { slot: launch.slot, phase: Phase::Acquired, last });
        out.push(AgentAction::Spawn(launch));
    }

    fn on_kill(&mut self, id: ContainerId, reason: String, out: &mut Vec<AgentAction>) {
        let Some(container) = self.live.get_mut(&id) else {
            // Already finished or never here: its terminal report says what happened.
            debug!(container = %id, %reason, "kill for a container that is not live ignored");
            return;
        };
        if let Phase::Killing { .. } = container.phase {
            debug!(container = %id, "already being killed");
            return;
        }
        info!(container = %id, %reason, "killing");
        container.phase = Phase::Killing { reason };
        out.push(AgentAction::KillGroup { container: id });
    }

    fn on_started(&mut self, now: Timestamp, id: ContainerId, pid: u32, out: &mut Vec<AgentAction>) {
        let Some(container) = self.live.get_mut(&id) else {
            warn!(container = %id, pid, "start of an unknown container ignored");
            return;
        };
        match &container.phase {
            Phase::Acquired => {
                debug!(container = %id, pid, "running");
                container.phase = Phase::Running;
                let running = container.report(ContainerState::Running, now, None, None);
                container.last = running.clone();
                out.push(AgentAction::Report(running));
            }
            // Killed before it started: the kill sequence already covers this process,
            // and `Acquired → Killed` needs no `Running` in between.
            Phase::Killing { .. } => debug!(container = %id, pid, "started while being killed"),
            Phase::Running => warn!(container = %id, pid, "second start ignored"),
        }
    }

    fn on_spawn_failed(
        &mut self,
        now: Timestamp,
        id: ContainerId,
        error: String,
        out: &mut Vec<AgentAction>,
    ) {
        let Some(container) = self.live.get(&id) else {
            warn!(container = %id, %error, "spawn failure of an unknown container ignored");
            return;
        };
        let report = match &container.phase {
            Phase::Killing { reason } => {
                container.report(ContainerState::Killed, now, None, Some(reason.clone()))
            }
            _ => {
                warn!(container = %id, %error, "spawn failed");
                container.report(ContainerState::Failed, now, None, Some(error))
            }
        };
        self.finish(id, report, out);
    }

    fn on_exited(
        &mut self,
        now: Timestamp,
        id: ContainerId,
        exit: TaskExit,
        stderr_tail: Option<String>,
        out: &mut Vec<AgentAction>,
    ) {
        let Some(container) = self.live.get(&id) else {
            warn!(container = %id, ?exit, "exit of an unknown container ignored");
            return;
        };
        let code = match exit {
            TaskExit::Code(code) => Some(code),
            _ => None,
        };
        let report = match (&container.phase, &exit) {
            (Phase::Killing { reason }, _) => {
                container.report(ContainerState::Killed, now, code, Some(reason.clone()))
            }
            (_, TaskExit::Code(0)) => container.report(ContainerState::Completed, now, Some(0), None),
            // The stderr tail says more than the exit code the report carries anyway.
            (_, TaskExit::Code(code)) => container.report(
                ContainerState::Failed,
                now,
                Some(*code),
                Some(
                    stderr_tail
                        .map_or_else(|| format!("exited with code {code}"), |t| format!("stderr: {t}")),
                ),
            ),
            (_, TaskExit::Signal(signal)) => container.report(
                ContainerState::Failed,
                now,
                None,
                Some(match stderr_tail {
                    Some(tail) => format!("terminated by signal {signal}; stderr: {tail}"),
                    None => format!("terminated by signal {signal}"),
                }),
            ),
            (_, TaskExit::Unknown(why)) => container.report(
                ContainerState::Failed,
                now,
                None,
                Some(format!("lost track of the process: {why}")),
            ),
        };
        debug!(container = %id, state = %report.state, exit_code = ?report.exit_code, "container finished");
        self.finish(id, report, out);
    }

    fn on_shutdown(&mut self, out: &mut Vec<AgentAction>) {
        self.shutting_down = true;
        let ids: Vec<ContainerId> = self.live.keys().copied().collect();
        info!(live = ids.len(), "shutting down: killing every container");
        for id in ids {
            self.on_kill(id, "agent shutting down".to_string(), out);
        }
    }

    /// Moves a container out of the live table, frees its slot and reports its end.
    fn finish(&mut self, id: ContainerId, report: ContainerReport, out: &mut Vec<AgentAction>) {
        if let Some(container) = self.live.remove(&id) {
            if !self.slots.release(container.slot) {
                warn!(container = %id, slot = %container.slot, "slot table out of step");
            }
        }
        self.remember_finished(report.clone());
        out.push(AgentAction::Report(report));
    }

    fn remember_finished(&mut self, report: ContainerReport) {
        let id = report.container;
        if self.finished.insert(id, report).is_none() {
            self.finished_order.push_back(id);
        }
        while self.finished_order.len() > REMEMBERED_FINISHED {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
    }
}

impl Container {
    fn report(
        &self,
        state: ContainerState,
        at: Timestamp,
        exit_code: Option<i32>,
        message: Option<String>,
    ) -> ContainerReport {
        // Same container, task and attempt as its last report; only the transition is new.
        ContainerReport { state, at, exit_code, message, ..self.last.clone() }
    }
}

fn report(
    launch: &Launch,
    state: ContainerState,
    at: Timestamp,
    exit_code: Option<i32>,
    message: Option<String>,
) -> ContainerReport {
    ContainerReport {
        container: launch.container,
        task: launch.task,
        attempt: launch.attempt,
        state,
        at,
        exit_code,
        message,
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
