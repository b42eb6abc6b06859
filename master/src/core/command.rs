//! `Command`: what the core asks its driver to do. Commands are executed strictly in
//! the order returned; in particular a `Persist` precedes the `Reply` that depends on
//! it, so a submit is acknowledged only once it is durable.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use slotmarket_common::ids::{AccountId, AgentId, ContainerId, JobId, StageId};
use slotmarket_common::protocol::{ContainerReport, JobHistory, JobState, Launch, LedgerEntry, Response};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::RequestId;
use super::policy::PolicyName;

/// An instruction for the driver.
#[derive(Clone, PartialEq, Debug)]
pub enum Command {
    /// Start a container on an agent. Consecutive launches for one agent may be sent as
    /// one `MasterToAgent::Launch` batch.
    Launch {
        /// Where.
        agent: AgentId,
        /// What.
        launch: Launch,
    },
    /// Terminate a container's process group.
    Kill {
        /// Where.
        agent: AgentId,
        /// Which.
        container: ContainerId,
        /// Why; its text is sent to the agent, which logs it and echoes it in the
        /// `Killed` report.
        reason: KillReason,
    },
    /// Write to the durable store before carrying out any later command.
    Persist(Persist),
    /// Answer a client request.
    Reply {
        /// The request.
        request: RequestId,
        /// The answer, boxed: inline, the largest answers made every command 360 bytes,
        /// and launches (most commands) were copied at that size.
        response: Box<Response>,
    },
    /// A job's status changed; watchers should be sent a fresh `Job` response.
    JobChanged {
        /// The job.
        job: JobId,
    },
    /// The registration is refused or replaced: close the agent's connection.
    DropAgent {
        /// The registration.
        agent: AgentId,
        /// Why, sent to the agent as `Refused`.
        reason: String,
    },
    /// Build a Jockey completion model (simulating a job profile many times) and feed
    /// it back as `Event::CompletionModelBuilt`. It takes a while: a server builds it
    /// off its actor so that scheduling does not stall.
    BuildCompletionModel(Box<super::policy::jockey::ModelRequest>),
}

/// Why the core kills a container. Drivers that count outcomes (the simulator) match on
/// it; [`Display`](fmt::Display) gives the text sent to the agent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KillReason {
    /// A policy takes the slot back for a job or queue below its share.
    Preempted {
        /// The policy that decided it.
        policy: PolicyName,
        /// The rule it applied, e.g. "its job is over its fair share".
        why: &'static str,
    },
    /// Its job was cancelled.
    Cancelled,
    /// Its job failed: a task used up its attempts, or its stored spec no longer validates.
    JobFailed,
    /// Its job ended otherwise: its agent reconnected listing it after its job ended.
    /// (A job that completes has no live containers left to kill.)
    JobEnded,
    /// Its agent was silent for longer than the timeout; it is killed in case the agent
    /// is still alive, since its task now runs elsewhere.
    AgentSilent {
        /// The registration.
        agent: AgentId,
        /// The timeout it exceeded.
        timeout: Duration,
    },
    /// A reconnecting agent listed a container the master does not know (or no longer
    /// runs for that task and attempt).
    Unknown,
    /// A reconnecting agent listed it but offers no free slot of its kind to adopt it into.
    NoSlotToAdopt,
    /// It reads outputs of an earlier stage that were lost with a local-mode node; it
    /// would fail fetching them, so it waits for them to be made again.
    /// (The node is named in the container's stored report.)
    InputsLost,
}

impl fmt::Display for KillReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KillReason::Preempted { policy, why } => write!(f, "preempted by {policy}: {why}"),
            KillReason::Cancelled => f.write_str("cancelled"),
            KillReason::JobFailed => f.write_str("job failed"),
            KillReason::JobEnded => f.write_str("its job has ended"),
            KillReason::AgentSilent { agent, timeout } => {
                write!(f, "agent {agent} silent for more than {} ms", timeout.as_millis())
            }
            KillReason::Unknown => f.write_str("unknown to the master"),
            KillReason::NoSlotToAdopt => {
                f.write_str("no free slot to adopt it into; the agent offers fewer slots than before")
            }
            KillReason::InputsLost => f.write_str(
                "its inputs were lost with the node holding them; it runs again once they are made again",
            ),
        }
    }
}

