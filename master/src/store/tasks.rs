//! Per-task answers from the store: the latest attempt of every task of a job, with the
//! node that ran it and when its process started, for `slotmarket status JOB --tasks`
//! and for finding the agent whose files hold a task's log.

use std::collections::BTreeMap;

use rusqlite::params;
use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::time::Timestamp;

use super::{Store, StoreError, to_i64, to_u32, to_u64, unknown};

/// A task's latest attempt as stored.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StoredAttempt {
    /// Containers launched for the task so far.
    pub attempts: u32,
    /// The latest one.
    pub container: ContainerId,
    /// The node it ran on.
    pub node: String,
    /// Its last reported state.
    pub state: ContainerState,
    /// When it entered that state.
    pub at: Timestamp,
    /// When its process started running, if it did.
    pub started: Option<Timestamp>,
    /// Its exit code, once its process exited.
    pub exit_code: Option<i32>,
    /// Why it failed or was killed.
    pub message: Option<String>,
}

/// One `containers` row, as read.
type Row = (i64, i64, i64, String, String, i64, Option<i32>, Option<String>, Option<i64>);

impl Store {
    /// The latest attempt of every task of `job` that ever had a container, by (stage
    /// index, task index).
    pub fn latest_attempts(&self, job: JobId) -> Result<BTreeMap<(u32, u32), StoredAttempt>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT c.stage, c.task, c.id, c.node, c.state, c.at_ms, c.exit_code, c.message,
                    c.running_ms
             FROM containers c WHERE c.job = ?1 ORDER BY c.stage, c.task, c.id",
        )?;
        let rows = statement.query_map(params![to_i64(job.0)], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
                row.get(7)?,
                row.get(8)?,
            ))
        })?;
        let mut latest = BTreeMap::new();
        for row in rows {
            let row: Row = row?;
            let key = (to_u32(row.0)?, to_u32(row.1)?);
            let attempts = latest.get(&key).map_or(0, |a: &StoredAttempt| a.attempts) + 1;
            latest.insert(key, attempt_of(row, attempts)?);
        }
        Ok(latest)
    }
}

/// A read row as an attempt, the `attempts`-th of its task.
fn attempt_of(row: Row, attempts: u32) -> Result<StoredAttempt, StoreError> {
    let (_, _, id, node, state, at, exit_code, message, started) = row;
    let state = ContainerState::from_name(&state).ok_or_else(|| unknown("container state", &state))?;
    Ok(StoredAttempt {
        attempts,
        container: ContainerId(to_u64(id)?),
        node,
        state,
        at: Timestamp(to_u64(at)?),
        started: started.map(to_u64).transpose()?.map(Timestamp),
        exit_code,
        message,
    })
}
