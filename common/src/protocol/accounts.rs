//! Wire and store types of accounts and their ledger: what an account looks like to a
//! client, one ledger entry, and a page of a ledger. Same postcard rule as `messages`:
//! append variants and fields at the end, never reorder.

use serde::{Deserialize, Serialize};

use crate::ids::{AccountId, JobId};
use crate::money::Credits;
use crate::time::Timestamp;

/// Most ledger entries one `Ledger` answer carries, whatever the client asks for; an
/// entry is at most a few hundred bytes, so a page stays far below the frame limit.
pub const MAX_LEDGER_PAGE: u32 = 500;

/// Longest memo or charge reason kept on a ledger entry, in bytes.
pub const MAX_MEMO_LEN: usize = 200;

/// Whether `name` is usable as an account name: `[A-Za-z0-9._-]{1,64}`, the same rule as
/// certificate principals, so a user's own account can carry their principal's name.
pub fn valid_account_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// One append-only ledger entry. An account's balance is the sum of its entries'
/// amounts; nothing else stores it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Position in the master's ledger (across all accounts), from 1, strictly increasing.
    pub seq: u64,
    /// The account credited or debited.
    pub account: AccountId,
    /// When it was decided (the core's time).
    pub at: Timestamp,
    /// Signed change of the balance: positive for grants, negative for charges.
    pub amount: Credits,
    /// Why the balance changed.
    pub kind: EntryKind,
    /// Free text given by whoever caused it (untrusted; shown as data).
    pub memo: Option<String>,
}

/// What a ledger entry records. Each kind fixes the sign of its amount.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum EntryKind {
    /// Budget granted by an administrator (amount > 0).
    Grant {
        /// The granting principal.
        by: String,
    },
    /// Credits spent or taken back (amount < 0): a job's price, an interval's use, or an
    /// administrator's downward adjustment (no job).
    Charge {
        /// The job charged for, if any.
        job: Option<JobId>,
        /// Why, e.g. "budget reduced by admin:root".
        reason: String,
    },
    /// Income credited for an allocation interval (DP §5, amount > 0): the account's
    /// admin-set income per hour times the interval's length.
    Income {
        /// What it was for, e.g. "income for 10 s at 1 per hour".
        reason: String,
    },
    /// The price of a deadline bought under MRM admission (amount < 0), written in the
    /// same store transaction as the job's admission.
    DeadlinePurchase {
        /// The job admitted with it.
        job: JobId,
        /// The deadline bought.
        deadline: Timestamp,
    },
}

impl EntryKind {
    /// Lower-case name used in tables, JSON and the store.
    pub fn name(&self) -> &'static str {
        match self {
            EntryKind::Grant { .. } => "grant",
            EntryKind::Charge { .. } => "charge",
            EntryKind::Income { .. } => "income",
            EntryKind::DeadlinePurchase { .. } => "deadline",
        }
    }

    /// Whether `amount` has the sign this kind requires.
    pub fn allows(&self, amount: Credits) -> bool {
        match self {
            EntryKind::Grant { .. } => amount.is_positive(),
            EntryKind::Charge { .. } => amount.is_negative(),
            EntryKind::Income { .. } => amount.is_positive(),
            EntryKind::DeadlinePurchase { .. } => amount.is_negative(),
        }
    }
}

/// An account as a client sees it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AccountSummary {
    /// Its name.
    pub account: AccountId,
    /// When an administrator created it; `None` for a user's own account that exists
    /// only implicitly (balance 0, no entries) until an administrator creates it.
    pub created: Option<Timestamp>,
    /// Users other than the account's namesake who may read it and submit to it.
    pub members: Vec<String>,
    /// Sum of its grants.
    pub granted: Credits,
    /// Sum of its charges, as a positive amount.
    pub charged: Credits,
    /// `granted - charged`: what is left to spend; never below zero.
    pub balance: Credits,
    /// Number of ledger entries.
    pub entries: u64,
    /// Sequence number of its latest entry (0 if none), the `after_seq` to watch from.
    pub last_seq: u64,
    /// The DP spending rate its user set (credits per slot-hour); `None`: the rate the
    /// policy's settings give it.
    pub rate: Option<Credits>,
    /// The DP income an administrator set (credits per hour); `None`: the income the
    /// policy's settings give it, if any.
    pub income: Option<Credits>,
}

/// A slice of one account's ledger, oldest first.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LedgerPage {
    /// The account.
    pub account: AccountId,
    /// Entries with `seq` above the request's `after_seq`, at most its limit.
    pub entries: Vec<LedgerEntry>,
    /// `Some(seq)` to pass as `after_seq` for the next page when more entries follow.
    pub next_after: Option<u64>,
}

/// The DP market as `slotmarket price` shows it (the console of the paper's Fig. 2).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct MarketInfo {
    /// The running policy's name; shares are empty unless it is `proportional`.
    pub policy: String,
    /// The price: the sum of the rates in force of the accounts with work, credits per
    /// slot-hour.
    pub price: Credits,
    /// Accounts with work, by name (a user sees only the accounts they may read).
    pub accounts: Vec<AccountMarket>,
}

/// One account's standing in the DP market.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AccountMarket {
    /// The account.
    pub account: AccountId,
    /// Its balance, if an admin created it (`None`: not metered).
    pub balance: Option<Credits>,
    /// The rate it competes at this interval (0 once its budget is spent).
    pub rate: Credits,
    /// Slots allotted, map and reduce.
    pub share: [u32; 2],
    /// Slots in use, map and reduce.
    pub used: [u32; 2],
    /// Tasks waiting to run (ready or behind a barrier), map and reduce.
    pub pending: [u32; 2],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_names_follow_the_principal_rule() {
        for ok in ["alice", "lab-2", "a.b_c", &"x".repeat(64)] {
            assert!(valid_account_name(ok), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", "a\nb", &"x".repeat(65)] {
            assert!(!valid_account_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn entry_kinds_fix_the_sign_of_their_amount() {
        let grant = EntryKind::Grant { by: "root".into() };
        let charge = EntryKind::Charge { job: Some(JobId(3)), reason: "price".into() };
        assert!(grant.allows(Credits(1)) && !grant.allows(Credits(0)) && !grant.allows(Credits(-1)));
        assert!(charge.allows(Credits(-1)) && !charge.allows(Credits(0)) && !charge.allows(Credits(1)));
        assert_eq!((grant.name(), charge.name()), ("grant", "charge"));
    }

    #[test]
    fn a_full_page_of_long_entries_fits_a_frame() {
        let entry = LedgerEntry {
            seq: u64::MAX,
            account: AccountId("x".repeat(64)),
            at: Timestamp(u64::MAX),
            amount: Credits(i64::MIN),
            kind: EntryKind::Charge { job: Some(JobId(u64::MAX)), reason: "r".repeat(MAX_MEMO_LEN) },
            memo: Some("m".repeat(MAX_MEMO_LEN)),
        };
        let page = LedgerPage {
            account: entry.account.clone(),
            entries: vec![entry; MAX_LEDGER_PAGE as usize],
            next_after: Some(u64::MAX),
        };
        let bytes = postcard::to_allocvec(&page).unwrap();
        assert!(bytes.len() < crate::protocol::DEFAULT_MAX_FRAME / 2, "{} bytes", bytes.len());
        assert_eq!(postcard::from_bytes::<LedgerPage>(&bytes).unwrap(), page);
    }
}
