//! DP (`proportional`) scenarios through the real core: shares follow spending rates at
//! each allocation interval, freed slots go to the account furthest below its share,
//! preemption takes slots back youngest first, and interval charges and income reach the
//! ledger in the step that decided them, never overdrawing a budget.

use std::collections::BTreeMap;
use std::time::Duration;

use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{EntryKind, LedgerEntry, Response};
use slotmarket_common::spec::JobSpec;

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob, caller, root};
use crate::core::policy::ProportionalSettings;
use crate::core::{CoreConfig, Event, Persist, PolicySettings};

fn cr(text: &str) -> Credits {
    text.parse().unwrap()
}

/// A DP core with alice at rate 2 and bob at rate 1, a 10 s interval, and these tweaks.
fn dp_env(tweak: impl FnOnce(&mut ProportionalSettings)) -> TestEnv {
    let mut dp = ProportionalSettings {
        rates: BTreeMap::from([("alice".into(), 2.0), ("bob".into(), 1.0)]),
        ..ProportionalSettings::default()
    };
    tweak(&mut dp);
    // Agents never fall silent here: the tests jump whole intervals at once.
    let policy = PolicySettings::Proportional(dp);
    TestEnv::with_config(CoreConfig { policy, agent_timeout: Duration::MAX, ..CoreConfig::default() })
}

fn submit(env: &mut TestEnv, who: Identity, spec: JobSpec) {
    let response = env.submit_as(who, spec);
    assert!(matches!(response, Response::Submitted { .. }), "{response:?}");
}

fn create_account(env: &mut TestEnv, name: &str, budget: &str) {
    let request = env.request();
    let account = AccountId(name.into());
    env.handle(Event::AccountAddRequested {
        request,
        caller: root(),
        account,
        budget: Some(cr(budget)),
        members: Vec::new(),
    });
    let reply = env.take_reply(request);
    assert!(!matches!(reply, Response::Error(_)), "{reply:?}");
}

/// Launches taken, counted by account.
fn launches_by_account(env: &mut TestEnv) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for launch in env.take_all_launches() {
        *out.entry(launch.account.to_string()).or_default() += 1;
    }
    out
}

