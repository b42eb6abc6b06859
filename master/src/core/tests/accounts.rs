//! Account scenarios: creation and grants are durable before they are acknowledged,
//! balances never go below zero, only admins write, users read only what they belong
//! to, and a restart restores balances from the ledger.

use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{AccountSummary, EntryKind, ErrorKind, ErrorReply, LedgerEntry, Response};

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob, caller, root};
use crate::core::{Command, Event, Persist, StoredAccount};

fn id(name: &str) -> AccountId {
    AccountId(name.into())
}

fn cr(text: &str) -> Credits {
    text.parse().unwrap()
}

fn add_account(
    env: &mut TestEnv,
    who: Identity,
    name: &str,
    budget: Option<&str>,
    members: &[&str],
) -> Response {
    let request = env.request();
    let members = members.iter().map(|m| (*m).to_string()).collect();
    let event = Event::AccountAddRequested {
        request,
        caller: who,
        account: id(name),
        budget: budget.map(cr),
        members,
    };
    env.handle(event);
    env.take_reply(request)
}

fn add_budget(env: &mut TestEnv, who: Identity, name: &str, amount: &str) -> Response {
    let request = env.request();
    let event = Event::BudgetAddRequested {
        request,
        caller: who,
        account: id(name),
        amount: cr(amount),
        memo: Some(format!("add {amount}")),
    };
    env.handle(event);
    env.take_reply(request)
}

