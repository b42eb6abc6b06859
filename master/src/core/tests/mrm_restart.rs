//! MRM quotes across a master restart: the core stores the cluster's capacity as agents
//! come and go, and a restarted core quotes against the capacity it recovered until its
//! agents reconnect, saying so in the quote; with nothing stored it cannot quote.

use std::time::Duration;

use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::spec::{EstimateSpec, JobSpec};

use super::builders::JobBuilder;
use super::env::TestEnv;
use crate::core::{AdmissionMode, AdmissionSettings, CoreConfig, Event, Persist, QuoteError, StoreRecovery};

fn mrm() -> CoreConfig {
    let admission = AdmissionSettings { mode: AdmissionMode::Mrm, ..AdmissionSettings::default() };
    CoreConfig { admission, ..CoreConfig::default() }
}

/// Four map tasks of exactly 10 s.
fn four_maps() -> JobSpec {
    let mut spec = JobBuilder::maps(4).name("four").build();
    spec.estimate = Some(EstimateSpec {
        map_task_ms: Some(10_000),
        reduce_task_ms: None,
        spread_pct: Some(0),
        task_spread_pct: Some(0),
    });
    spec
}

fn capacities(persists: &[Persist]) -> Vec<(u32, u32)> {
    persists
        .iter()
        .filter_map(|p| match p {
            Persist::Capacity { map_slots, reduce_slots } => Some((*map_slots, *reduce_slots)),
            _ => None,
        })
        .collect()
}

fn restarted(capacity: Option<[u32; 2]>) -> TestEnv {
    let mut env = TestEnv::with_config(mrm());
    let recovery = StoreRecovery {
        next_job: JobId(10),
        next_container: ContainerId(1),
        history: vec![],
        capacity,
        local_nodes: vec![],
    };
    env.handle(Event::StoreRecovered(recovery));
    env
}

#[test]
fn the_capacity_is_stored_when_it_changes_and_a_kind_nobody_offers_keeps_its_last_count() {
    let mut env = TestEnv::with_config(mrm());
    env.join_agent("n1", 2, 0);
    env.join_agent("n2", 2, 1);
    assert_eq!(capacities(&env.take_persists()), [(2, 0), (4, 1)]);
    env.leave("n2");
    env.leave("n1");
    // n2 leaving lowers the map slots; no agent offers reduce slots now, and none
    // offers any once n1 leaves too: the last counts stay.
    assert_eq!(capacities(&env.take_persists()), [(2, 1)]);
    // Without MRM admission nothing is stored.
    let mut off = TestEnv::new();
    off.join_agent("n1", 2, 0);
    assert_eq!(capacities(&off.take_persists()), []);
}

#[test]
fn a_restarted_master_quotes_against_the_recovered_capacity_until_agents_reconnect() {
    let mut env = restarted(Some([4, 1]));
    let now = env.now;
    let quote = env.core.quote(now, &four_maps()).unwrap();
    assert_eq!(quote.assumed_slots, Some([4, 1]));
    assert_eq!(quote.earliest, now + Duration::from_secs(10), "four tasks on the four slots last known");
    // One agent back with 2 map and 1 reduce slot: the quote is against what is offered.
    env.join_agent("n1", 2, 1);
    let quote = env.core.quote(now, &four_maps()).unwrap();
    assert_eq!(quote.assumed_slots, None);
    assert_eq!(quote.earliest, now + Duration::from_secs(20));
}

#[test]
fn a_restarted_master_with_no_stored_capacity_cannot_quote_before_an_agent_joins() {
    let mut env = restarted(None);
    assert_eq!(env.core.quote(env.now, &four_maps()).unwrap_err(), QuoteError::NoSlots("map"));
}
