//! The durability rule: every commit returns without waiting for the disk, a reopened
//! store (as after a SIGKILLed master) still has it, and a `WalSync` syncs the file the
//! commits went to, across checkpoints and a replaced WAL; job ids continue above the
//! durable reservation.

use slotmarket_common::container::ContainerState;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::protocol::JobState;
use slotmarket_common::time::Timestamp;

use super::Store;
use super::test_fixtures::{Admission, map_report, map_spec, on_node};
use crate::core::Persist;

fn container(state: ContainerState, at: u64) -> Persist {
    on_node("node-1", map_report(1, 1, 0, state, at))
}

fn job_state(state: JobState, at: u64) -> Persist {
    Persist::JobState { job: JobId(1), state, at: Timestamp(at), message: None, tasks_completed: 0 }
}

fn admitted() -> Persist {
    Admission { spec: map_spec(1), ..Admission::of(1) }.persist()
}

/// The connection's `PRAGMA synchronous`: 1 is NORMAL, 2 is FULL.
fn synchronous(store: &Store) -> i64 {
    store.conn.query_row("PRAGMA synchronous", [], |row| row.get(0)).unwrap()
}

/// The (device, inode) of the database's WAL file as it is now.
fn wal_id(dir: &Path) -> (u64, u64) {
    let meta = std::fs::metadata(dir.join(format!("{}-wal", super::DATABASE_FILE))).unwrap();
    (meta.dev(), meta.ino())
}

#[test]
fn every_commit_returns_without_waiting_for_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    assert_eq!(synchronous(&store), 1);
    store.apply(&[admitted(), container(ContainerState::Allocated, 110)]).unwrap();
    store.apply(&[container(ContainerState::Completed, 130), job_state(JobState::Completed, 130)]).unwrap();
    assert_eq!(synchronous(&store), 1, "no transaction switches to FULL");
}

#[test]
fn a_commit_is_recovered_by_a_reopened_store() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(dir.path()).unwrap();
        store.apply(&[admitted(), container(ContainerState::Allocated, 110)]).unwrap();
        store.apply(&[container(ContainerState::Acquired, 115)]).unwrap();
        store.apply(&[container(ContainerState::Running, 120), job_state(JobState::Running, 120)]).unwrap();
        // Left without closing and without a sync: what a SIGKILLed master leaves (the
        // WAL holds the commits, nothing checkpointed them).
        std::mem::forget(store);
    }
    let jobs = Store::open(dir.path()).unwrap().recover().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].state, jobs[0].started), (JobState::Running, Some(Timestamp(120))));
    let states: Vec<_> = jobs[0].containers.iter().map(|(_, r)| (r.container, r.state)).collect();
    assert_eq!(states, vec![(ContainerId(1), ContainerState::Running)]);
}

#[test]
fn the_barrier_syncs_the_file_the_commits_went_to_and_a_copy_of_it_recovers_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut wal = store.wal_sync().unwrap();
    store.apply(&[admitted(), container(ContainerState::Allocated, 110)]).unwrap();
    wal.sync().unwrap();
    assert_eq!(wal.held_id(), Some(wal_id(dir.path())), "the synced descriptor is the live WAL");
    store.sync().unwrap();
    // What the disk holds once the barrier returned: the database and its WAL, as
    // they are (nothing closed or checkpointed them).
    let image = tempfile::tempdir().unwrap();
    for name in [super::DATABASE_FILE.to_string(), format!("{}-wal", super::DATABASE_FILE)] {
        std::fs::copy(dir.path().join(&name), image.path().join(&name)).unwrap();
    }
    let jobs = Store::open(image.path()).unwrap().recover().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].containers[0].1.state, ContainerState::Allocated);
}

#[test]
fn a_checkpoint_reuses_the_same_wal_and_a_replaced_one_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut wal = store.wal_sync().unwrap();
    let first = wal_id(dir.path());
    store.apply(&[admitted(), container(ContainerState::Allocated, 110)]).unwrap();
    // A checkpoint that restarts the WAL: the next commit overwrites it from the start.
    store.conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())).unwrap();
    store.apply(&[container(ContainerState::Running, 120)]).unwrap();
    wal.sync().unwrap();
    assert_eq!((wal.held_id(), wal_id(dir.path())), (Some(first), first), "the same file, reused");
    // The last connection closing deletes the WAL; the next one makes a new file.
    drop(store);
    let mut store = Store::open(dir.path()).unwrap();
    store.apply(&[container(ContainerState::Completed, 130)]).unwrap();
    wal.sync().unwrap();
    assert_eq!(wal.held_id(), Some(wal_id(dir.path())), "the handle follows the new WAL");
}

#[test]
fn job_ids_continue_above_the_durable_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.apply(&[admitted()]).unwrap();
    assert_eq!(store.recover_store().unwrap().next_job, JobId(2), "no reservation: above the jobs");
    store.reserve_job_ids(2000).unwrap();
    store.reserve_job_ids(1000).unwrap();
    store.sync().unwrap();
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.recover_store().unwrap().next_job, JobId(2001), "a reservation never shrinks");
}
