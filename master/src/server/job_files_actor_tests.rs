//! The actor's job-file paths end to end on its inputs: output nodes and relayed reads,
//! and removals planned, sent once, kept for an absent node and not repeated after a
//! restart.

use std::path::Path;

use slotmarket_common::identity::Role;
use slotmarket_common::ids::{AccountId, AttemptId, StageId, TaskId};
use slotmarket_common::protocol::{ContainerReport, JobState, OutputData, Request};
use slotmarket_common::spec::JobSpec;
use tokio::sync::mpsc;

use super::super::{Actor, Input};
use super::*;
use crate::core::{Core, CoreConfig, Persist};
use crate::server::DEFAULT_HEARTBEAT_INTERVAL;
use crate::server::launches::launch_budget;
use crate::store::Store;

const SPEC: &str = "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"\n\
                    [[stage]]\nname = \"reduce\"\ntasks = 2\nslot = \"reduce\"\ncommand = \"true\"\n";

fn user(name: &str) -> Identity {
    Identity { role: Role::User, principal: name.into() }
}

/// Job 1 of alice: its map ran on n1, its reduces on n1 (container 11) and n2 (12).
/// Completed just now, or still running its second reduce if `running`.
fn stored_job(dir: &Path, running: bool) {
    let now = Timestamp::from(std::time::SystemTime::now());
    let ran = |container: u64, stage: u32, index: u32, node: &str| Persist::Container {
        node: node.into(),
        report: ContainerReport {
            container: ContainerId(container),
            task: TaskId { job: JobId(1), stage: StageId(stage), index },
            attempt: AttemptId(1),
            state: if running && container == 12 {
                ContainerState::Running
            } else {
                ContainerState::Completed
            },
            at: now,
            exit_code: Some(0),
            message: None,
        },
    };
    let mut ops = vec![
        Persist::JobAdmitted {
            job: JobId(1),
            account: AccountId("alice".into()),
            owner: AccountId("alice".into()),
            spec: JobSpec::from_toml(SPEC).unwrap().into(),
            submitted: Timestamp(100),
            deadline: None,
        },
        ran(10, 0, 0, "n1"),
        ran(11, 1, 0, "n1"),
        ran(12, 1, 1, "n2"),
    ];
    if !running {
        let state = JobState::Completed;
        ops.push(Persist::JobState { job: JobId(1), state, at: now, message: None, tasks_completed: 3 });
    }
    Store::open(dir).unwrap().apply(&ops).unwrap();
}

fn actor_on(dir: &Path) -> Actor {
    let store = Store::open(dir).unwrap();
    let mut actor = Actor::new(
        Core::new(CoreConfig::default()),
        store,
        DEFAULT_HEARTBEAT_INTERVAL,
        launch_budget(1 << 20),
    )
    .unwrap();
    actor.set_cleanup_retain(Duration::ZERO);
    actor
}

/// Registers `node` with data directory `dir_id`; returns its id and its queue past
/// `Registered`.
fn join(actor: &mut Actor, node: &str, dir_id: &str) -> (AgentId, mpsc::UnboundedReceiver<MasterToAgent>) {
    let (outbound, mut outbound_rx) = mpsc::unbounded_channel();
    let (assigned, mut assigned_rx) = oneshot::channel();
    let input = Input::AgentRegistered {
        node: node.into(),
        map_slots: 1,
        reduce_slots: 1,
        live_containers: Vec::new(),
        outbound,
        assigned,
        data_mode: slotmarket_common::protocol::DataMode::Shared,
        data_dir_id: dir_id.into(),
    };
    let commands = actor.on_input(input);
    actor.execute_settled(commands).unwrap();
    assert!(matches!(outbound_rx.try_recv(), Ok(MasterToAgent::Registered { .. })));
    (assigned_rx.try_recv().unwrap(), outbound_rx)
}

fn send(actor: &mut Actor, caller: Identity, request: Request) -> oneshot::Receiver<Response> {
    let (reply, reply_rx) = oneshot::channel();
    let commands = actor.on_input(Input::Request { caller, request, reply });
    actor.execute_settled(commands).unwrap();
    reply_rx
}

