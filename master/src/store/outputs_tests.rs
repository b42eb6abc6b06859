//! Where completed tasks' outputs are survives a master restart: the store's container
//! rows name the node of each completion, recovery rebuilds it, and a lost output
//! (`Persist::OutputsLost`) stays lost.

use std::net::SocketAddr;

use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::{AgentId, JobId, StageId};
use slotmarket_common::protocol::DataMode;
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::Store;
use super::test_fixtures::{Admission, map_report, on_node};
use crate::core::{Command, Core, CoreConfig, Event, Persist};

const SPEC: &str = "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 3\nslot = \"map\"\ncommand = \"true\"\n\
     [[stage]]\nname = \"reduce\"\ntasks = 1\nslot = \"reduce\"\ncommand = \"true\"\nafter = [\"map\"]\n";

fn completed_map(container: u64, index: u32, node: &str) -> [Persist; 2] {
    let report = |state, at| on_node(node, map_report(1, container, index, state, at));
    [report(ContainerState::Running, 110), report(ContainerState::Completed, 120)]
}

/// A store holding job j1 whose three maps completed on n1, n2 and n1, plus `more`.
fn store_with_completed_maps(dir: &std::path::Path, more: &[Persist]) -> Store {
    let mut store = Store::open(dir).unwrap();
    let admitted = Admission { spec: JobSpec::from_toml(SPEC).unwrap(), ..Admission::of(1) }.persist();
    let mut ops = vec![admitted];
    ops.extend(completed_map(1, 0, "n1"));
    ops.extend(completed_map(2, 1, "n2"));
    ops.extend(completed_map(3, 2, "n1"));
    ops.extend_from_slice(more);
    store.apply(&ops).unwrap();
    store
}

/// When the master restarts in these tests.
const RESTART: Timestamp = Timestamp(1_000);

/// A core recovered from `store` at [`RESTART`].
fn recover(store: &Store) -> Core {
    let mut core = Core::new(CoreConfig::default());
    let _ = core.handle(RESTART, Event::StoreRecovered(store.recover_store().unwrap()));
    for job in store.recover().unwrap() {
        let _ = core.handle(RESTART, Event::JobRecovered(job));
    }
    core
}

/// Registers node `n` (`n1`, `n2`: agent `n`) in local mode with two map slots, a
/// reduce slot on n2 only, and the data directory `dir_id`.
fn join(core: &mut Core, n: u32, dir_id: &str) -> Vec<Command> {
    let shuffle: SocketAddr = format!("127.0.0.1:{}", 7000 + n).parse().unwrap();
    let event = Event::AgentJoined {
        agent: AgentId(n),
        node: format!("n{n}"),
        map_slots: 2,
        reduce_slots: n - 1,
        live_containers: vec![],
        data_mode: DataMode::Local { shuffle },
        data_dir_id: dir_id.into(),
    };
    core.handle(RESTART, event)
}

/// The agents launches went to, as (agent, stage index).
fn launched(commands: &[Command]) -> Vec<(AgentId, u32)> {
    let launch = |c: &Command| match c {
        Command::Launch { agent, launch } => Some((*agent, launch.task.stage.0)),
        _ => None,
    };
    commands.iter().filter_map(launch).collect()
}

/// A core recovered from `store` with n1 and n2 registered again in local mode with
/// their directories; returns it with the agent the reduce went to, if one was launched.
fn recovered_core(store: &Store) -> (Core, Option<AgentId>) {
    let mut core = recover(store);
    let mut commands = join(&mut core, 1, "disk-n1");
    commands.extend(join(&mut core, 2, "disk-n2"));
    let reduce_on = launched(&commands).into_iter().find(|&(_, stage)| stage == 1).map(|(a, _)| a);
    (core, reduce_on)
}

/// Both nodes were registered in local mode before the restart.
fn local_nodes() -> [Persist; 2] {
    let local = |n: u32| Persist::LocalNode { node: format!("n{n}"), dir_id: Some(format!("disk-n{n}")) };
    [local(1), local(2)]
}

/// The nodes whose outputs the commands say were lost, with the tasks.
fn lost(commands: &[Command]) -> Vec<(String, Vec<u32>)> {
    let lost = |c: &Command| match c {
        Command::Persist(Persist::OutputsLost { node, tasks, .. }) => Some((node.to_string(), tasks.clone())),
        _ => None,
    };
    commands.iter().filter_map(lost).collect()
}

