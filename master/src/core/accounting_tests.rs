//! Unit tests of the accounting arithmetic and rules.

use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{EntryKind, LedgerEntry};
use slotmarket_common::time::Timestamp;

use super::{AccountError, Accounts, ReplayError, StoredAccount};

const T: Timestamp = Timestamp(1_000);

fn who(role: Role, name: &str) -> Identity {
    Identity { role, principal: name.into() }
}

fn root() -> Identity {
    who(Role::Admin, "root")
}

fn id(name: &str) -> AccountId {
    AccountId(name.into())
}

fn cr(text: &str) -> Credits {
    text.parse().unwrap()
}

/// `lab` with members alice and carol and a budget of 10; `bob` with nothing.
fn accounts() -> Accounts {
    let mut a = Accounts::default();
    a.create(id("lab"), vec!["alice".into(), "carol".into()], Some(cr("10")), &root(), T).unwrap();
    a.create(id("bob"), vec![], None, &root(), T).unwrap();
    a
}

#[test]
fn balance_is_grants_minus_charges_exactly() {
    let mut a = accounts();
    a.grant(&id("lab"), cr("0.1"), &root(), Some("top-up".into()), T).unwrap();
    a.grant(&id("lab"), cr("0.2"), &root(), None, T).unwrap();
    a.charge(&id("lab"), cr("3.3"), Some(JobId(4)), "price".into(), T).unwrap();
    let lab = a.get(&id("lab")).unwrap();
    assert_eq!((lab.granted(), lab.charged(), lab.balance()), (cr("10.3"), cr("3.3"), cr("7")));
    let seqs: Vec<u64> = lab.entries().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    let sum = lab.entries().iter().try_fold(Credits::ZERO, |s, e| s.checked_add(e.amount)).unwrap();
    assert_eq!(sum, lab.balance());
    a.check().unwrap();
}

#[test]
fn charges_never_take_a_balance_below_zero() {
    let mut a = accounts();
    let err = a.charge(&id("lab"), cr("10.000001"), None, "too much".into(), T).unwrap_err();
    assert_eq!(
        err,
        AccountError::InsufficientFunds { account: id("lab"), balance: cr("10"), amount: cr("10.000001") }
    );
    let err = a.grant(&id("lab"), cr("-11"), &root(), None, T).unwrap_err();
    assert!(matches!(err, AccountError::InsufficientFunds { .. }), "{err:?}");
    // Nothing was posted by the refusals; spending it all to exactly zero is fine.
    assert_eq!(a.get(&id("lab")).unwrap().entries().len(), 1);
    let entry = a.charge(&id("lab"), cr("10"), None, "all".into(), T).unwrap();
    assert_eq!((entry.seq, entry.amount), (2, cr("-10")));
    assert_eq!(a.get(&id("lab")).unwrap().balance(), Credits::ZERO);
    a.check().unwrap();
}

#[test]
fn a_negative_grant_is_a_charge_without_a_job_naming_the_admin() {
    let mut a = accounts();
    let entry = a.grant(&id("lab"), cr("-2.5"), &root(), Some("refund error".into()), T).unwrap();
    assert_eq!(entry.kind, EntryKind::Charge { job: None, reason: "budget reduced by admin:root".into() });
    assert_eq!(entry.memo.as_deref(), Some("refund error"));
    let positive = a.grant(&id("lab"), cr("1"), &root(), None, T).unwrap();
    assert_eq!(positive.kind, EntryKind::Grant { by: "root".into() });
    assert_eq!(a.get(&id("lab")).unwrap().balance(), cr("8.5"));
}

