//! `proportional`: DP, the Dynamic Priority scheduler (Sandholm & Lai, §3–5). Every
//! allocation interval the price is the sum of the spending rates of the accounts with
//! work; each such account is allotted `rate / price` of every slot kind (rounded so that
//! every slot is handed out) and is charged its rate for each slot it used during the
//! interval. An account whose budget is spent competes at rate 0: it gets no allotment
//! but still runs on slots nobody else wants, so no slot idles while work waits. The
//! rates (and so the price) are fixed for an interval; the allotments they imply are
//! recomputed over the current demand at every step, so a freed slot goes to the account
//! furthest below its allotment. With preemption on, an account below its allotment that
//! has waited the grace period takes slots back from those over theirs, youngest
//! attempts first.
//!
//! An account in the market that leaves part of its share to others (between two of its
//! jobs, in a job's last wave, while waiting for slots without preemption) is owed those
//! slot-seconds and, with `compensation_s` set, paid back over that horizon: its allotment rises by its
//! lag over the horizon and the borrowers' falls by theirs (`proportional_lag`), so over
//! time each account gets its rate's share of the slots it could have used. Preemption
//! kills for no more than an account's uncompensated share.
//!
//! Rates and income are in credits per slot-hour and per hour, so an income of 1 keeps
//! buying about one slot at rate 1 (§5). Charges and income are [`Posting`]s the reactor
//! writes to the ledger in the same step as the interval's decisions.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::{Credits, MICROS_PER_CREDIT};
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::preempt::{kills_in_flight, newest_of};
use super::proportional_lag::{LagBook, Standing};
use super::slots::FreeSlots;
use super::{Assignment, Decisions, KillReason, Policy, PolicyName, Posting, SchedView, Trigger};
use crate::core::state::kind_ix;

/// Milliseconds in an hour: rates are per slot-hour.
const MS_PER_HOUR: u128 = 3_600_000;

/// The settings of `proportional`, as the `[policy]` table gives them.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProportionalSettings {
    /// Length of the allocation interval in seconds (default 10).
    #[serde(default = "default_interval_s")]
    pub interval_s: f64,
    /// Kill the youngest tasks of accounts over their allotment when an account below
    /// its allotment has tasks waiting (default false).
    #[serde(default)]
    pub preemption: bool,
    /// How long, in seconds, an account must have waited below its allotment before
    /// tasks are killed for it (default 0: at the next interval).
    #[serde(default)]
    pub grace_s: f64,
    /// Spending rate (credits per slot-hour) of an account neither listed in `rates`
    /// nor set at run time (default 1).
    #[serde(default = "default_rate")]
    pub default_rate: f64,
    /// Spending rate per account, until its user sets another.
    #[serde(default)]
    pub rates: BTreeMap<String, f64>,
    /// Income per account in credits per hour, credited every interval (default none).
    #[serde(default)]
    pub income: BTreeMap<String, f64>,
    /// Seconds over which slots an account lent to others are paid back (default 60;
    /// 0: off, shares follow the rates of the moment only; see docs/experiments/dp.md).
    #[serde(default = "default_compensation_s")]
    pub compensation_s: f64,
}

fn default_interval_s() -> f64 {
    10.0
}

fn default_rate() -> f64 {
    1.0
}

fn default_compensation_s() -> f64 {
    60.0
}

impl Default for ProportionalSettings {
    fn default() -> ProportionalSettings {
        ProportionalSettings {
            interval_s: default_interval_s(),
            preemption: false,
            grace_s: 0.0,
            default_rate: default_rate(),
            rates: BTreeMap::new(),
            income: BTreeMap::new(),
            compensation_s: default_compensation_s(),
        }
    }
}

impl ProportionalSettings {
    /// The first setting that cannot work, as `(field, problem)`.
    pub fn problem(&self) -> Option<(String, String)> {
        if !(self.interval_s.is_finite() && self.interval_s >= 0.001) {
            return Some(("interval_s".into(), format!("must be at least 0.001, got {}", self.interval_s)));
        }
        if !(self.grace_s.is_finite() && self.grace_s >= 0.0) {
            return Some(("grace_s".into(), format!("must not be negative, got {}", self.grace_s)));
        }
        if !(self.compensation_s.is_finite() && (0.0..=86_400.0).contains(&self.compensation_s)) {
            let problem = format!("must be from 0 to 86400 seconds, got {}", self.compensation_s);
            return Some(("compensation_s".into(), problem));
        }
        let amounts = std::iter::once(("default_rate".to_string(), self.default_rate))
            .chain(self.rates.iter().map(|(a, &r)| (format!("rates.{a}"), r)))
            .chain(self.income.iter().map(|(a, &r)| (format!("income.{a}"), r)));
        for (field, value) in amounts {
            if credits_of(value).is_none() {
                return Some((field, format!("must be a number of credits from 0 to 1e12, got {value}")));
            }
        }
        None
    }
}

