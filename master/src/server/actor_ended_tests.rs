//! Actor tests of requests about an ended job: cancel and `deadline set` answer alike
//! whether the core still holds the job or only the store does (after a restart), a
//! job of another user answers as no job, and a deadline not in the future is refused.
//! The history of ended jobs comes in pages that follow one another.

use std::path::Path;

use slotmarket_common::identity::Role;
use slotmarket_common::protocol::{ErrorKind, ErrorReply, HistoryPage, HistoryQuery, JobState};
use slotmarket_common::spec::JobSpec;

use super::*;
use crate::core::CoreConfig;
use crate::server::DEFAULT_HEARTBEAT_INTERVAL;
use crate::server::launches::launch_budget;
use slotmarket_common::protocol::DEFAULT_MAX_FRAME;

const SPEC: &str =
    "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"\n";

fn actor_on(dir: &Path) -> Actor {
    let store = Store::open(dir).unwrap();
    Actor::new(
        Core::new(CoreConfig::default()),
        store,
        DEFAULT_HEARTBEAT_INTERVAL,
        launch_budget(DEFAULT_MAX_FRAME),
    )
    .unwrap()
}

fn user(principal: &str) -> Identity {
    Identity { role: Role::User, principal: principal.into() }
}

fn ask(actor: &mut Actor, caller: Identity, request: Request) -> Response {
    let (reply, mut reply_rx) = oneshot::channel();
    let commands = actor.on_input(Input::Request { caller, request, reply });
    actor.execute_settled(commands).unwrap();
    reply_rx.try_recv().unwrap()
}

/// What cancelling `job` and moving its deadline five minutes on answer, for `caller`.
fn cancel_and_move(actor: &mut Actor, caller: &Identity, job: JobId) -> (Response, Response) {
    let cancel = ask(actor, caller.clone(), Request::Cancel { job });
    let later = Some(actor.clock.now() + Duration::from_secs(300));
    let deadline = ask(actor, caller.clone(), Request::SetDeadline { job, deadline: later });
    (cancel, deadline)
}

#[test]
fn an_ended_job_answers_alike_from_memory_and_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path());
    let spec = JobSpec::from_toml(SPEC).unwrap();
    let Response::Submitted { job } = ask(&mut actor, user("alice"), Request::Submit { spec }) else {
        panic!("not submitted")
    };
    assert!(matches!(ask(&mut actor, user("alice"), Request::Cancel { job }), Response::Cancelled { .. }));
    let in_memory = cancel_and_move(&mut actor, &user("alice"), job);
    assert!(
        matches!(in_memory.0, Response::Cancelled { state: JobState::Cancelled, .. }),
        "{:?}",
        in_memory.0
    );
    let Response::Error(ErrorReply { kind: ErrorKind::BadRequest, message }) = &in_memory.1 else {
        panic!("{:?}", in_memory.1)
    };
    assert!(message.contains("has ended (cancelled)"), "{message}");
    let hidden = cancel_and_move(&mut actor, &user("bob"), job);
    drop(actor);

    let mut restarted = actor_on(dir.path());
    restarted.recover().unwrap();
    assert!(!restarted.core.view().has_job(job), "the ended job is only in the store");
    assert_eq!(
        format!("{:?}", cancel_and_move(&mut restarted, &user("alice"), job)),
        format!("{in_memory:?}")
    );
    // Another user's job stays indistinguishable from no job, in memory or not.
    let no_job = cancel_and_move(&mut restarted, &user("bob"), JobId(999));
    let (hidden_now, no_job) =
        (format!("{:?}", cancel_and_move(&mut restarted, &user("bob"), job)), format!("{no_job:?}"));
    assert_eq!(hidden_now.replace(&job.to_string(), "jX"), no_job.replace("j999", "jX"));
    assert_eq!(format!("{hidden:?}"), hidden_now);
}

#[test]
fn a_deadline_not_in_the_future_is_refused_as_at_submit() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path());
    let spec = JobSpec::from_toml(SPEC).unwrap();
    let Response::Submitted { job } = ask(&mut actor, user("alice"), Request::Submit { spec }) else {
        panic!("not submitted")
    };
    let now = actor.clock.now();
    for at in [Timestamp::from_secs(978_307_200), now] {
        let response = ask(&mut actor, user("alice"), Request::SetDeadline { job, deadline: Some(at) });
        let Response::Error(ErrorReply { kind: ErrorKind::BadRequest, message }) = response else {
            panic!("{at}: {response:?}")
        };
        assert!(message.starts_with("deadline: ") && message.ends_with(" has already passed"), "{message}");
    }
    let status = actor.core.view().job_status(job, &user("alice")).unwrap();
    assert_eq!(status.summary.deadline, None, "no deadline was set");
    let ahead = Some(now + Duration::from_secs(60));
    let set = ask(&mut actor, user("alice"), Request::SetDeadline { job, deadline: ahead });
    assert!(matches!(set, Response::DeadlineSet { deadline, .. } if deadline == ahead), "{set:?}");
}

#[test]
fn history_pages_follow_one_another_without_a_gap_or_a_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path());
    for _ in 0..5 {
        let spec = JobSpec::from_toml(SPEC).unwrap();
        let Response::Submitted { job } = ask(&mut actor, user("alice"), Request::Submit { spec }) else {
            panic!("not submitted")
        };
        ask(&mut actor, user("alice"), Request::Cancel { job });
    }
    let mut page = |before, limit| match ask(
        &mut actor,
        user("alice"),
        Request::History(HistoryQuery { name: None, before, limit }),
    ) {
        Response::History(page) => page,
        other => panic!("{other:?}"),
    };
    let HistoryPage { runs: all, next: None } = page(None, 10) else { panic!("one page holds all five") };
    let jobs =
        |runs: &[slotmarket_common::protocol::JobHistory]| runs.iter().map(|r| r.job).collect::<Vec<_>>();
    assert_eq!(jobs(&all).len(), 5);
    let mut walked = Vec::new();
    let mut before = None;
    for expected in [2, 2, 1] {
        let HistoryPage { runs, next } = page(before, 2);
        assert_eq!(runs.len(), expected);
        walked.extend(jobs(&runs));
        assert_eq!(next.is_some(), walked.len() < 5, "a next page only while runs are left");
        before = next;
    }
    assert_eq!(walked, jobs(&all), "newest first, each run once");
}
