//! Accounts, budgets and the append-only ledger, as pure arithmetic and rules: who may
//! read an account or submit to it, which grants and charges are valid, and balances
//! derived from ledger entries only. The reactor turns these decisions into `Persist`
//! commands; MRM's admission charges and DP's interval charges and income post here too.
//!
//! Accounts named after a user's principal exist *implicitly*: until an administrator
//! creates one, its owner sees it with balance 0 and no entries and may submit to it, but
//! nothing is stored and no grant can be made to it (`account add` creates it first).

use std::collections::{BTreeMap, BTreeSet};

use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::accounts::{MAX_MEMO_LEN, valid_account_name};
use slotmarket_common::protocol::{AccountSummary, EntryKind, LedgerEntry, LedgerPage, MAX_LEDGER_PAGE};
use slotmarket_common::time::Timestamp;
use thiserror::Error;

/// Most members one account may list.
pub const MAX_MEMBERS: usize = 256;

/// Why an account request or a posting was refused.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum AccountError {
    /// The name breaks the account-name rule.
    #[error("\"{name}\" is not a valid account name; use 1-64 of A-Z a-z 0-9 . _ -")]
    BadName {
        /// The name given (untrusted, shown quoted).
        name: String,
    },
    /// A member name breaks the principal-name rule.
    #[error("\"{name}\" is not a valid member (user principal) name; use 1-64 of A-Z a-z 0-9 . _ -")]
    BadMember {
        /// The name given.
        name: String,
    },
    /// More members than [`MAX_MEMBERS`].
    #[error("{count} members given; an account may list at most {MAX_MEMBERS}")]
    TooManyMembers {
        /// How many were given.
        count: usize,
    },
    /// An account of that name was already created.
    #[error("account {account} already exists")]
    Exists {
        /// The account.
        account: AccountId,
    },
    /// No account of that name was created (or the caller may not see it).
    #[error("no account {account}")]
    NotFound {
        /// The account.
        account: AccountId,
    },
    /// A grant or charge of nothing.
    #[error("the amount must not be zero")]
    ZeroAmount,
    /// A first budget that is not positive.
    #[error("a new account's budget must be positive, got {amount}")]
    NonPositiveBudget {
        /// The amount given.
        amount: Credits,
    },
    /// A charge (or negative grant) larger than the balance: balances never go below zero.
    #[error("account {account} has {balance} left, less than the {amount} asked for")]
    InsufficientFunds {
        /// The account.
        account: AccountId,
        /// What it has.
        balance: Credits,
        /// What would be taken.
        amount: Credits,
    },
    /// A sum past the fixed-point range.
    #[error("account {account}'s totals would overflow")]
    Overflow {
        /// The account.
        account: AccountId,
    },
    /// A memo or reason too long or with control characters.
    #[error("memo must be at most {MAX_MEMO_LEN} bytes of printable text")]
    BadMemo,
    /// A spending rate below zero.
    #[error("a spending rate must not be negative, got {rate}")]
    NegativeRate {
        /// The rate given.
        rate: Credits,
    },
    /// An income below zero.
    #[error("an income must not be negative, got {income}")]
    NegativeIncome {
        /// The income given.
        income: Credits,
    },
}

/// Why stored accounts and entries do not replay into a consistent ledger.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum ReplayError {
    /// An account is stored twice or under an invalid name.
    #[error("account {account} is stored twice or has an invalid name")]
    BadAccount {
        /// The account.
        account: AccountId,
    },
    /// Entries are not in strictly increasing sequence order.
    #[error("ledger entry {seq} follows entry {after}")]
    OutOfOrder {
        /// The entry.
        seq: u64,
        /// The entry before it.
        after: u64,
    },
    /// An entry names an account that was never created.
    #[error("ledger entry {seq} is for unknown account {account}")]
    UnknownAccount {
        /// The entry.
        seq: u64,
        /// The account.
        account: AccountId,
    },
    /// An entry's amount has the wrong sign for its kind.
    #[error("ledger entry {seq} is a {kind} of {amount}")]
    WrongSign {
        /// The entry.
        seq: u64,
        /// Its kind's name.
        kind: &'static str,
        /// Its amount.
        amount: Credits,
    },
    /// An entry takes its account below zero or past the numeric range.
    #[error("ledger entry {seq} takes account {account} below zero or out of range")]
    Balance {
        /// The entry.
        seq: u64,
        /// The account.
        account: AccountId,
    },
}