/// `value` credits as fixed-point credits, if it is a sane non-negative amount.
fn credits_of(value: f64) -> Option<Credits> {
    (value.is_finite() && (0.0..=1e12).contains(&value))
        .then(|| Credits((value * MICROS_PER_CREDIT as f64).round() as i64))
}

/// Seconds as a duration, for settings already checked.
fn duration_of(secs: f64) -> Duration {
    Duration::from_secs_f64(secs.max(0.0))
}

/// The DP policy.
#[derive(Clone, Debug)]
pub struct Proportional {
    interval: Duration,
    preemption: bool,
    grace: Duration,
    default_rate: Credits,
    rates: BTreeMap<AccountId, Credits>,
    income: BTreeMap<AccountId, Credits>,
    /// When the current interval began; `None` before the first.
    interval_start: Option<Timestamp>,
    /// Whether the last step saw work (otherwise no interval needs ticking).
    busy: bool,
    /// The rate each account competes at this interval (its spending rate, or 0 once its
    /// budget is spent), fixed at the interval's start: what its use is charged at.
    in_force: BTreeMap<AccountId, Credits>,
    /// Each account's allotment per kind: the rates in force shared over the current
    /// demand (recomputed every step, so a job that ends or arrives moves slots at once).
    allotments: BTreeMap<AccountId, Allotment>,
    /// Since when each (account, kind) has waited below its allotment.
    starved_since: BTreeMap<(AccountId, usize), Timestamp>,
    /// The payback horizon of lent slots; zero: no compensation.
    compensation: Duration,
    /// Slot-seconds each account lent (positive) or borrowed (negative).
    lags: LagBook,
    /// The allotments by rate alone (no compensation): preemption enforces no more.
    base: BTreeMap<AccountId, Allotment>,
    /// Since when each (account, kind) with ready tasks has held fewer slots than its
    /// allotment: `fill` serves the longest-waiting first among equally-short accounts.
    below_since: BTreeMap<(AccountId, usize), Timestamp>,
}

/// What an account was given at an interval.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Allotment {
    /// The rate it competes at: its spending rate, or 0 once its budget is spent.
    pub rate: Credits,
    /// Slots of each kind (by `kind_ix`).
    pub slots: [u32; 2],
}

/// One account's work in one step.
#[derive(Debug, Default)]
struct Work {
    /// Tasks running, by kind.
    running: [u32; 2],
    /// Tasks running or still to run, by kind: what the account could use.
    demand: [u32; 2],
    /// Jobs with ready tasks, in admission order, with how many, by kind.
    ready: [VecDeque<(JobId, u32)>; 2],
}

impl Work {
    fn ready_count(&self, k: usize) -> u32 {
        self.ready[k].iter().map(|&(_, n)| n).sum()
    }
}

impl Proportional {
    /// A DP policy with these (checked) settings.
    pub fn new(settings: &ProportionalSettings) -> Proportional {
        let amounts = |m: &BTreeMap<String, f64>| -> BTreeMap<AccountId, Credits> {
            m.iter().map(|(a, &v)| (AccountId(a.clone()), credits_of(v).unwrap_or(Credits::ZERO))).collect()
        };
        Proportional {
            interval: duration_of(settings.interval_s),
            preemption: settings.preemption,
            grace: duration_of(settings.grace_s),
            default_rate: credits_of(settings.default_rate).unwrap_or(Credits::ZERO),
            rates: amounts(&settings.rates),
            income: amounts(&settings.income),
            interval_start: None,
            busy: false,
            in_force: BTreeMap::new(),
            allotments: BTreeMap::new(),
            starved_since: BTreeMap::new(),
            compensation: duration_of(settings.compensation_s),
            lags: LagBook::default(),
            base: BTreeMap::new(),
            below_since: BTreeMap::new(),
        }
    }

    /// The allotments of the last interval, by account (for tests and the console).
    pub fn allotments(&self) -> &BTreeMap<AccountId, Allotment> {
        &self.allotments
    }

