//! Data between agents that do not share a data directory (Hadoop's shuffle): how an
//! agent says which mode it is in, how it asks the master where a stage's outputs are,
//! how a task asks its own agent to fetch parts, and the agent-to-agent fetch itself.
//!
//! The path of one part: a reduce task asks its local agent over a Unix socket
//! ([`LocalFetch`], authenticated by the per-container token in [`ENV_FETCH_TOKEN`]);
//! the agent asks the master which agent completed each producing task ([`Locate`] /
//! [`Located`]), then fetches each part from that agent over mutual-TLS QUIC
//! ([`SHUFFLE_ALPN`], [`ShuffleRequest`] / [`ShuffleReply`] and the raw bytes), writing
//! it under its own job directory at the same relative path.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::ids::JobId;

/// The ALPN of the agent-to-agent shuffle service (distinct from the master's).
pub const SHUFFLE_ALPN: &[u8] = b"slotmarket-shuffle/1";

/// The environment variable naming the local agent's fetch socket, set for every task of
/// an agent in [`DataMode::Local`].
pub const ENV_FETCH_SOCKET: &str = "SLOTMARKET_FETCH_SOCKET";

/// The environment variable holding the container's fetch token: the agent accepts a
/// [`LocalFetch`] only with the token of a live container, and only for that container's
/// job.
pub const ENV_FETCH_TOKEN: &str = "SLOTMARKET_FETCH_TOKEN";

/// Where an agent keeps the jobs' data.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum DataMode {
    /// One data directory shared by every agent in this mode (NFS): a task reads any
    /// other task's output in place.
    Shared,
    /// The agent's own disk: other agents fetch its tasks' outputs from its shuffle
    /// service at this address.
    Local {
        /// The address other agents dial for [`ShuffleRequest`]s.
        shuffle: SocketAddr,
    },
}

/// An agent holding completed tasks' outputs, as another agent reaches it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct InputHolder {
    /// The node name: the TLS name its shuffle service presents.
    pub node: String,
    /// Its shuffle service.
    pub shuffle: SocketAddr,
}

/// An agent's question to the master (`AgentToMaster::Locate`): which agents hold the
/// outputs of `stage`'s tasks of `job`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Locate {
    /// Chosen by the agent; echoed in [`Located`].
    pub request: u64,
    /// The job.
    pub job: JobId,
    /// The producing stage's name.
    pub stage: String,
}

/// The master's answer to a [`Locate`] (`MasterToAgent::Located`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Located {
    /// The [`Locate::request`] answered.
    pub request: u64,
    /// The holders, or why there is no answer (unknown job or stage, not this agent's).
    pub outcome: Result<StageOutputs, String>,
}

/// Where each task's output of one stage is.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct StageOutputs {
    /// The distinct agents in [`DataMode::Local`] holding outputs of the stage.
    pub holders: Vec<InputHolder>,
    /// Per task index: its output's holder as an index into `holders`; `None` when the
    /// task has not completed or its output is in the shared directory.
    pub task_holder: Vec<Option<u32>>,
}

/// A task's request to its own agent over the fetch socket: copy these parts of the
/// task's job from the agents that hold them into this agent's job directory.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LocalFetch {
    /// The container's [`ENV_FETCH_TOKEN`].
    pub token: String,
    /// The parts, fetched concurrently (bounded); the reply comes when all are done.
    pub parts: Vec<FetchPart>,
}

/// One part to fetch: the file at `path` under the job directory of the agent that
/// completed task `task` of stage `stage`; it lands at the same `path` locally.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct FetchPart {
    /// The producing stage's name.
    pub stage: String,
    /// The producing task's index.
    pub task: u32,
    /// Relative to the job directory: normal components only (no `..`, not absolute).
    pub path: String,
}

/// The agent's answer to a [`LocalFetch`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum LocalFetchReply {
    /// Every part is in the local job directory.
    Fetched {
        /// Bytes copied over the network (parts already local count zero).
        bytes: u64,
    },
    /// At least one part could not be fetched.
    Failed {
        /// Why, naming the part and its holder.
        reason: String,
    },
}

/// One agent's request to another's shuffle service, on its own bidirectional stream.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ShuffleRequest {
    /// The job whose directory holds the file.
    pub job: JobId,
    /// Relative to the job directory: normal components only (no `..`, not absolute).
    pub path: String,
    /// Where to start: a broken fetch resumes from what it already has.
    pub offset: u64,
}

/// The shuffle service's answer; after `Sending`, the stream carries exactly `len -
/// offset` raw bytes of the file and is then finished.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ShuffleReply {
    /// The file exists; its whole length.
    Sending {
        /// The file's length in bytes.
        len: u64,
    },
    /// Not served: no such file, a path outside the job directory, a bad offset.
    Refused {
        /// Why.
        reason: String,
    },
}
