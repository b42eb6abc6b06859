//! Store round trips: what is applied is what a reopened store recovers.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, ContainerId, JobId};
use slotmarket_common::protocol::{ContainerReport, JobHistory, JobState, JobsQuery, StageHistory};
use slotmarket_common::spec::{JobSpec, SlotKind};
use slotmarket_common::time::Timestamp;

use super::test_fixtures::{Admission, map_report, map_spec, map_spec_toml};
use super::{Store, StoreError};
use crate::core::Persist;

fn report(container: u64, index: u32, state: ContainerState, at: u64) -> ContainerReport {
    map_report(1, container, index, state, at)
}

#[test]
fn a_reopened_store_recovers_jobs_and_the_latest_container_states() {
    let dir = tempfile::tempdir().unwrap();
    let spec = map_spec(2);
    {
        let mut store = Store::open(dir.path()).unwrap();
        store.apply(&[Admission { spec: spec.clone(), ..Admission::of(1) }.persist()]).unwrap();
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
                    tasks_completed: 0,
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
    let admitted = Admission { submitted: 1, ..Admission::of(1) }.persist();
    store.apply(std::slice::from_ref(&admitted)).unwrap();
    // The same id twice violates the primary key: the whole batch must roll back.
    let second = Persist::JobState {
        job: JobId(1),
        state: JobState::Cancelled,
        at: Timestamp(2),
        message: None,
        tasks_completed: 0,
    };
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
                Admission { owner: "bob", submitted: 10, ..Admission::of(3) }.persist(),
                Persist::JobState {
                    job: JobId(3),
                    state: JobState::Cancelled,
                    at: Timestamp(20),
                    message: Some("cancelled by bob".into()),
                    tasks_completed: 0,
                },
            ])
            .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert!(store.recover().unwrap().is_empty(), "ended jobs stay in the store");
    let recovery = store.recover_store().unwrap();
    assert_eq!((recovery.next_job, recovery.next_container), (JobId(4), ContainerId(1)));
    let status = store.ended_job_status(JobId(3)).unwrap().expect("stored");
    assert_eq!((status.summary.state, status.summary.finished), (JobState::Cancelled, Some(Timestamp(20))));
    assert_eq!((status.summary.tasks_total, status.summary.owner.0.as_str()), (2, "bob"));
    assert_eq!(status.message.as_deref(), Some("cancelled by bob"));
    assert_eq!(status.stages.len(), 1);
    assert_eq!(store.ended_job_status(JobId(9)).unwrap(), None);
}

#[test]
fn history_keeps_the_newest_runs_of_each_name_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(dir.path()).unwrap();
        for job in 1..=4 {
            let name = if job == 2 { "sort" } else { "wc" };
            store.apply(&[Persist::History { record: run(job, name).into(), keep_per_name: 2 }]).unwrap();
        }
    }
    let history = Store::open(dir.path()).unwrap().recover_store().unwrap().history;
    let kept: Vec<(u64, &str)> = history.iter().map(|r| (r.job.0, r.name.as_str())).collect();
    assert_eq!(kept, vec![(2, "sort"), (3, "wc"), (4, "wc")]);
    assert_eq!(history[2], run(4, "wc"));
}

#[test]
fn listings_walk_stored_jobs_in_either_order_with_filters() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    for (job, owner, state) in
        [(1, "alice", JobState::Completed), (2, "bob", JobState::Failed), (3, "alice", JobState::Cancelled)]
    {
        store.apply(&[admitted(job, owner), ended(job, state)]).unwrap();
    }
    let list = |query: JobsQuery, owner: Option<&str>| {
        let mut ids = Vec::new();
        let owner = owner.map(|o| AccountId(o.into()));
        store
            .each_job(&query, owner.as_ref(), |job| {
                ids.push(job.id.0);
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        ids
    };
    let oldest = JobsQuery { newest_first: false, ..JobsQuery::default() };
    assert_eq!(list(oldest.clone(), None), vec![1, 2, 3]);
    assert_eq!(list(JobsQuery::default(), None), vec![3, 2, 1]);
    assert_eq!(list(oldest.clone(), Some("alice")), vec![1, 3]);
    assert_eq!(list(JobsQuery { after: Some(JobId(1)), ..oldest.clone() }, None), vec![2, 3]);
    assert_eq!(list(JobsQuery { after: Some(JobId(3)), ..JobsQuery::default() }, None), vec![2, 1]);
    assert_eq!(list(JobsQuery { states: vec![JobState::Failed], ..oldest.clone() }, None), vec![2]);
    assert_eq!(list(JobsQuery { account: Some(AccountId("bob".into())), ..oldest }, None), vec![2]);
}

#[test]
fn a_version_one_database_gains_owners_and_task_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(super::DATABASE_FILE);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(super::schema::V1).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let spec_json = serde_json::to_string(&map_spec(2)).unwrap();
        conn.execute(
            "INSERT INTO jobs (id, account, name, spec_json, submitted_ms, state, finished_ms)
             VALUES (5, 'carol', 'wc', ?1, 10, 'completed', 30)",
            [spec_json],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO containers (id, job, stage, task, attempt, node, state, at_ms)
             VALUES (1, 5, 0, 0, 1, 'n1', 'completed', 20), (2, 5, 0, 1, 1, 'n1', 'completed', 25)",
            [],
        )
        .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let status = store.ended_job_status(JobId(5)).unwrap().expect("migrated");
    let summary = &status.summary;
    assert_eq!((summary.owner.0.as_str(), summary.tasks_total, summary.tasks_completed), ("carol", 2, 2));
    assert_eq!(status.stages[0].completed, 2);
}

