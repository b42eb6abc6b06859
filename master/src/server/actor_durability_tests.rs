//! The store's durability rule seen from the actor: commits do not wait for the disk, so
//! a power cut may lose a suffix of them, e.g. the agent's `Acquired` and `Running`
//! reports. The master then restarts with the container still `Allocated`, and the
//! agent's registration (which re-reports its live containers) must move it on without
//! running the task again.

use std::path::Path;

use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::Role;
use slotmarket_common::ids::AttemptId;
use slotmarket_common::spec::JobSpec;

use super::test_support::{register_node, report_input};
use super::*;
use crate::core::CoreConfig;
use crate::server::DEFAULT_HEARTBEAT_INTERVAL;
use crate::server::launches::launch_budget;
use slotmarket_common::protocol::DEFAULT_MAX_FRAME;

const SPEC: &str =
    "name = \"one\"\n[[stage]]\nname = \"map\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"\n";

fn actor_on(dir: &Path) -> Actor {
    let store = Store::open(dir).unwrap();
    let core = Core::new(CoreConfig::default());
    Actor::new(core, store, DEFAULT_HEARTBEAT_INTERVAL, launch_budget(DEFAULT_MAX_FRAME)).unwrap()
}

fn alice() -> Identity {
    Identity { role: Role::User, principal: "alice".into() }
}

/// Registers node `n1` (one map slot) reporting `live`; returns its id and queue, past
/// the `Registered` answer.
fn register(
    actor: &mut Actor,
    live: Vec<ContainerReport>,
) -> (AgentId, mpsc::UnboundedReceiver<MasterToAgent>) {
    let (agent, mut outbound_rx) = register_node(actor, 1, live);
    assert!(matches!(outbound_rx.try_recv(), Ok(MasterToAgent::Registered { .. })));
    (agent, outbound_rx)
}

fn reported(actor: &mut Actor, agent: AgentId, launch: &Launch, state: ContainerState) {
    let commands = actor.on_input(report_input(actor, agent, launch, state));
    actor.execute_settled(commands).unwrap();
}

#[test]
fn a_lost_running_commit_is_restored_by_the_agents_registration() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = actor_on(dir.path());
    first.recover().unwrap();
    let (_, mut outbound) = register(&mut first, Vec::new());
    let (reply, mut reply_rx) = oneshot::channel();
    let request = Request::Submit { spec: JobSpec::from_toml(SPEC).unwrap() };
    let commands = first.on_input(Input::Request { caller: alice(), request, reply });
    first.execute_settled(commands).unwrap();
    let Ok(Response::Submitted { job }) = reply_rx.try_recv() else { panic!("not submitted") };
    let Ok(MasterToAgent::Launch(launches)) = outbound.try_recv() else { panic!("no launch") };
    let launch = launches[0].clone();
    // The agent's Acquired and Running reports were committed without an fsync and a
    // power cut took them: the store still says Allocated. The master process is gone.
    std::mem::forget(first);

    let mut second = actor_on(dir.path());
    assert_eq!(second.recover().unwrap(), 1);
    let running = ContainerReport {
        container: launch.container,
        task: launch.task,
        attempt: launch.attempt,
        state: ContainerState::Running,
        at: second.clock.now(),
        exit_code: None,
        message: None,
    };
    let (agent, mut outbound) = register(&mut second, vec![running]);
    assert!(outbound.try_recv().is_err(), "the running task is adopted, not launched again");
    assert_eq!(second.core.view().job_state(job), Some(JobState::Running));
    assert_eq!(second.store.job_state(job).unwrap(), Some(JobState::Running), "and stored");

    reported(&mut second, agent, &launch, ContainerState::Completed);
    assert_eq!(second.core.view().job_state(job), Some(JobState::Completed));
    let status = second.core.view().job_status(job, &alice()).unwrap();
    assert_eq!((status.stages[0].completed, status.stages[0].failed_attempts), (1, 0), "{status:?}");
    assert_eq!(launch.attempt, AttemptId(1));
    drop(second);
    assert_eq!(Store::open(dir.path()).unwrap().job_state(job).unwrap(), Some(JobState::Completed));
}
