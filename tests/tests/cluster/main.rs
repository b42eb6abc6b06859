//! Multi-process integration tests: real master and agent binaries on loopback.
//! Run `cargo build` first so the binaries exist (the README's test command does).

mod access;
mod accounts;
mod cancel;
mod cli_habits;
mod containment;
mod data_dirs;
mod deadlines;
mod demo;
mod dp;
mod dress;
mod failover;
mod interop;
mod job_files;
mod lifetimes;
mod limits;
mod mapreduce;
mod market;
mod mrm;
mod nodes;
mod restart;
mod security;
mod shuffle;
mod shuffle_loss;
mod submit_wait;
mod support;
mod task_logs;