fn admitted(job: u64, owner: &'static str) -> Persist {
    Admission { owner, submitted: job, deadline: Some(1_000), ..Admission::of(job) }.persist()
}

fn ended(job: u64, state: JobState) -> Persist {
    Persist::JobState { job: JobId(job), state, at: Timestamp(job + 10), message: None, tasks_completed: 1 }
}

fn run(job: u64, name: &str) -> JobHistory {
    JobHistory {
        submitted: Timestamp(job),
        started: Some(Timestamp(job + 1)),
        finished: Timestamp(job + 5),
        input_bytes: Some(1024),
        slot_ms: [3, 1],
        stages: vec![StageHistory {
            name: "map".into(),
            slot: SlotKind::Map,
            run_ms: vec![Some(3)],
            attempts: vec![1],
        }],
        ..crate::core::completed_run(job, name)
    }
}

#[test]
fn an_unknown_state_name_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let admitted = Admission { submitted: 1, ..Admission::of(1) }.persist();
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

#[test]
fn latest_attempts_name_the_newest_container_of_each_task_with_its_node_and_times() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let admitted = Admission::of(1).persist();
    let on = |node: &str, r| Persist::Container { node: node.into(), report: r };
    let failed = ContainerReport {
        exit_code: Some(3),
        message: Some("exit 3".into()),
        ..report(1, 0, ContainerState::Failed, 130)
    };
    store
        .apply(&[
            admitted,
            on("n1", report(1, 0, ContainerState::Allocated, 110)),
            on("n1", report(1, 0, ContainerState::Running, 120)),
            on("n1", failed),
            on("n2", report(2, 0, ContainerState::Allocated, 140)),
            on("n2", report(2, 0, ContainerState::Running, 150)),
            on("n2", report(2, 0, ContainerState::Completed, 170)),
        ])
        .unwrap();
    let latest = store.latest_attempts(JobId(1)).unwrap();
    assert_eq!(latest.len(), 1, "task 1 never ran: {latest:?}");
    let task0 = &latest[&(0, 0)];
    assert_eq!((task0.attempts, task0.container, task0.node.as_str()), (2, ContainerId(2), "n2"));
    assert_eq!(
        (task0.state, task0.started, task0.at),
        (ContainerState::Completed, Some(Timestamp(150)), Timestamp(170))
    );
    assert_eq!(task0.exit_code, Some(0));
    assert!(store.latest_attempts(JobId(9)).unwrap().is_empty());
}

#[test]
fn a_reopened_store_recovers_the_last_capacity_stored() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(dir.path()).unwrap();
        assert_eq!(store.recover_store().unwrap().capacity, None, "nothing stored yet");
        store.apply(&[Persist::Capacity { map_slots: 2, reduce_slots: 0 }]).unwrap();
        store.apply(&[Persist::Capacity { map_slots: 6, reduce_slots: 3 }]).unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.recover_store().unwrap().capacity, Some([6, 3]));
}

#[test]
fn a_job_specs_utility_curve_is_stored_and_a_spec_stored_without_one_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let curve = "deadline = \"+30m\"\nutility = [[0, 1], [10, -1.5]]\n";
    let own = JobSpec::from_toml(&format!("{curve}{}", map_spec_toml(2))).unwrap();
    let plain = map_spec(2);
    {
        let mut store = Store::open(dir.path()).unwrap();
        let admitted = |job, spec: &JobSpec| Admission { spec: spec.clone(), ..Admission::of(job) }.persist();
        store.apply(&[admitted(1, &own), admitted(2, &plain)]).unwrap();
    }
    {
        // Job 2's row as a master from before the field wrote it: no `utility` key.
        let conn = rusqlite::Connection::open(dir.path().join(super::DATABASE_FILE)).unwrap();
        let stored: String =
            conn.query_row("SELECT spec_json FROM jobs WHERE id = 1", [], |r| r.get(0)).unwrap();
        assert!(stored.contains(r#""utility":[[0.0,1.0],[10.0,-1.5]]"#), "{stored}");
        let mut old: serde_json::Value = serde_json::from_str(
            &conn
                .query_row("SELECT spec_json FROM jobs WHERE id = 2", [], |r| r.get::<_, String>(0))
                .unwrap(),
        )
        .unwrap();
        assert!(old.as_object_mut().unwrap().remove("utility").is_some());
        conn.execute("UPDATE jobs SET spec_json = ?1 WHERE id = 2", [old.to_string()]).unwrap();
    }
    let jobs = Store::open(dir.path()).unwrap().recover().unwrap();
    let specs: Vec<&JobSpec> = jobs.iter().map(|j| &j.spec).collect();
    assert_eq!(specs, vec![&own, &plain]);
    assert_eq!(own.utility.as_ref().map(|u| u.0.len()), Some(2));
    assert_eq!(plain.utility, None);
}
