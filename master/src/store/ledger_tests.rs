//! Store round trips of accounts and the ledger, its append-only guard and the balance
//! check at recovery.

use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{EntryKind, LedgerEntry};
use slotmarket_common::time::Timestamp;

use crate::core::Persist;
use crate::core::accounting::Accounts;
use crate::store::{Store, StoreError};

fn id(name: &str) -> AccountId {
    AccountId(name.into())
}

fn cr(text: &str) -> Credits {
    text.parse().unwrap()
}

/// Two accounts with grants, an adjustment and a job charge, made by the core's own
/// rules, and the writes that record them.
fn history() -> (Accounts, Vec<Persist>) {
    let root = Identity { role: Role::Admin, principal: "root".into() };
    let mut accounts = Accounts::default();
    let mut writes = Vec::new();
    for (name, members, budget) in
        [("lab", vec!["alice".to_string(), "bob".into()], Some("10")), ("bob", vec![], None)]
    {
        let (stored, entry) =
            accounts.create(id(name), members, budget.map(cr), &root, Timestamp(5)).unwrap();
        writes.push(Persist::Account {
            account: stored.account,
            members: stored.members,
            created: stored.created,
        });
        writes.extend(entry.map(Persist::Ledger));
    }
    let entries = [
        accounts.grant(&id("bob"), cr("2.5"), &root, Some("first \"quoted\" memo".into()), Timestamp(6)),
        accounts.grant(&id("lab"), cr("-0.75"), &root, None, Timestamp(7)),
        accounts.charge(&id("lab"), cr("1.000001"), Some(JobId(9)), "price".into(), Timestamp(8)),
    ];
    writes.extend(entries.into_iter().map(|e| Persist::Ledger(e.unwrap())));
    (accounts, writes)
}

#[test]
fn accounts_and_the_ledger_survive_a_reopen_and_replay_to_the_same_balances() {
    let dir = tempfile::tempdir().unwrap();
    let (accounts, writes) = history();
    {
        let mut store = Store::open(dir.path()).unwrap();
        // Two transactions, as two batches of the actor would be.
        store.apply(&writes[..3]).unwrap();
        store.apply(&writes[3..]).unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let (stored, ledger) = store.recover_accounts().unwrap();
    assert_eq!(stored.iter().map(|a| a.account.0.as_str()).collect::<Vec<_>>(), ["bob", "lab"]);
    assert_eq!(stored[1].members, ["alice", "bob"]);
    let written: Vec<&LedgerEntry> = writes
        .iter()
        .filter_map(|w| match w {
            Persist::Ledger(e) => Some(e),
            _ => None,
        })
        .collect();
    assert_eq!(ledger.iter().collect::<Vec<_>>(), written);
    let back = Accounts::replay(stored, ledger).unwrap();
    assert_eq!(back, accounts);
    assert_eq!(back.get(&id("lab")).unwrap().balance(), cr("8.249999"));
    assert_eq!(back.get(&id("bob")).unwrap().balance(), cr("2.5"));
}

#[test]
fn the_ledger_refuses_updates_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.apply(&history().1).unwrap();
    for sql in ["UPDATE ledger SET amount_micro = 99000000 WHERE seq = 1", "DELETE FROM ledger WHERE seq = 3"]
    {
        let err = store.conn.execute(sql, []).unwrap_err();
        assert!(err.to_string().contains("the ledger is append-only"), "{sql}: {err}");
    }
    assert_eq!(store.recover_accounts().unwrap().1.len(), 4);
}

#[test]
fn an_entry_for_an_unknown_account_rolls_its_batch_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (_, writes) = history();
    let stray = LedgerEntry {
        seq: 50,
        account: id("ghost"),
        at: Timestamp(9),
        amount: cr("1"),
        kind: EntryKind::Grant { by: "root".into() },
        memo: None,
    };
    let batch = [writes[0].clone(), writes[1].clone(), Persist::Ledger(stray)];
    assert!(matches!(store.apply(&batch), Err(StoreError::Sqlite(_))));
    let (accounts, ledger) = store.recover_accounts().unwrap();
    assert!(accounts.is_empty() && ledger.is_empty());
}

#[test]
fn a_ledger_that_does_not_add_up_stops_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (_, writes) = history();
    store.apply(&writes).unwrap();
    // Written behind the core's back: a charge that takes bob below zero.
    let overdraw = LedgerEntry {
        seq: 7,
        account: id("bob"),
        at: Timestamp(10),
        amount: cr("-3"),
        kind: EntryKind::Charge { job: None, reason: "forged".into() },
        memo: None,
    };
    store.apply(&[Persist::Ledger(overdraw)]).unwrap();
    let err = store.recover_accounts().unwrap_err();
    assert_eq!(
        err.to_string(),
        "stored row is unreadable: ledger does not add up: ledger entry 7 takes account bob below zero or out of range"
    );
}

