//! The Slotmarket master.
//!
//! - [`core`]: everything that decides (admission, scheduling policies, retries, agent
//!   liveness). Pure: no I/O, no clock; driven by events with explicit timestamps.
//! - `server`: the actor that owns the core, fed by QUIC sessions of agents and clients.
//! - `store`: SQLite (WAL) persistence of jobs and container history, replayed on start.
//!
//! The simulator that drives the same core with a virtual clock is the `slotmarket-sim`
//! crate beside this one.
#![warn(missing_docs)]

pub mod config;
pub mod core;
pub mod server;
pub mod store;
