//! Client scenarios: submit (durable before acknowledged), validation, roles, cancel and
//! the read-only views.

use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::Role;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{ErrorKind, JobState, Response};

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob, caller, root};
use crate::core::{Command, Persist};

#[test]
fn submit_persists_the_job_before_replying() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(2).name("wc").build());
    assert_eq!(job, JobId(1));
    let kinds: Vec<&str> = env
        .last
        .iter()
        .map(|c| match c {
            Command::Persist(Persist::JobAdmitted { .. }) => "admitted",
            Command::Reply { response, .. } if matches!(**response, Response::Submitted { .. }) => "reply",
            Command::Persist(Persist::Container { .. }) => "container",
            Command::Launch { .. } => "launch",
            Command::JobChanged { .. } => "changed",
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["admitted", "reply", "container", "launch", "changed"]);
    match &env.take_persists()[0] {
        Persist::JobAdmitted { job: j, account, spec, submitted, .. } => {
            assert_eq!(
                (*j, account.0.as_str(), spec.name.as_str(), *submitted),
                (job, "alice", "wc", env.now)
            );
        }
        other => panic!("expected the admission first, got {other:?}"),
    }
    env.take_launches(1);
    assert_eq!(env.submit(JobBuilder::maps(1).build()), JobId(2));
    env.assert_no_commands();
}

#[test]
fn an_invalid_spec_is_refused_as_bad_request() {
    let mut env = TestEnv::new();
    let mut spec = JobBuilder::maps(1).build();
    spec.stages[0].tasks = 0;
    match env.submit_as(alice(), spec) {
        Response::Error(e) => {
            assert_eq!(e.kind, ErrorKind::BadRequest);
            assert_eq!(e.message, "stage[0].tasks: must be between 1 and 100000, got 0");
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
    assert!(env.take_persists().is_empty());
    // The refused submit used no id.
    assert_eq!(env.submit(JobBuilder::maps(1).build()), JobId(1));
    env.assert_no_commands();
}

#[test]
fn agents_and_the_master_may_not_submit() {
    let mut env = TestEnv::new();
    for role in [Role::Agent, Role::Master] {
        match env.submit_as(caller(role, "n1"), JobBuilder::maps(1).build()) {
            Response::Error(e) => assert_eq!(e.kind, ErrorKind::Forbidden, "{role}"),
            other => panic!("expected Forbidden, got {other:?}"),
        }
    }
    assert!(env.take_persists().is_empty());
    env.assert_no_commands();
}

#[test]
fn cancel_kills_live_containers_and_replies() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 1);
    let job = env.submit(JobBuilder::map_reduce(4, 1).build());
    let live = env.take_launches(2);
    env.start(live[0].container);
    let other = env.submit(JobBuilder::maps(1).build());
    env.take_persists();

    let reply = env.cancel_as(alice(), job);
    assert_eq!(reply, Response::Cancelled { job, state: JobState::Cancelled });
    let mut kills: Vec<_> = env.take_kills(2).into_iter().map(|(_, c, reason)| (c, reason)).collect();
    kills.sort();
    assert_eq!(kills, vec![(live[0].container, "cancelled".into()), (live[1].container, "cancelled".into())]);
    let persisted = env.take_persists();
    assert!(matches!(
        &persisted[..],
        [
            Persist::JobState { state: JobState::Cancelled, message: Some(_), .. },
            Persist::History { record, .. }
        ] if record.state == JobState::Cancelled && record.job == job
    ));
    let status = env.status(job);
    assert_eq!((status.stages[0].pending, status.stages[0].running, status.stages[1].pending), (0, 0, 0));
    // The slots stay taken until the agent confirms the kills.
    env.assert_no_commands();

    env.report(live[0].container, ContainerState::Killed);
    assert_eq!(env.take_launches(1)[0].task.job, other);
    env.report(live[1].container, ContainerState::Killed);
    env.assert_no_commands();

    // Cancelling again just reports the state.
    assert_eq!(env.cancel_as(root(), job), Response::Cancelled { job, state: JobState::Cancelled });
    assert!(env.take_persists().iter().all(|p| matches!(p, Persist::Container { .. })));
    env.assert_no_commands();
}

#[test]
fn cancelling_an_ended_job_replies_with_its_state() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(1).build());
    let l = env.take_launches(1);
    env.finish(l[0].container);
    assert_eq!(env.cancel_as(alice(), job), Response::Cancelled { job, state: JobState::Completed });
    env.assert_no_commands();
}

#[test]
fn a_user_cannot_cancel_another_users_job_nor_learn_that_it_exists() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(2).build());
    env.take_launches(1);
    // Someone else's job answers exactly as an id that was never used: no owner, no kind
    // that tells the two apart.
    let unknown = JobId(job.0 + 1000);
    assert_eq!(env.cancel_as(bob(), job), not_found(job));
    assert_eq!(env.cancel_as(bob(), unknown), not_found(unknown));
    assert_eq!(env.core.view().job_state(job), Some(JobState::Pending));
    assert_eq!(env.cancel_as(root(), job), Response::Cancelled { job, state: JobState::Cancelled });
    env.take_kills(1);
    env.assert_no_commands();
}

/// The one answer for a job the caller cannot see, whether or not it exists.
fn not_found(job: JobId) -> Response {
    Response::error(ErrorKind::NotFound, format!("no job {job}"))
}

#[test]
fn users_see_only_their_own_jobs_and_admins_see_all() {
    let mut env = TestEnv::new();
    let a = env.submit(JobBuilder::maps(1).build());
    let b = match env.submit_as(bob(), JobBuilder::maps(1).build()) {
        Response::Submitted { job } => job,
        other => panic!("{other:?}"),
    };
    let view = env.core.view();
    let ids = |who| view.all_jobs(&who).iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(ids(alice()), vec![a]);
    assert_eq!(ids(bob()), vec![b]);
    assert_eq!(ids(root()), vec![a, b]);
    assert_eq!(ids(caller(Role::Agent, "alice")), Vec::<JobId>::new());
    // Status (and watch, which starts from it) of a job the caller may not see answers as
    // an unknown id does, for users and for agents alike.
    let answer = |job, who| view.job_status(job, &who).map_or_else(Response::Error, Response::Job);
    assert_eq!(answer(a, bob()), not_found(a));
    assert_eq!(answer(a, caller(Role::Agent, "alice")), not_found(a));
    assert_eq!(answer(JobId(9), bob()), not_found(JobId(9)));
    assert_eq!(answer(JobId(9), root()), not_found(JobId(9)));
    let status = view.job_status(a, &alice()).expect("own job");
    assert_eq!((status.summary.tasks_total, status.stages[0].pending), (1, 1));
    env.assert_no_commands();
}