fn ledger_entries(env: &mut TestEnv) -> Vec<LedgerEntry> {
    env.take_persists()
        .into_iter()
        .filter_map(|p| match p {
            Persist::Ledger(e) => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn shares_follow_rates_as_tasks_finish() {
    let mut env = dp_env(|_| {});
    env.join_agent("n1", 6, 0);
    submit(&mut env, alice(), JobBuilder::maps(20).build());
    let first = env.take_all_launches();
    assert_eq!(first.len(), 6, "alone, alice takes every slot (work-conserving)");
    submit(&mut env, bob(), JobBuilder::maps(20).build());
    env.assert_no_commands();
    env.advance(10);
    env.tick();
    // Allotments 4 : 2. Each freed slot goes to bob until he has his two.
    let mut freed = first.iter().map(|l| l.container);
    for expected in ["bob", "bob", "alice", "alice"] {
        let Some(container) = freed.next() else { panic!("ran out of containers") };
        env.finish(container);
        let got = launches_by_account(&mut env);
        assert_eq!(got, BTreeMap::from([(expected.to_string(), 1)]));
    }
}

#[test]
fn preemption_kills_the_youngest_tasks_of_the_account_over_its_share() {
    let mut env = dp_env(|dp| dp.preemption = true);
    env.join_agent("n1", 6, 0);
    submit(&mut env, alice(), JobBuilder::maps(20).build());
    let first = env.take_all_launches();
    // Bob's arrival allots him 2 of 6 at once; without a grace period, 2 of alice's are
    // killed in the same step.
    submit(&mut env, bob(), JobBuilder::maps(20).build());
    let kills = env.take_kills(2);
    let mut killed: Vec<_> = kills.iter().map(|k| k.1).collect();
    killed.sort();
    let youngest: Vec<_> = first.iter().rev().take(2).map(|l| l.container).rev().collect();
    assert_eq!(killed, youngest);
    assert!(kills.iter().all(|k| k.2.contains("proportional")), "{kills:?}");
    // Once the kills land, the slots go to bob.
    for (_, container, _) in kills {
        env.run_to(container, slotmarket_common::container::ContainerState::Killed);
    }
    assert_eq!(launches_by_account(&mut env), BTreeMap::from([("bob".to_string(), 2)]));
    // The next interval finds everyone at their share: nothing more is killed.
    env.advance(10);
    env.tick();
    env.take_kills(0);
}

#[test]
fn a_grace_period_delays_preemption() {
    let mut env = dp_env(|dp| {
        dp.preemption = true;
        dp.grace_s = 15.0;
    });
    env.join_agent("n1", 6, 0);
    submit(&mut env, alice(), JobBuilder::maps(20).build());
    env.take_all_launches();
    submit(&mut env, bob(), JobBuilder::maps(20).build());
    env.take_kills(0);
    env.advance(10);
    env.tick();
    env.take_kills(0);
    env.advance(10);
    env.tick();
    assert_eq!(env.take_kills(2).len(), 2, "bob has waited 20 s > 15 s of grace");
}

#[test]
fn each_interval_charges_rate_times_slots_used() {
    let mut env = dp_env(|_| {});
    create_account(&mut env, "alice", "100");
    env.join_agent("n1", 4, 0);
    env.take_persists();
    submit(&mut env, alice(), JobBuilder::maps(20).build());
    env.take_all_launches();
    env.take_persists();
    env.advance(1800);
    env.tick();
    let entries = ledger_entries(&mut env);
    // 4 slots for half an hour at 2 per slot-hour: 4 credits.
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].amount, cr("-4"));
    assert!(matches!(entries[0].kind, EntryKind::Charge { job: None, .. }), "{entries:?}");
    let balance = env.core.state().accounts.get(&AccountId("alice".into())).map(|a| a.balance());
    assert_eq!(balance, Some(cr("96")));
}

#[test]
fn a_spent_budget_competes_at_rate_zero_but_still_uses_idle_slots() {
    let mut env = dp_env(|_| {});
    create_account(&mut env, "alice", "1");
    env.join_agent("n1", 4, 0);
    submit(&mut env, alice(), JobBuilder::maps(40).build());
    let alices = env.take_all_launches();
    assert_eq!(alices.len(), 4);
    env.take_persists();
    // An hour of 4 slots at rate 2 would cost 8; only the 1 left is taken.
    env.advance(3600);
    env.tick();
    let entries = ledger_entries(&mut env);
    assert_eq!(entries.iter().map(|e| e.amount).collect::<Vec<_>>(), vec![cr("-1")]);
    let account = AccountId("alice".into());
    assert_eq!(env.core.state().accounts.get(&account).map(|a| a.balance()), Some(Credits::ZERO));
    // Alone and broke, alice keeps the idle slots: a finished task is replaced by hers.
    env.finish(alices[0].container);
    assert_eq!(launches_by_account(&mut env), BTreeMap::from([("alice".to_string(), 1)]));
    // Bob (unmetered, rate 1) arrives: at the next interval he is allotted every slot, so
    // freed slots go to him; alice's later charges take nothing (no entry below zero).
    submit(&mut env, bob(), JobBuilder::maps(40).build());
    env.advance(10);
    env.tick();
    assert!(ledger_entries(&mut env).is_empty());
    env.finish(alices[1].container);
    assert_eq!(launches_by_account(&mut env), BTreeMap::from([("bob".to_string(), 1)]));
}

#[test]
fn income_is_credited_every_interval() {
    let mut env = dp_env(|dp| {
        dp.income = BTreeMap::from([("alice".into(), 36.0)]);
        dp.default_rate = 0.0;
        dp.rates.clear();
    });
    create_account(&mut env, "alice", "5");
    env.join_agent("n1", 1, 0);
    submit(&mut env, alice(), JobBuilder::maps(5).build());
    env.take_all_launches();
    env.take_persists();
    env.advance(10);
    env.tick();
    let entries = ledger_entries(&mut env);
    // 36 per hour for 10 s: 0.1 credit; rate 0 charges nothing.
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].amount, cr("0.1"));
    assert!(matches!(entries[0].kind, EntryKind::Income { .. }), "{entries:?}");
    let balance = env.core.state().accounts.get(&AccountId("alice".into())).map(|a| a.balance());
    assert_eq!(balance, Some(cr("5.1")));
}

