//! Unit tests of DP's arithmetic: the paper's 15-slot example, rounding that hands out
//! every slot, demand caps, and the cost of an interval's use.

use super::*;

/// Rates in whole credits as the fixed-point bids `proportional_shares` takes.
fn bids(rates: &[f64], demands: &[u32]) -> Vec<(u64, u32)> {
    rates.iter().zip(demands).map(|(&r, &d)| (credits_of(r).unwrap().0 as u64, d)).collect()
}

#[test]
fn the_papers_example_gives_8_3_and_4_of_15_slots() {
    // §3: 15 slots; rates 4, 1.5 and 2: price 7.5, shares 8, 3 and 4.
    let shares = proportional_shares(15, &bids(&[4.0, 1.5, 2.0], &[100, 100, 100]));
    assert_eq!(shares, vec![8, 3, 4]);
}

#[test]
fn rounding_hands_out_every_slot() {
    for total in 0..40u32 {
        for rates in [[1.0, 1.0, 1.0], [3.0, 1.0, 0.5], [0.1, 7.0, 2.2]] {
            let shares = proportional_shares(total, &bids(&rates, &[1000, 1000, 1000]));
            assert_eq!(shares.iter().sum::<u32>(), total, "{total} slots at {rates:?}: {shares:?}");
            // No one is more than one slot away from the exact proportional share.
            let price: f64 = rates.iter().sum();
            for (share, rate) in shares.iter().zip(rates) {
                let exact = f64::from(total) * rate / price;
                assert!((f64::from(*share) - exact).abs() < 1.0, "{share} vs {exact}");
            }
        }
    }
}

#[test]
fn a_capped_demand_leaves_its_rest_to_the_others_by_rate() {
    // Rate 4 wants 2 slots only: the other 13 are shared 1.5 : 2.
    let shares = proportional_shares(15, &bids(&[4.0, 1.5, 2.0], &[2, 100, 100]));
    assert_eq!(shares, vec![2, 6, 7]);
    // Everyone capped: slots stay free (for spare use), nobody gets past their demand.
    assert_eq!(proportional_shares(15, &bids(&[1.0, 1.0], &[3, 4])), vec![3, 4]);
}

#[test]
fn rate_zero_bidders_get_no_share() {
    assert_eq!(proportional_shares(10, &bids(&[0.0, 2.0], &[50, 50])), vec![0, 10]);
    assert_eq!(proportional_shares(10, &bids(&[0.0, 0.0], &[50, 50])), vec![0, 0]);
}

#[test]
fn an_interval_costs_rate_times_slots_times_time() {
    let rate = credits_of(2.0).unwrap();
    // 3 slots for half an hour at 2 per slot-hour: 3 credits.
    assert_eq!(interval_cost(rate, 3, Duration::from_secs(1800)), credits_of(3.0).unwrap());
    assert_eq!(interval_cost(rate, 0, Duration::from_secs(1800)), Credits::ZERO);
    // 10 s of one slot at 1 per hour: 1/360 credit, rounded down to the micro-credit.
    assert_eq!(interval_cost(credits_of(1.0).unwrap(), 1, Duration::from_secs(10)), Credits(2777));
}

#[test]
fn settings_out_of_range_are_named() {
    let mut dp = ProportionalSettings::default();
    assert_eq!(dp.problem(), None);
    dp.rates.insert("alice".into(), -1.0);
    assert_eq!(dp.problem().map(|p| p.0), Some("rates.alice".to_string()));
    let dp = ProportionalSettings { interval_s: 0.0, ..ProportionalSettings::default() };
    assert_eq!(dp.problem().map(|p| p.0), Some("interval_s".to_string()));
}
