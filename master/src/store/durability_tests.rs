//! The durability rule: which transactions commit without waiting for fsync, and that
//! such commits are still committed (a reopened store, as after a SIGKILLed master, has
//! them).

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{ContainerReport, JobState};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::{Durability, Store};
use crate::core::Persist;

const SPEC: &str =
    "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"\n";

fn container(state: ContainerState, at: u64) -> Persist {
    let report = ContainerReport {
        container: ContainerId(1),
        task: TaskId { job: JobId(1), stage: StageId(0), index: 0 },
        attempt: AttemptId(1),
        state,
        at: Timestamp(at),
        exit_code: (state == ContainerState::Completed).then_some(0),
        message: None,
    };
    Persist::Container { node: "node-1".into(), report }
}

fn job_state(state: JobState, at: u64) -> Persist {
    Persist::JobState { job: JobId(1), state, at: Timestamp(at), message: None, tasks_completed: 0 }
}

fn admitted() -> Persist {
    Persist::JobAdmitted {
        job: JobId(1),
        account: AccountId("alice".into()),
        owner: AccountId("alice".into()),
        spec: JobSpec::from_toml(SPEC).unwrap(),
        submitted: Timestamp(100),
        deadline: None,
    }
}

/// The connection's `PRAGMA synchronous`: 1 is NORMAL, 2 is FULL.
fn synchronous(store: &Store) -> i64 {
    store.conn.query_row("PRAGMA synchronous", [], |row| row.get(0)).unwrap()
}

#[test]
fn only_acquired_running_and_job_start_writes_are_relaxed() {
    use ContainerState::*;
    let relaxed = [
        vec![container(Acquired, 1)],
        vec![container(Acquired, 1), container(Running, 2), job_state(JobState::Running, 2)],
    ];
    for ops in relaxed {
        assert_eq!(Durability::of(&ops), Durability::Relaxed, "{ops:?}");
    }
    let full = [
        vec![admitted()],
        vec![container(Allocated, 1)],
        vec![container(Completed, 3)],
        vec![container(Failed, 3)],
        vec![container(Killed, 3)],
        vec![job_state(JobState::Completed, 3)],
        // One acknowledged write makes the whole transaction FULL.
        vec![container(Running, 2), container(Completed, 3)],
        vec![container(Running, 2), container(Allocated, 2)],
    ];
    for ops in full {
        assert_eq!(Durability::of(&ops), Durability::Full, "{ops:?}");
    }
}

#[test]
fn the_connection_switches_to_normal_only_for_relaxed_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    assert_eq!(synchronous(&store), 2);
    store.apply(&[admitted(), container(ContainerState::Allocated, 110)]).unwrap();
    assert_eq!(synchronous(&store), 2);
    store.apply(&[container(ContainerState::Running, 120), job_state(JobState::Running, 120)]).unwrap();
    assert_eq!(synchronous(&store), 1);
    store.apply(&[container(ContainerState::Completed, 130)]).unwrap();
    assert_eq!(synchronous(&store), 2);
}

#[test]
fn a_relaxed_commit_is_recovered_by_a_reopened_store() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(dir.path()).unwrap();
        store.apply(&[admitted(), container(ContainerState::Allocated, 110)]).unwrap();
        store.apply(&[container(ContainerState::Acquired, 115)]).unwrap();
        store.apply(&[container(ContainerState::Running, 120), job_state(JobState::Running, 120)]).unwrap();
        // Left without closing and without another FULL commit: what a SIGKILLed
        // master leaves (the WAL holds the relaxed commits, nothing checkpointed them).
        std::mem::forget(store);
    }
    let jobs = Store::open(dir.path()).unwrap().recover().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].state, jobs[0].started), (JobState::Running, Some(Timestamp(120))));
    let states: Vec<_> = jobs[0].containers.iter().map(|(_, r)| (r.container, r.state)).collect();
    assert_eq!(states, vec![(ContainerId(1), ContainerState::Running)]);
}
