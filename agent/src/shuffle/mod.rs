//! Data between agents that do not share a data directory (local data mode, issue 13):
//!
//! - [`server`]: the shuffle service other agents fetch parts from (QUIC, mutual TLS,
//!   agent certificates only).
//! - [`client`]: fetching one part from a holder, resumable, with cached connections.
//! - [`fetch`]: containers' fetch tokens and the service behind `{work_dir}/fetch.sock`
//!   that answers a task's `LocalFetch`.
//! - [`locate`]: asking the master which agents hold a stage's outputs.
//! - [`paths`]: which paths under a job directory may be served or written.

pub mod client;
pub mod fetch;
pub mod locate;
pub mod paths;
pub mod server;

#[cfg(test)]
mod tests;