fn error(response: Response) -> ErrorReply {
    match response {
        Response::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn summary(env: &TestEnv, who: &Identity, name: &str) -> AccountSummary {
    env.core.view().accounts(who, Some(&id(name))).expect("readable").remove(0)
}

#[test]
fn account_add_stores_the_account_and_its_first_grant_before_replying() {
    let mut env = TestEnv::new();
    let response = add_account(&mut env, root(), "lab", Some("10"), &["alice"]);
    let kinds: Vec<&str> = env
        .last
        .iter()
        .map(|c| match c {
            Command::Persist(Persist::Account { .. }) => "account",
            Command::Persist(Persist::Ledger(_)) => "ledger",
            Command::Reply { .. } => "reply",
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["account", "ledger", "reply"]);
    let Response::AccountAdded(added) = response else { panic!("{response:?}") };
    assert_eq!((added.balance, added.granted, added.entries, added.last_seq), (cr("10"), cr("10"), 1, 1));
    assert_eq!((added.created, added.members), (Some(env.now), vec!["alice".to_string()]));
    let persists = env.take_persists();
    assert_eq!(
        persists[0],
        Persist::Account { account: id("lab"), members: vec!["alice".into()], created: env.now }
    );
    let Persist::Ledger(entry) = &persists[1] else { panic!("{persists:?}") };
    assert_eq!(
        (entry.seq, entry.amount, &entry.kind),
        (1, cr("10"), &EntryKind::Grant { by: "root".into() })
    );
    env.assert_no_commands();
}

#[test]
fn grants_and_adjustments_derive_the_balance_and_overdraws_are_refused() {
    let mut env = TestEnv::new();
    add_account(&mut env, root(), "alice", None, &[]);
    assert!(matches!(add_budget(&mut env, root(), "alice", "5"), Response::BudgetAdded { .. }));
    let Response::BudgetAdded { entry, account } = add_budget(&mut env, root(), "alice", "-1.25") else {
        panic!("adjustment refused")
    };
    assert_eq!(entry.amount, cr("-1.25"));
    assert!(matches!(entry.kind, EntryKind::Charge { job: None, .. }), "{entry:?}");
    assert_eq!((account.granted, account.charged, account.balance), (cr("5"), cr("1.25"), cr("3.75")));
    env.take_persists();

    // Taking back more than is left would go below zero: refused, nothing stored.
    let refused = error(add_budget(&mut env, root(), "alice", "-3.750001"));
    assert_eq!(refused.kind, ErrorKind::BadRequest);
    assert_eq!(refused.message, "account alice has 3.75 left, less than the 3.750001 asked for");
    let zero = error(add_budget(&mut env, root(), "alice", "0"));
    assert_eq!(zero.kind, ErrorKind::BadRequest);
    assert!(env.take_persists().is_empty());
    assert_eq!(summary(&env, &alice(), "alice").balance, cr("3.75"));
    env.assert_no_commands();
}

#[test]
fn grants_need_a_created_account_and_say_how_to_create_it() {
    let mut env = TestEnv::new();
    let err = error(add_budget(&mut env, root(), "carol", "1"));
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert_eq!(err.message, "no account carol; create it with `slotmarket account add carol`");
    let dup = {
        add_account(&mut env, root(), "carol", None, &[]);
        error(add_account(&mut env, root(), "carol", Some("1"), &[]))
    };
    assert_eq!((dup.kind, dup.message.as_str()), (ErrorKind::BadRequest, "account carol already exists"));
    let bad = error(add_account(&mut env, root(), "../etc", None, &[]));
    assert!(bad.message.starts_with("\"../etc\" is not a valid account name"), "{}", bad.message);
    env.assert_no_commands();
}

#[test]
fn only_admins_create_accounts_or_grant_budget() {
    let mut env = TestEnv::new();
    add_account(&mut env, root(), "bob", Some("2"), &[]);
    env.take_persists();
    for who in [alice(), bob(), caller(Role::Agent, "node-1")] {
        assert_eq!(error(add_account(&mut env, who.clone(), "x", Some("1"), &[])).kind, ErrorKind::Forbidden);
        // The same answer for an existing account and a missing one: nothing leaks.
        let existing = error(add_budget(&mut env, who.clone(), "bob", "100"));
        let missing = error(add_budget(&mut env, who.clone(), "nobody", "100"));
        assert_eq!(existing.kind, ErrorKind::Forbidden, "{who}");
        assert_eq!(existing, missing, "{who}");
    }
    assert!(env.take_persists().is_empty());
    assert_eq!(summary(&env, &root(), "bob").balance, cr("2"), "bob charged himself nothing");
    env.assert_no_commands();
}

#[test]
fn users_read_only_accounts_they_belong_to() {
    let mut env = TestEnv::new();
    add_account(&mut env, root(), "bob", Some("2"), &[]);
    add_account(&mut env, root(), "lab", Some("7"), &["alice"]);
    let view = env.core.view();
    let names = |who: &Identity| -> Vec<String> {
        view.accounts(who, None).unwrap().into_iter().map(|a| a.account.0).collect()
    };
    assert_eq!(names(&alice()), ["alice", "lab"]);
    assert_eq!(names(&bob()), ["bob"]);
    assert_eq!(names(&root()), ["bob", "lab"]);
    // alice's own account is implicit: visible, empty, not created.
    let own = view.accounts(&alice(), Some(&id("alice"))).unwrap().remove(0);
    assert_eq!((own.created, own.balance), (None, Credits::ZERO));
    // bob's account reads exactly like one that does not exist.
    let other = view.accounts(&alice(), Some(&id("bob"))).unwrap_err();
    let missing = view.accounts(&alice(), Some(&id("ghost"))).unwrap_err();
    assert_eq!(other.kind, ErrorKind::NotFound);
    assert_eq!(other.message.replace("bob", "X"), missing.message.replace("ghost", "X"));
    assert_eq!(view.ledger(&alice(), &id("bob"), 0, 10).unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(view.ledger(&alice(), &id("lab"), 0, 10).unwrap().entries.len(), 1);
    let agent = caller(Role::Agent, "bob");
    assert!(view.accounts(&agent, None).unwrap().is_empty());
    assert!(view.accounts(&agent, Some(&id("bob"))).is_err());
    // Members run jobs on the account; others are refused.
    let mut spec = JobBuilder::maps(1).build();
    spec.account = Some("lab".into());
    assert!(matches!(env.submit_as(alice(), spec.clone()), Response::Submitted { .. }));
    assert!(matches!(env.submit_as(bob(), spec), Response::Error(e) if e.kind == ErrorKind::Forbidden));
    env.take_persists();
    env.assert_no_commands();
}

#[test]
fn a_member_is_told_an_admin_sets_a_shared_accounts_rate_and_others_hear_of_no_account() {
    let mut env = TestEnv::new();
    add_account(&mut env, root(), "lab", Some("7"), &["alice"]);
    let mut set_lab_rate = |who: Identity| {
        let request = env.request();
        env.handle(Event::RateSetRequested { request, caller: who, account: Some(id("lab")), rate: cr("3") });
        error(env.take_reply(request))
    };
    let member = set_lab_rate(alice());
    assert_eq!(member.kind, ErrorKind::Forbidden);
    assert_eq!(member.message, "users set only their own account's rate; an admin sets lab's");
    let outsider = set_lab_rate(bob());
    assert_eq!(outsider.kind, ErrorKind::NotFound);
    assert!(outsider.message.starts_with("no account lab"), "{}", outsider.message);
    env.take_persists();
    env.assert_no_commands();
}

#[test]
fn recovered_accounts_keep_their_balances_and_the_sequence_continues() {
    let mut env = TestEnv::new();
    add_account(&mut env, root(), "lab", Some("10"), &["alice"]);
    add_budget(&mut env, root(), "lab", "-4");
    let ledger: Vec<LedgerEntry> = env
        .take_persists()
        .into_iter()
        .filter_map(|p| match p {
            Persist::Ledger(entry) => Some(entry),
            _ => None,
        })
        .collect();
    let before = summary(&env, &root(), "lab");

    let mut restarted = TestEnv::new();
    let accounts =
        vec![StoredAccount { account: id("lab"), members: vec!["alice".into()], created: env.now }];
    let out = restarted.handle(Event::AccountsRecovered { accounts, ledger });
    assert!(out.is_empty(), "recovery writes nothing: {out:?}");
    assert_eq!(summary(&restarted, &alice(), "lab"), before);
    assert_eq!(restarted.core.view().accounts_refused_on_replay(), 0);
    let Response::BudgetAdded { entry, account } = add_budget(&mut restarted, root(), "lab", "1") else {
        panic!("grant after restart refused")
    };
    assert_eq!((entry.seq, account.balance), (3, cr("7")));
    restarted.assert_no_commands();
}