fn removals(outbound: &mut mpsc::UnboundedReceiver<MasterToAgent>) -> Vec<RemoveJob> {
    let mut found = Vec::new();
    while let Ok(message) = outbound.try_recv() {
        if let MasterToAgent::RemoveJob(remove) = message {
            found.push(remove);
        }
    }
    found
}

#[test]
fn outputs_are_read_from_the_last_stages_nodes_for_their_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    stored_job(dir.path(), false);
    let mut actor = actor_on(dir.path());
    let (n1, mut out1) = join(&mut actor, "n1", "a");
    let (_n2, _out2) = join(&mut actor, "n2", "b");

    let mut nodes = send(&mut actor, user("alice"), Request::OutputNodes { job: JobId(1) });
    assert_eq!(nodes.try_recv().unwrap(), Response::OutputNodes(vec!["n1".into(), "n2".into()]));
    let mut refused = send(&mut actor, user("bob"), Request::OutputNodes { job: JobId(1) });
    assert!(matches!(refused.try_recv(), Ok(Response::Error(e)) if e.kind == ErrorKind::NotFound));

    let list = |node: &str| OutputQuery {
        job: JobId(1),
        node: node.into(),
        op: OutputOp::List { dir: "out".into() },
    };
    let mut answer = send(&mut actor, user("alice"), Request::Output(list("n1")));
    let Ok(MasterToAgent::ReadOutput(read)) = out1.try_recv() else { panic!("n1 is asked") };
    assert_eq!((read.job, &read.op), (JobId(1), &OutputOp::List { dir: "out".into() }));
    let files = OutputData::Files(vec![slotmarket_common::protocol::OutputFile {
        path: "out/part-0".into(),
        len: 3,
    }]);
    actor.on_input(Input::OutputRead {
        agent: AgentId(77),
        answer: OutputReadReply { request: read.request, result: Ok(OutputData::Bytes(vec![])) },
    });
    assert!(answer.try_recv().is_err(), "a stranger's answer is ignored");
    actor.on_input(Input::OutputRead {
        agent: n1,
        answer: OutputReadReply { request: read.request, result: Ok(files.clone()) },
    });
    assert_eq!(answer.try_recv().unwrap(), Response::Output(files));

    // A node that holds none of the outputs is not asked.
    let (_n3, mut out3) = join(&mut actor, "n3", "c");
    let mut wrong = send(&mut actor, user("alice"), Request::Output(list("n3")));
    assert!(matches!(wrong.try_recv(), Ok(Response::Error(e)) if e.message.contains("does not serve")));
    assert!(out3.try_recv().is_err());
}

#[test]
fn agents_sharing_a_directory_serve_the_outputs_once() {
    let dir = tempfile::tempdir().unwrap();
    stored_job(dir.path(), false);
    let mut actor = actor_on(dir.path());
    let _n1 = join(&mut actor, "n1", "nfs");
    let _n2 = join(&mut actor, "n2", "nfs");
    let mut nodes = send(&mut actor, user("alice"), Request::OutputNodes { job: JobId(1) });
    assert_eq!(nodes.try_recv().unwrap(), Response::OutputNodes(vec!["n1".into()]));
}

#[test]
fn removals_go_once_to_each_node_and_wait_for_an_absent_one_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    stored_job(dir.path(), false);
    let mut actor = actor_on(dir.path());
    let (_n1, mut out1) = join(&mut actor, "n1", "a");
    actor.cleanup_round(actor.clock.now());
    let sent = removals(&mut out1);
    assert_eq!(
        sent,
        [RemoveJob { job: JobId(1), containers: vec![ContainerId(10), ContainerId(11)], job_dir: true }]
    );
    actor.cleanup_round(actor.clock.now());
    assert!(removals(&mut out1).is_empty(), "sent once");
    drop(actor);

    // After a restart n1 is not told again; n2, away until now, is told when it joins.
    let mut actor = actor_on(dir.path());
    let (_n1, mut out1) = join(&mut actor, "n1", "a");
    actor.cleanup_round(actor.clock.now());
    assert!(removals(&mut out1).is_empty(), "not repeated");
    let (_n2, mut out2) = join(&mut actor, "n2", "b");
    let sent = removals(&mut out2);
    assert_eq!(sent, [RemoveJob { job: JobId(1), containers: vec![ContainerId(12)], job_dir: true }]);
}

