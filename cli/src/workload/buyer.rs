//! The MRM buyer model of the paper's §6.3 (`workload run --alpha`): each job is quoted
//! first, then a delay-sensitive job buys the earliest deadline costing at most α times
//! its processing time and every other job pays only its processing time, which buys the
//! cheapest (latest) deadline. One token buys one unit of processing time: here one
//! credit per slot-hour of the quote's PI-upper work, the processing time MRM prices
//! (its floor), as the simulator's buyer (`slotmarket_master::sim::market::buy`) has it
//! and as the paper's Table 8 implies (tolerant jobs pay 1.2 times their real usage,
//! sensitive ones at α = 2 pay 2.4 times: α times the same estimate).
//!
//! The choice is sent as a maximum price, so the master re-prices it at admission
//! against whatever was admitted since the quote. When the limit is below every point
//! of the curve (the master re-priced the floor up since the quote) the buyer raises it
//! to the cheapest point instead of being refused, and the record says so.

use anyhow::{Context, Result};
use slotmarket_common::client::Client;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{
    ChoiceRefusal, DeadlineChoice, Purchase, QuoteInfo, QuotePoint, SLOT_MS_PER_CREDIT,
};
use slotmarket_common::spec::{EstimateSpec, JobClass, JobSpec, SlotKind};
use slotmarket_common::time::Timestamp;

use super::file::TaskSeconds;
use crate::connection;

/// Micro-credits in one credit.
const MICROS_PER_CREDIT: f64 = 1_000_000.0;

/// What the buyer decided from one quote.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BuyerChoice {
    /// The job's processing time in credits (the quote's PI-upper work, the floor).
    pub(crate) processing: Credits,
    /// The most the buyer pays: α × processing (delay-sensitive) or processing.
    pub(crate) limit: Credits,
    /// The point of the quote's curve that limit buys (what the buyer expects to get).
    pub(crate) expected: QuotePoint,
    /// Whether no point cost at most the limit, so the cheapest point was bought.
    pub(crate) raised_to_cheapest: bool,
    /// What is sent to the master.
    pub(crate) choice: DeadlineChoice,
}

/// What one job's purchase recorded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Bought {
    /// When the quote was made (the master's clock).
    pub(crate) quoted_at: Timestamp,
    /// The quote's earliest feasible finish.
    pub(crate) quoted_earliest: Timestamp,
    /// The buyer's decision.
    pub(crate) decision: BuyerChoice,
    /// What the master admitted and charged.
    pub(crate) purchase: Purchase,
}

/// Credits of `slot_ms` slot-milliseconds of processing, rounded up to the micro-credit.
pub(crate) fn processing_credits(slot_ms: f64) -> Credits {
    Credits((slot_ms / SLOT_MS_PER_CREDIT * MICROS_PER_CREDIT).ceil() as i64)
}

/// The §6.3 buyer's choice for a job of `class` from its `quote`, with willingness `alpha`.
pub(crate) fn choose(quote: &QuoteInfo, class: Option<JobClass>, alpha: f64) -> BuyerChoice {
    let processing = processing_credits(quote.work_upper_ms as f64);
    let factor = if class == Some(JobClass::DelaySensitive) { alpha } else { 1.0 };
    let wanted = processing_credits(factor * quote.work_upper_ms as f64);
    // The curve's prices fall as deadlines move later: the first affordable point is the
    // earliest the limit buys.
    let affordable = quote.curve.iter().find(|point| point.price <= wanted).copied();
    let cheapest = quote.curve.last().copied().unwrap_or(quote.earliest);
    let (expected, raised) = match affordable {
        Some(point) => (point, false),
        None => (cheapest, true),
    };
    let limit = if raised { cheapest.price } else { wanted };
    BuyerChoice {
        processing,
        limit,
        expected,
        raised_to_cheapest: raised,
        choice: DeadlineChoice::MaxPrice(limit),
    }
}

/// The spec as a buyer submits it: no deadline of its own (it buys one), and the
/// workload file's per-task seconds as the estimate MRM prices (one mean for the map
/// slot kind, weighted by the tasks of each map-slot stage).
pub(crate) fn buyer_spec(mut spec: JobSpec, seconds: TaskSeconds) -> JobSpec {
    let mut map = (0.0, 0u64);
    let mut reduce = (0.0, 0u64);
    for stage in &spec.stages {
        let tasks = u64::from(stage.tasks);
        let (per_task, sum) = match (stage.slot, stage.name.as_str()) {
            (SlotKind::Reduce, _) => (seconds.reduce_s, &mut reduce),
            (SlotKind::Map, "gen") => (seconds.gen_s, &mut map),
            (SlotKind::Map, _) => (seconds.map_s, &mut map),
        };
        sum.0 += per_task * tasks as f64;
        sum.1 += tasks;
    }
    let mean_ms = |(total_s, tasks): (f64, u64)| {
        (tasks > 0).then(|| ((total_s / tasks as f64) * 1000.0).round().max(1.0) as u64)
    };
    spec.deadline = None;
    spec.estimate = Some(EstimateSpec {
        map_task_ms: mean_ms(map),
        reduce_task_ms: mean_ms(reduce),
        spread_pct: None,
        task_spread_pct: None,
    });
    spec
}

