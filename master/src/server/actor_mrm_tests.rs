//! Actor tests of MRM on the live path: quotes, a bought deadline stored with its charge
//! and recovered by the next master, refusals that store nothing, and admission off.

use std::path::Path;

use slotmarket_common::identity::Role;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{DeadlineChoice, EntryKind, JobState};
use slotmarket_common::spec::JobSpec;

use super::test_support::register_node;
use super::*;
use crate::core::{AdmissionMode, AdmissionSettings, CoreConfig};
use crate::server::DEFAULT_HEARTBEAT_INTERVAL;
use crate::server::launches::launch_budget;
use slotmarket_common::protocol::DEFAULT_MAX_FRAME;

/// Four map tasks of exactly 10 s (an `[estimate]`, no spread).
const SPEC: &str = "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 4\nslot = \"map\"\ncommand = \"true\"\n\
                    [estimate]\nmap_task_ms = 10000\nspread_pct = 0\ntask_spread_pct = 0\n";

fn actor_on(dir: &Path, mode: AdmissionMode) -> Actor {
    let admission = AdmissionSettings { mode, ..AdmissionSettings::default() };
    let config = CoreConfig { admission, predict_from_progress: true, ..CoreConfig::default() };
    let store = Store::open(dir).unwrap();
    Actor::new(Core::new(config), store, DEFAULT_HEARTBEAT_INTERVAL, launch_budget(DEFAULT_MAX_FRAME))
        .unwrap()
}

fn who(role: Role, principal: &str) -> Identity {
    Identity { role, principal: principal.into() }
}

fn ask(actor: &mut Actor, caller: Identity, request: Request) -> Response {
    let (reply, mut reply_rx) = oneshot::channel();
    let commands = actor.on_input(Input::Request { caller, request, reply });
    actor.execute_settled(commands).unwrap();
    reply_rx.try_recv().unwrap()
}

/// A master with one agent of two map slots and alice's account holding `budget`.
fn market(dir: &Path, budget: &str) -> (Actor, mpsc::UnboundedReceiver<MasterToAgent>) {
    let mut actor = actor_on(dir, AdmissionMode::Mrm);
    actor.recover().unwrap();
    let (_, outbound_rx) = register_node(&mut actor, 2, Vec::new());
    let add = Request::AccountAdd {
        account: AccountId("alice".into()),
        budget: Some(budget.parse().unwrap()),
        members: vec![],
    };
    assert!(matches!(ask(&mut actor, who(Role::Admin, "root"), add), Response::AccountAdded(_)));
    (actor, outbound_rx)
}

fn spec() -> JobSpec {
    JobSpec::from_toml(SPEC).unwrap()
}

#[test]
fn a_bought_deadline_is_stored_with_its_charge_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut actor, _agent) = market(dir.path(), "1");
    let alice = who(Role::User, "alice");
    let Response::Quote(quote) = ask(&mut actor, alice.clone(), Request::Quote { spec: spec() }) else {
        panic!("no quote")
    };
    assert_eq!((quote.work_upper_ms, quote.admitted), (40_000, 0));
    assert!(quote.curve.windows(2).all(|w| w[0].price >= w[1].price), "{:?}", quote.curve);

    let buy = Request::SubmitChoosing { spec: spec(), choice: DeadlineChoice::Earliest };
    let Response::Purchased(bought) = ask(&mut actor, alice.clone(), buy) else { panic!("refused") };
    // The earliest is 20 s after the quote (4 × 10 s on 2 slots), give or take the clock.
    let after_quote = bought.deadline.saturating_since(quote.at);
    assert!((20_000..21_000).contains(&after_quote.as_millis()), "{after_quote:?}");
    assert_eq!(bought.price, quote.earliest.price);
    let Response::Job(status) = ask(&mut actor, alice.clone(), Request::Status { job: bought.job }) else {
        panic!("no status")
    };
    let summary = &status.summary;
    assert_eq!(
        (summary.deadline, summary.price, summary.paid),
        (Some(bought.deadline), Some(bought.price), Some(bought.price))
    );
    let predicted = summary.predicted_finish.expect("a deadline job has a predicted finish");
    // Nothing ran yet: the model still expects 20 s of work from now (a few ms later).
    let late = predicted.saturating_since(bought.deadline);
    assert!(late.as_millis() < 1_000, "{predicted:?} vs {:?}", bought.deadline);
    drop(actor);

    // The next master: the job, its deadline and price, and the balance.
    let mut next = actor_on(dir.path(), AdmissionMode::Mrm);
    assert_eq!(next.recover().unwrap(), 1);
    let (_, ledger) = next.store.recover_accounts().unwrap();
    let purchase = ledger.iter().find(|e| matches!(e.kind, EntryKind::DeadlinePurchase { .. })).unwrap();
    assert_eq!(purchase.kind, EntryKind::DeadlinePurchase { job: bought.job, deadline: bought.deadline });
    assert_eq!(purchase.amount, Credits(-bought.price.micros()));
    let Response::Job(status) = ask(&mut next, alice.clone(), Request::Status { job: bought.job }) else {
        panic!("no status after restart")
    };
    assert_eq!(status.summary.state, JobState::Pending);
    assert_eq!((status.summary.deadline, status.summary.price), (Some(bought.deadline), Some(bought.price)));
    let Response::Accounts(accounts) = ask(&mut next, alice, Request::Account { account: None }) else {
        panic!("no accounts")
    };
    assert_eq!(accounts[0].balance, Credits(1_000_000 - bought.price.micros()));
}