/// An account created by an administrator, with totals derived from its entries.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Account {
    /// Its name.
    pub id: AccountId,
    /// When it was created.
    pub created: Timestamp,
    /// Users besides its namesake who may read it and submit to it.
    pub members: BTreeSet<String>,
    /// Sum of grant amounts.
    granted: Credits,
    /// Sum of charge amounts, negated (so positive).
    charged: Credits,
    /// Its ledger entries, by sequence number.
    entries: Vec<LedgerEntry>,
}

impl Account {
    /// `granted - charged`; never below zero.
    pub fn balance(&self) -> Credits {
        // Both totals are kept in range by `post`, and charged <= granted.
        Credits(self.granted.0 - self.charged.0)
    }

    /// Sum of its grants.
    pub fn granted(&self) -> Credits {
        self.granted
    }

    /// Sum of its charges, as a positive amount.
    pub fn charged(&self) -> Credits {
        self.charged
    }

    /// Its entries, oldest first.
    pub fn entries(&self) -> &[LedgerEntry] {
        &self.entries
    }

    /// The totals after adding `amount` (signed), if they stay in range and the balance
    /// does not go below zero.
    fn totals_after(&self, amount: Credits) -> Result<(Credits, Credits), AccountError> {
        let overflow = || AccountError::Overflow { account: self.id.clone() };
        let (granted, charged) = if amount.is_negative() {
            let taken = amount.checked_neg().ok_or_else(overflow)?;
            (self.granted, self.charged.checked_add(taken).ok_or_else(overflow)?)
        } else {
            (self.granted.checked_add(amount).ok_or_else(overflow)?, self.charged)
        };
        if charged > granted {
            let amount = amount.checked_neg().unwrap_or(Credits(i64::MAX));
            return Err(AccountError::InsufficientFunds {
                account: self.id.clone(),
                balance: self.balance(),
                amount,
            });
        }
        Ok((granted, charged))
    }

    fn summary(&self) -> AccountSummary {
        AccountSummary {
            account: self.id.clone(),
            created: Some(self.created),
            members: self.members.iter().cloned().collect(),
            granted: self.granted,
            charged: self.charged,
            balance: self.balance(),
            entries: self.entries.len() as u64,
            last_seq: self.entries.last().map_or(0, |e| e.seq),
            rate: None,
            income: None,
        }
    }
}

/// Every created account and the whole ledger, by account.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Accounts {
    by_id: BTreeMap<AccountId, Account>,
    /// The sequence number of the next entry; one past the largest ever posted.
    next_seq: u64,
    /// Entries a recovery could not apply (the store checks first, so this stays 0).
    refused_on_replay: u64,
    /// Spending rates (credits per slot-hour) users set at run time, by account; an
    /// account not listed spends at the rate the policy's settings give it.
    rates: BTreeMap<AccountId, Credits>,
    /// Incomes (credits per hour) administrators set on created accounts; an account not
    /// listed earns what the policy's settings give it.
    income: BTreeMap<AccountId, Credits>,
}

impl Default for Accounts {
    fn default() -> Accounts {
        Accounts {
            by_id: BTreeMap::new(),
            next_seq: 1,
            refused_on_replay: 0,
            rates: BTreeMap::new(),
            income: BTreeMap::new(),
        }
    }
}

/// An account as stored: what `Persist::Account` writes and recovery reads back.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StoredAccount {
    /// Its name.
    pub account: AccountId,
    /// Its members.
    pub members: Vec<String>,
    /// When it was created.
    pub created: Timestamp,
}