#[test]
fn the_interval_is_the_policys_wakeup_only_while_there_is_work() {
    let mut env = dp_env(|_| {});
    env.join_agent("n1", 2, 0);
    submit(&mut env, alice(), JobBuilder::maps(1).build());
    let launched = env.take_all_launches();
    let due = env.now + Duration::from_secs(10);
    assert!(env.core.next_wakeup().is_some_and(|at| at <= due));
    env.finish(launched[0].container);
    // The job ended: the policy no longer asks to be woken.
    assert_eq!(env.core.next_wakeup().filter(|&at| at == due), None);
}

fn set_rate(env: &mut TestEnv, who: Identity, account: Option<&str>, rate: &str) -> Response {
    let request = env.request();
    let account = account.map(|a| AccountId(a.into()));
    env.handle(Event::RateSetRequested { request, caller: who, account, rate: cr(rate) });
    env.take_reply(request)
}

#[test]
fn users_set_only_their_own_rate_and_it_moves_slots_from_the_next_interval() {
    let mut env = dp_env(|dp| dp.preemption = true);
    env.join_agent("n1", 6, 0);
    let refused = set_rate(&mut env, alice(), Some("bob"), "9");
    assert!(matches!(&refused, Response::Error(e) if e.message.contains("no account bob")), "{refused:?}");
    let refused = set_rate(&mut env, alice(), None, "-1");
    assert!(
        matches!(&refused, Response::Error(e) if e.message.contains("must not be negative")),
        "{refused:?}"
    );
    submit(&mut env, alice(), JobBuilder::maps(30).build());
    submit(&mut env, bob(), JobBuilder::maps(30).build());
    let first = launches_by_account(&mut env);
    assert_eq!(first, BTreeMap::from([("alice".to_string(), 6)]), "alice arrived first, alone");
    // Bob bids 1 against alice's 2 at once: 2 of 6 are his.
    let kills = env.take_kills(2);
    for (_, container, _) in kills {
        env.run_to(container, slotmarket_common::container::ContainerState::Killed);
    }
    assert_eq!(launches_by_account(&mut env), BTreeMap::from([("bob".to_string(), 2)]));
    // Bob raises his rate to 4: nothing moves until the interval ends...
    let set = set_rate(&mut env, bob(), None, "4");
    assert_eq!(set, Response::RateSet { account: AccountId("bob".into()), rate: cr("4") });
    env.take_kills(0);
    // ...then 4 : 2 of 6 gives him 4, taken from alice's youngest.
    env.advance(10);
    env.tick();
    assert_eq!(env.take_kills(2).len(), 2);
}

#[test]
fn the_market_shows_the_price_and_only_the_accounts_the_caller_may_read() {
    let mut env = dp_env(|_| {});
    create_account(&mut env, "alice", "10");
    env.join_agent("n1", 6, 0);
    submit(&mut env, alice(), JobBuilder::maps(20).build());
    submit(&mut env, bob(), JobBuilder::maps(20).build());
    env.take_all_launches();
    let market = env.core.market(&root());
    assert_eq!((market.policy.as_str(), market.price), ("proportional", cr("3")));
    let rows: Vec<_> = market
        .accounts
        .iter()
        .map(|a| (a.account.0.as_str(), a.balance, a.rate, a.share, a.used, a.pending))
        .collect();
    // Admins read created accounts only: bob's is implicit (and unmetered).
    assert_eq!(rows, vec![("alice", Some(cr("10")), cr("2"), [4, 0], [6, 0], [14, 0])]);
    let bobs = env.core.market(&bob());
    assert_eq!(bobs.price, cr("3"), "the price counts every account");
    let rows: Vec<_> = bobs.accounts.iter().map(|a| (a.account.0.as_str(), a.balance, a.share)).collect();
    assert_eq!(rows, vec![("bob", None, [2, 0])]);
}

