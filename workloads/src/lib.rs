//! The programs behind `slotmarket-task`: data generators and the map and reduce sides of
//! wordcount, grep, sort and pi, as plain functions so tests can call them directly.
//!
//! Every program follows the data layout the scheduler relies on (see `DESIGN.md`, "Data
//! plane for the built-in workloads"): map task `i` writes `{job_dir}/map-{i}/part-{r}` for
//! each reducer `r`; reduce task `r` reads every `{job_dir}/map-*/part-{r}` and writes
//! `{job_dir}/out/part-{r}`. Every part is written under a temporary name and renamed into
//! place ([`output::AtomicFile`]), so a killed attempt never leaves a half-written part and a
//! re-run overwrites cleanly.
//!
//! Without a shared data directory, [`fetch`] asks the local agent to copy the map parts
//! other agents hold before a reduce reads them.
//!
//! Errors are `anyhow` with context rather than typed: this library is the inside of one
//! binary, its errors are only ever reported to a person, never matched on.

#![warn(missing_docs)]

pub mod count;
pub mod fetch;
pub mod generate;
pub mod grep;
pub mod layout;
pub mod merge;
pub mod output;
pub mod partition;
pub mod pi;
pub mod sort;
pub mod split;
pub mod task;
pub mod wordcount;

/// The seeded generator of the data generators and pi: the shared SplitMix64, so the
/// task programs draw from the same implementation as the simulator and workload plans.
pub use slotmarket_common::rng;

/// Memory a map task may use for its in-memory table or buffer before it spills a sorted
/// run to disk, when the command line does not say (64 MiB).
pub const DEFAULT_SPILL_BYTES: usize = 64 << 20;
