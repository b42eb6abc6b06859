//! MRM deadline purchases through the core's events (what the master's actor feeds it):
//! a bought deadline is admitted and charged in one step, a refusal names the best
//! alternative and changes nothing, admission off refuses, a running job's predicted
//! finish follows its progress, and a recovered job keeps its price.

use std::time::Duration;

use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{
    DeadlineChoice, EntryKind, ErrorKind, JobState, LedgerEntry, Purchase, QuotePoint, Response,
};
use slotmarket_common::spec::{EstimateSpec, JobSpec};
use slotmarket_common::time::Timestamp;

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, root};
use crate::core::{
    AdmissionMode, AdmissionSettings, CoreConfig, Event, Persist, RecoveredJob, StoredAccount, price_credits,
};

/// `tasks` map tasks of exactly `task_s` seconds each (no spread, so the PI is the mean).
fn exact(name: &str, tasks: u32, task_s: u64) -> JobSpec {
    let mut spec = JobBuilder::maps(tasks).name(name).build();
    spec.estimate = Some(EstimateSpec {
        map_task_ms: Some(task_s * 1000),
        reduce_task_ms: None,
        spread_pct: Some(0),
        task_spread_pct: Some(0),
    });
    spec
}

/// A core with MRM admission, following progress as the master does, one agent with two
/// map slots, and alice's account holding `budget`.
fn market(budget: &str) -> TestEnv {
    let admission = AdmissionSettings { mode: AdmissionMode::Mrm, ..AdmissionSettings::default() };
    let config = CoreConfig { admission, predict_from_progress: true, ..CoreConfig::default() };
    let mut env = TestEnv::with_config(config);
    env.join_agent("n1", 2, 0);
    let request = env.request();
    let budget = Some(budget.parse().unwrap());
    let account = AccountId("alice".into());
    env.handle(Event::AccountAddRequested { request, caller: root(), account, budget, members: vec![] });
    env.take_reply(request);
    env.take_persists();
    env
}

fn buy(env: &mut TestEnv, spec: JobSpec, choice: DeadlineChoice) -> Response {
    let request = env.request();
    env.handle(Event::ChoiceSubmitted { request, caller: alice(), spec, choice });
    env.take_reply(request)
}

fn balance(env: &TestEnv) -> Credits {
    env.core.view().accounts(&alice(), Some(&AccountId("alice".into()))).unwrap()[0].balance
}

#[test]
fn buying_the_earliest_deadline_admits_the_job_and_charges_it_in_one_step() {
    let mut env = market("1");
    let start = env.now;
    let at = |s: u64| start + Duration::from_secs(s);
    let (deadline, price) = (at(20), price_credits(80_000.0));
    let quote = env.core.quote_info(env.now, &exact("a", 4, 10)).unwrap();
    assert_eq!(quote.earliest, QuotePoint { deadline, price });
    assert_eq!((quote.work_upper_ms, quote.map_task_ms, quote.admitted), (40_000, (10_000, 10_000), 0));

    let response = buy(&mut env, exact("a", 4, 10), DeadlineChoice::Earliest);
    let job = JobId(1);
    assert_eq!(response, Response::Purchased(Purchase { job, deadline, price, earliest: deadline }));
    // 80 000 slot-ms at one credit per slot-hour: 0.022223 credits (rounded up).
    assert_eq!(price, Credits(22_223));
    // Admission then charge, adjacent (one store transaction), then the launches' records.
    let persists = env.take_persists();
    assert!(
        matches!(&persists[..], [Persist::JobAdmitted { job: j, deadline: Some(d), .. }, Persist::Ledger(entry), ..]
            if *j == job && *d == deadline
                && entry.kind == EntryKind::DeadlinePurchase { job, deadline }
                && entry.amount == Credits(-22_223)),
        "{persists:#?}"
    );
    assert_eq!(balance(&env), Credits(1_000_000 - 22_223));
    let summary = env.status(job).summary;
    assert_eq!((summary.deadline, summary.price, summary.paid), (Some(deadline), Some(price), Some(price)));
    env.take_launches(2);
    env.assert_no_commands();
}

