//! Store round trips: what is applied is what a reopened store recovers.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{ContainerReport, JobState};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::{Store, StoreError};
use crate::core::Persist;

const SPEC: &str =
    "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 2\nslot = \"map\"\ncommand = \"true\"\n";

fn report(container: u64, index: u32, state: ContainerState, at: u64) -> ContainerReport {
    ContainerReport {
        container: ContainerId(container),
        task: TaskId { job: JobId(1), stage: StageId(0), index },
        attempt: AttemptId(1),
        state,
        at: Timestamp(at),
        exit_code: (state == ContainerState::Completed).then_some(0),
        message: None,
    }
}

#[test]
fn a_reopened_store_recovers_jobs_and_the_latest_container_states() {
    let dir = tempfile::tempdir().unwrap();
    let spec = JobSpec::from_toml(SPEC).unwrap();
    {
        let mut store = Store::open(dir.path()).unwrap();
        store
            .apply(&[Persist::JobAdmitted {
                job: JobId(1),
                account: AccountId("alice".into()),
                spec: spec.clone(),
                submitted: Timestamp(100),
            }])
            .unwrap();
        let node = |r| Persist::Container { node: "node-1".into(), report: r };
        store
            .apply(&[
                node(report(1, 0, ContainerState::Allocated, 110)),
                node(report(2, 1, ContainerState::Allocated, 110)),
                node(report(1, 0, ContainerState::Running, 120)),
                Persist::JobState {
                    job: JobId(1),
                    state: JobState::Running,
                    at: Timestamp(120),
                    message: None,
                },
                node(report(1, 0, ContainerState::Completed, 130)),
            ])
            .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let jobs = store.recover().unwrap();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!((job.id, &job.account, &job.spec), (JobId(1), &AccountId("alice".into()), &spec));
    assert_eq!(
        (job.state, job.started, job.submitted),
        (JobState::Running, Some(Timestamp(120)), Timestamp(100))
    );
    let states: Vec<_> =
        job.containers.iter().map(|(node, r)| (node.as_str(), r.container.0, r.state)).collect();
    assert_eq!(
        states,
        vec![("node-1", 1, ContainerState::Completed), ("node-1", 2, ContainerState::Allocated)]
    );
    assert_eq!(job.containers[0].1.exit_code, Some(0));
}

#[test]
fn a_failed_batch_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let admitted = Persist::JobAdmitted {
        job: JobId(1),
        account: AccountId("alice".into()),
        spec: JobSpec::from_toml(SPEC).unwrap(),
        submitted: Timestamp(1),
    };
    store.apply(std::slice::from_ref(&admitted)).unwrap();
    // The same id twice violates the primary key: the whole batch must roll back.
    let second =
        Persist::JobState { job: JobId(1), state: JobState::Cancelled, at: Timestamp(2), message: None };
    assert!(matches!(store.apply(&[second, admitted]), Err(StoreError::Sqlite(_))));
    assert_eq!(store.job_state(JobId(1)).unwrap(), Some(JobState::Pending));
}

#[test]
fn a_database_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let conn = rusqlite::Connection::open(dir.path().join(super::DATABASE_FILE)).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    assert!(matches!(Store::open(dir.path()), Err(StoreError::SchemaVersion { found: 99, .. })));
}

#[test]
fn an_ended_job_comes_back_with_its_finish_time_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(dir.path()).unwrap();
        store
            .apply(&[
                Persist::JobAdmitted {
                    job: JobId(3),
                    account: AccountId("bob".into()),
                    spec: JobSpec::from_toml(SPEC).unwrap(),
                    submitted: Timestamp(10),
                },
                Persist::JobState {
                    job: JobId(3),
                    state: JobState::Cancelled,
                    at: Timestamp(20),
                    message: Some("cancelled by bob".into()),
                },
            ])
            .unwrap();
    }
    let jobs = Store::open(dir.path()).unwrap().recover().unwrap();
    assert_eq!((jobs[0].state, jobs[0].finished), (JobState::Cancelled, Some(Timestamp(20))));
    assert_eq!(jobs[0].message.as_deref(), Some("cancelled by bob"));
}

#[test]
fn an_unknown_state_name_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let admitted = Persist::JobAdmitted {
        job: JobId(1),
        account: AccountId("alice".into()),
        spec: JobSpec::from_toml(SPEC).unwrap(),
        submitted: Timestamp(1),
    };
    let container =
        Persist::Container { node: "n1".into(), report: report(1, 0, ContainerState::Running, 2) };
    store.apply(&[admitted, container]).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(dir.path().join(super::DATABASE_FILE)).unwrap();
    conn.execute("UPDATE containers SET state = 'paused'", []).unwrap();
    drop(conn);
    let store = Store::open(dir.path()).unwrap();
    let err = store.recover().unwrap_err();
    assert_eq!(err.to_string(), "stored row is unreadable: unknown container state \"paused\"");
    store.conn.execute("UPDATE jobs SET state = 'paused'", []).unwrap();
    assert!(
        matches!(store.job_state(JobId(1)), Err(StoreError::Corrupt(m)) if m == "unknown job state \"paused\"")
    );
}
