//! The SQLite schema and its version. Bump `SCHEMA_VERSION` and add a migration step in
//! `migrate` for every change; never edit a released statement.

use rusqlite::Connection;

use super::StoreError;

/// The version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = 1;

const V1: &str = "
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    account      TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    spec_json    TEXT    NOT NULL,
    submitted_ms INTEGER NOT NULL,
    state        TEXT    NOT NULL,
    started_ms   INTEGER,
    finished_ms  INTEGER,
    message      TEXT
);
-- The latest state of every container (one task attempt each).
CREATE TABLE containers (
    id          INTEGER PRIMARY KEY,
    job         INTEGER NOT NULL REFERENCES jobs(id),
    stage       INTEGER NOT NULL,
    task        INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    node        TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    at_ms       INTEGER NOT NULL,
    exit_code   INTEGER,
    message     TEXT
);
CREATE INDEX containers_by_job ON containers(job);
-- Every transition with its time: the task history estimates and profiles learn from.
CREATE TABLE transitions (
    container INTEGER NOT NULL,
    state     TEXT    NOT NULL,
    at_ms     INTEGER NOT NULL
);
CREATE INDEX transitions_by_container ON transitions(container);
";

/// Creates the schema in a new database, or checks an existing one's version.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    match version {
        0 => {
            let tx = conn.transaction()?;
            tx.execute_batch(V1)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            tx.commit()?;
            Ok(())
        }
        SCHEMA_VERSION => Ok(()),
        found => Err(StoreError::SchemaVersion { found, supported: SCHEMA_VERSION }),
    }
}