#[test]
fn an_unknown_entry_kind_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.apply(&history().1[..1]).unwrap();
    store
        .conn
        .execute(
            "INSERT INTO ledger (seq, account, at_ms, amount_micro, kind, detail) VALUES (1, 'lab', 1, 5, 'gift', 'x')",
            [],
        )
        .unwrap();
    let err = store.recover_accounts().unwrap_err();
    assert_eq!(err.to_string(), "stored row is unreadable: unknown ledger entry kind \"gift\"");
}

#[test]
fn dp_income_and_interval_charges_survive_a_reopen_as_grants_plus_income_minus_charges() {
    let dir = tempfile::tempdir().unwrap();
    let root = Identity { role: Role::Admin, principal: "root".into() };
    let mut accounts = Accounts::default();
    let (stored, grant) = accounts.create(id("lab"), vec![], Some(cr("3")), &root, Timestamp(5)).unwrap();
    let mut writes =
        vec![Persist::Account { account: stored.account, members: stored.members, created: stored.created }];
    writes.extend(grant.map(Persist::Ledger));
    let income =
        accounts.credit_income(&id("lab"), cr("0.5"), "income for 10.0 s".into(), Timestamp(6)).unwrap();
    let charge = accounts.charge_up_to(&id("lab"), cr("2"), "2 slots".into(), Timestamp(7)).unwrap();
    // More than is left: only the balance is taken, nothing below zero.
    let clipped = accounts.charge_up_to(&id("lab"), cr("9"), "4 slots".into(), Timestamp(8)).unwrap();
    assert_eq!(clipped.as_ref().map(|e| e.amount), Some(cr("-1.5")));
    assert_eq!(accounts.charge_up_to(&id("lab"), cr("1"), "broke".into(), Timestamp(9)).unwrap(), None);
    writes.extend([income, charge.unwrap(), clipped.unwrap()].into_iter().map(Persist::Ledger));
    Store::open(dir.path()).unwrap().apply(&writes).unwrap();
    let (stored, ledger) = Store::open(dir.path()).unwrap().recover_accounts().unwrap();
    assert!(matches!(ledger[1].kind, EntryKind::Income { .. }), "{ledger:?}");
    let back = Accounts::replay(stored, ledger).unwrap();
    assert_eq!(back, accounts);
    let lab = back.get(&id("lab")).unwrap();
    // grants 3 + income 0.5 - charges (2 + 1.5) = 0.
    assert_eq!((lab.granted(), lab.charged(), lab.balance()), (cr("3.5"), cr("3.5"), Credits::ZERO));
}

#[test]
fn a_deadline_purchase_reads_back_and_prices_its_ended_job() {
    use slotmarket_common::protocol::JobState;

    use crate::store::test_fixtures::{Admission, map_spec};

    let dir = tempfile::tempdir().unwrap();
    let root = Identity { role: Role::Admin, principal: "root".into() };
    let mut accounts = Accounts::default();
    let (stored, grant) = accounts.create(id("alice"), vec![], Some(cr("1")), &root, Timestamp(5)).unwrap();
    let (job, deadline) = (JobId(3), Timestamp(90_000));
    let purchase = accounts.purchase_deadline(&id("alice"), cr("0.25"), job, deadline, Timestamp(6)).unwrap();
    let writes = vec![
        Persist::Account { account: stored.account, members: stored.members, created: stored.created },
        Persist::Ledger(grant.unwrap()),
        Admission { spec: map_spec(1), submitted: 6, deadline: Some(deadline.0), ..Admission::of(job.0) }
            .persist(),
        Persist::Ledger(purchase.clone()),
        Persist::JobState {
            job,
            state: JobState::Completed,
            at: Timestamp(50_000),
            message: None,
            tasks_completed: 1,
        },
    ];
    Store::open(dir.path()).unwrap().apply(&writes).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (_, ledger) = store.recover_accounts().unwrap();
    assert_eq!(ledger[1], purchase);
    assert_eq!(ledger[1].kind, EntryKind::DeadlinePurchase { job, deadline });
    // An ended job listed from the store alone shows what its deadline cost.
    let status = store.ended_job_status(job).unwrap().unwrap();
    assert_eq!((status.summary.price, status.summary.paid), (Some(cr("0.25")), Some(cr("0.25"))));
    assert_eq!(status.summary.deadline, Some(deadline));
}

#[test]
fn dp_rates_and_incomes_are_kept_and_the_latest_setting_wins() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store
        .apply(&[
            Persist::Rate { account: id("bob"), rate: cr("2") },
            Persist::Income { account: id("lab"), income: cr("10") },
            Persist::Rate { account: id("lab"), rate: cr("1.5") },
        ])
        .unwrap();
    store.apply(&[Persist::Rate { account: id("bob"), rate: cr("4") }]).unwrap();
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    let (rates, income) = store.recover_account_settings().unwrap();
    assert_eq!(rates, vec![(id("bob"), cr("4")), (id("lab"), cr("1.5"))]);
    assert_eq!(income, vec![(id("lab"), cr("10"))]);
}
