//! Where completed tasks' outputs are survives a master restart: the store's container
//! rows name the node of each completion, recovery rebuilds it, and a lost output
//! (`Persist::OutputsLost`) stays lost.

use std::net::SocketAddr;

use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::{AccountId, AgentId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{ContainerReport, DataMode};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::Store;
use crate::core::{Command, Core, CoreConfig, Event, Persist};

const SPEC: &str = "name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = 3\nslot = \"map\"\ncommand = \"true\"\n\
     [[stage]]\nname = \"reduce\"\ntasks = 1\nslot = \"reduce\"\ncommand = \"true\"\nafter = [\"map\"]\n";

fn completed_map(container: u64, index: u32, node: &str) -> [Persist; 2] {
    let report = |state, at| ContainerReport {
        container: ContainerId(container),
        task: TaskId { job: JobId(1), stage: StageId(0), index },
        attempt: AttemptId(1),
        state,
        at: Timestamp(at),
        exit_code: (state == ContainerState::Completed).then_some(0),
        message: None,
    };
    [
        Persist::Container { node: node.into(), report: report(ContainerState::Running, 110) },
        Persist::Container { node: node.into(), report: report(ContainerState::Completed, 120) },
    ]
}

/// A store holding job j1 whose three maps completed on n1, n2 and n1, plus `more`.
fn store_with_completed_maps(dir: &std::path::Path, more: &[Persist]) -> Store {
    let mut store = Store::open(dir).unwrap();
    let admitted = Persist::JobAdmitted {
        job: JobId(1),
        account: AccountId("alice".into()),
        owner: AccountId("alice".into()),
        spec: JobSpec::from_toml(SPEC).unwrap(),
        submitted: Timestamp(100),
        deadline: None,
    };
    let mut ops = vec![admitted];
    ops.extend(completed_map(1, 0, "n1"));
    ops.extend(completed_map(2, 1, "n2"));
    ops.extend(completed_map(3, 2, "n1"));
    ops.extend_from_slice(more);
    store.apply(&ops).unwrap();
    store
}

/// A core recovered from `store` at time 1000 with n1 and n2 registered again in local
/// mode (only n2 offers a reduce slot); returns it with the agent the reduce went to, if
/// one was launched.
fn recovered_core(store: &Store) -> (Core, Option<AgentId>) {
    let mut core = Core::new(CoreConfig::default());
    let now = Timestamp(1_000);
    let _ = core.handle(now, Event::StoreRecovered(store.recover_store().unwrap()));
    for job in store.recover().unwrap() {
        let _ = core.handle(now, Event::JobRecovered(job));
    }
    let mut reduce_on = None;
    for (n, node) in ["n1", "n2"].into_iter().enumerate() {
        let shuffle: SocketAddr = format!("127.0.0.1:{}", 7001 + n).parse().unwrap();
        let event = Event::AgentJoined {
            agent: AgentId(n as u32 + 1),
            node: node.into(),
            map_slots: 2,
            reduce_slots: n as u32,
            live_containers: vec![],
            data_mode: DataMode::Local { shuffle },
            data_dir_id: format!("disk-{node}"),
        };
        for command in core.handle(now, event) {
            if let Command::Launch { agent, launch } = command {
                if launch.task.stage == StageId(1) {
                    reduce_on = Some(agent);
                }
            }
        }
    }
    (core, reduce_on)
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
    let rows = store.latest_attempts(JobId(1)).unwrap();
    let lost_row = &rows[&(0, 0)];
    assert_eq!(lost_row.state, ContainerState::Killed);
    assert_eq!(lost_row.message.as_deref(), Some("its output was lost with node n1; the task runs again"));
}
