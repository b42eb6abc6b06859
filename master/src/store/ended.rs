//! Answers for jobs from the store alone: listings walk the `jobs` table in id order, and
//! the status of an ended job the core has dropped is rebuilt from its row and its
//! containers. The server merges these with the core's view of the jobs it still holds.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use rusqlite::{OptionalExtension, params};
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{JobState, JobStatus, JobSummary, JobsQuery, StageStatus};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::{Store, StoreError, to_i64, to_u32, to_u64, unknown};

/// The columns of a job's summary, in the order `summary_of` reads them.
const SUMMARY_COLUMNS: &str = "id, name, account, COALESCE(owner, account), state, submitted_ms, started_ms,
     finished_ms, COALESCE(tasks_total, 0), COALESCE(tasks_completed, 0), deadline_ms,
     (SELECT -amount_micro FROM ledger WHERE kind = 'deadline' AND ledger.job = jobs.id)";

impl Store {
    /// Calls `visit` with each stored job `query` selects, in its order from its cursor,
    /// until `visit` breaks or the jobs run out. `owner`: only jobs this principal
    /// submitted (users); `None` for every job (admins).
    pub fn each_job(
        &self,
        query: &JobsQuery,
        owner: Option<&AccountId>,
        mut visit: impl FnMut(JobSummary) -> ControlFlow<()>,
    ) -> Result<(), StoreError> {
        let (bound, order) = if query.newest_first { ("id < ?1", "DESC") } else { ("id > ?1", "ASC") };
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS} FROM jobs WHERE {bound}
                 AND (?2 IS NULL OR COALESCE(owner, account) = ?2) AND (?3 IS NULL OR account = ?3)
             ORDER BY id {order}"
        );
        let start = match (query.after, query.newest_first) {
            (Some(after), _) => to_i64(after.0),
            (None, false) => 0,
            (None, true) => i64::MAX,
        };
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let owner = owner.map(|o| o.0.as_str());
        let account = query.account.as_ref().map(|a| a.0.as_str());
        let mut rows = stmt.query(params![start, owner, account])?;
        while let Some(row) = rows.next()? {
            let job = summary_of(row)?;
            if !query.states.is_empty() && !query.states.contains(&job.state) {
                continue;
            }
            if visit(job).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// A stored job in detail, rebuilt from its row and its containers (for ended jobs the
    /// core no longer holds: nothing of theirs is pending or running).
    pub fn ended_job_status(&self, job: JobId) -> Result<Option<JobStatus>, StoreError> {
        let sql = format!("SELECT {SUMMARY_COLUMNS}, spec_json, message FROM jobs WHERE id = ?1");
        let row = self
            .conn
            .query_row(&sql, params![to_i64(job.0)], |row| {
                Ok((summary_of(row), row.get::<_, String>(12)?, row.get::<_, Option<String>>(13)?))
            })
            .optional()?;
        let Some((summary, spec_json, message)) = row else { return Ok(None) };
        let summary = summary?;
        let spec: JobSpec = serde_json::from_str(&spec_json)
            .map_err(|e| StoreError::Corrupt(format!("job {job}: spec: {e}")))?;
        let outcomes = self.stage_outcomes(job)?;
        let stages = spec
            .stages
            .iter()
            .enumerate()
            .map(|(ix, stage)| {
                let (completed, failed_attempts) = outcomes.get(&(ix as u32)).copied().unwrap_or((0, 0));
                StageStatus {
                    name: stage.name.clone(),
                    slot: stage.slot,
                    tasks: stage.tasks,
                    pending: 0,
                    running: 0,
                    completed,
                    failed_attempts,
                }
            })
            .collect();
        Ok(Some(JobStatus { summary, stages, message, slo: None }))
    }

    /// Per stage of `job`: (tasks completed, attempts failed, killed or lost).
    fn stage_outcomes(&self, job: JobId) -> Result<BTreeMap<u32, (u32, u32)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT stage, SUM(state = 'completed'), SUM(state IN ('failed', 'killed'))
             FROM containers WHERE job = ?1 GROUP BY stage",
        )?;
        let rows = stmt.query_map(params![to_i64(job.0)], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        })?;
        let mut outcomes = BTreeMap::new();
        for row in rows {
            let (stage, completed, failed) = row?;
            outcomes.insert(to_u32(stage)?, (to_u32(completed)?, to_u32(failed)?));
        }
        Ok(outcomes)
    }
}

/// A job's summary from a row of `SUMMARY_COLUMNS`. Stored jobs have no running tasks: the
/// server uses the core's summary for every job the core still holds.
fn summary_of(row: &rusqlite::Row<'_>) -> Result<JobSummary, StoreError> {
    let time = |ix: usize| -> Result<Option<Timestamp>, StoreError> {
        row.get::<_, Option<i64>>(ix)?.map(to_u64).transpose().map(|t| t.map(Timestamp))
    };
    let state: String = row.get(4)?;
    Ok(JobSummary {
        id: JobId(to_u64(row.get(0)?)?),
        name: row.get(1)?,
        account: AccountId(row.get(2)?),
        owner: AccountId(row.get(3)?),
        state: JobState::from_name(&state).ok_or_else(|| unknown("job state", &state))?,
        submitted: Timestamp(to_u64(row.get(5)?)?),
        started: time(6)?,
        finished: time(7)?,
        tasks_total: to_u64(row.get(8)?)?,
        tasks_completed: to_u64(row.get(9)?)?,
        tasks_running: 0,
        deadline: time(10)?,
        predicted_finish: None,
        // The deadline purchase's ledger entry: what was charged is the price.
        price: row.get::<_, Option<i64>>(11)?.map(Credits),
        paid: row.get::<_, Option<i64>>(11)?.map(Credits),
        // The policy's class is not stored: an evicted job's is no longer known.
        demand_class: None,
    })
}
