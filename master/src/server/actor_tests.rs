//! Tests of the actor: recovery on its clock, registration, launches that cannot be
//! sent, and watchers that never read.

use std::path::Path;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AttemptId, StageId, TaskId};
use slotmarket_common::protocol::{JobState, Located, LogQuery, MAX_LOG_CHUNK, StageOutputs};
use slotmarket_common::spec::JobSpec;

use super::test_support::register_node;
use super::*;
use crate::core::CoreConfig;
use crate::server::DEFAULT_HEARTBEAT_INTERVAL;
use crate::server::launches::launch_budget;
use slotmarket_common::protocol::DEFAULT_MAX_FRAME;

const SPEC: &str =
    "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"\n";

fn actor_on(dir: &Path, heartbeat_interval: Duration) -> Actor {
    let store = Store::open(dir).unwrap();
    Actor::new(Core::new(CoreConfig::default()), store, heartbeat_interval, launch_budget(DEFAULT_MAX_FRAME))
        .unwrap()
}

#[test]
fn stored_jobs_are_replayed_at_the_actors_clock() {
    let dir = tempfile::tempdir().unwrap();
    let running = ContainerReport {
        container: ContainerId(1),
        task: TaskId { job: JobId(4), stage: StageId(0), index: 0 },
        attempt: AttemptId(1),
        state: ContainerState::Running,
        at: Timestamp(110),
        exit_code: None,
        message: None,
    };
    Store::open(dir.path())
        .unwrap()
        .apply(&[
            Persist::JobAdmitted {
                job: JobId(4),
                account: AccountId("alice".into()),
                owner: AccountId("alice".into()),
                spec: JobSpec::from_toml(SPEC).unwrap().into(),
                submitted: Timestamp(100),
                deadline: None,
            },
            Persist::Container { node: "n1".into(), report: running },
        ])
        .unwrap();

    let mut actor = actor_on(dir.path(), DEFAULT_HEARTBEAT_INTERVAL);
    let before = Timestamp::from(SystemTime::now());
    assert_eq!(actor.recover().unwrap(), 1);
    let after = actor.clock.now();
    assert_eq!(actor.core.view().job_state(JobId(4)), Some(JobState::Pending));
    // The running container waits for its node until the agent timeout, counted from
    // the moment of recovery on the actor's (wall-clock based) time.
    let timeout = CoreConfig::default().agent_timeout;
    let wakeup = actor.core.next_wakeup().expect("the orphan has a deadline");
    assert!(before + timeout <= wakeup && wakeup <= after + timeout + Duration::from_millis(1), "{wakeup}");
}

#[test]
fn an_unsendable_launch_fails_its_attempt_instead_of_reaching_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let core = Core::new(CoreConfig::default());
    let mut actor = Actor::new(core, store, DEFAULT_HEARTBEAT_INTERVAL, 200).unwrap();
    let (outbound, mut outbound_rx) = mpsc::unbounded_channel();
    let (assigned, _assigned_rx) = oneshot::channel();
    let join = Input::AgentRegistered {
        node: "n1".into(),
        map_slots: 1,
        reduce_slots: 0,
        live_containers: Vec::new(),
        outbound,
        assigned,
        data_mode: DataMode::Shared,
        data_dir_id: String::new(),
    };
    let commands = actor.on_input(join);
    actor.execute_settled(commands).unwrap();
    assert!(matches!(outbound_rx.try_recv(), Ok(MasterToAgent::Registered { .. })));

    let input = "i".repeat(400);
    let spec = format!("input = \"{input}\"\nmax_attempts = 2\n{SPEC}");
    let spec = JobSpec::from_toml(&spec).unwrap();
    let caller = Identity { role: slotmarket_common::identity::Role::User, principal: "alice".into() };
    let (reply, mut reply_rx) = oneshot::channel();
    let commands = actor.on_input(Input::Request { caller, request: Request::Submit { spec }, reply });
    actor.execute_settled(commands).unwrap();
    let Ok(Response::Submitted { job }) = reply_rx.try_recv() else { panic!("not submitted") };

    // Nothing that would break the connection was sent; both attempts failed.
    assert!(outbound_rx.try_recv().is_err());
    assert_eq!(actor.core.view().job_state(job), Some(JobState::Failed));
    let owner = Identity { role: slotmarket_common::identity::Role::User, principal: "alice".into() };
    let status = actor.core.view().job_status(job, &owner).unwrap();
    let message = status.message.unwrap_or_default();
    assert!(message.contains("failed 2 of 2 attempts"), "{message}");
    assert!(message.contains("the launch message is"), "{message}");
    assert_eq!(actor.core.view().nodes()[0].map_used, 0, "the slot is free again");
}