    /// The rate `account` competes at given its `balance`: its spending rate, or 0 once
    /// a metered budget is spent.
    fn bid(&self, view: &SchedView<'_>, account: &AccountId, balance: Option<Credits>) -> Credits {
        if balance.is_some_and(|b| !b.is_positive()) { Credits::ZERO } else { self.rate_of(view, account) }
    }

    /// Each account's allotment now: the rates in force this interval (an account that
    /// found work since bids its rate at once, fixed until the interval ends), shared
    /// over the current demand.
    fn allot_now(&mut self, view: &SchedView<'_>, work: &BTreeMap<AccountId, Work>) {
        for account in work.keys() {
            if !self.in_force.contains_key(account) {
                let bid = self.bid(view, account, view.balance(account));
                self.in_force.insert(account.clone(), bid);
            }
        }
        let bids: Vec<(AccountId, Credits)> =
            work.keys().map(|a| (a.clone(), self.in_force.get(a).copied().unwrap_or_default())).collect();
        self.base = allot(view, work, &bids, None);
        self.allotments = if self.compensation.is_zero() {
            self.base.clone()
        } else {
            allot(view, work, &bids, Some((&self.lags, self.compensation)))
        };
    }

    /// Records each account's rate share and the slots it holds after this step's
    /// `assignments`, for the lag book to charge the time until the next step.
    fn record_standings(
        &mut self,
        now: Timestamp,
        view: &SchedView<'_>,
        work: &BTreeMap<AccountId, Work>,
        assignments: &[Assignment],
    ) {
        if self.compensation.is_zero() {
            return;
        }
        let bids: Vec<(AccountId, Credits)> =
            work.keys().map(|a| (a.clone(), self.in_force.get(a).copied().unwrap_or_default())).collect();
        let mut standings: BTreeMap<AccountId, Standing> = BTreeMap::new();
        for kind in SlotKind::ALL {
            let k = kind_ix(kind);
            let shares = exact_shares(view.total_slots(kind), &bids);
            for ((account, _), share) in bids.iter().zip(shares) {
                let s = standings.entry(account.clone()).or_default();
                s.share[k] = share;
                s.used[k] = work.get(account).map_or(0, |w| w.running[k]);
            }
        }
        for a in assignments {
            let Some(account) = view.job(a.job).map(|j| j.account().clone()) else { continue };
            if let Some(s) = standings.get_mut(&account) {
                s.used[kind_ix(a.kind)] += 1;
            }
        }
        self.lags.record(now, standings, self.compensation);
    }

    /// The spending rate `account` bids: set at run time, else from the settings.
    fn rate_of(&self, view: &SchedView<'_>, account: &AccountId) -> Credits {
        view.spending_rate(account).or_else(|| self.rates.get(account).copied()).unwrap_or(self.default_rate)
    }

    /// Ends the running interval at `now`: charges each account its interval's rate for
    /// the slots it holds, credits income, and allots the next interval.
    fn run_interval(
        &mut self,
        now: Timestamp,
        view: &SchedView<'_>,
        work: &BTreeMap<AccountId, Work>,
        out: &mut Vec<Posting>,
    ) {
        let elapsed = self.interval_start.map_or(Duration::ZERO, |start| now.saturating_since(start));
        let mut balances: BTreeMap<AccountId, Credits> = BTreeMap::new();
        if !elapsed.is_zero() {
            for (account, w) in work {
                let rate = self.in_force.get(account).copied().unwrap_or(Credits::ZERO);
                let used = w.running[0] + w.running[1];
                let cost = interval_cost(rate, used, elapsed);
                if let Some(balance) = view.balance(account) {
                    balances.insert(account.clone(), Credits(balance.0.saturating_sub(cost.0).max(0)));
                    if cost.is_positive() {
                        let reason =
                            format!("{used} slots for {:.1} s at {rate}/slot-hour", elapsed.as_secs_f64());
                        out.push(Posting::Charge { account: account.clone(), amount: cost, reason });
                    }
                }
            }
            // Incomes set at run time override the settings' ones.
            let mut incomes = self.income.clone();
            incomes.extend(view.incomes().iter().map(|(a, &i)| (a.clone(), i)));
            for (account, &per_hour) in &incomes {
                let amount = interval_cost(per_hour, 1, elapsed);
                if amount.is_positive() && view.balance(account).is_some() {
                    let reason = format!("income for {:.1} s at {per_hour}/hour", elapsed.as_secs_f64());
                    out.push(Posting::Income { account: account.clone(), amount, reason });
                    let b =
                        balances.entry(account.clone()).or_insert(view.balance(account).unwrap_or_default());
                    *b = Credits(b.0.saturating_add(amount.0));
                }
            }
        }
        self.in_force = work
            .keys()
            .map(|account| {
                let balance = balances.get(account).copied().or_else(|| view.balance(account));
                (account.clone(), self.bid(view, account, balance))
            })
            .collect();
        self.interval_start = Some(now);
    }