impl Accounts {
    /// A created account.
    pub fn get(&self, id: &AccountId) -> Option<&Account> {
        self.by_id.get(id)
    }

    /// The spending rate set on `id` at run time, if any.
    pub fn rate(&self, id: &AccountId) -> Option<Credits> {
        self.rates.get(id).copied()
    }

    /// Sets the spending rate of `id` (credits per slot-hour); refused when negative.
    pub fn set_rate(&mut self, id: &AccountId, rate: Credits) -> Result<(), AccountError> {
        if rate.is_negative() {
            return Err(AccountError::NegativeRate { rate });
        }
        self.rates.insert(id.clone(), rate);
        Ok(())
    }

    /// The income set on `id` by an administrator, if any.
    pub fn income(&self, id: &AccountId) -> Option<Credits> {
        self.income.get(id).copied()
    }

    /// Every income set by an administrator, by account.
    pub fn incomes(&self) -> &BTreeMap<AccountId, Credits> {
        &self.income
    }

    /// Sets the income of the created account `id` (credits per hour); refused when
    /// negative or when the account does not exist (income is posted to its ledger).
    pub fn set_income(&mut self, id: &AccountId, income: Credits) -> Result<(), AccountError> {
        if income.is_negative() {
            return Err(AccountError::NegativeIncome { income });
        }
        if !self.by_id.contains_key(id) {
            return Err(AccountError::NotFound { account: id.clone() });
        }
        self.income.insert(id.clone(), income);
        Ok(())
    }

    /// Restores the rates and incomes a store kept (entries for accounts that no longer
    /// exist are kept too: a user's rate needs no created account).
    pub fn restore_settings(&mut self, rates: Vec<(AccountId, Credits)>, income: Vec<(AccountId, Credits)>) {
        self.rates.extend(rates.into_iter().filter(|(_, r)| !r.is_negative()));
        self.income.extend(income.into_iter().filter(|(_, i)| !i.is_negative()));
    }

    /// `summary` with the account's set rate and income filled in.
    fn with_settings(&self, mut summary: AccountSummary) -> AccountSummary {
        summary.rate = self.rate(&summary.account);
        summary.income = self.income(&summary.account);
        summary
    }

    /// Entries a recovery refused (see [`Accounts::replay`] for the strict check).
    pub fn refused_on_replay(&self) -> u64 {
        self.refused_on_replay
    }

    /// Creates `id` with `members` and, if given, a first grant of `budget` by `by`.
    /// Everything is checked before anything changes. Returns what to store: the account
    /// and the grant's entry.
    pub fn create(
        &mut self,
        id: AccountId,
        members: Vec<String>,
        budget: Option<Credits>,
        by: &Identity,
        now: Timestamp,
    ) -> Result<(StoredAccount, Option<LedgerEntry>), AccountError> {
        if !valid_account_name(&id.0) {
            return Err(AccountError::BadName { name: id.0 });
        }
        if let Some(bad) = members.iter().find(|m| !valid_account_name(m)) {
            return Err(AccountError::BadMember { name: bad.clone() });
        }
        if members.len() > MAX_MEMBERS {
            return Err(AccountError::TooManyMembers { count: members.len() });
        }
        if self.by_id.contains_key(&id) {
            return Err(AccountError::Exists { account: id });
        }
        if let Some(amount) = budget.filter(|b| !b.is_positive()) {
            return Err(AccountError::NonPositiveBudget { amount });
        }
        let members: BTreeSet<String> = members.into_iter().collect();
        let stored =
            StoredAccount { account: id.clone(), members: members.iter().cloned().collect(), created: now };
        let account = Account {
            id: id.clone(),
            created: now,
            members,
            granted: Credits::ZERO,
            charged: Credits::ZERO,
            entries: Vec::new(),
        };
        self.by_id.insert(id.clone(), account);
        let entry = budget.map(|amount| self.grant(&id, amount, by, None, now)).transpose()?;
        Ok((stored, entry))
    }

