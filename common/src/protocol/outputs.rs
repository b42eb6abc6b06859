//! A job's final outputs and its directories on the agents: `slotmarket fetch` lists and
//! reads the files a job's last stage wrote, through the master, from the agents that hold
//! them (bounded chunks, like `slotmarket logs`); `slotmarket cleanup` and the master's
//! retention timer remove a job's directories from the agents ([`RemoveJob`]).

use serde::{Deserialize, Serialize};

use crate::ids::{ContainerId, JobId};

/// Most bytes of a file one read carries; the client asks again from the next offset.
pub const MAX_OUTPUT_CHUNK: u32 = 256 * 1024;

/// Most files one listing carries; a listing with more is refused (name a narrower
/// `--path`).
pub const MAX_OUTPUT_FILES: usize = 10_000;

/// The directory under the job directory the built-in workloads' last stage writes.
pub const DEFAULT_OUTPUT_DIR: &str = "out";

/// What the client asks one node about a job's outputs.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum OutputOp {
    /// Every regular file under `dir` (relative to the job directory), recursively.
    List {
        /// Relative to the job directory: normal, non-hidden components only.
        dir: String,
    },
    /// A chunk of one file.
    Read {
        /// Relative to the job directory: normal, non-hidden components only.
        path: String,
        /// Where to start.
        offset: u64,
        /// Most bytes wanted (capped at [`MAX_OUTPUT_CHUNK`]).
        max: u32,
    },
}

/// A client's question about a job's outputs on one node (`Request::Output`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct OutputQuery {
    /// The job.
    pub job: JobId,
    /// The node asked: one of the job's output nodes (`Request::OutputNodes`).
    pub node: String,
    /// What is asked.
    pub op: OutputOp,
}

/// One file of a listing.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct OutputFile {
    /// Relative to the job directory (`out/part-0`).
    pub path: String,
    /// Its length in bytes when listed.
    pub len: u64,
}

/// An answer about a job's outputs.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum OutputData {
    /// The files under the listed directory, sorted by path.
    Files(Vec<OutputFile>),
    /// The bytes read from the offset asked (empty at the end of the file).
    Bytes(Vec<u8>),
}

/// The master asking an agent about a job's outputs (`MasterToAgent::ReadOutput`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct OutputRead {
    /// Echoed in the answer.
    pub request: u64,
    /// The job; the agent reads only under that job's directory.
    pub job: JobId,
    /// What is asked.
    pub op: OutputOp,
}

/// An agent's answer to an [`OutputRead`] (`AgentToMaster::OutputRead`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct OutputReadReply {
    /// The request's number.
    pub request: u64,
    /// The answer, or why there is none.
    pub result: Result<OutputData, String>,
}

/// The master telling an agent to delete a job's directory and these containers'
/// directories (with their logs) (`MasterToAgent::RemoveJob`). Idempotent: what is
/// already gone is fine.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct RemoveJob {
    /// The job whose directory goes.
    pub job: JobId,
    /// The job's containers that ran on this agent.
    pub containers: Vec<ContainerId>,
    /// Whether to remove the job directory too: agents sharing one data directory are
    /// told once between them.
    pub job_dir: bool,
}

/// What `slotmarket cleanup` did for one job (`Response::CleanedUp`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JobCleanup {
    /// The job.
    pub job: JobId,
    /// Nodes told to remove its directory now.
    pub removed_on: Vec<String>,
    /// Nodes not connected now: they are told when they register again.
    pub pending_on: Vec<String>,
}

/// Whether `path` names something under a job directory a client may read: relative,
/// not empty, made of normal components only (no `..`, no root), none of them hidden
/// (starting with `.`, like the agents' temporary files). The caller still checks that
/// symlinks do not lead out.
pub fn check_job_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("an empty path".into());
    }
    if path.starts_with('/') {
        return Err(format!("{path:?} is absolute; name a path inside the job directory"));
    }
    for part in path.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(format!("{path:?} has an empty, `.` or `..` component"));
        }
        if part.starts_with('.') {
            return Err(format!("{path:?} names a hidden file"));
        }
        if part.contains('\0') || part.contains('\\') {
            return Err(format!("{path:?} has a NUL or backslash"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_paths_are_relative_plain_and_visible() {
        for good in ["out", "out/part-0", "map-3/part-1"] {
            assert_eq!(check_job_path(good), Ok(()), "{good}");
        }
        for bad in ["", "/etc/passwd", "../j2/out", "out/../../x", "out//x", "./out", "out/.tmp-part", ".."] {
            assert!(check_job_path(bad).is_err(), "{bad}");
        }
    }
}
