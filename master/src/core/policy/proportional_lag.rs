//! DP's compensation for lent capacity: the service lag of each account, in slot-seconds
//! per slot kind. While an account in the market (one with an active job) runs below its
//! rate share and another runs above it on the slots it leaves, the first lends and the
//! second borrows; the lag book records both (zero-sum) and the allotment pays the lender
//! back over the compensation horizon (like lottery scheduling's compensation tickets).
//! Without it, work conservation lets a closed-loop user that pauses between jobs (a
//! reduce phase, a job's last wave) hand its share to the others for good, and its
//! completion times drift toward the others' (docs/experiments/dp.md).

use std::collections::BTreeMap;
use std::time::Duration;

use slotmarket_common::ids::AccountId;
use slotmarket_common::time::Timestamp;

/// One account's standing during the step just taken, per kind: what it was entitled to
/// and what it held.
#[derive(Clone, Debug, Default)]
pub(super) struct Standing {
    /// Its exact rate share of the slots (`total × rate / price`), 0 at rate 0.
    pub(super) share: [f64; 2],
    /// Slots it held after the step's assignments.
    pub(super) used: [u32; 2],
}

/// Service lags (positive: owed slots; negative: owes slots), in slot-seconds.
#[derive(Clone, Debug, Default)]
pub(super) struct LagBook {
    lag: BTreeMap<AccountId, [f64; 2]>,
    /// The standings since the last step, and when it was taken.
    since: Option<(Timestamp, BTreeMap<AccountId, Standing>)>,
    /// Since when each account with a lag has been out of the market (a closed-loop
    /// user is out for an instant between two jobs; its lag waits a horizon for it).
    absent: BTreeMap<AccountId, Timestamp>,
}

impl LagBook {
    /// The lag of `account` in `kind` (by index), slot-seconds.
    pub(super) fn lag(&self, account: &AccountId, k: usize) -> f64 {
        self.lag.get(account).map_or(0.0, |l| l[k])
    }

    /// Books the time since the last step at the standings recorded then: in each kind,
    /// the borrowed slots `min(Σ over-share, Σ under-share)` are debited to the accounts
    /// over their share and credited to those under it, each in proportion to how far.
    /// Lags are bounded by `horizon` seconds of the account's share.
    pub(super) fn accrue(&mut self, now: Timestamp, horizon: Duration) {
        let Some((at, standings)) = &self.since else { return };
        let dt = now.saturating_since(*at).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        for k in 0..2 {
            let gap = |s: &Standing| s.share[k] - f64::from(s.used[k]);
            let over: f64 = standings.values().filter(|s| s.share[k] > 0.0).map(|s| (-gap(s)).max(0.0)).sum();
            let under: f64 = standings.values().map(|s| gap(s).max(0.0)).sum();
            let borrowed = over.min(under);
            if borrowed <= 1e-9 {
                continue;
            }
            for (account, s) in standings {
                let g = gap(s);
                let change = if g > 0.0 {
                    dt * g * borrowed / under
                } else if s.share[k] > 0.0 {
                    dt * g * borrowed / over
                } else {
                    // Rate 0 runs on spare slots only: nobody is owed for those.
                    0.0
                };
                let bound = s.share[k] * horizon.as_secs_f64();
                let lag = &mut self.lag.entry(account.clone()).or_default()[k];
                *lag = (*lag + change).clamp(-bound, bound);
            }
        }
    }

    /// Records the standings after a step (from `now` on), and forgets the lags of
    /// accounts out of the market for a whole `horizon`, spreading what they were owed or
    /// owed back over the others so the book stays zero-sum.
    pub(super) fn record(
        &mut self,
        now: Timestamp,
        standings: BTreeMap<AccountId, Standing>,
        horizon: Duration,
    ) {
        self.absent.retain(|a, _| !standings.contains_key(a));
        let out: Vec<AccountId> = self.lag.keys().filter(|a| !standings.contains_key(*a)).cloned().collect();
        for account in out {
            let since = *self.absent.entry(account.clone()).or_insert(now);
            if now.saturating_since(since) < horizon {
                continue;
            }
            self.absent.remove(&account);
            if let Some(left) = self.lag.remove(&account) {
                for (k, &amount) in left.iter().enumerate() {
                    self.settle(k, amount);
                }
            }
        }
        self.since = Some((now, standings));
    }

    /// Moves the lags of the opposite sign to `amount` toward zero by `amount` in total,
    /// in proportion to their size.
    fn settle(&mut self, k: usize, amount: f64) {
        let opposite: f64 = self.lag.values().map(|l| l[k]).filter(|l| l * amount < 0.0).map(f64::abs).sum();
        if opposite <= 1e-9 {
            return;
        }
        let fraction = (amount.abs() / opposite).min(1.0);
        for l in self.lag.values_mut() {
            if l[k] * amount < 0.0 {
                l[k] -= l[k] * fraction;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> AccountId {
        AccountId(name.into())
    }

    fn standing(share: f64, used: u32) -> Standing {
        Standing { share: [share, 0.0], used: [used, 0] }
    }

    #[test]
    fn a_paused_account_lends_its_share_and_the_borrower_owes_it() {
        let mut book = LagBook::default();
        let horizon = Duration::from_secs(60);
        // 9 slots, rates 2:1: a holds none of its 6 (between jobs), b holds all 9.
        let standings = BTreeMap::from([(id("a"), standing(6.0, 0)), (id("b"), standing(3.0, 9))]);
        book.record(Timestamp(0), standings, horizon);
        book.accrue(Timestamp(10_000), horizon);
        assert!((book.lag(&id("a"), 0) - 60.0).abs() < 1e-9, "6 slots for 10 s lent");
        assert!((book.lag(&id("b"), 0) + 60.0).abs() < 1e-9, "and borrowed");
    }

    #[test]
    fn idle_slots_and_spare_use_at_rate_zero_are_owed_to_nobody() {
        let mut book = LagBook::default();
        let horizon = Duration::from_secs(60);
        // a under its share, b at its share, c at rate 0 on 2 spare slots: nobody borrowed.
        let standings = BTreeMap::from([
            (id("a"), standing(6.0, 2)),
            (id("b"), standing(3.0, 3)),
            (id("c"), standing(0.0, 2)),
        ]);
        book.record(Timestamp(0), standings, horizon);
        book.accrue(Timestamp(10_000), horizon);
        assert_eq!([book.lag(&id("a"), 0), book.lag(&id("b"), 0), book.lag(&id("c"), 0)], [0.0; 3]);
    }

    #[test]
    fn lags_are_bounded_by_the_horizon_and_a_leaver_is_settled() {
        let mut book = LagBook::default();
        let horizon = Duration::from_secs(5);
        let standings = BTreeMap::from([(id("a"), standing(6.0, 0)), (id("b"), standing(3.0, 9))]);
        book.record(Timestamp(0), standings, horizon);
        book.accrue(Timestamp(100_000), horizon);
        // a is owed at most 5 s of its 6 slots; b owes at most 5 s of its 3.
        assert_eq!((book.lag(&id("a"), 0), book.lag(&id("b"), 0)), (30.0, -15.0));
        // a leaves the market: its lag waits a horizon for it, then b's debt is forgiven.
        let alone = || BTreeMap::from([(id("b"), standing(9.0, 9))]);
        book.record(Timestamp(100_000), alone(), horizon);
        book.record(Timestamp(104_000), alone(), horizon);
        assert_eq!(book.lag(&id("b"), 0), -15.0);
        book.record(Timestamp(105_000), alone(), horizon);
        assert_eq!(book.lag(&id("b"), 0), 0.0);
    }
}