    /// Grants `amount` to `id` on behalf of `by`. A negative amount takes budget back as
    /// a charge without a job, refused if it would leave the balance below zero.
    pub fn grant(
        &mut self,
        id: &AccountId,
        amount: Credits,
        by: &Identity,
        memo: Option<String>,
        now: Timestamp,
    ) -> Result<LedgerEntry, AccountError> {
        let kind = if amount.is_negative() {
            EntryKind::Charge { job: None, reason: format!("budget reduced by {by}") }
        } else {
            EntryKind::Grant { by: by.principal.clone() }
        };
        self.post(id, amount, kind, memo, now)
    }

    /// Charges `price` (a positive amount) to `id`, for `job` if any; refused when the
    /// balance is smaller (DP: a charge never takes a budget below zero). What MRM's
    /// admission and DP's interval charges call.
    pub fn charge(
        &mut self,
        id: &AccountId,
        price: Credits,
        job: Option<JobId>,
        reason: String,
        now: Timestamp,
    ) -> Result<LedgerEntry, AccountError> {
        let account = id.clone();
        let amount = price.checked_neg().ok_or(AccountError::Overflow { account })?;
        self.post(id, amount, EntryKind::Charge { job, reason }, None, now)
    }

    /// Charges `price` (positive) to `id` for the deadline `job` bought under MRM; refused
    /// when the balance is smaller. The admission and this entry are stored together.
    pub fn purchase_deadline(
        &mut self,
        id: &AccountId,
        price: Credits,
        job: JobId,
        deadline: Timestamp,
        now: Timestamp,
    ) -> Result<LedgerEntry, AccountError> {
        let account = id.clone();
        let amount = price.checked_neg().ok_or(AccountError::Overflow { account })?;
        self.post(id, amount, EntryKind::DeadlinePurchase { job, deadline }, None, now)
    }

    /// Credits `amount` (positive) of income to `id` (DP §5: income per hour, credited
    /// every allocation interval). Counts toward the account's granted total.
    pub fn credit_income(
        &mut self,
        id: &AccountId,
        amount: Credits,
        reason: String,
        now: Timestamp,
    ) -> Result<LedgerEntry, AccountError> {
        if amount.is_negative() {
            return Err(AccountError::ZeroAmount);
        }
        self.post(id, amount, EntryKind::Income { reason }, None, now)
    }

    /// Charges up to `price` to `id`: the whole price, or what the balance holds when it
    /// holds less (DP: an interval's charge never takes a budget below zero). `None` when
    /// nothing is charged (a zero price or an empty balance).
    pub fn charge_up_to(
        &mut self,
        id: &AccountId,
        price: Credits,
        reason: String,
        now: Timestamp,
    ) -> Result<Option<LedgerEntry>, AccountError> {
        let balance =
            self.by_id.get(id).ok_or_else(|| AccountError::NotFound { account: id.clone() })?.balance();
        let amount = price.min(balance);
        if !amount.is_positive() {
            return Ok(None);
        }
        self.charge(id, amount, None, reason, now).map(Some)
    }

    /// Checks and appends one entry; the only place totals change outside replay.
    fn post(
        &mut self,
        id: &AccountId,
        amount: Credits,
        kind: EntryKind,
        memo: Option<String>,
        now: Timestamp,
    ) -> Result<LedgerEntry, AccountError> {
        if amount == Credits::ZERO {
            return Err(AccountError::ZeroAmount);
        }
        let reason_ok = match &kind {
            EntryKind::Charge { reason, .. } | EntryKind::Income { reason } => printable(reason),
            EntryKind::Grant { .. } | EntryKind::DeadlinePurchase { .. } => true,
        };
        if !reason_ok || !memo.as_deref().is_none_or(printable) {
            return Err(AccountError::BadMemo);
        }
        let account = self.by_id.get_mut(id).ok_or_else(|| AccountError::NotFound { account: id.clone() })?;
        (account.granted, account.charged) = account.totals_after(amount)?;
        let entry = LedgerEntry { seq: self.next_seq, account: id.clone(), at: now, amount, kind, memo };
        self.next_seq += 1;
        account.entries.push(entry.clone());
        Ok(entry)
    }

