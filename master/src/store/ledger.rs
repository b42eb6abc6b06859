//! Accounts and the append-only ledger in the store: inserting them (the only writes;
//! the schema's triggers refuse UPDATE and DELETE on the ledger) and reading them back
//! at start, checked by replaying them with the core's own accounting rules.

use rusqlite::{Row, Transaction, params};
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{EntryKind, LedgerEntry};
use slotmarket_common::time::Timestamp;

use super::{Store, StoreError, to_i64, to_u64, unknown};
use crate::core::StoredAccount;
use crate::core::accounting::Accounts;

/// Writes a created account.
pub(super) fn insert_account(
    tx: &Transaction<'_>,
    account: &AccountId,
    members: &[String],
    created: Timestamp,
) -> Result<(), StoreError> {
    let members_json = serde_json::to_string(members).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    tx.prepare_cached("INSERT INTO accounts (name, created_ms, members_json) VALUES (?1, ?2, ?3)")?
        .execute(params![account.0, to_i64(created.0), members_json])?;
    Ok(())
}

/// Appends one ledger entry.
pub(super) fn insert_entry(tx: &Transaction<'_>, entry: &LedgerEntry) -> Result<(), StoreError> {
    let (job, detail) = match &entry.kind {
        EntryKind::Grant { by } => (None, by.clone()),
        EntryKind::Charge { job, reason } => (job.map(|j| to_i64(j.0)), reason.clone()),
        EntryKind::Income { reason } => (None, reason.clone()),
        // The deadline bought, in milliseconds since the epoch, read back exactly.
        EntryKind::DeadlinePurchase { job, deadline } => (Some(to_i64(job.0)), deadline.0.to_string()),
    };
    tx.prepare_cached(
        "INSERT INTO ledger (seq, account, at_ms, amount_micro, kind, job, detail, memo)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        to_i64(entry.seq),
        entry.account.0,
        to_i64(entry.at.0),
        entry.amount.micros(),
        entry.kind.name(),
        job,
        detail,
        entry.memo,
    ])?;
    Ok(())
}

/// Writes one DP setting of `account` (`column` is `rate_micro` or `income_micro`, a
/// constant of this module's callers, never input).
pub(super) fn upsert_setting(
    tx: &Transaction<'_>,
    account: &AccountId,
    column: &'static str,
    amount: Credits,
) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO account_settings (account, {column}) VALUES (?1, ?2)
         ON CONFLICT(account) DO UPDATE SET {column} = excluded.{column}"
    );
    tx.prepare_cached(&sql)?.execute(params![account.0, amount.micros()])?;
    Ok(())
}

/// Rates and incomes by account, as `recover_account_settings` answers them.
pub type AccountSettings = (Vec<(AccountId, Credits)>, Vec<(AccountId, Credits)>);

impl Store {
    /// The DP spending rates and incomes kept for accounts, by account name: replay them
    /// into the core after the accounts (`Event::AccountSettingsRecovered`).
    pub fn recover_account_settings(&self) -> Result<AccountSettings, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT account, rate_micro, income_micro FROM account_settings ORDER BY account")?;
        let rows = stmt.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<i64>>(1)?, row.get::<_, Option<i64>>(2)?))
        })?;
        let (mut rates, mut income) = (Vec::new(), Vec::new());
        for row in rows {
            let (name, rate, per_hour) = row?;
            let check = |v: i64| {
                if v < 0 {
                    Err(StoreError::Corrupt(format!("negative DP setting {v} on account {name}")))
                } else {
                    Ok(Credits(v))
                }
            };
            if let Some(rate) = rate {
                rates.push((AccountId(name.clone()), check(rate)?));
            }
            if let Some(per_hour) = per_hour {
                income.push((AccountId(name.clone()), check(per_hour)?));
            }
        }
        Ok((rates, income))
    }

    /// Every account and the whole ledger in sequence order, after checking that they
    /// replay into consistent balances (strictly increasing sequence, known accounts,
    /// amounts signed as their kind says, no balance ever below zero). A ledger that does
    /// not is reported as corrupt and the master does not start on it.
    pub fn recover_accounts(&self) -> Result<(Vec<StoredAccount>, Vec<LedgerEntry>), StoreError> {
        let accounts = self.stored_accounts()?;
        let mut stmt = self.conn.prepare(
            "SELECT seq, account, at_ms, amount_micro, kind, job, detail, memo FROM ledger ORDER BY seq",
        )?;
        let mut ledger = Vec::new();
        for row in stmt.query_map([], LedgerRow::read)? {
            ledger.push(row?.into_entry()?);
        }
        Accounts::replay(accounts.clone(), ledger.clone())
            .map_err(|e| StoreError::Corrupt(format!("ledger does not add up: {e}")))?;
        Ok((accounts, ledger))
    }

    fn stored_accounts(&self) -> Result<Vec<StoredAccount>, StoreError> {
        let mut stmt =
            self.conn.prepare("SELECT name, created_ms, members_json FROM accounts ORDER BY name")?;
        let rows = stmt.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?))
        })?;
        let mut accounts = Vec::new();
        for row in rows {
            let (name, created, members_json) = row?;
            let members: Vec<String> = serde_json::from_str(&members_json)
                .map_err(|e| StoreError::Corrupt(format!("account {name}: members: {e}")))?;
            accounts.push(StoredAccount {
                account: AccountId(name),
                members,
                created: Timestamp(to_u64(created)?),
            });
        }
        Ok(accounts)
    }
}

/// A ledger row as SQLite hands it back, before its values are checked.
struct LedgerRow {
    seq: i64,
    account: String,
    at: i64,
    amount: i64,
    kind: String,
    job: Option<i64>,
    detail: String,
    memo: Option<String>,
}

impl LedgerRow {
    fn read(row: &Row<'_>) -> rusqlite::Result<LedgerRow> {
        Ok(LedgerRow {
            seq: row.get(0)?,
            account: row.get(1)?,
            at: row.get(2)?,
            amount: row.get(3)?,
            kind: row.get(4)?,
            job: row.get(5)?,
            detail: row.get(6)?,
            memo: row.get(7)?,
        })
    }

    /// The entry, or `Corrupt` for a kind or a number this build cannot read.
    fn into_entry(self) -> Result<LedgerEntry, StoreError> {
        let kind = match self.kind.as_str() {
            "grant" => EntryKind::Grant { by: self.detail },
            "charge" => {
                let job = self.job.map(to_u64).transpose()?.map(JobId);
                EntryKind::Charge { job, reason: self.detail }
            }
            "income" => EntryKind::Income { reason: self.detail },
            "deadline" => {
                let job = self.job.map(to_u64).transpose()?.map(JobId);
                let deadline = self.detail.parse::<u64>().ok().map(Timestamp);
                let (Some(job), Some(deadline)) = (job, deadline) else {
                    return Err(unknown("deadline purchase", &self.detail));
                };
                EntryKind::DeadlinePurchase { job, deadline }
            }
            other => return Err(unknown("ledger entry kind", other)),
        };
        Ok(LedgerEntry {
            seq: to_u64(self.seq)?,
            account: AccountId(self.account),
            at: Timestamp(to_u64(self.at)?),
            amount: Credits(self.amount),
            kind,
            memo: self.memo,
        })
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
