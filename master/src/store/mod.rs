//! The master's durable state: jobs, the history of their containers, accounts and the
//! ledger in SQLite (WAL) under the data directory. Executes the core's `Persist` commands
//! (here), hands stored state back on start so it can be replayed into the core
//! (`recover`, `ledger`), and answers for ended jobs the core no longer holds (`ended`).
//!
//! Durability rule. A transaction is committed with `synchronous = FULL` (its WAL frames
//! are fsynced before `apply` returns) unless every write in it is *unacknowledged*: an
//! agent's `Acquired` or `Running` report (`Persist::Container` in those states) or the
//! job start such a report causes (`Persist::JobState` to `Running`). Those transactions
//! are committed with `synchronous = NORMAL`: they survive a crash of the master process
//! (the WAL is in the page cache) but not a power cut until the next FULL commit, whose
//! fsync of the WAL covers them too. Nobody is told about these transitions as a promise
//! (no reply, launch or ledger entry depends on them), and a lost tail of them is the
//! state the master would have had if it had stopped just before the reports arrived: the
//! WAL loses commits only as a suffix, and every agent re-reports its containers' states
//! when it registers again, which moves them on. Submits, launches (`Allocated`), ends of
//! containers, job ends, the ledger and everything else stay FULL: they are acknowledged
//! to a client or an agent once `apply` returns.

mod cleanup;
mod ended;
mod ledger;
mod recover;
mod schema;
mod tasks;

use std::path::{Path, PathBuf};
pub use tasks::StoredAttempt;

use rusqlite::{Connection, Transaction, params};
use slotmarket_common::protocol::JobState;
use thiserror::Error;

pub use ledger::AccountSettings;

use crate::core::Persist;

/// File name of the database inside the data directory.
pub const DATABASE_FILE: &str = "slotmarket.db";

/// A failure of the store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// SQLite failed (disk full, permissions, corruption).
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database was written by a newer or unknown build.
    #[error("database schema version {found} is not supported (this build reads version {supported})")]
    SchemaVersion {
        /// Version found in the file.
        found: i64,
        /// Version this build writes.
        supported: i64,
    },
    /// A stored row cannot be read back (e.g. a spec that no longer parses).
    #[error("stored row is unreadable: {0}")]
    Corrupt(String),
}

/// How a transaction's commit reaches the disk (see the module header's rule).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Durability {
    /// fsynced before the commit returns (`synchronous = FULL`).
    Full,
    /// Written to the WAL without an fsync (`synchronous = NORMAL`); made durable by the
    /// next `Full` commit.
    Relaxed,
}

impl Durability {
    /// What `ops` need: `Relaxed` only if every write is an unacknowledged transition.
    pub fn of(ops: &[Persist]) -> Durability {
        if ops.iter().all(is_unacknowledged) { Durability::Relaxed } else { Durability::Full }
    }

    fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Relaxed => "NORMAL",
        }
    }
}

/// Whether `op` records a transition that no reply, launch or ledger entry depends on,
/// and that an agent re-reports on registering (see the module header).
fn is_unacknowledged(op: &Persist) -> bool {
    use slotmarket_common::container::ContainerState::{Acquired, Running};
    match op {
        Persist::Container { report, .. } => matches!(report.state, Acquired | Running),
        Persist::JobState { state, .. } => *state == JobState::Running,
        _ => false,
    }
}

/// The open database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The connection's current `synchronous` setting, changed only when a transaction
    /// needs the other one.
    durability: Durability,
}

impl Store {
    /// Opens (creating if needed) the database in `data_dir`, in WAL mode with full
    /// synchronisation so that a committed write survives a crash.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        let path = data_dir.join(DATABASE_FILE);
        let mut conn = Connection::open(&path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        schema::migrate(&mut conn)?;
        Ok(Store { conn, path, durability: Durability::Full })
    }

    /// Whether `data_dir` holds a database with a schema in it. A missing or zero-length
    /// file, or one no migration ever ran on, holds nothing. Opens nothing new: a missing
    /// file is not created.
    pub fn holds_data(data_dir: &Path) -> Result<bool, StoreError> {
        let path = data_dir.join(DATABASE_FILE);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.len() > 0 => {}
            _ => return Ok(false),
        }
        let conn = Connection::open(&path)?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        Ok(version > 0)
    }

    /// Where the database file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Applies `ops` in one transaction: either all are committed or none, with the
    /// [`Durability`] they need (see the module header).
    pub fn apply(&mut self, ops: &[Persist]) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        let durability = Durability::of(ops);
        if durability != self.durability {
            // Outside a transaction, as SQLite requires; costs no I/O.
            self.conn.pragma_update(None, "synchronous", durability.pragma())?;
            self.durability = durability;
        }
        let tx = self.conn.transaction()?;
        for op in ops {
            apply_one(&tx, op)?;
        }
        tx.commit()?;
        Ok(())
    }
}