#[test]
fn a_local_holder_that_does_not_return_after_a_restart_has_its_maps_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_completed_maps(dir.path(), &local_nodes());
    let mut core = recover(&store);
    assert_eq!(launched(&join(&mut core, 2, "disk-n2")), vec![(AgentId(2), 1)], "the reduce runs on n2");
    // n1 is awaited until the agent timeout; then its maps 0 and 2 run again on n2 and
    // the reduce is killed to wait for them.
    let due = after_the_timeout(&mut core);
    assert_eq!(core.next_wakeup(), Some(due), "n1 is awaited until then");
    let commands = core.tick(due);
    assert_eq!(lost(&commands), vec![("n1".to_string(), vec![0, 2])]);
    assert_eq!(launched(&commands), vec![(AgentId(2), 0), (AgentId(2), 0)]);
    assert!(commands.iter().any(|c| matches!(c, Command::Kill { agent: AgentId(2), .. })), "{commands:#?}");
}

#[test]
fn a_local_holder_back_with_another_directory_after_a_restart_has_its_maps_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_completed_maps(dir.path(), &local_nodes());
    let mut core = recover(&store);
    let commands = join(&mut core, 1, "disk-n1-wiped");
    assert_eq!(lost(&commands), vec![("n1".to_string(), vec![0, 2])]);
    assert_eq!(launched(&commands), vec![(AgentId(1), 0), (AgentId(1), 0)]);
    let stored = Persist::LocalNode { node: "n1".into(), dir_id: Some("disk-n1-wiped".into()) };
    assert!(commands.contains(&Command::Persist(stored)), "{commands:#?}");
    // n2 comes back as it was: nothing more is lost.
    assert!(lost(&join(&mut core, 2, "disk-n2")).is_empty());
}

#[test]
fn a_shared_mode_node_that_does_not_return_after_a_restart_keeps_its_outputs() {
    let dir = tempfile::tempdir().unwrap();
    // No LocalNode records: both nodes were in shared mode.
    let store = store_with_completed_maps(dir.path(), &[]);
    let mut core = recover(&store);
    let _ = join(&mut core, 2, "disk-n2");
    let due = after_the_timeout(&mut core);
    assert!(core.next_wakeup() > Some(due), "no holder is awaited");
    let commands = core.tick(due);
    assert!(lost(&commands).is_empty() && launched(&commands).is_empty(), "{commands:#?}");
}

/// The first instant after the agent timeout counted from [`RESTART`]; n2 sent a
/// heartbeat just before, so only a node that never returned is due then.
fn after_the_timeout(core: &mut Core) -> Timestamp {
    let due = RESTART + CoreConfig::default().agent_timeout + std::time::Duration::from_millis(1);
    let _ = core.handle(Timestamp(due.0 - 1_000), Event::AgentHeartbeat { agent: AgentId(2) });
    due
}

#[test]
fn the_store_keeps_which_nodes_are_local() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.apply(&local_nodes()).unwrap();
    store.apply(&[Persist::LocalNode { node: "n1".into(), dir_id: None }]).unwrap();
    store.apply(&[Persist::LocalNode { node: "n2".into(), dir_id: Some("disk-new".into()) }]).unwrap();
    let recovered = Store::open(dir.path()).unwrap().recover_store().unwrap();
    assert_eq!(recovered.local_nodes, vec![("n2".to_string(), "disk-new".to_string())]);
}

#[test]
fn a_restarted_master_locates_each_completed_map_on_the_node_that_ran_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_completed_maps(dir.path(), &[]);
    let (core, reduce_on) = recovered_core(&store);
    let reduce_on = reduce_on.expect("the maps stayed completed, so the reduce runs");
    let outputs = core.view().stage_outputs(reduce_on, JobId(1), "map").expect("answered");
    let nodes: Vec<&str> = outputs.holders.iter().map(|h| h.node.as_str()).collect();
    assert_eq!(nodes, vec!["n1", "n2"]);
    assert_eq!(outputs.holders[1].shuffle, "127.0.0.1:7002".parse().unwrap());
    assert_eq!(outputs.task_holder, vec![Some(0), Some(1), Some(0)]);
}

#[test]
fn outputs_lost_before_a_restart_run_again_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let lost = Persist::OutputsLost {
        job: JobId(1),
        stage: StageId(0),
        stage_name: "map".into(),
        tasks: vec![0, 2],
        node: "n1".into(),
        at: Timestamp(200),
    };
    let store = store_with_completed_maps(dir.path(), &[lost]);
    let (core, reduce_on) = recovered_core(&store);
    assert_eq!(reduce_on, None, "the reduce waits for the maps run again");
    let admin = Identity { role: Role::Admin, principal: "root".into() };
    let status = core.view().job_status(JobId(1), &admin).unwrap();
    assert_eq!((status.stages[0].completed, status.stages[0].running), (1, 2));
    assert_eq!(status.stages[0].failed_attempts, 0, "a lost output is no failed attempt");
    let rows = store.latest_attempts(JobId(1)).unwrap();
    let lost_row = &rows[&(0, 0)];
    assert_eq!(lost_row.state, ContainerState::Killed);
    assert_eq!(lost_row.message.as_deref(), Some("its output was lost with node n1; the task runs again"));
}