    /// Kills tasks of accounts over their allotment of `kind` for those below it that
    /// have waited at least the grace period (checked at every step, so a starved account
    /// waits for the grace period, not for the next interval).
    fn preempt(
        &mut self,
        now: Timestamp,
        view: &SchedView<'_>,
        kind: SlotKind,
        work: &BTreeMap<AccountId, Work>,
    ) -> Vec<super::Preemption> {
        let k = kind_ix(kind);
        let mut owed = 0u32;
        for (account, w) in work {
            // An account preempts for its rate share only, never for what it is owed:
            // repayment comes through freed slots.
            let share = self.base.get(account).map_or(0, |a| a.slots[k]);
            let share = share.min(self.allotments.get(account).map_or(0, |a| a.slots[k]));
            let deficit = share.saturating_sub(w.running[k]).min(w.ready_count(k));
            let key = (account.clone(), k);
            if deficit == 0 {
                self.starved_since.remove(&key);
                continue;
            }
            let since = *self.starved_since.entry(key).or_insert(now);
            if now.saturating_since(since) >= self.grace {
                owed += deficit;
            }
        }
        // Free slots go to the starved by `fill`; kills are only for a full cluster.
        if owed == 0 || view.has_free(kind) {
            return Vec::new();
        }
        let budget = owed.saturating_sub(kills_in_flight(view, kind));
        if budget == 0 {
            return Vec::new();
        }
        let names: Vec<&AccountId> = work.keys().collect();
        let mut victims: Vec<(usize, u32)> = names
            .iter()
            .enumerate()
            .filter_map(|(i, account)| {
                // Over its compensated allotment, the one `fill` works to: a lender being
                // paid back is no victim, so a kill never hands the slot straight back.
                let share = self.allotments.get(*account).map_or(0, |a| a.slots[k]);
                let over = work[*account].running[k].saturating_sub(share);
                (over > 0).then_some((i, over))
            })
            .collect();
        victims.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let group = |job: JobId| view.job(job).and_then(|j| names.iter().position(|n| *n == j.account()));
        let reason = KillReason::Preempted {
            policy: PolicyName::Proportional,
            why: "its account is over its proportional share",
        };
        newest_of(view, kind, &victims, group, budget, reason)
    }
}

/// What `used` slots cost for `elapsed` at `rate` per slot-hour (rounded down to a
/// micro-credit, so charges never exceed rate × use).
pub(super) fn interval_cost(rate: Credits, used: u32, elapsed: Duration) -> Credits {
    let micros = rate.0.max(0) as u128 * u128::from(used) * elapsed.as_millis() / MS_PER_HOUR;
    Credits(i64::try_from(micros).unwrap_or(i64::MAX))
}

/// Each account's work, from the active jobs.
fn gather(view: &SchedView<'_>) -> BTreeMap<AccountId, Work> {
    let mut work: BTreeMap<AccountId, Work> = BTreeMap::new();
    for job in view.active_jobs() {
        let w = work.entry(job.account().clone()).or_default();
        for kind in SlotKind::ALL {
            let k = kind_ix(kind);
            w.running[k] += job.running(kind);
            w.demand[k] += job.running(kind) + job.pending(kind);
            if job.ready(kind) > 0 {
                w.ready[k].push_back((job.id(), job.ready(kind)));
            }
        }
    }
    work
}

/// Each bidder's exact rate share of `total` slots, `total × rate / price` (0 at rate 0),
/// whatever its demand.
fn exact_shares(total: u32, bids: &[(AccountId, Credits)]) -> Vec<f64> {
    let price: f64 = bids.iter().map(|(_, r)| r.0.max(0) as f64).sum();
    bids.iter()
        .map(|(_, r)| if price > 0.0 { f64::from(total) * r.0.max(0) as f64 / price } else { 0.0 })
        .collect()
}

