//! Core scenario tests (STYLE layer 2): a [`TestEnv`](env::TestEnv) drives the real core
//! with a virtual clock, checks the invariants after every step and makes each test take
//! the commands it expects.

mod builders;
mod env;

mod accounts;
mod clients;
mod dress;
mod edf;
mod failures;
mod jockey;
mod lifetimes;
mod limits;
mod market;
mod mrm;
mod mrm_kept;
mod mrm_restart;
mod nodes;
mod persists;
mod proportional;
mod proportional_settings;
mod purchases;
mod purity;
mod queue;
mod recovery;
mod reservations;
mod scheduling;
mod shuffle;
mod triggers;
mod waits;
