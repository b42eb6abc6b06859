//! Per-task detail and task logs on the wire: the rows of `slotmarket status JOB --tasks`
//! and the bounded chunks of a task's stdout or stderr that `slotmarket logs` reads from
//! the agent that ran it, through the master.

use serde::{Deserialize, Serialize};

use crate::ids::ContainerId;
use crate::time::Timestamp;

/// Most bytes of log one chunk carries; the client asks again from the next offset.
pub const MAX_LOG_CHUNK: u32 = 64 * 1024;

/// One task of a job: where its latest attempt ran and how it went.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TaskRow {
    /// The stage's name.
    pub stage: String,
    /// The task's index in its stage.
    pub index: u32,
    /// Attempts launched so far (0 while it never ran).
    pub attempts: u32,
    /// The latest attempt's container, once one was allocated.
    pub container: Option<ContainerId>,
    /// The node that holds or held that container.
    pub node: Option<String>,
    /// The latest container's state name (`running`, `completed`, …), or `pending`.
    pub state: String,
    /// When the latest attempt's process started (the agent's clock).
    pub started: Option<Timestamp>,
    /// When the latest attempt ended, if it did.
    pub finished: Option<Timestamp>,
    /// The latest attempt's exit code, once its process exited.
    pub exit_code: Option<i32>,
    /// Why it failed or was killed.
    pub message: Option<String>,
}

/// Every task of one job, in stage and index order.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TaskList {
    /// The rows.
    pub tasks: Vec<TaskRow>,
    /// Set when rows were left off to keep the answer within the frame limit.
    pub truncated: bool,
}

/// Which task's log a `Logs` request reads, and from where.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LogQuery {
    /// The job.
    pub job: crate::ids::JobId,
    /// The stage's name; the job's first stage if `None`.
    pub stage: Option<String>,
    /// The task's index in the stage; 0 if `None`.
    pub task: Option<u32>,
    /// Read stderr instead of stdout.
    pub stderr: bool,
    /// The byte offset to read from.
    pub offset: u64,
    /// Most bytes wanted (capped at [`MAX_LOG_CHUNK`]).
    pub max: u32,
}

/// A chunk of a task's log.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LogChunk {
    /// The container whose log it is (the task's latest attempt).
    pub container: ContainerId,
    /// The bytes from the asked offset on.
    pub data: Vec<u8>,
    /// Where the next read starts.
    pub next_offset: u64,
    /// Whether the task's attempt has ended, so the log will not grow: with an empty
    /// `data` the whole log has been read.
    pub ended: bool,
}

/// The master asking an agent for part of a container's log file.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LogRead {
    /// Echoed in the answer.
    pub request: u64,
    /// The container; the agent reads only that container's `stdout` or `stderr`.
    pub container: ContainerId,
    /// Read stderr instead of stdout.
    pub stderr: bool,
    /// The byte offset.
    pub offset: u64,
    /// Most bytes.
    pub max: u32,
}

/// An agent's answer to a [`LogRead`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LogReadReply {
    /// The request's number.
    pub request: u64,
    /// The bytes read (empty at the end of the file), or why none could be read.
    pub result: Result<Vec<u8>, String>,
}
