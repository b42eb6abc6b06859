//! Reading back what the core needs after a restart: the jobs that had not ended, with
//! their containers' last states, plus the id counters and the kept job history.

use std::collections::BTreeMap;

use rusqlite::OptionalExtension;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{ContainerReport, JobHistory, JobState};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::{Store, StoreError, to_u32, to_u64, unknown};
use crate::core::{RecoveredJob, StoreRecovery};

/// The states of jobs that have not ended, as stored.
const ACTIVE: &str = "('pending', 'running')";

impl Store {
    /// Id counters (job ids above every reservation too) and history: replay it into the
    /// core first (`Event::StoreRecovered`).
    pub fn recover_store(&self) -> Result<StoreRecovery, StoreError> {
        let max = |sql: &str| -> Result<u64, StoreError> {
            let value: Option<i64> = self.conn.query_row(sql, [], |row| row.get(0))?;
            value.map_or(Ok(0), to_u64)
        };
        // Above every stored job and every reserved id: a job lost with an unsynced
        // suffix of the WAL may have run tasks under an id no row shows.
        let reserved = max("SELECT MAX(until) FROM job_id_reservation")?;
        let next_job = JobId(max("SELECT MAX(id) FROM jobs")?.max(reserved) + 1);
        let next_container = ContainerId(max("SELECT MAX(id) FROM containers")? + 1);
        let mut stmt = self.conn.prepare("SELECT job, record_json FROM job_history ORDER BY job")?;
        let rows = stmt.query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))?;
        let mut history = Vec::new();
        for row in rows {
            let (job, json) = row?;
            let record: JobHistory = serde_json::from_str(&json)
                .map_err(|e| StoreError::Corrupt(format!("history of job j{job}: {e}")))?;
            history.push(record);
        }
        let capacity = self
            .conn
            .query_row("SELECT map_slots, reduce_slots FROM cluster_capacity WHERE id = 1", [], |row| {
                Ok([row.get::<_, u32>(0)?, row.get::<_, u32>(1)?])
            })
            .optional()?;
        let mut stmt = self.conn.prepare("SELECT node, dir_id FROM local_nodes ORDER BY node")?;
        let rows = stmt.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?;
        let local_nodes = rows.collect::<Result<Vec<_>, _>>()?;
        Ok(StoreRecovery { next_job, next_container, history, capacity, local_nodes })
    }

    /// Every job that had not ended, with its containers' last states (one row per
    /// container, by id: the table is keyed by container), oldest job first. Ended jobs
    /// stay in the store, which answers for them (`Store::jobs`, `Store::ended_job_status`).
    pub fn recover(&self) -> Result<Vec<RecoveredJob>, StoreError> {
        let mut containers = self.active_containers()?;
        let mut stmt = self.conn.prepare(&format!(
            "SELECT id, account, spec_json, submitted_ms, state, started_ms, finished_ms, message,
                 COALESCE(owner, account), deadline_ms
             FROM jobs WHERE state IN {ACTIVE} ORDER BY id"
        ))?;
        let rows = stmt.query_map([], |row| {
            Ok((
                (row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?),
                (row.get::<_, i64>(3)?, row.get::<_, String>(4)?),
                (
                    row.get::<_, Option<i64>>(5)?,
                    row.get::<_, Option<i64>>(6)?,
                    row.get::<_, Option<String>>(7)?,
                ),
                (row.get::<_, String>(8)?, row.get::<_, Option<i64>>(9)?),
            ))
        })?;
        let mut jobs = Vec::new();
        for row in rows {
            let (
                (id, account, spec_json),
                (submitted, state),
                (started, finished, message),
                (owner, deadline),
            ) = row?;
            let id = JobId(to_u64(id)?);
            let spec: JobSpec = serde_json::from_str(&spec_json)
                .map_err(|e| StoreError::Corrupt(format!("job {id}: spec: {e}")))?;
            jobs.push(RecoveredJob {
                id,
                account: AccountId(account),
                owner: AccountId(owner),
                deadline: deadline.map(to_u64).transpose()?.map(Timestamp),
                spec,
                submitted: Timestamp(to_u64(submitted)?),
                state: JobState::from_name(&state).ok_or_else(|| unknown("job state", &state))?,
                started: started.map(to_u64).transpose()?.map(Timestamp),
                finished: finished.map(to_u64).transpose()?.map(Timestamp),
                message,
                containers: containers.remove(&id).unwrap_or_default(),
            });
        }
        Ok(jobs)
    }

    /// The stored state of one job, if any.
    #[cfg(test)]
    pub(crate) fn job_state(&self, job: JobId) -> Result<Option<JobState>, StoreError> {
        use rusqlite::{OptionalExtension, params};

        use super::to_i64;
        let state: Option<String> = self
            .conn
            .query_row("SELECT state FROM jobs WHERE id = ?1", params![to_i64(job.0)], |row| row.get(0))
            .optional()?;
        state.map(|s| JobState::from_name(&s).ok_or_else(|| unknown("job state", &s))).transpose()
    }

    /// The containers of the jobs that had not ended, by job.
    fn active_containers(&self) -> Result<BTreeMap<JobId, Vec<(String, ContainerReport)>>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT id, job, stage, task, attempt, node, state, at_ms, exit_code, message FROM containers
             WHERE job IN (SELECT id FROM jobs WHERE state IN {ACTIVE}) ORDER BY id"
        ))?;
        let rows = stmt.query_map([], |row| {
            Ok((
                [row.get::<_, i64>(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?],
                row.get::<_, String>(5)?,
                row.get::<_, String>(6)?,
                row.get::<_, i64>(7)?,
                row.get::<_, Option<i32>>(8)?,
                row.get::<_, Option<String>>(9)?,
            ))
        })?;
        let mut by_job: BTreeMap<JobId, Vec<(String, ContainerReport)>> = BTreeMap::new();
        for row in rows {
            let ([id, job, stage, task, attempt], node, state, at, exit_code, message) = row?;
            let job = JobId(to_u64(job)?);
            let report = ContainerReport {
                container: ContainerId(to_u64(id)?),
                task: TaskId { job, stage: StageId(to_u32(stage)?), index: to_u32(task)? },
                attempt: AttemptId(to_u32(attempt)?),
                state: ContainerState::from_name(&state).ok_or_else(|| unknown("container state", &state))?,
                at: Timestamp(to_u64(at)?),
                exit_code,
                message,
            };
            by_job.entry(job).or_default().push((node, report));
        }
        Ok(by_job)
    }
}
