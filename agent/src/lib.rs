//! The Slotmarket agent: offers map and reduce slots to the master, runs task processes
//! in their own process groups, reports every container transition and kills on request.
//!
//! Layout:
//! - [`core`] decides (slot table, container state machine) and is pure; it is driven by
//!   events with explicit timestamps and answers with actions.
//! - [`slots`]: map/reduce slot accounting used by the core.
//! - [`process`]: spawning a task and the kill sequence on its process group.
//! - [`plain_command`]: which command lines start without a shell.
//! - [`containment`]: keeping all of a task's processes in its container (cgroup v2 or a
//!   process scan), and sweeping what a killed agent left.
//! - [`descendants`]: under the process scan, the agent as its tasks' child subreaper, the
//!   walk over its descendants and the reaping of the orphans it adopts.
//! - [`ready`]: what the next task of a slot needs from the file systems (a cgroup, a
//!   directory with its output files), made ahead of its launch.
//! - [`set_up`]: whether a task's set-up runs on the async worker or in the blocking pool
//!   (local or possibly remote file systems).
//! - [`data_dir`]: the data directory's id, which tells agents sharing it from others.
//! - [`open_files`]: the agent's limit on open descriptors, raised; its tasks' as it was.
//! - [`run_as`]: which Unix user a task runs as (`[run_as]`, for agents running as root).
//! - [`stderr_tail`]: the last lines of a failed task's stderr, for its report.
//! - [`task_logs`]: reading a container's stdout or stderr for `slotmarket logs`.
//! - [`session`]: the QUIC session with the master (register, heartbeat, reports,
//!   reconnect with backoff).
//! - [`shuffle`]: local data mode: the shuffle service, the fetch socket and the fetcher.
//! - [`driver`]: the event loop that owns the core and carries out its actions.
//! - [`config`]: `agent.toml` ([`config::AgentFile`]) and the resolved
//!   [`config::AgentConfig`].
#![warn(missing_docs)]

pub mod config;
pub mod containment;
pub mod core;
pub mod data_dir;
pub mod descendants;
pub mod driver;
pub mod job_outputs;
pub mod open_files;
pub mod plain_command;
pub mod process;
pub mod ready;
mod recycle;
pub mod run_as;
pub mod session;
pub mod set_up;
pub mod shuffle;
pub mod slots;
pub mod spawn;
pub mod stderr_tail;
pub mod task_logs;

#[cfg(test)]
mod test_support;