/// Executes one write. The statements are prepared once per connection and reused: a
/// batch of reports runs the same few statements many times.
fn apply_one(tx: &Transaction<'_>, op: &Persist) -> Result<(), StoreError> {
    match op {
        Persist::JobAdmitted { job, account, owner, spec, submitted, deadline } => {
            let spec_json = serde_json::to_string(spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            tx.prepare_cached(
                "INSERT INTO jobs (id, account, name, spec_json, submitted_ms, state, owner, deadline_ms,
                     tasks_total, tasks_completed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0)",
            )?
            .execute(params![
                to_i64(job.0),
                account.0,
                spec.name,
                spec_json,
                to_i64(submitted.0),
                JobState::Pending.name(),
                owner.0,
                deadline.map(|d| to_i64(d.0)),
                to_i64(spec.total_tasks()),
            ])?;
        }
        Persist::JobState { job, state, at, message, tasks_completed } => {
            let at = to_i64(at.0);
            let (started, finished) = match state {
                JobState::Running => (Some(at), None),
                s if s.is_terminal() => (None, Some(at)),
                _ => (None, None),
            };
            tx.prepare_cached(
                "UPDATE jobs SET state = ?2, started_ms = COALESCE(started_ms, ?3),
                 finished_ms = COALESCE(?4, finished_ms), message = COALESCE(?5, message),
                 tasks_completed = ?6 WHERE id = ?1",
            )?
            .execute(params![
                to_i64(job.0),
                state.name(),
                started,
                finished,
                message,
                to_i64(*tasks_completed)
            ])?;
        }
        Persist::Account { account, members, created } => {
            ledger::insert_account(tx, account, members, *created)?
        }
        Persist::Ledger(entry) => ledger::insert_entry(tx, entry)?,
        Persist::Rate { account, rate } => ledger::upsert_setting(tx, account, "rate_micro", *rate)?,
        Persist::Income { account, income } => ledger::upsert_setting(tx, account, "income_micro", *income)?,
        Persist::Capacity { map_slots, reduce_slots } => {
            tx.execute(
                "INSERT INTO cluster_capacity (id, map_slots, reduce_slots) VALUES (1, ?1, ?2)
                 ON CONFLICT(id) DO UPDATE SET map_slots = ?1, reduce_slots = ?2",
                params![map_slots, reduce_slots],
            )?;
        }
        Persist::Deadline { job, deadline } => {
            tx.execute(
                "UPDATE jobs SET deadline_ms = ?2 WHERE id = ?1",
                rusqlite::params![to_i64(job.0), deadline.map(|d| to_i64(d.0))],
            )?;
        }
        Persist::Container { node, report } => {
            let r = report;
            tx.prepare_cached(
                "INSERT INTO containers (id, job, stage, task, attempt, node, state, at_ms, exit_code, message)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT(id) DO UPDATE SET node = ?6, state = ?7, at_ms = ?8,
                     exit_code = COALESCE(?9, exit_code), message = COALESCE(?10, message)",
            )?
            .execute(params![
                to_i64(r.container.0),
                to_i64(r.task.job.0),
                r.task.stage.0,
                r.task.index,
                r.attempt.0,
                node,
                r.state.name(),
                to_i64(r.at.0),
                r.exit_code,
                r.message,
            ])?;
            tx.prepare_cached("INSERT INTO transitions (container, state, at_ms) VALUES (?1, ?2, ?3)")?
                .execute(params![to_i64(r.container.0), r.state.name(), to_i64(r.at.0)])?;
        }
        Persist::OutputsLost { job, stage, tasks, node, at, .. } => {
            // The completed containers of these tasks no longer count: recovery re-runs
            // the tasks rather than finding them done. Their exit code (0) stays, which
            // tells recovery this was no failed attempt.
            let message = format!("its output was lost with node {node}; the task runs again");
            let mut update = tx.prepare_cached(
                "UPDATE containers SET state = 'killed', at_ms = ?1, message = ?2
                 WHERE job = ?3 AND stage = ?4 AND task = ?5 AND state = 'completed'",
            )?;
            for &task in tasks {
                update.execute(params![to_i64(at.0), message, to_i64(job.0), stage.0, task])?;
            }
        }
        Persist::LocalNode { node, dir_id: Some(dir_id) } => {
            tx.prepare_cached(
                "INSERT INTO local_nodes (node, dir_id) VALUES (?1, ?2)
                 ON CONFLICT(node) DO UPDATE SET dir_id = ?2",
            )?
            .execute(params![node, dir_id])?;
        }
        Persist::LocalNode { node, dir_id: None } => {
            tx.prepare_cached("DELETE FROM local_nodes WHERE node = ?1")?.execute(params![node])?;
        }
        Persist::History { record, keep_per_name } => {
            let json = serde_json::to_string(record).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            tx.prepare_cached(
                "INSERT OR REPLACE INTO job_history (job, name, record_json) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![to_i64(record.job.0), record.name, json])?;
            tx.prepare_cached(
                "DELETE FROM job_history WHERE name = ?1 AND job NOT IN
                     (SELECT job FROM job_history WHERE name = ?1 ORDER BY job DESC LIMIT ?2)",
            )?
            .execute(params![record.name, to_i64(*keep_per_name as u64)])?;
        }
    }
    Ok(())
}

/// A stored state name this build does not know, e.g. `unknown job state "paused"`.
fn unknown(what: &str, name: &str) -> StoreError {
    StoreError::Corrupt(format!("unknown {what} \"{name}\""))
}

// SQLite integers are i64; ids and times are u64 that stay far below 2^63 in practice,
// but a corrupt file must produce an error rather than a wrapped value.
fn to_u64(v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative value {v}")))
}

fn to_u32(v: i64) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("value {v} out of range")))
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod outputs_tests;

#[cfg(test)]
mod durability_tests;