#[test]
fn nodes_sharing_a_directory_remove_the_job_directory_once() {
    let dir = tempfile::tempdir().unwrap();
    stored_job(dir.path(), false);
    let mut actor = actor_on(dir.path());
    let (_n1, mut out1) = join(&mut actor, "n1", "nfs");
    let (_n2, mut out2) = join(&mut actor, "n2", "nfs");
    actor.cleanup_round(actor.clock.now());
    let (first, second) = (removals(&mut out1), removals(&mut out2));
    assert_eq!(first.len(), 1);
    assert_eq!(second.len(), 1);
    assert!(first[0].job_dir && !second[0].job_dir, "{first:?} {second:?}");
}

#[test]
fn a_cleanup_request_removes_an_ended_job_at_once_for_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    stored_job(dir.path(), false);
    let mut actor = actor_on(dir.path());
    actor.set_cleanup_retain(Duration::from_secs(3600));
    let (_n1, mut out1) = join(&mut actor, "n1", "a");
    actor.cleanup_round(actor.clock.now());
    assert!(removals(&mut out1).is_empty(), "retention has not run out");

    let mut refused = send(&mut actor, user("bob"), Request::Cleanup { jobs: vec![JobId(1)] });
    assert!(matches!(refused.try_recv(), Ok(Response::Error(e)) if e.kind == ErrorKind::NotFound));
    assert!(removals(&mut out1).is_empty());

    let mut done = send(&mut actor, user("alice"), Request::Cleanup { jobs: vec![JobId(1)] });
    let expected = JobCleanup { job: JobId(1), removed_on: vec!["n1".into()], pending_on: vec!["n2".into()] };
    assert_eq!(done.try_recv().unwrap(), Response::CleanedUp(vec![expected]));
    assert_eq!(removals(&mut out1).len(), 1);
}

#[test]
fn a_job_still_running_is_not_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    stored_job(dir.path(), true);
    let mut actor = actor_on(dir.path());
    actor.recover().unwrap();
    let (_n1, mut out1) = join(&mut actor, "n1", "a");
    let mut refused = send(&mut actor, user("alice"), Request::Cleanup { jobs: vec![JobId(1)] });
    let Ok(Response::Error(err)) = refused.try_recv() else { panic!("refused") };
    assert_eq!(err.kind, ErrorKind::BadRequest, "{err:?}");
    assert!(removals(&mut out1).is_empty());
    actor.cleanup_round(actor.clock.now());
    assert!(removals(&mut out1).is_empty());
}

#[test]
fn a_cleanup_naming_no_job_takes_the_callers_ended_jobs_not_yet_removed() {
    let dir = tempfile::tempdir().unwrap();
    stored_job(dir.path(), false);
    let mut actor = actor_on(dir.path());
    actor.set_cleanup_retain(Duration::from_secs(3600));
    let (_n1, mut out1) = join(&mut actor, "n1", "a");
    let mut theirs = send(&mut actor, user("bob"), Request::Cleanup { jobs: vec![] });
    assert_eq!(theirs.try_recv().unwrap(), Response::CleanedUp(vec![]), "bob owns nothing");
    let mut mine = send(&mut actor, user("alice"), Request::Cleanup { jobs: vec![] });
    let Ok(Response::CleanedUp(done)) = mine.try_recv() else { panic!("answered") };
    assert_eq!(done.iter().map(|d| d.job).collect::<Vec<_>>(), [JobId(1)]);
    assert_eq!(removals(&mut out1).len(), 1);
    // Once planned, it is not named again.
    let mut again = send(&mut actor, user("alice"), Request::Cleanup { jobs: vec![] });
    assert_eq!(again.try_recv().unwrap(), Response::CleanedUp(vec![]));
}
