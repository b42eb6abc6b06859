//! `Command`: what the core asks its driver to do. Commands are executed strictly in
//! the order returned; in particular a `Persist` precedes the `Reply` that depends on
//! it, so a submit is acknowledged only once it is durable.

use std::sync::Arc;

use slotmarket_common::ids::{AccountId, AgentId, ContainerId, JobId};
use slotmarket_common::protocol::{ContainerReport, JobState, Launch, Response};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::RequestId;

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
        /// Why (logged and echoed in the agent's `Killed` report).
        reason: String,
    },
    /// Write to the durable store before carrying out any later command.
    Persist(Persist),
    /// Answer a client request.
    Reply {
        /// The request.
        request: RequestId,
        /// The answer.
        response: Response,
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
}

/// A durable write.
#[derive(Clone, PartialEq, Debug)]
pub enum Persist {
    /// A job was admitted.
    JobAdmitted {
        /// Its id.
        job: JobId,
        /// Its owner.
        account: AccountId,
        /// The job.
        spec: JobSpec,
        /// Admission time.
        submitted: Timestamp,
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
    },
    /// A container was created or changed state; this is the task history.
    Container {
        /// The node it is on (shared with the agent's record: every transition names it,
        /// and a copy per transition showed up in simulator profiles).
        node: Arc<str>,
        /// The transition.
        report: ContainerReport,
    },
}
