//! Which ended jobs' directories are still to be removed from which nodes. A job is
//! planned once (`jobs_cleaned`), when its retention ran out or on `slotmarket cleanup`:
//! one row per node that ran its tasks is then owed (`job_cleanup`) until the removal
//! was sent to that node, so a restarted master neither forgets a removal nor repeats a
//! finished one, and a node offline at the time gets it when it registers.

use rusqlite::params;
use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::time::Timestamp;

use super::{Store, StoreError, to_i64, to_u64};

/// Ended jobs planned per call at most: a backlog drains over several timer rounds.
const DUE_BATCH: i64 = 256;

impl Store {
    /// Ended jobs (completed, failed, cancelled) that finished at or before `before` and
    /// whose cleanup is not planned yet, oldest first (at most a batch), with their owners.
    pub fn jobs_due_for_cleanup(&self, before: Timestamp) -> Result<Vec<(JobId, String)>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, COALESCE(owner, account) FROM jobs
             WHERE state IN ('completed', 'failed', 'cancelled') AND finished_ms <= ?1
               AND id NOT IN (SELECT job FROM jobs_cleaned)
             ORDER BY id LIMIT ?2",
        )?;
        let rows = statement
            .query_map(params![to_i64(before.0), DUE_BATCH], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.map(|row| {
            let (id, owner): (i64, String) = row?;
            Ok((JobId(to_u64(id)?), owner))
        })
        .collect()
    }

    /// Plans the removal of `jobs`' directories at `now`: every node that ran one of a
    /// job's containers is owed a removal. Planning a job again (an explicit cleanup)
    /// owes its nodes again; removal is idempotent.
    pub fn plan_cleanup(&mut self, jobs: &[JobId], now: Timestamp) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        for job in jobs {
            tx.prepare_cached("INSERT OR REPLACE INTO jobs_cleaned (job, at_ms) VALUES (?1, ?2)")?
                .execute(params![to_i64(job.0), to_i64(now.0)])?;
            tx.prepare_cached(
                "INSERT OR IGNORE INTO job_cleanup (job, node)
                 SELECT DISTINCT job, node FROM containers WHERE job = ?1",
            )?
            .execute(params![to_i64(job.0)])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The removals `node` is owed: each job with the containers it ran there.
    pub fn cleanups_owed(&self, node: &str) -> Result<Vec<(JobId, Vec<ContainerId>)>, StoreError> {
        let mut jobs =
            self.conn.prepare_cached("SELECT job FROM job_cleanup WHERE node = ?1 ORDER BY job")?;
        let jobs: Vec<i64> = jobs.query_map(params![node], |row| row.get(0))?.collect::<Result<_, _>>()?;
        let mut containers =
            self.conn.prepare_cached("SELECT id FROM containers WHERE job = ?1 AND node = ?2 ORDER BY id")?;
        let mut owed = Vec::with_capacity(jobs.len());
        for job in jobs {
            let ids: Vec<i64> =
                containers.query_map(params![job, node], |row| row.get(0))?.collect::<Result<_, _>>()?;
            let ids = ids.into_iter().map(|id| to_u64(id).map(ContainerId)).collect::<Result<_, _>>()?;
            owed.push((JobId(to_u64(job)?), ids));
        }
        Ok(owed)
    }

    /// The nodes still owed `job`'s removal.
    pub fn cleanup_nodes_owed(&self, job: JobId) -> Result<Vec<String>, StoreError> {
        let mut statement =
            self.conn.prepare_cached("SELECT node FROM job_cleanup WHERE job = ?1 ORDER BY node")?;
        let nodes = statement.query_map(params![to_i64(job.0)], |row| row.get(0))?;
        Ok(nodes.collect::<Result<_, _>>()?)
    }

    /// Records that `node` was sent `job`'s removal.
    pub fn cleanup_sent(&self, job: JobId, node: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM job_cleanup WHERE job = ?1 AND node = ?2")?
            .execute(params![to_i64(job.0), node])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::container::ContainerState;
    use slotmarket_common::protocol::JobState;

    use super::*;
    use crate::core::Persist;
    use crate::store::test_fixtures::{Admission, map_report, on_node};

    fn ran(container: u64, job: u64, node: &str) -> Persist {
        on_node(node, map_report(job, container, 0, ContainerState::Completed, 150))
    }

    fn admitted(job: u64) -> Persist {
        Admission::of(job).persist()
    }

    fn ended(job: u64, at: u64) -> Persist {
        Persist::JobState {
            job: JobId(job),
            state: JobState::Completed,
            at: Timestamp(at),
            message: None,
            tasks_completed: 2,
        }
    }

    #[test]
    fn an_ended_job_is_due_once_and_its_nodes_are_owed_until_sent_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store
            .apply(&[
                admitted(1),
                admitted(2),
                admitted(3),
                ran(10, 1, "n1"),
                ran(11, 1, "n2"),
                ran(12, 1, "n1"),
                ran(20, 2, "n1"),
                ended(1, 1_000),
                ended(2, 5_000),
            ])
            .unwrap();
        // Job 3 is still pending; job 2 ended too recently.
        let due = store.jobs_due_for_cleanup(Timestamp(2_000)).unwrap();
        assert_eq!(due, [(JobId(1), "alice".to_string())]);
        store.plan_cleanup(&[JobId(1)], Timestamp(2_000)).unwrap();
        assert!(store.jobs_due_for_cleanup(Timestamp(2_000)).unwrap().is_empty(), "planned once");
        assert_eq!(store.cleanup_nodes_owed(JobId(1)).unwrap(), ["n1", "n2"]);
        assert_eq!(store.cleanups_owed("n1").unwrap(), [(JobId(1), vec![ContainerId(10), ContainerId(12)])]);
        store.cleanup_sent(JobId(1), "n1").unwrap();
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        assert!(store.cleanups_owed("n1").unwrap().is_empty(), "not repeated after a restart");
        assert_eq!(store.cleanups_owed("n2").unwrap(), [(JobId(1), vec![ContainerId(11)])], "not forgotten");
        assert!(store.jobs_due_for_cleanup(Timestamp(2_000)).unwrap().is_empty());
        assert_eq!(store.jobs_due_for_cleanup(Timestamp(9_000)).unwrap(), [(JobId(2), "alice".to_string())]);
    }
}
