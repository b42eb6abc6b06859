//! DP settings an account keeps: the spending rate its user sets and the income an
//! administrator sets are stored (`Persist::Rate`, `Persist::Income`) before the reply,
//! shown on the account, restored after a restart, and a set income overrides the
//! `[policy]` settings' one on the ledger.

use std::collections::BTreeMap;
use std::time::Duration;

use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{EntryKind, ErrorKind, Response};

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob, root};
use crate::core::policy::ProportionalSettings;
use crate::core::{Command, CoreConfig, Event, Persist, PolicySettings};

fn cr(text: &str) -> Credits {
    text.parse().unwrap()
}

fn id(name: &str) -> AccountId {
    AccountId(name.into())
}

/// A DP core (10 s interval, default rate 1) with alice's account created with 5 credits
/// and an income of 36 per hour from the settings.
fn env_with_alice() -> TestEnv {
    let dp = ProportionalSettings {
        income: BTreeMap::from([("alice".into(), 36.0)]),
        ..ProportionalSettings::default()
    };
    let policy = PolicySettings::Proportional(dp);
    let mut env =
        TestEnv::with_config(CoreConfig { policy, agent_timeout: Duration::MAX, ..CoreConfig::default() });
    let request = env.request();
    let members = Vec::new();
    env.handle(Event::AccountAddRequested {
        request,
        caller: root(),
        account: id("alice"),
        budget: Some(cr("5")),
        members,
    });
    let reply = env.take_reply(request);
    assert!(matches!(reply, Response::AccountAdded(_)), "{reply:?}");
    env.take_persists();
    env
}

/// Sends `event` and returns the commands it caused, stores and reply in order.
fn step(env: &mut TestEnv, event: Event) -> Vec<Command> {
    env.handle(event)
}

#[test]
fn an_admin_sets_income_it_is_stored_before_the_reply_and_overrides_the_settings() {
    let mut env = env_with_alice();
    let request = env.request();
    let event =
        Event::IncomeSetRequested { request, caller: alice(), account: id("alice"), income: cr("72") };
    step(&mut env, event);
    let refused = env.take_reply(request);
    assert!(matches!(&refused, Response::Error(e) if e.kind == ErrorKind::Forbidden), "{refused:?}");

    let request = env.request();
    let event = Event::IncomeSetRequested { request, caller: root(), account: id("nobody"), income: cr("1") };
    step(&mut env, event);
    let refused = env.take_reply(request);
    assert!(matches!(&refused, Response::Error(e) if e.kind == ErrorKind::NotFound), "{refused:?}");

    let request = env.request();
    let event = Event::IncomeSetRequested { request, caller: root(), account: id("alice"), income: cr("72") };
    let commands = step(&mut env, event);
    let stored = commands.iter().position(|c| {
        matches!(c, Command::Persist(Persist::Income { account, income }) if account.0 == "alice" && *income == cr("72"))
    });
    let replied = commands.iter().position(|c| matches!(c, Command::Reply { .. }));
    assert!(stored.is_some() && stored < replied, "stored before the reply: {commands:?}");
    let Response::IncomeSet(summary) = env.take_reply(request) else { panic!("not IncomeSet") };
    assert_eq!(summary.income, Some(cr("72")));
    env.take_persists();

    env.join_agent("n1", 1, 0);
    env.submit_as(alice(), JobBuilder::maps(5).build());
    env.take_all_launches();
    env.take_persists();
    env.advance(10);
    env.tick();
    let incomes: Vec<Credits> = env
        .take_persists()
        .into_iter()
        .filter_map(|p| match p {
            Persist::Ledger(e) if matches!(e.kind, EntryKind::Income { .. }) => Some(e.amount),
            _ => None,
        })
        .collect();
    // 72 per hour for 10 s is 0.2 (the settings' 36 would give 0.1).
    assert_eq!(incomes, vec![cr("0.2")]);
}

#[test]
fn a_set_rate_is_stored_and_a_restarted_core_restores_rates_and_incomes() {
    let mut env = env_with_alice();
    let request = env.request();
    let commands =
        step(&mut env, Event::RateSetRequested { request, caller: bob(), account: None, rate: cr("3") });
    assert!(
        commands.iter().any(|c| matches!(c, Command::Persist(Persist::Rate { account, rate })
            if account.0 == "bob" && *rate == cr("3"))),
        "{commands:?}"
    );
    env.take_reply(request);

    // A new core, as after a restart: the store hands back what was set.
    let mut restarted = env_with_alice();
    let rates = vec![(id("bob"), cr("3"))];
    let income = vec![(id("alice"), cr("72"))];
    restarted.handle(Event::AccountSettingsRecovered { rates, income });
    let bobs = restarted.core.view().accounts(&bob(), None).unwrap_or_default();
    assert_eq!(
        bobs.iter().map(|a| (a.account.0.as_str(), a.rate)).collect::<Vec<_>>(),
        [("bob", Some(cr("3")))]
    );
    let alices = restarted.core.view().accounts(&root(), Some(&id("alice"))).unwrap_or_default();
    assert_eq!(alices.iter().map(|a| a.income).collect::<Vec<_>>(), [Some(cr("72"))]);

    // Bob's restored rate 3 against alice's default 1: 3 of 4 slots are his.
    restarted.join_agent("n1", 4, 0);
    restarted.submit_as(bob(), JobBuilder::maps(20).build());
    restarted.submit_as(alice(), JobBuilder::maps(20).build());
    let market = restarted.core.market(&root());
    let shares: Vec<(&str, [u32; 2])> =
        market.accounts.iter().map(|a| (a.account.0.as_str(), a.share)).collect();
    assert!(shares.contains(&("alice", [1, 0])), "{shares:?}");
    assert_eq!(market.price, cr("4"));
}