#[test]
fn an_infeasible_deadline_is_refused_with_the_earliest_and_nothing_changes() {
    let mut env = market("1");
    let start = env.now;
    let at = |s: u64| start + Duration::from_secs(s);
    buy(&mut env, exact("a", 4, 10), DeadlineChoice::Earliest);
    env.take_launches(2);
    env.take_persists();
    let before = balance(&env);

    // B (2 × 10 s) cannot go ahead of A, which has no slack: 30 s at the earliest.
    let Response::ChoiceRefused(refusal) = buy(&mut env, exact("b", 2, 10), DeadlineChoice::Deadline(at(25)))
    else {
        panic!("an infeasible deadline was sold")
    };
    let earliest = QuotePoint { deadline: at(30), price: price_credits(40_000.0) };
    assert_eq!(refusal.earliest, Some(earliest));
    assert_eq!(refusal.affordable, Some(earliest), "the balance buys the earliest too");
    assert!(refusal.reason.contains("is not feasible now"), "{}", refusal.reason);
    assert!(refusal.reason.contains("the earliest feasible finish now is"), "{}", refusal.reason);
    assert_eq!(env.take_persists(), vec![], "nothing admitted or charged");
    assert_eq!(balance(&env), before);
    assert!(env.core.view().job_status(JobId(2), &root()).is_err(), "no job admitted");
    env.assert_no_commands();
}

#[test]
fn an_unaffordable_choice_names_the_deadline_the_balance_buys() {
    // Enough for B's work alone (20 000 slot-ms is 0.005556), not for its earliest (40 000).
    let mut env = market("0.006");
    let start = env.now;
    let at = |s: u64| start + Duration::from_secs(s);
    let spend = buy(&mut env, exact("a", 4, 10), DeadlineChoice::MaxPrice(Credits(6_000)));
    let Response::ChoiceRefused(refusal) = spend else { panic!("A's 0.022 price was sold for 0.006") };
    assert!(refusal.reason.contains("no deadline costs at most 0.006 "), "{}", refusal.reason);
    assert_eq!(refusal.affordable, None, "A's floor (40 000 slot-ms) is over the balance");
    // A maximum of nothing is named as asked, not as the smallest price it rounds to.
    let Response::ChoiceRefused(nothing) =
        buy(&mut env, exact("a", 4, 10), DeadlineChoice::MaxPrice(Credits(0)))
    else {
        panic!("a deadline was sold for 0")
    };
    assert!(nothing.reason.contains("no deadline costs at most 0.00 ("), "{}", nothing.reason);

    let Response::ChoiceRefused(refusal) = buy(&mut env, exact("b", 2, 10), DeadlineChoice::Earliest) else {
        panic!("the earliest deadline was sold over the balance")
    };
    assert!(refusal.reason.contains("holds 0.006"), "{}", refusal.reason);
    assert_eq!(refusal.earliest, Some(QuotePoint { deadline: at(10), price: price_credits(40_000.0) }));
    let affordable = refusal.affordable.expect("the balance buys a later deadline");
    assert!(affordable.price <= Credits(6_000) && affordable.deadline > at(10), "{affordable:?}");
    assert_eq!(env.take_persists(), vec![]);

    // Buying within the balance gets exactly that alternative.
    let Response::Purchased(bought) =
        buy(&mut env, exact("b", 2, 10), DeadlineChoice::MaxPrice(Credits(6_000)))
    else {
        panic!("the affordable deadline was refused")
    };
    assert_eq!((bought.deadline, bought.price), (affordable.deadline, affordable.price));
    assert_eq!(balance(&env), Credits(6_000 - affordable.price.micros()));
}

#[test]
fn with_admission_off_quotes_and_choices_say_so() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    let err = env.core.quote_info(env.now, &exact("a", 1, 1)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadRequest);
    assert!(err.message.contains("admission is off"), "{}", err.message);
    let Response::Error(err) = buy(&mut env, exact("a", 1, 1), DeadlineChoice::Earliest) else {
        panic!("a choice was taken with admission off")
    };
    assert!(err.message.contains("mode = \"mrm\""), "{}", err.message);
    assert!(env.core.predicted_finishes(env.now).is_empty());
    assert_eq!(env.take_persists(), vec![]);
}