/// The allotments of one step: for each kind, the slots offered shared by rate, or, with
/// a lag book and horizon, by rate share plus lag / horizon (never below 0).
fn allot(
    view: &SchedView<'_>,
    work: &BTreeMap<AccountId, Work>,
    bids: &[(AccountId, Credits)],
    compensation: Option<(&LagBook, Duration)>,
) -> BTreeMap<AccountId, Allotment> {
    let mut out: BTreeMap<AccountId, Allotment> =
        bids.iter().map(|(a, rate)| (a.clone(), Allotment { rate: *rate, slots: [0, 0] })).collect();
    for kind in SlotKind::ALL {
        let k = kind_ix(kind);
        let total = view.total_slots(kind);
        let weights: Vec<u64> = match compensation {
            None => bids.iter().map(|(_, rate)| rate.0.max(0) as u64).collect(),
            Some((lags, horizon)) => exact_shares(total, bids)
                .iter()
                .zip(bids)
                .map(|(&share, (a, _))| {
                    let owed = lags.lag(a, k) / horizon.as_secs_f64();
                    if share > 0.0 { ((share + owed).max(0.0) * 1e6).round() as u64 } else { 0 }
                })
                .collect(),
        };
        let rated: Vec<(u64, u32)> = weights
            .iter()
            .zip(bids)
            .map(|(&w, (a, _))| (w, work.get(a).map_or(0, |w| w.demand[k])))
            .collect();
        let shares = proportional_shares(total, &rated);
        for ((account, _), share) in bids.iter().zip(shares) {
            if let Some(a) = out.get_mut(account) {
                a.slots[k] = share;
            }
        }
    }
    out
}

/// Shares `total` slots among bidders `(rate, demand)` in proportion to their rates,
/// never giving one more than its demand (what a capped bidder leaves is shared again
/// among the others by rate), and rounded by largest remainder so that every slot some
/// bidder with a positive rate can use is handed out. Bidders at rate 0 get nothing: they
/// run on spare slots only. Ties in rounding go to the higher rate, then the earlier
/// bidder.
pub(super) fn proportional_shares(total: u32, bids: &[(u64, u32)]) -> Vec<u32> {
    let mut exact = vec![0.0f64; bids.len()];
    let mut open: Vec<usize> = (0..bids.len()).filter(|&i| bids[i].0 > 0 && bids[i].1 > 0).collect();
    let mut left = f64::from(total);
    // Water-filling: hand out by rate; whoever reaches their demand is capped and leaves
    // the round, and the rest is shared again. At most one round per bidder.
    while !open.is_empty() && left > 1e-9 {
        let price: f64 = open.iter().map(|&i| bids[i].0 as f64).sum();
        let capped: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| left * bids[i].0 as f64 / price >= f64::from(bids[i].1) - exact[i] - 1e-9)
            .collect();
        if capped.is_empty() {
            for &i in &open {
                exact[i] += left * bids[i].0 as f64 / price;
            }
            break;
        }
        for &i in &capped {
            left -= f64::from(bids[i].1) - exact[i];
            exact[i] = f64::from(bids[i].1);
        }
        open.retain(|i| !capped.contains(i));
    }
    round_largest_remainder(&exact, bids)
}

/// Floors every exact share and hands the slots the floors leave over to the largest
/// remainders (higher rate, then earlier bidder, on ties), never past a demand.
fn round_largest_remainder(exact: &[f64], bids: &[(u64, u32)]) -> Vec<u32> {
    let mut shares: Vec<u32> = exact.iter().map(|&x| (x + 1e-9).floor() as u32).collect();
    let target = exact.iter().sum::<f64>().round() as u32;
    let mut spare = target.saturating_sub(shares.iter().sum());
    let mut order: Vec<usize> = (0..exact.len()).filter(|&i| bids[i].0 > 0).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - f64::from(shares[a]), exact[b] - f64::from(shares[b]));
        rb.total_cmp(&ra).then(bids[b].0.cmp(&bids[a].0)).then(a.cmp(&b))
    });
    for i in order {
        if spare == 0 {
            break;
        }
        if shares[i] < bids[i].1 {
            shares[i] += 1;
            spare -= 1;
        }
    }
    shares
}

impl Policy for Proportional {
    fn name(&self) -> PolicyName {
        PolicyName::Proportional
    }