/// Quotes `spec`, chooses and buys: the record, or the master's refusal (nothing was
/// admitted or charged then).
pub(crate) async fn quote_and_buy(
    client: &Client,
    spec: JobSpec,
    class: Option<JobClass>,
    alpha: f64,
) -> Result<Result<Bought, ChoiceRefusal>> {
    let name = spec.name.clone();
    let quote = connection::bounded(client.quote(spec.clone()))
        .await
        .with_context(|| format!("quoting job \"{name}\""))?;
    let decision = choose(&quote, class, alpha);
    let answer = connection::bounded(client.submit_choosing(spec, decision.choice))
        .await
        .with_context(|| format!("buying a deadline for job \"{name}\""))?;
    Ok(answer.map(|purchase| Bought {
        quoted_at: quote.at,
        quoted_earliest: quote.earliest.deadline,
        decision,
        purchase,
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use slotmarket_common::spec::{DeadlineSpec, StageSpec};

    use super::*;

    /// A quote of 43.2 slot-seconds of PI-upper work (0.012 credits, the floor) with a
    /// falling curve.
    fn quote() -> QuoteInfo {
        let point =
            |s: u64, micros: i64| QuotePoint { deadline: Timestamp(s * 1000), price: Credits(micros) };
        let curve = vec![point(20, 40_000), point(30, 25_000), point(40, 15_000), point(60, 12_000)];
        QuoteInfo {
            at: Timestamp(0),
            work_ms: 36_000,
            work_upper_ms: 43_200,
            pi_level: 0.95,
            map_task_ms: (3_000, 3_600),
            reduce_task_ms: (0, 0),
            earliest: curve[0],
            curve,
            admitted: 2,
            assumed_slots: None,
        }
    }

    #[test]
    fn processing_time_is_a_credit_per_slot_hour_rounded_up() {
        assert_eq!(processing_credits(3_600_000.0), Credits::from_credits(1));
        assert_eq!(processing_credits(36_000.0), Credits(10_000));
        assert_eq!(processing_credits(1.0), Credits(1));
    }

    #[test]
    fn a_delay_sensitive_buyer_takes_the_earliest_deadline_within_alpha_times_its_work() {
        // α = 2: at most 0.024 credits; 0.04 and 0.025 are too dear, 0.015 at +40 s is not.
        let two = choose(&quote(), Some(JobClass::DelaySensitive), 2.0);
        assert_eq!(two.expected.deadline, Timestamp(40_000));
        assert_eq!((two.limit, two.processing), (Credits(24_000), Credits(12_000)));
        assert_eq!(two.choice, DeadlineChoice::MaxPrice(Credits(24_000)));
        assert!(!two.raised_to_cheapest);
        // α = 4 buys the earliest point outright.
        assert_eq!(
            choose(&quote(), Some(JobClass::DelaySensitive), 4.0).expected.deadline,
            Timestamp(20_000)
        );
    }

    #[test]
    fn a_delay_tolerant_buyer_pays_its_processing_time_which_is_the_cheapest_point() {
        // 0.012 credits, the PI's upper end, is the curve's floor: the latest deadline.
        for class in [Some(JobClass::DelayTolerant), None] {
            let got = choose(&quote(), class, 2.0);
            assert_eq!(got.expected, QuotePoint { deadline: Timestamp(60_000), price: Credits(12_000) });
            assert!(!got.raised_to_cheapest);
            assert_eq!(got.choice, DeadlineChoice::MaxPrice(Credits(12_000)));
        }
        // α = 1.1 (0.0132) buys only the floor too.
        assert_eq!(
            choose(&quote(), Some(JobClass::DelaySensitive), 1.1).expected.deadline,
            Timestamp(60_000)
        );
        // A floor above the limit (re-priced since) is raised to, not refused.
        let dearer = QuoteInfo { work_upper_ms: 36_000, ..quote() };
        let got = choose(&dearer, Some(JobClass::DelayTolerant), 2.0);
        assert!(got.raised_to_cheapest);
        assert_eq!(got.choice, DeadlineChoice::MaxPrice(Credits(12_000)));
    }

    #[test]
    fn the_buyer_spec_drops_the_deadline_and_prices_the_files_task_seconds() {
        let stage = |name: &str, tasks, slot| StageSpec {
            name: name.into(),
            tasks,
            slot,
            command: "true".into(),
            after: Vec::new(),
        };
        let spec = JobSpec {
            name: "w".into(),
            input: None,
            max_attempts: None,
            stages: vec![
                stage("gen", 2, SlotKind::Map),
                stage("map", 2, SlotKind::Map),
                stage("reduce", 1, SlotKind::Reduce),
            ],
            class: Some(JobClass::DelayTolerant),
            queue: None,
            deadline: Some(DeadlineSpec::In(Duration::from_secs(9))),
            account: None,
            input_bytes: None,
            estimate: None,
            time_limit: None,
            after: Vec::new(),
            utility: None,
        };
        let seconds = TaskSeconds { gen_s: 0.2, map_s: 0.6, reduce_s: 0.3 };
        let bought = buyer_spec(spec, seconds);
        assert_eq!(bought.deadline, None);
        let estimate = bought.estimate.unwrap();
        assert_eq!((estimate.map_task_ms, estimate.reduce_task_ms), (Some(400), Some(300)));
    }
}