    /// Rebuilds accounts and balances from what the store holds, strictly: the first
    /// inconsistency (order, unknown account, sign, negative balance) is an error. The
    /// store runs this before the master starts, so a damaged ledger stops it.
    pub fn replay(accounts: Vec<StoredAccount>, ledger: Vec<LedgerEntry>) -> Result<Accounts, ReplayError> {
        let mut out = Accounts::default();
        for stored in accounts {
            out.restore_account(stored)?;
        }
        for entry in ledger {
            out.restore_entry(entry)?;
        }
        Ok(out)
    }

    /// Like [`replay`](Accounts::replay) into `self`, but keeps going past bad records,
    /// counting them: what the core does with the store's (already checked) records.
    pub fn restore(&mut self, accounts: Vec<StoredAccount>, ledger: Vec<LedgerEntry>) {
        let refused = accounts.into_iter().filter_map(|a| self.restore_account(a).err()).count()
            + ledger.into_iter().filter_map(|e| self.restore_entry(e).err()).count();
        self.refused_on_replay += refused as u64;
    }

    fn restore_account(&mut self, stored: StoredAccount) -> Result<(), ReplayError> {
        let id = stored.account;
        if !valid_account_name(&id.0) || self.by_id.contains_key(&id) {
            return Err(ReplayError::BadAccount { account: id });
        }
        let members = stored.members.into_iter().collect();
        let account = Account {
            id: id.clone(),
            created: stored.created,
            members,
            granted: Credits::ZERO,
            charged: Credits::ZERO,
            entries: Vec::new(),
        };
        self.by_id.insert(id, account);
        Ok(())
    }

    fn restore_entry(&mut self, entry: LedgerEntry) -> Result<(), ReplayError> {
        let seq = entry.seq;
        if seq < self.next_seq {
            return Err(ReplayError::OutOfOrder { seq, after: self.next_seq - 1 });
        }
        if !entry.kind.allows(entry.amount) {
            return Err(ReplayError::WrongSign { seq, kind: entry.kind.name(), amount: entry.amount });
        }
        let Some(account) = self.by_id.get_mut(&entry.account) else {
            return Err(ReplayError::UnknownAccount { seq, account: entry.account });
        };
        let totals = account.totals_after(entry.amount);
        let (granted, charged) =
            totals.map_err(|_| ReplayError::Balance { seq, account: entry.account.clone() })?;
        (account.granted, account.charged) = (granted, charged);
        account.entries.push(entry);
        self.next_seq = seq + 1;
        Ok(())
    }

    // ----- rules -----

    /// Whether `caller` may read `account` (its summary and ledger): administrators any
    /// created account; a user their namesake account (created or implicit) and any
    /// account listing them as a member; agents and the master none.
    pub fn may_read(&self, caller: &Identity, account: &AccountId) -> bool {
        match caller.role {
            Role::Admin => caller.principal == account.0 || self.by_id.contains_key(account),
            Role::User => caller.principal == account.0 || self.is_member(caller, account),
            Role::Agent | Role::Master => false,
        }
    }

    /// Whether `caller` may submit jobs charged to `account`: administrators to any
    /// created account or their own namesake; a user to their namesake account (even
    /// implicit) or to any account listing them as a member; agents and the master never.
    pub fn may_submit_to(&self, caller: &Identity, account: &AccountId) -> bool {
        // Reading and submitting follow the same rule today; kept apart because DP's
        // spending rates may let members read without spending.
        self.may_read(caller, account)
    }

    fn is_member(&self, caller: &Identity, account: &AccountId) -> bool {
        self.by_id.get(account).is_some_and(|a| a.members.contains(&caller.principal))
    }

    // ----- queries -----

