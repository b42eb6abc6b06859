//! The DP market as clients see it (`slotmarket price`): the price, and per account its
//! balance, rate in force, allotment, slots used and tasks pending. Read-only; the
//! allotments come from the policy, the rest from the jobs and the ledger.

use std::collections::BTreeMap;

use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{AccountMarket, MarketInfo};
use slotmarket_common::spec::SlotKind;

use super::Caller;
use super::policy::{Policy, SchedView};
use super::state::{State, kind_ix};

/// The market for `caller`: every account with work counts toward the price; only those
/// `caller` may read are listed.
pub(super) fn market(state: &State, policy: &dyn Policy, caller: &Caller) -> MarketInfo {
    let view = SchedView::new(state);
    let mut rows: BTreeMap<AccountId, AccountMarket> = BTreeMap::new();
    for job in view.active_jobs() {
        let row = rows.entry(job.account().clone()).or_insert_with(|| AccountMarket {
            account: job.account().clone(),
            balance: view.balance(job.account()),
            rate: Credits::ZERO,
            share: [0, 0],
            used: [0, 0],
            pending: [0, 0],
        });
        for kind in SlotKind::ALL {
            row.used[kind_ix(kind)] += job.running(kind);
            row.pending[kind_ix(kind)] += job.pending(kind);
        }
    }
    let mut price = Credits::ZERO;
    for (account, rate, share) in policy.account_shares() {
        if let Some(row) = rows.get_mut(&account) {
            row.rate = rate;
            row.share = share;
            price = price.checked_add(rate).unwrap_or(price);
        }
    }
    let accounts = rows.into_values().filter(|r| state.accounts.may_read(caller, &r.account)).collect();
    MarketInfo { policy: policy.name().to_string(), price, accounts }
}
