//! The master's durable state: jobs, the history of their containers, accounts and the
//! ledger in SQLite (WAL) under the data directory. Executes the core's `Persist` commands
//! (here), hands stored state back on start so it can be replayed into the core
//! (`recover`, `ledger`), and answers for ended jobs the core no longer holds (`ended`).
//!
//! Durability rule. Every transaction is committed with `synchronous = NORMAL`: its WAL
//! frames are written (to the page cache) before `apply` returns, but not synced. So a
//! crash of the master process loses nothing committed; a power cut may lose a suffix of
//! the transactions committed since the last sync. Syncing is the caller's job: a
//! [`WalSync`] (the server's syncer thread holds one; [`Store::sync`] is the same on the
//! caller's thread) `fdatasync`s the `-wal` file, which makes every transaction
//! committed before the call durable. The server decides at once and sends launches and
//! kills at once, but holds every *acknowledgement* (a reply to a client, a watch update
//! announcing a job's end, a removal that lets an agent forget a job's files) until the
//! sync covering its transaction has returned.
//!
//! Why a sync of our own descriptor on the WAL is enough. `fdatasync` acts on the file,
//! not the descriptor, and flushes every page written to it before the call, with the
//! size needed to read them. SQLite reads the WAL back after a power cut frame by frame
//! from the start and stops at the first frame whose salt (copied from the WAL header)
//! or cumulative checksum (over every earlier frame) does not match, and ignores frames
//! after the last commit frame it reached: so what survives is always a *prefix* of the
//! committed transactions, and everything committed before a completed sync is in it.
//! A checkpoint (in NORMAL mode: the WAL is synced before its frames are copied, the
//! database file after) moves frames into the database durably; when the WAL is then
//! reused from its start, it is the same file (same inode) with a new salt, written and
//! synced by SQLite before new frames follow, and our descriptor still reaches it. The
//! WAL is deleted only when the last connection closes, which checkpoints it first; the
//! store's connection lives as long as the server, and `WalSync` notices a replaced file
//! by its inode and then syncs the database file and the directory too.
//!
//! The crash story, after a power cut: the store holds a prefix of the batches; nothing
//! acknowledged is missing (its sync returned before the acknowledgement went out); a
//! launch that went out but whose batch is lost comes back, when its agent registers,
//! as a container the core does not know, and is killed, never adopted. Its id is never
//! reused: container ids start above `container_epoch` (the start time) in each master
//! lifetime, and job ids come from durable reservations (`job_id_reservation`): a job's
//! tasks reach an agent only once a reservation covering its id is durable, and a
//! restarted master issues ids above every reservation, so a job whose submit was lost
//! with the suffix never has its id (and the files its tasks wrote under it) handed to
//! another job.

mod cleanup;
mod containers;
mod ended;
mod ledger;
mod recover;
mod schema;
mod tasks;
mod wal;

use std::path::{Path, PathBuf};
pub use tasks::StoredAttempt;

use rusqlite::{Connection, Transaction, params};
use slotmarket_common::protocol::JobState;
use thiserror::Error;

use containers::ContainerWrites;
pub use ledger::AccountSettings;
pub use wal::WalSync;

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
    /// Syncing the write-ahead log (or opening it to sync) failed: what was committed
    /// since the last sync may not be durable.
    #[error("syncing the database's write-ahead log: {0}")]
    Sync(#[from] std::io::Error),
}

/// The open database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the database in `data_dir`, in WAL mode with commits
    /// that do not wait for the disk (see the module header: [`Store::sync`] or a
    /// [`WalSync`] makes them durable).
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        let path = data_dir.join(DATABASE_FILE);
        let mut conn = Connection::open(&path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        schema::migrate(&mut conn)?;
        Ok(Store { conn, path })
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

    /// Applies `ops` in one transaction: either all are committed or none. The commit
    /// does not wait for the disk (see the module header).
    pub fn apply(&mut self, ops: &[Persist]) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        let mut containers = ContainerWrites::new(&tx);
        for op in ops {
            apply_one(&tx, &mut containers, op)?;
        }
        drop(containers);
        tx.commit()?;
        Ok(())
    }
}

impl Store {
    /// Makes every transaction committed so far durable, on the caller's thread (a
    /// barrier: recovery, removals of job files, tests). The server's syncer does the
    /// same off the actor's thread.
    pub fn sync(&self) -> Result<(), StoreError> {
        WalSync::open(&self.path)?.sync()?;
        Ok(())
    }

    /// A handle that syncs this database's WAL from another thread.
    pub fn wal_sync(&self) -> Result<WalSync, StoreError> {
        Ok(WalSync::open(&self.path)?)
    }

    /// Records that job ids up to `until` may be in use (see the module header); a
    /// restarted master issues ids above it. Committed like any transaction: the id of
    /// a job may reach an agent only once a sync covers a reservation of it.
    pub fn reserve_job_ids(&mut self, until: u64) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO job_id_reservation (id, until) VALUES (1, ?1)
             ON CONFLICT(id) DO UPDATE SET until = MAX(until, ?1)",
            params![to_i64(until)],
        )?;
        Ok(())
    }
}

/// Executes one write. The statements are prepared once per connection and reused: a
/// batch of reports runs the same few statements many times.
fn apply_one(
    tx: &Transaction<'_>,
    containers: &mut ContainerWrites<'_>,
    op: &Persist,
) -> Result<(), StoreError> {
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
        Persist::Container { node, report } => containers.record(node, report)?,
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
mod containers_tests;

#[cfg(test)]
mod outputs_tests;

#[cfg(test)]
mod durability_tests;

#[cfg(test)]
mod test_fixtures;