/// A durable write.
#[derive(Clone, PartialEq, Debug)]
pub enum Persist {
    /// A job was admitted.
    JobAdmitted {
        /// Its id.
        job: JobId,
        /// The account it runs on.
        account: AccountId,
        /// The principal who submitted it.
        owner: AccountId,
        /// The job (boxed, as `Command::Reply`'s answer is).
        spec: Box<JobSpec>,
        /// Admission time.
        submitted: Timestamp,
        /// Its deadline, resolved at admission.
        deadline: Option<Timestamp>,
    },
    /// A job changed state (started, or ended with an optional reason).
    JobState {
        /// The job.
        job: JobId,
        /// The new state.
        state: JobState,
        /// When.
        at: Timestamp,
        /// Why it failed or was cancelled.
        message: Option<String>,
        /// Tasks completed by then (the store lists ended jobs without the core).
        tasks_completed: u64,
    },
    /// A container was created or changed state; this is the task history.
    Container {
        /// The node it is on (shared with the agent's record: every transition names it,
        /// and a copy per transition showed up in simulator profiles).
        node: Arc<str>,
        /// The transition.
        report: ContainerReport,
    },
    /// An ended job's history, kept with at most `keep_per_name` runs of its name.
    History {
        /// What the job did (boxed, as `Command::Reply`'s answer is).
        record: Box<JobHistory>,
        /// Runs of the same name to keep, newest first.
        keep_per_name: usize,
    },
    /// An account was created; its first grant, if any, follows as a `Ledger` write.
    Account {
        /// Its name.
        account: AccountId,
        /// Users besides its namesake who may read it and submit to it.
        members: Vec<String>,
        /// When.
        created: Timestamp,
    },
    /// A ledger entry. The ledger is append-only: entries are never changed or removed,
    /// and balances are derived from them.
    Ledger(LedgerEntry),
    /// A job's deadline was moved (or dropped, `None`) while it runs.
    Deadline {
        /// The job.
        job: JobId,
        /// Its new deadline.
        deadline: Option<Timestamp>,
    },
    /// A DP spending rate was set (credits per slot-hour); kept across restarts.
    Rate {
        /// The account.
        account: AccountId,
        /// Its rate.
        rate: slotmarket_common::money::Credits,
    },
    /// A DP income was set on a created account (credits per hour); kept across restarts.
    Income {
        /// The account.
        account: AccountId,
        /// Its income.
        income: slotmarket_common::money::Credits,
    },
    /// The cluster's slots last seen offered, per kind (MRM admission only): what a
    /// restarted master quotes against until agents reconnect.
    Capacity {
        /// Map slots.
        map_slots: u32,
        /// Reduce slots.
        reduce_slots: u32,
    },
    /// Completed tasks whose output was on a local-mode node that was lost run again:
    /// their completed containers no longer count (a restart must not find them done).
    OutputsLost {
        /// The job.
        job: JobId,
        /// The producing stage.
        stage: StageId,
        /// Its name, for the log.
        stage_name: String,
        /// The tasks' indices in the stage.
        tasks: Vec<u32>,
        /// The node that held their outputs.
        node: Arc<str>,
        /// When it was decided (the master's clock).
        at: Timestamp,
    },
    /// A node registered in local data mode with the directory `dir_id`, or (`None`)
    /// registered in shared mode after it was known as local: recovery needs it to tell
    /// which recovered outputs a node that does not return took with it.
    LocalNode {
        /// The node.
        node: String,
        /// Its own data directory's id; `None`: no longer local.
        dir_id: Option<String>,
    },
}

/// Which [`Persist`] commands the core builds: set once by the driver in
/// [`CoreConfig::persists`](super::CoreConfig::persists). Every other command, and every
/// decision, is the same whatever is chosen; a driver that keeps no store is spared
/// building (and dropping) a write per container transition.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Persists {
    /// Every durable write: what the master's store needs.
    #[default]
    All,
    /// Only [`Persist::JobState`]: the job outcomes a driver without a store (the
    /// simulator) learns from the command stream.
    JobStates,
    /// [`Persist::JobState`] and [`Persist::History`] (the simulator when it keeps
    /// ended jobs' history records).
    JobStatesAndHistory,
}

impl Persists {
    /// Whether the driver wants `persist`.
    pub fn wants(self, persist: &Persist) -> bool {
        matches!(
            (self, persist),
            (Persists::All, _)
                | (Persists::JobStates | Persists::JobStatesAndHistory, Persist::JobState { .. })
                | (Persists::JobStatesAndHistory, Persist::History { .. })
        )
    }

    /// Whether the driver wants every write, hence `Persist::Container` and
    /// `Persist::JobAdmitted`, which the hot paths check before building them.
    pub fn all(self) -> bool {
        self == Persists::All
    }

    /// Whether the driver wants `Persist::History` (checked before copying the record).
    pub fn history(self) -> bool {
        matches!(self, Persists::All | Persists::JobStatesAndHistory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_reasons_read_as_the_agent_sees_them() {
        let cases = [
            (
                KillReason::Preempted { policy: PolicyName::Fair, why: "its job is over its fair share" },
                "preempted by fair: its job is over its fair share",
            ),
            (KillReason::Cancelled, "cancelled"),
            (KillReason::JobFailed, "job failed"),
            (KillReason::JobEnded, "its job has ended"),
            (
                KillReason::AgentSilent { agent: AgentId(3), timeout: Duration::from_secs(10) },
                "agent n3 silent for more than 10000 ms",
            ),
            (KillReason::Unknown, "unknown to the master"),
            (
                KillReason::InputsLost,
                "its inputs were lost with the node holding them; it runs again once they are made again",
            ),
            (
                KillReason::NoSlotToAdopt,
                "no free slot to adopt it into; the agent offers fewer slots than before",
            ),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text, "{reason:?}");
        }
    }
}