#[test]
fn bad_requests_change_nothing() {
    let mut a = accounts();
    let before = a.clone();
    let cases = [
        a.create(id("lab"), vec![], None, &root(), T).err(),
        a.create(id("a b"), vec![], None, &root(), T).err(),
        a.create(id("x"), vec!["bad/name".into()], None, &root(), T).err(),
        a.create(id("x"), vec!["m".into(); 257], None, &root(), T).err(),
        a.create(id("x"), vec![], Some(cr("-1")), &root(), T).err(),
        a.create(id("x"), vec![], Some(Credits::ZERO), &root(), T).err(),
        a.grant(&id("nobody"), cr("1"), &root(), None, T).err(),
        a.grant(&id("lab"), Credits::ZERO, &root(), None, T).err(),
        a.grant(&id("lab"), cr("1"), &root(), Some("a\u{1b}[2Jb".into()), T).err(),
        a.grant(&id("lab"), cr("1"), &root(), Some("m".repeat(201)), T).err(),
        a.grant(&id("lab"), Credits(i64::MAX), &root(), None, T).err(),
    ];
    assert!(cases.iter().all(Option::is_some), "{cases:?}");
    assert!(matches!(cases[0], Some(AccountError::Exists { .. })));
    assert!(matches!(cases[1], Some(AccountError::BadName { .. })));
    assert!(matches!(cases[2], Some(AccountError::BadMember { .. })));
    assert!(matches!(cases[3], Some(AccountError::TooManyMembers { count: 257 })));
    assert!(matches!(cases[4], Some(AccountError::NonPositiveBudget { .. })));
    assert!(matches!(cases[6], Some(AccountError::NotFound { .. })));
    assert!(matches!(cases[7], Some(AccountError::ZeroAmount)));
    assert!(matches!(cases[8], Some(AccountError::BadMemo)));
    assert!(matches!(cases[10], Some(AccountError::Overflow { .. })));
    assert_eq!(a, before);
}

#[test]
fn users_read_their_namesake_and_accounts_listing_them() {
    let a = accounts();
    let alice = who(Role::User, "alice");
    let bob = who(Role::User, "bob");
    let dave = who(Role::User, "dave");
    assert!(a.may_read(&alice, &id("lab")) && a.may_submit_to(&alice, &id("lab")));
    assert!(!a.may_read(&bob, &id("lab")) && !a.may_submit_to(&bob, &id("lab")));
    assert!(a.may_read(&bob, &id("bob")) && !a.may_read(&alice, &id("bob")));
    // dave's own account is implicit: readable and usable, empty.
    assert!(a.may_submit_to(&dave, &id("dave")));
    assert!(!a.may_submit_to(&dave, &id("alice")));
    let summary = a.summary(&dave, &id("dave")).unwrap();
    assert_eq!((summary.created, summary.balance, summary.entries), (None, Credits::ZERO, 0));
    // Another's account reads exactly like a missing one.
    assert_eq!(a.summary(&alice, &id("bob")), Err(AccountError::NotFound { account: id("bob") }));
    assert_eq!(a.summary(&alice, &id("ghost")), Err(AccountError::NotFound { account: id("ghost") }));
    assert_eq!(
        a.ledger_page(&alice, &id("bob"), 0, 10).unwrap_err().to_string(),
        a.ledger_page(&alice, &id("ghost"), 0, 10).unwrap_err().to_string().replace("ghost", "bob")
    );
}

#[test]
fn admins_reach_every_created_account_and_agents_none() {
    let a = accounts();
    let admin = root();
    assert!(a.may_submit_to(&admin, &id("lab")) && a.may_submit_to(&admin, &id("bob")));
    assert!(a.may_submit_to(&admin, &id("root")), "an admin's own namesake");
    assert!(!a.may_submit_to(&admin, &id("ghost")));
    for role in [Role::Agent, Role::Master] {
        assert!(!a.may_read(&who(role, "lab"), &id("lab")), "{role}");
        assert!(!a.may_submit_to(&who(role, "bob"), &id("bob")), "{role}");
    }
    let names: Vec<String> = a.visible(&admin).into_iter().map(|s| s.account.0).collect();
    assert_eq!(names, ["bob", "lab"]);
}

#[test]
fn users_list_their_namesake_and_member_accounts_in_name_order() {
    let mut a = accounts();
    a.create(id("aaa"), vec!["carol".into()], None, &root(), T).unwrap();
    let names = |who: &Identity| -> Vec<String> { a.visible(who).into_iter().map(|s| s.account.0).collect() };
    assert_eq!(names(&who(Role::User, "carol")), ["aaa", "carol", "lab"]);
    assert_eq!(names(&who(Role::User, "bob")), ["bob"]);
    assert_eq!(names(&who(Role::User, "zed")), ["zed"]);
}