/// Bob (rate 1) holds all 6 slots when alice (rate 2) arrives; she waits `wait` seconds
/// (no preemption) and then bob's 6 tasks finish one by one. Returns who got the freed
/// slots, by account.
fn freed_slots_after_waiting(compensation_s: f64, wait: u64) -> BTreeMap<String, usize> {
    let mut env = dp_env(|dp| dp.compensation_s = compensation_s);
    env.join_agent("n1", 6, 0);
    submit(&mut env, bob(), JobBuilder::maps(60).build());
    let bobs = env.take_all_launches();
    submit(&mut env, alice(), JobBuilder::maps(60).build());
    env.advance(wait);
    env.tick();
    let mut got = BTreeMap::new();
    for launch in bobs {
        env.finish(launch.container);
        for (account, n) in launches_by_account(&mut env) {
            *got.entry(account).or_default() += n;
        }
    }
    got
}

#[test]
fn slots_an_account_waited_for_are_paid_back_by_a_larger_share() {
    // Without compensation the freed slots go 4 : 2 by rate.
    let plain = freed_slots_after_waiting(0.0, 30);
    assert_eq!(plain, BTreeMap::from([("alice".to_string(), 4), ("bob".to_string(), 2)]));
    // Alice lent her 4 slots to bob for 30 s: 120 slot-s owed, paid back over 60 s,
    // lifts her share from 4 to 6 and bob's to 0 until it is.
    let paid = freed_slots_after_waiting(60.0, 30);
    assert_eq!(paid, BTreeMap::from([("alice".to_string(), 6)]));
    // A shorter wait is owed less: 10 s, 40 slot-s, 4.67 slots, rounded to 5.
    let short = freed_slots_after_waiting(60.0, 10);
    assert_eq!(short, BTreeMap::from([("alice".to_string(), 5), ("bob".to_string(), 1)]));
}

/// Three accounts at rate 1 on 3 slots (allotment 1 each): `first` holds every slot
/// with one job, then `second` and `third` submit one second apart. Returns who got each of
/// two slots `first` frees.
fn freed_slots_to_two_waiting(first: &str, second: &str, third: &str) -> Vec<String> {
    let mut env = dp_env(|dp| dp.rates.clear());
    env.join_agent("n1", 3, 0);
    submit(&mut env, caller(Role::User, first), JobBuilder::maps(30).build());
    let held = env.take_all_launches();
    assert_eq!(held.len(), 3, "alone, {first} takes every slot");
    for name in [second, third] {
        env.advance(1);
        submit(&mut env, caller(Role::User, name), JobBuilder::maps(30).build());
        env.assert_no_commands();
    }
    let mut got = Vec::new();
    for launch in held.iter().take(2) {
        env.finish(launch.container);
        got.extend(launches_by_account(&mut env).into_keys());
    }
    got
}

#[test]
fn equally_starved_accounts_are_served_by_how_long_they_waited_not_by_name() {
    // zed and bea are both one slot below their allotment; zed waited longer, so the
    // first freed slot is his whatever the names (a tie by name made the last name lose
    // every tie: with 80 accounts one slot short at once, user80 starved for 80 minutes).
    assert_eq!(freed_slots_to_two_waiting("amy", "zed", "bea"), ["zed", "bea"]);
    assert_eq!(freed_slots_to_two_waiting("amy", "bea", "zed"), ["bea", "zed"]);
}
