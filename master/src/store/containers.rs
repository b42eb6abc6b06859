//! Container reports as rows: one `containers` row per container (one task attempt), made
//! by its first report and updated in place by each later one, with the time of each
//! phase (allocated, acquired, running, ended) kept on the row.
//!
//! These are most of the master's writes (four reports per task), so a batch takes each
//! statement from rusqlite's cache once (the cache's look-up and return hash the
//! statement's text) and a later report is a plain update by id, not an upsert that first
//! tries an insert.

use rusqlite::{CachedStatement, Connection, params};
use slotmarket_common::container::ContainerState;
use slotmarket_common::protocol::ContainerReport;

use super::{StoreError, to_i64};

/// A container's first report: its row. An upsert, so that a report for a row already
/// there (the same report applied twice) updates it rather than failing the batch.
const INSERT: &str = "
    INSERT INTO containers (id, job, stage, task, attempt, node, state, at_ms, exit_code, message,
        allocated_ms, acquired_ms, running_ms, ended_ms)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
    ON CONFLICT(id) DO UPDATE SET node = ?6, state = ?7, at_ms = ?8,
        exit_code = COALESCE(?9, exit_code), message = COALESCE(?10, message),
        allocated_ms = COALESCE(allocated_ms, ?11), acquired_ms = COALESCE(acquired_ms, ?12),
        running_ms = COALESCE(running_ms, ?13), ended_ms = COALESCE(ended_ms, ?14)";

/// A later report: the latest state, and its phase's time if the phase has none yet.
const UPDATE: &str = "
    UPDATE containers SET node = ?2, state = ?3, at_ms = ?4,
        exit_code = COALESCE(?5, exit_code), message = COALESCE(?6, message),
        acquired_ms = COALESCE(acquired_ms, ?7), running_ms = COALESCE(running_ms, ?8),
        ended_ms = COALESCE(ended_ms, ?9)
    WHERE id = ?1";

/// The container statements of one transaction, each prepared (taken from the cache) on
/// first use.
pub(super) struct ContainerWrites<'c> {
    conn: &'c Connection,
    insert: Option<CachedStatement<'c>>,
    update: Option<CachedStatement<'c>>,
}

impl<'c> ContainerWrites<'c> {
    pub(super) fn new(conn: &'c Connection) -> ContainerWrites<'c> {
        ContainerWrites { conn, insert: None, update: None }
    }

    /// Records `report` of a container on `node`.
    pub(super) fn record(&mut self, node: &str, r: &ContainerReport) -> Result<(), StoreError> {
        let at = to_i64(r.at.0);
        let phase = |of_phase: fn(ContainerState) -> bool| of_phase(r.state).then_some(at);
        let acquired = phase(|s| s == ContainerState::Acquired);
        let running = phase(|s| s == ContainerState::Running);
        let ended = phase(ContainerState::is_terminal);
        let id = to_i64(r.container.0);
        if r.state != ContainerState::Allocated {
            let update = prepared(self.conn, &mut self.update, UPDATE)?;
            let updated = update.execute(params![
                id,
                node,
                r.state.name(),
                at,
                r.exit_code,
                r.message,
                acquired,
                running,
                ended
            ])?;
            if updated == 1 {
                return Ok(());
            }
        }
        prepared(self.conn, &mut self.insert, INSERT)?.execute(params![
            id,
            to_i64(r.task.job.0),
            r.task.stage.0,
            r.task.index,
            r.attempt.0,
            node,
            r.state.name(),
            at,
            r.exit_code,
            r.message,
            phase(|s| s == ContainerState::Allocated),
            acquired,
            running,
            ended,
        ])?;
        Ok(())
    }
}

/// `slot`'s statement, taken from the connection's cache on first use.
fn prepared<'s, 'c>(
    conn: &'c Connection,
    slot: &'s mut Option<CachedStatement<'c>>,
    sql: &str,
) -> Result<&'s mut CachedStatement<'c>, StoreError> {
    Ok(match slot {
        Some(statement) => statement,
        None => slot.insert(conn.prepare_cached(sql)?),
    })
}