fn alice() -> Identity {
    Identity { role: slotmarket_common::identity::Role::User, principal: "alice".into() }
}

fn submit(actor: &mut Actor, spec: &str) -> Response {
    let spec = JobSpec::from_toml(spec).unwrap();
    let (reply, mut reply_rx) = oneshot::channel();
    let commands =
        actor.on_input(Input::Request { caller: alice(), request: Request::Submit { spec }, reply });
    actor.execute_settled(commands).unwrap();
    reply_rx.try_recv().unwrap()
}

#[test]
fn a_watcher_that_never_reads_holds_only_the_latest_update() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path(), DEFAULT_HEARTBEAT_INTERVAL);
    let (agent, mut outbound) = register_node(&mut actor, 1, Vec::new());
    assert!(matches!(outbound.try_recv(), Ok(MasterToAgent::Registered { .. })));
    let many = SPEC.replace("tasks = 1", "tasks = 100");
    let Response::Submitted { job } = submit(&mut actor, &many) else { panic!("not submitted") };
    let (updates, mut reader) = watch::channel(None);
    let commands = actor.on_input(Input::Watch { caller: alice(), job, updates });
    actor.execute_settled(commands).unwrap();

    // 99 tasks run one after another: about 300 changes the reader never takes.
    for _ in 0..99 {
        let Ok(MasterToAgent::Launch(launches)) = outbound.try_recv() else { panic!("no launch") };
        let Launch { container, task, .. } = launches[0];
        for state in [ContainerState::Acquired, ContainerState::Running, ContainerState::Completed] {
            let report = ContainerReport {
                container,
                task,
                attempt: AttemptId(1),
                state,
                at: actor.clock.now(),
                exit_code: (state == ContainerState::Completed).then_some(0),
                message: None,
            };
            let commands =
                actor.on_input(Input::Agent(Event::ContainerReports { agent, reports: vec![report] }));
            actor.execute_settled(commands).unwrap();
        }
    }
    assert!(reader.has_changed().unwrap(), "an update is waiting");
    let Some(Response::Job(status)) = reader.borrow_and_update().clone() else { panic!("no status") };
    assert_eq!(status.stages[0].completed, 99, "the waiting update is the latest state");
    assert!(!reader.has_changed().unwrap(), "and it is the only one");
    assert_eq!(actor.watchers[&job].len(), 1);
}

#[test]
fn agents_are_told_the_servers_heartbeat_interval() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path(), Duration::from_millis(250));
    let (outbound, mut outbound_rx) = mpsc::unbounded_channel();
    let (assigned, mut assigned_rx) = oneshot::channel();
    let input = Input::AgentRegistered {
        node: "n1".into(),
        map_slots: 1,
        reduce_slots: 0,
        live_containers: Vec::new(),
        outbound,
        assigned,
        data_mode: DataMode::Shared,
        data_dir_id: String::new(),
    };
    let commands = actor.on_input(input);
    assert!(commands.is_empty(), "{commands:?}");
    let agent = assigned_rx.try_recv().unwrap();
    let registered = MasterToAgent::Registered { agent, heartbeat_interval_ms: 250 };
    assert_eq!(outbound_rx.try_recv().unwrap(), registered);
}

/// Sends `request` as `caller`; returns the answer's receiver (log reads answer later).
fn send(actor: &mut Actor, caller: Identity, request: Request) -> oneshot::Receiver<Response> {
    let (reply, reply_rx) = oneshot::channel();
    let commands = actor.on_input(Input::Request { caller, request, reply });
    actor.execute_settled(commands).unwrap();
    reply_rx
}

