//! Everything more than one Slotmarket binary needs: identifiers, time, job specs,
//! container states, the wire protocol, the QUIC transport and the certificate authority.
//!
//! The pure modules (`ids`, `time`, `money`, `spec`, `container`, `protocol`) do no I/O and are
//! the only parts of this crate the master's sans-IO core may use; `metrics` (run
//! summaries shared by the simulator and the live workload runner), `rng` (the seeded
//! generator every tool draws from) and `workload_mix` (MRM's Table 1 and the job-alone
//! estimate both workload generators use) are pure too.
#![warn(missing_docs)]

pub mod container;
pub mod identity;
pub mod ids;
pub mod metrics;
pub mod money;
pub mod protocol;
pub mod report;
pub mod rng;
pub mod spec;
pub mod time;
pub mod workload_mix;

// I/O: certificates (and `der`, the reader of their fields), QUIC endpoints and streams, the request client, config files,
// directory locks, process groups, the log output.
pub mod client;
pub mod config;
pub mod der;
#[cfg(unix)]
pub mod dir_lock;
pub mod logging;
pub mod pki;
#[cfg(unix)]
pub mod process_group;
pub mod transport;