    /// `account` as `caller` may see it: `NotFound` if unknown *or* not readable, so a
    /// user cannot tell another's account from a missing one.
    pub fn summary(&self, caller: &Identity, account: &AccountId) -> Result<AccountSummary, AccountError> {
        if !self.may_read(caller, account) {
            return Err(AccountError::NotFound { account: account.clone() });
        }
        Ok(self.with_settings(self.by_id.get(account).map_or_else(|| implicit(account), Account::summary)))
    }

    /// Every account `caller` may read, by name: all created accounts for
    /// administrators; for a user, their namesake (created or implicit) and those that
    /// list them as a member.
    pub fn visible(&self, caller: &Identity) -> Vec<AccountSummary> {
        let own = caller.account();
        let mut out: Vec<AccountSummary> =
            self.by_id.values().filter(|a| self.may_read(caller, &a.id)).map(Account::summary).collect();
        if caller.role == Role::User && !self.by_id.contains_key(&own) {
            let at = out.partition_point(|a| a.account < own);
            out.insert(at, implicit(&own));
        }
        out.into_iter().map(|a| self.with_settings(a)).collect()
    }

    /// Entries of `account` after `after_seq`, at most `limit` (capped at
    /// [`MAX_LEDGER_PAGE`]), with the same `NotFound` rule as [`summary`](Accounts::summary).
    pub fn ledger_page(
        &self,
        caller: &Identity,
        account: &AccountId,
        after_seq: u64,
        limit: u32,
    ) -> Result<LedgerPage, AccountError> {
        if !self.may_read(caller, account) {
            return Err(AccountError::NotFound { account: account.clone() });
        }
        let entries = self.by_id.get(account).map_or(&[][..], |a| &a.entries[..]);
        let start = entries.partition_point(|e| e.seq <= after_seq);
        let limit = limit.clamp(1, MAX_LEDGER_PAGE) as usize;
        let page: Vec<LedgerEntry> = entries[start..].iter().take(limit).cloned().collect();
        let more = entries.len() > start + page.len();
        let next_after = page.last().filter(|_| more).map(|e| e.seq);
        Ok(LedgerPage { account: account.clone(), entries: page, next_after })
    }

    /// Cross-checks for `invariants::check`: totals equal the sums of entries, balances
    /// are not negative, sequence numbers increase and are below `next_seq`.
    pub fn check(&self) -> Result<(), String> {
        for account in self.by_id.values() {
            let (mut granted, mut charged, mut last) = (0i128, 0i128, 0u64);
            for e in &account.entries {
                if e.seq <= last
                    || e.seq >= self.next_seq
                    || e.account != account.id
                    || !e.kind.allows(e.amount)
                {
                    return Err(format!("account {}: entry {} is out of place: {e:?}", account.id, e.seq));
                }
                last = e.seq;
                if e.amount.is_negative() {
                    charged -= i128::from(e.amount.0);
                } else {
                    granted += i128::from(e.amount.0);
                }
            }
            let totals = (i128::from(account.granted.0), i128::from(account.charged.0));
            if totals != (granted, charged) || charged > granted {
                return Err(format!(
                    "account {}: totals {totals:?} differ from entries ({granted}, {charged}) or overdraw",
                    account.id
                ));
            }
        }
        Ok(())
    }
}

/// A user's namesake account before an administrator created it.
fn implicit(account: &AccountId) -> AccountSummary {
    AccountSummary {
        account: account.clone(),
        created: None,
        members: Vec::new(),
        granted: Credits::ZERO,
        charged: Credits::ZERO,
        balance: Credits::ZERO,
        entries: 0,
        last_seq: 0,
        rate: None,
        income: None,
    }
}

/// Whether a memo or reason may be kept: bounded and free of control characters, so it
/// can be shown in a table without moving the cursor.
fn printable(text: &str) -> bool {
    text.len() <= MAX_MEMO_LEN && !text.chars().any(char::is_control)
}

#[cfg(test)]
#[path = "accounting_tests.rs"]
mod tests;