    fn schedule(&mut self, now: Timestamp, view: &SchedView<'_>, trigger: Trigger) -> Decisions {
        let mut decisions = Decisions::default();
        let work = gather(view);
        let due = self.interval_start.is_none_or(|start| now >= start + self.interval);
        let idle_before = !self.busy;
        self.busy = !work.is_empty();
        if (trigger == Trigger::Tick && due) || (idle_before && self.busy) {
            self.run_interval(now, view, &work, &mut decisions.postings);
        }
        if !self.compensation.is_zero() {
            self.lags.accrue(now, self.compensation);
        }
        self.allot_now(view, &work);
        if self.preemption {
            for kind in SlotKind::ALL {
                decisions.preemptions.extend(self.preempt(now, view, kind, &work));
            }
        }
        self.note_waiting(now, &work);
        for kind in SlotKind::ALL {
            if view.has_free(kind) {
                self.fill(view, kind, &work, &mut decisions.assignments);
            }
        }
        self.record_standings(now, view, &work, &decisions.assignments);
        decisions
    }

    fn account_shares(&self) -> Vec<(AccountId, Credits, [u32; 2])> {
        self.allotments.iter().map(|(account, a)| (account.clone(), a.rate, a.slots)).collect()
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        if !self.busy {
            return None;
        }
        self.interval_start.map(|start| start + self.interval)
    }
}

impl Proportional {
    /// Keeps `below_since` current: an account with ready tasks below its allotment keeps
    /// the time it first fell below; one at or over it, or with nothing ready, is dropped.
    fn note_waiting(&mut self, now: Timestamp, work: &BTreeMap<AccountId, Work>) {
        let allotments = &self.allotments;
        let waiting = |account: &AccountId, k: usize| {
            work.get(account).is_some_and(|w| {
                let allotted = allotments.get(account).map_or(0, |a| a.slots[k]);
                !w.ready[k].is_empty() && w.running[k] < allotted
            })
        };
        self.below_since.retain(|(account, k), _| waiting(account, *k));
        for (account, _) in work.iter() {
            for k in 0..2 {
                if waiting(account, k) {
                    self.below_since.entry((account.clone(), k)).or_insert(now);
                }
            }
        }
    }

    /// Hands out the free slots of `kind`, one at a time: to the account furthest below
    /// its allotment first; once every account with ready tasks has its allotment, to the
    /// highest rate, then the fewest running (spare capacity: work-conserving).
    fn fill(
        &self,
        view: &SchedView<'_>,
        kind: SlotKind,
        work: &BTreeMap<AccountId, Work>,
        out: &mut Vec<Assignment>,
    ) {
        let k = kind_ix(kind);
        let mut table: Vec<Claim> = work
            .iter()
            .filter(|(_, w)| !w.ready[k].is_empty())
            .map(|(account, w)| {
                let a = self.allotments.get(account).copied().unwrap_or_default();
                let waiting_since = self.below_since.get(&(account.clone(), k)).map_or(u64::MAX, |t| t.0);
                Claim {
                    allotted: a.slots[k],
                    running: w.running[k],
                    rate: a.rate,
                    waiting_since,
                    ready: w.ready[k].clone(),
                }
            })
            .collect();
        let mut free = FreeSlots::new(view.agents_with_free(kind), kind);
        while free.remaining() > 0 {
            let Some(claim) = table.iter_mut().filter(|c| !c.ready.is_empty()).min_by_key(|c| c.order())
            else {
                return;
            };
            let Some(agent) = free.take() else { return };
            let Some(front) = claim.ready.front_mut() else { return };
            out.push(Assignment { agent, job: front.0, kind });
            front.1 -= 1;
            if front.1 == 0 {
                claim.ready.pop_front();
            }
            claim.running += 1;
        }
    }
}

/// An account's claim on the free slots of one kind during one step.
struct Claim {
    /// Its allotment from the last interval.
    allotted: u32,
    /// Tasks it runs, counting the ones this step starts.
    running: u32,
    /// The rate it competes at.
    rate: Credits,
    /// When it fell below its allotment (`u64::MAX`: it is not below), in ms.
    waiting_since: u64,
    /// Its jobs with ready tasks, in admission order, with how many.
    ready: VecDeque<(JobId, u32)>,
}

impl Claim {
    /// Serving order, lowest first: accounts below their allotment by how far below,
    /// then by how long they have waited (a tie broken by name would make the same
    /// account lose every tie: with many accounts one slot short, it starved); then the
    /// rest (spare capacity) by highest rate, then fewest running.
    fn order(&self) -> (u8, i64, u64, i64, u32) {
        let below = i64::from(self.allotted) - i64::from(self.running);
        if below > 0 { (0, -below, self.waiting_since, 0, 0) } else { (1, 0, 0, -self.rate.0, self.running) }
    }
}

#[cfg(test)]
#[path = "proportional_tests.rs"]
mod tests;
