//! MRM quotes and offers over the live core: the earliest feasible finish follows the
//! admitted jobs, an infeasible deadline or an unaffordable budget is refused with the
//! alternative, and a budget buys the first deadline within it.

use std::time::Duration;

use slotmarket_common::spec::{DeadlineSpec, EstimateSpec, JobSpec};

use super::builders::JobBuilder;
use super::env::TestEnv;
use crate::core::{Choice, QuoteError};

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

#[test]
fn quotes_and_offers_follow_the_admitted_deadline_jobs() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    let now = env.now;
    let secs = |s: u64| now + Duration::from_secs(s);

    // A: 4 tasks of 10 s on 2 slots: 20 s; with no slack it costs κ = 2 times its work.
    let mut a = exact("a", 4, 10);
    let quote = env.core.quote(now, &a).unwrap();
    assert_eq!((quote.earliest, quote.admitted), (secs(20), 0));
    assert_eq!(quote.curve[0], (secs(20), 80_000.0));
    assert!(quote.curve.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 >= w[1].1), "{:?}", quote.curve);
    let (_, offer) = env.core.offer(now, &a, Choice::Earliest).unwrap();
    assert_eq!((offer.deadline, offer.price_ms), (secs(20), 80_000.0));
    a.deadline = Some(DeadlineSpec::At(offer.deadline));
    env.submit(a);
    env.take_launches(2);

    // B (2 × 10 s) cannot go ahead of A, which has no slack: 30 s at the earliest.
    let b = exact("b", 2, 10);
    let quote = env.core.quote(now, &b).unwrap();
    assert_eq!((quote.earliest, quote.admitted), (secs(30), 1));
    let refused = env.core.offer(now, &b, Choice::Deadline(secs(25))).unwrap_err();
    assert_eq!(refused, QuoteError::Infeasible { asked: secs(25), earliest: secs(30), price_ms: 40_000.0 });
    let refused = env.core.offer(now, &b, Choice::MaxPrice(19_999.0)).unwrap_err();
    assert_eq!(refused, QuoteError::Unaffordable { max_ms: 19_999.0, floor_ms: 20_000.0 });
    // Paying only its work takes a slack of one average job (g = (20 + 10) / 2 s).
    let (_, offer) = env.core.offer(now, &b, Choice::MaxPrice(20_000.0)).unwrap();
    assert_eq!((offer.deadline, offer.price_ms), (secs(45), 20_000.0));
}

#[test]
fn a_job_with_no_history_and_no_estimate_cannot_be_quoted() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 1);
    let err = env.core.quote(env.now, &JobBuilder::map_reduce(2, 1).name("new").build()).unwrap_err();
    assert!(matches!(err, QuoteError::Estimate(_)), "{err}");
    assert!(err.to_string().contains("map_task_ms"), "{err}");
    let mut reduce_only = exact("r", 1, 5);
    reduce_only.stages[0].slot = slotmarket_common::spec::SlotKind::Reduce;
    reduce_only.estimate = Some(EstimateSpec {
        map_task_ms: None,
        reduce_task_ms: Some(5_000),
        spread_pct: None,
        task_spread_pct: None,
    });
    let mut none = TestEnv::new();
    none.join_agent("n1", 2, 0);
    assert_eq!(none.core.quote(none.now, &reduce_only).unwrap_err(), QuoteError::NoSlots("reduce"));
}

/// §4.2: slack is measured in the average job processing time `g`, the time a job takes
/// alone on the cluster (its fluid share plus its tail), averaged over the jobs seen; with
/// κ = 2 a buyer paying only its work offers one `g` of slack on an empty queue (the
/// paper's Table 7: the delay-tolerant slack equals the average job duration).
#[test]
fn slack_is_measured_in_the_long_run_average_job_time_alone_on_the_cluster() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 4, 0);
    let now = env.now;
    // One task of 20 s on 4 slots: a fluid share of 5 s but 20 s alone on the cluster.
    let mut a = exact("a", 1, 20);
    let (_, offer) = env.core.offer(now, &a, Choice::MaxPrice(20_000.0)).unwrap();
    assert_eq!(offer.earliest, now + Duration::from_secs(20));
    assert_eq!((offer.deadline, offer.price_ms), (now + Duration::from_secs(40), 20_000.0));
    a.deadline = Some(DeadlineSpec::At(offer.deadline));
    let a = env.submit(a);
    env.core.quote(now, &exact("probe", 1, 1)).unwrap();
    // a ends; g still remembers it: (20 s + 40 s) / 2 for a job of 40 s.
    env.cancel_as(super::env::root(), a);
    let (_, offer) = env.core.offer(now, &exact("b", 1, 40), Choice::MaxPrice(40_000.0)).unwrap();
    assert_eq!(offer.earliest, now + Duration::from_secs(40));
    assert_eq!(offer.deadline, now + Duration::from_secs(40 + 30));
}
