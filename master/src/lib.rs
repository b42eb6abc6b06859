//! The Slotmarket master.
//!
//! - [`core`]: everything that decides (admission, scheduling policies, retries, agent
//!   liveness). Pure: no I/O, no clock; driven by events with explicit timestamps.
//! - `server`: the actor that owns the core, fed by QUIC sessions of agents and clients.
//! - `store`: SQLite (WAL) persistence of jobs and container history, replayed on start.
//! - [`sim`]: the discrete-event simulator behind `slotmarket-sim`, driving the same core
//!   with a virtual clock and simulated agents.
#![warn(missing_docs)]

pub mod config;
pub mod core;
pub mod server;
pub mod sim;
pub mod store;