#[test]
fn ledger_pages_follow_after_seq_and_say_when_more_follow() {
    let mut a = accounts();
    for _ in 0..4 {
        a.grant(&id("lab"), cr("1"), &root(), None, T).unwrap();
        a.grant(&id("bob"), cr("1"), &root(), None, T).unwrap();
    }
    let admin = root();
    // lab holds seqs 1 (its first budget), 2, 4, 6, 8; bob 3, 5, 7, 9.
    let seqs = |after, limit| {
        let page = a.ledger_page(&admin, &id("lab"), after, limit).unwrap();
        (page.entries.iter().map(|e| e.seq).collect::<Vec<_>>(), page.next_after)
    };
    assert_eq!(seqs(0, 2), (vec![1, 2], Some(2)));
    assert_eq!(seqs(2, 2), (vec![4, 6], Some(6)));
    assert_eq!(seqs(6, 2), (vec![8], None));
    assert_eq!(seqs(3, 10), (vec![4, 6, 8], None));
    // A limit of 0 still makes progress; a huge one is capped.
    assert_eq!(a.ledger_page(&admin, &id("bob"), 0, 0).unwrap().entries.len(), 1);
    assert_eq!(a.ledger_page(&admin, &id("bob"), 0, u32::MAX).unwrap().entries.len(), 4);
}

fn stored(name: &str) -> StoredAccount {
    StoredAccount { account: id(name), members: vec!["alice".into()], created: T }
}

fn entry(seq: u64, account: &str, amount: &str) -> LedgerEntry {
    let amount = cr(amount);
    let kind = if amount.is_negative() {
        EntryKind::Charge { job: None, reason: "r".into() }
    } else {
        EntryKind::Grant { by: "root".into() }
    };
    LedgerEntry { seq, account: id(account), at: T, amount, kind, memo: None }
}

#[test]
fn replay_rebuilds_balances_and_continues_the_sequence() {
    let mut a = accounts();
    a.grant(&id("lab"), cr("5"), &root(), None, T).unwrap();
    a.charge(&id("lab"), cr("1.5"), Some(JobId(1)), "price".into(), T).unwrap();
    let lab = a.get(&id("lab")).unwrap();
    let stored_accounts = vec![
        StoredAccount { account: id("bob"), members: vec![], created: T },
        StoredAccount {
            account: id("lab"),
            members: lab.members.iter().cloned().collect(),
            created: lab.created,
        },
    ];
    let ledger = lab.entries().to_vec();
    let mut back = Accounts::replay(stored_accounts, ledger).unwrap();
    assert_eq!(back, a);
    assert_eq!(back.grant(&id("bob"), cr("1"), &root(), None, T).unwrap().seq, 4);
}

#[test]
fn replay_refuses_an_inconsistent_ledger() {
    let replay = |ledger: Vec<LedgerEntry>| Accounts::replay(vec![stored("lab")], ledger).unwrap_err();
    assert_eq!(
        replay(vec![entry(2, "lab", "1"), entry(2, "lab", "1")]),
        ReplayError::OutOfOrder { seq: 2, after: 2 }
    );
    assert_eq!(
        replay(vec![entry(1, "ghost", "1")]),
        ReplayError::UnknownAccount { seq: 1, account: id("ghost") }
    );
    assert_eq!(
        replay(vec![entry(1, "lab", "1"), entry(2, "lab", "-1.5")]),
        ReplayError::Balance { seq: 2, account: id("lab") }
    );
    let mut wrong = entry(1, "lab", "1");
    wrong.amount = cr("-1");
    assert!(matches!(replay(vec![wrong]), ReplayError::WrongSign { seq: 1, kind: "grant", .. }));
    let twice = Accounts::replay(vec![stored("lab"), stored("lab")], vec![]).unwrap_err();
    assert_eq!(twice, ReplayError::BadAccount { account: id("lab") });
}

#[test]
fn lenient_restore_counts_what_it_refuses() {
    let mut a = Accounts::default();
    a.restore(vec![stored("lab")], vec![entry(1, "lab", "2"), entry(2, "ghost", "1"), entry(3, "lab", "-1")]);
    assert_eq!(a.refused_on_replay(), 1);
    assert_eq!(a.get(&id("lab")).unwrap().balance(), cr("1"));
    a.check().unwrap();
}