#[test]
fn a_refused_choice_stores_nothing_and_names_the_alternative() {
    let dir = tempfile::tempdir().unwrap();
    let (mut actor, _agent) = market(dir.path(), "0.001");
    let alice = who(Role::User, "alice");
    let buy = Request::SubmitChoosing { spec: spec(), choice: DeadlineChoice::Earliest };
    let Response::ChoiceRefused(refusal) = ask(&mut actor, alice.clone(), buy) else {
        panic!("a deadline was sold over the balance")
    };
    assert!(refusal.reason.contains("holds 0.001"), "{}", refusal.reason);
    assert!(refusal.earliest.is_some() && refusal.affordable.is_none(), "{refusal:?}");
    let (_, ledger) = actor.store.recover_accounts().unwrap();
    assert_eq!(ledger.len(), 1, "only the grant: {ledger:?}");
    assert_eq!(actor.store.recover().unwrap().len(), 0, "no job stored");
}

#[test]
fn with_admission_off_a_quote_is_an_error_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path(), AdmissionMode::None);
    let Response::Error(err) = ask(&mut actor, who(Role::User, "alice"), Request::Quote { spec: spec() })
    else {
        panic!("quoted with admission off")
    };
    assert!(err.message.contains("admission is off"), "{}", err.message);
}

#[test]
fn under_mrm_a_spec_deadline_must_be_bought_and_a_plain_job_runs_best_effort() {
    let dir = tempfile::tempdir().unwrap();
    let (mut actor, _agent) = market(dir.path(), "1");
    let alice = who(Role::User, "alice");
    let mut with_deadline = spec();
    with_deadline.deadline = Some(slotmarket_common::spec::DeadlineSpec::In(Duration::from_secs(60)));
    let Response::Error(err) = ask(&mut actor, alice.clone(), Request::Submit { spec: with_deadline }) else {
        panic!("a deadline was taken without being bought")
    };
    assert!(err.message.contains("slotmarket submit --deadline"), "{}", err.message);
    let Response::Submitted { job } = ask(&mut actor, alice.clone(), Request::Submit { spec: spec() }) else {
        panic!("a best-effort job was refused")
    };
    let Response::Job(status) = ask(&mut actor, alice.clone(), Request::Status { job }) else {
        panic!("no status")
    };
    assert_eq!((status.summary.deadline, status.summary.price), (None, None));
    // Nor can a deadline be set by hand afterwards, which would skip pricing too.
    let set = Request::SetDeadline { job, deadline: Some(Timestamp(u64::MAX / 2)) };
    let Response::Error(err) = ask(&mut actor, alice.clone(), set) else {
        panic!("a deadline was set by hand under MRM")
    };
    assert!(err.message.contains("cannot be moved"), "{}", err.message);
    let Response::Job(status) = ask(&mut actor, alice, Request::Status { job }) else { panic!("no status") };
    assert_eq!(status.summary.deadline, None);
}
