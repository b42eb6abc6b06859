//! Container rows: one per container, its latest state and the first time of each phase,
//! and the `transitions` table of older stores folded into them.

use rusqlite::Connection;
use slotmarket_common::container::ContainerState::{self, *};
use slotmarket_common::ids::{JobId, StageId};
use slotmarket_common::time::Timestamp;

use super::test_fixtures::{Admission, map_report, on_node};
use super::{Store, StoreError, schema};
use crate::core::Persist;

type Phases = (String, i64, Option<i64>, Option<i64>, Option<i64>, Option<i64>);

/// Container `id`'s state, time and phase times (allocated, acquired, running, ended).
fn phases(conn: &Connection, id: u64) -> Phases {
    conn.query_row(
        "SELECT state, at_ms, allocated_ms, acquired_ms, running_ms, ended_ms FROM containers WHERE id = ?1",
        [id as i64],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?)),
    )
    .unwrap()
}

fn state(container: u64, state: ContainerState, at: u64) -> Persist {
    on_node("n1", map_report(1, container, 0, state, at))
}

#[test]
fn each_phase_keeps_its_first_time_and_the_row_its_latest_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.apply(&[Admission::of(1).persist(), state(7, Allocated, 10), state(7, Acquired, 11)]).unwrap();
    // A report repeated (an agent's again after a reconnect) keeps the phase's first time.
    store.apply(&[state(7, Running, 12), state(7, Running, 15), state(7, Completed, 20)]).unwrap();
    assert_eq!(phases(&store.conn, 7), ("completed".into(), 20, Some(10), Some(11), Some(12), Some(20)));
    // The outputs lost later: the row reads killed then, its end stays when it ran.
    let lost = Persist::OutputsLost {
        job: JobId(1),
        stage: StageId(0),
        stage_name: "map".into(),
        tasks: vec![0],
        node: "n1".into(),
        at: Timestamp(30),
    };
    store.apply(&[lost]).unwrap();
    assert_eq!(phases(&store.conn, 7), ("killed".into(), 30, Some(10), Some(11), Some(12), Some(20)));
}

#[test]
fn a_report_for_a_container_without_a_row_makes_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.apply(&[Admission::of(1).persist(), state(3, Running, 12)]).unwrap();
    assert_eq!(phases(&store.conn, 3), ("running".into(), 12, None, None, Some(12), None));
    let latest = store.latest_attempts(JobId(1)).unwrap();
    assert_eq!(latest[&(0, 0)].started, Some(Timestamp(12)));
}

#[test]
fn a_failed_batch_leaves_no_container_row_and_the_next_batch_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let admitted = Admission::of(1).persist();
    store.apply(std::slice::from_ref(&admitted)).unwrap();
    // The job admitted twice violates its primary key after the reports were written.
    let failed = store.apply(&[state(4, Allocated, 10), state(4, Running, 11), admitted]);
    assert!(matches!(failed, Err(StoreError::Sqlite(_))));
    let rows: i64 = store.conn.query_row("SELECT COUNT(*) FROM containers", [], |row| row.get(0)).unwrap();
    assert_eq!(rows, 0);
    store.apply(&[state(4, Allocated, 10), state(4, Running, 11)]).unwrap();
    assert_eq!(phases(&store.conn, 4), ("running".into(), 11, Some(10), None, Some(11), None));
}

#[test]
fn an_older_stores_transitions_become_its_containers_phase_times() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(super::DATABASE_FILE);
    let before = schema::MIGRATIONS.len() - 1;
    {
        let conn = Connection::open(&path).unwrap();
        for step in &schema::MIGRATIONS[..before] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", before as i64).unwrap();
        conn.execute_batch(
            "INSERT INTO jobs (id, account, name, spec_json, submitted_ms, state) VALUES (1, 'a', 'wc', '{}', 1, 'running');
             INSERT INTO containers (id, job, stage, task, attempt, node, state, at_ms)
                 VALUES (1, 1, 0, 0, 1, 'n1', 'killed', 40), (2, 1, 0, 1, 1, 'n1', 'acquired', 12);
             INSERT INTO transitions (container, state, at_ms) VALUES
                 (1, 'allocated', 10), (1, 'acquired', 11), (1, 'running', 12), (1, 'running', 14),
                 (1, 'completed', 20), (1, 'killed', 40), (2, 'allocated', 10), (2, 'acquired', 12);",
        )
        .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(phases(&store.conn, 1), ("killed".into(), 40, Some(10), Some(11), Some(12), Some(20)));
    assert_eq!(phases(&store.conn, 2), ("acquired".into(), 12, Some(10), Some(12), None, None));
    let tables: i64 = store
        .conn
        .query_row("SELECT COUNT(*) FROM sqlite_schema WHERE name LIKE 'transitions%'", [], |row| row.get(0))
        .unwrap();
    assert_eq!(tables, 0, "the table and its index are dropped");
}