#[test]
fn a_job_running_slower_than_estimated_moves_its_predicted_finish_and_later_quotes() {
    let mut env = market("1");
    let start = env.now;
    let at = |s: u64| start + Duration::from_secs(s);
    buy(&mut env, exact("a", 4, 10), DeadlineChoice::Earliest);
    let job = JobId(1);
    assert_eq!(env.core.predicted_finishes(env.now).get(&job), Some(&at(20)));
    let first = env.take_launches(2);
    for launch in &first {
        env.start(launch.container);
    }
    // Its first two tasks take 20 s, twice the estimate: the two left are expected to as well.
    env.advance(20);
    for launch in &first {
        env.report(launch.container, slotmarket_common::container::ContainerState::Completed);
    }
    env.take_launches(2);
    assert_eq!(env.core.predicted_finishes(env.now).get(&job), Some(&at(40)));
    // A new job queues behind the late one's updated remaining work (20 s, not 10 s).
    let quote = env.core.quote_info(env.now, &exact("b", 2, 10)).unwrap();
    assert_eq!(quote.earliest.deadline, at(50));
}

#[test]
fn a_recovered_job_keeps_its_deadline_and_price_from_the_ledger() {
    let mut env = market("1");
    let spec = exact("a", 4, 10);
    let Response::Purchased(bought) = buy(&mut env, spec.clone(), DeadlineChoice::Earliest) else {
        panic!("refused")
    };
    let mut ledger: Vec<LedgerEntry> = Vec::new();
    env.take_persists().into_iter().for_each(|p| {
        if let Persist::Ledger(entry) = p {
            ledger.push(entry);
        }
    });
    // The grant went with the account's creation; rebuild it in front of the purchase.
    let grant = LedgerEntry {
        seq: 1,
        account: AccountId("alice".into()),
        at: Timestamp(env.now.0),
        amount: "1".parse().unwrap(),
        kind: EntryKind::Grant { by: "root".into() },
        memo: None,
    };
    ledger.insert(0, grant);

    let mut fresh = TestEnv::with_config(CoreConfig {
        admission: AdmissionSettings { mode: AdmissionMode::Mrm, ..AdmissionSettings::default() },
        ..CoreConfig::default()
    });
    let alice_account =
        StoredAccount { account: AccountId("alice".into()), members: vec![], created: env.now };
    fresh.handle(Event::AccountsRecovered { accounts: vec![alice_account], ledger });
    fresh.recover(RecoveredJob {
        id: bought.job,
        account: AccountId("alice".into()),
        owner: AccountId("alice".into()),
        deadline: Some(bought.deadline),
        spec,
        submitted: env.now,
        state: JobState::Pending,
        started: None,
        finished: None,
        message: None,
        containers: vec![],
    });
    let summary = fresh.status(bought.job).summary;
    assert_eq!(
        (summary.deadline, summary.price, summary.paid),
        (Some(bought.deadline), Some(bought.price), Some(bought.price))
    );
    assert_eq!(balance(&fresh), Credits(1_000_000 - bought.price.micros()));
}

#[test]
fn jobs_priced_by_their_estimate_are_quoted_as_long_as_such_jobs_ran_lately() {
    let mut env = market("1");
    buy(&mut env, exact("a", 2, 10), DeadlineChoice::Earliest);
    let launches = env.take_launches(2);
    for launch in &launches {
        env.start(launch.container);
    }
    // a's tasks take 30 s, three times what its `[estimate]` said (a loaded cluster).
    env.advance(30);
    for launch in &launches {
        env.report(launch.container, slotmarket_common::container::ContainerState::Completed);
    }
    // b says 10 s too; it is quoted at what such tasks take now: 2 × 30 s on 2 slots.
    let quote = env.core.quote_info(env.now, &exact("b", 2, 10)).unwrap();
    assert_eq!(quote.map_task_ms.0, 30_000);
    assert_eq!(quote.earliest.deadline, env.now + Duration::from_secs(30));
    // The master's simulator and tests without `predict_from_progress` keep the estimate.
    let mut plain = TestEnv::with_config(CoreConfig {
        admission: AdmissionSettings { mode: AdmissionMode::Mrm, ..AdmissionSettings::default() },
        ..CoreConfig::default()
    });
    plain.join_agent("n1", 2, 0);
    let quote = plain.core.quote(plain.now, &exact("b", 2, 10)).unwrap();
    assert_eq!(
        quote.earliest,
        plain.now + Duration::from_secs(10),
        "without predict_from_progress: as estimated"
    );
}