fn log_query(job: JobId) -> LogQuery {
    LogQuery { job, stage: None, task: None, stderr: true, offset: 3, max: u32::MAX }
}

#[test]
fn a_log_read_goes_to_the_agent_that_ran_the_task_and_only_its_answer_counts() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path(), DEFAULT_HEARTBEAT_INTERVAL);
    let (agent, mut outbound) = register_node(&mut actor, 1, Vec::new());
    let Response::Submitted { job, .. } = submit(&mut actor, SPEC) else { panic!("not admitted") };
    while let Ok(message) = outbound.try_recv() {
        assert!(!matches!(message, MasterToAgent::ReadLog(_)), "no read yet");
    }

    // Another user is told the job does not exist, and no agent is asked.
    let bob = Identity { role: slotmarket_common::identity::Role::User, principal: "bob".into() };
    let mut refused = send(&mut actor, bob, Request::Logs(log_query(job)));
    let Ok(Response::Error(err)) = refused.try_recv() else { panic!("bob is answered at once") };
    assert_eq!(err.message, format!("no job {job}"));
    assert!(outbound.try_recv().is_err());

    let mut answer = send(&mut actor, alice(), Request::Logs(log_query(job)));
    let Ok(MasterToAgent::ReadLog(read)) = outbound.try_recv() else { panic!("the agent is asked") };
    assert_eq!((read.stderr, read.offset, read.max), (true, 3, MAX_LOG_CHUNK), "capped: {read:?}");
    // An answer from another agent is ignored; the asked agent's is relayed.
    let forged = LogReadReply { request: read.request, result: Ok(b"forged".to_vec()) };
    actor.on_input(Input::LogRead { agent: AgentId(99), answer: forged });
    assert!(answer.try_recv().is_err(), "not answered by a stranger");
    let real = LogReadReply { request: read.request, result: Ok(b"log".to_vec()) };
    actor.on_input(Input::LogRead { agent, answer: real });
    let Ok(Response::Log(chunk)) = answer.try_recv() else { panic!("answered") };
    assert_eq!(
        (chunk.container, chunk.data, chunk.next_offset, chunk.ended),
        (read.container, b"log".to_vec(), 6, false)
    );

    // A read whose agent disconnects fails instead of waiting forever.
    let mut lost = send(&mut actor, alice(), Request::Logs(log_query(job)));
    assert!(matches!(outbound.try_recv(), Ok(MasterToAgent::ReadLog(_))));
    let commands = actor.on_input(Input::Agent(Event::AgentDisconnected { agent }));
    actor.execute_settled(commands).unwrap();
    let Ok(Response::Error(err)) = lost.try_recv() else { panic!("failed at once") };
    assert!(err.message.contains("disconnected"), "{err:?}");
}

#[test]
fn a_locate_is_answered_to_the_asking_agent_at_once_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path(), DEFAULT_HEARTBEAT_INTERVAL);
    let (agent, mut outbound) = register_node(&mut actor, 1, Vec::new());
    let two_maps = SPEC.replace("tasks = 1", "tasks = 2");
    let Response::Submitted { job } = submit(&mut actor, &two_maps) else { panic!("not submitted") };
    while outbound.try_recv().is_ok() {}

    let locate =
        |request, stage: &str| Input::Locate { agent, locate: Locate { request, job, stage: stage.into() } };
    assert!(actor.on_input(locate(7, "map")).is_empty(), "a read decides nothing");
    let Ok(MasterToAgent::Located(located)) = outbound.try_recv() else { panic!("answered at once") };
    // A shared-mode agent holds no outputs another agent would fetch; no task completed.
    let expected = StageOutputs { holders: vec![], task_holder: vec![None, None] };
    assert_eq!(located, Located { request: 7, outcome: Ok(expected) });

    assert!(actor.on_input(locate(8, "reduce")).is_empty());
    let Ok(MasterToAgent::Located(refused)) = outbound.try_recv() else { panic!("answered at once") };
    assert_eq!(refused, Located { request: 8, outcome: Err(format!("job {job} has no stage \"reduce\"")) });
}
