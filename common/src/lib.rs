//! Everything more than one Slotmarket binary needs: identifiers, time, job specs,
//! container states, the wire protocol, the QUIC transport and the certificate authority.
//!
//! The pure modules (`ids`, `time`, `spec`, `container`, `protocol`) do no I/O and are
//! the only parts of this crate the master's sans-IO core may use; `metrics` (run
//! summaries shared by the simulator and the live workload runner) is pure too.
#![warn(missing_docs)]

pub mod container;
pub mod identity;
pub mod ids;
pub mod metrics;
pub mod protocol;
pub mod spec;
pub mod time;

// I/O: certificates, QUIC endpoints and streams, the request client.
pub mod client;
pub mod pki;
pub mod transport;
