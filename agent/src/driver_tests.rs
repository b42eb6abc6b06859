//! The whole agent (driver, core, processes, session) against a fake master over
//! loopback QUIC: launches run and are reported in order (failures with their stderr),
//! kills kill, and shutdown says `Leaving` before it kills.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use slotmarket_common::container::ContainerState::{self, *};
use slotmarket_common::ids::{AccountId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{AgentToMaster, ContainerReport, DEFAULT_MAX_FRAME, Launch, MasterToAgent};
use slotmarket_common::spec::{SlotKind, TaskVars};
use tokio::sync::oneshot;

use super::run;
use crate::config::AgentConfig;
use crate::containment::ContainmentMode;
use crate::session::BackoffConfig;
use crate::test_support::{FakeMaster, NODE, WAIT};

fn config(dir: &Path, master: &FakeMaster) -> AgentConfig {
    AgentConfig {
        master: master.addr.to_string(),
        server_name: "localhost".into(),
        cert_dir: dir.join("pki"),
        name: NODE.into(),
        map_slots: 2,
        reduce_slots: 1,
        work_dir: dir.join("work"),
        data_dir: dir.join("data"),
        kill_grace: Duration::from_millis(500),
        containment: ContainmentMode::Auto,
        run_as: crate::run_as::RunAs::default(),
        path_prefix: None,
        backoff: BackoffConfig { initial: Duration::from_millis(20), max: Duration::from_millis(100) },
        max_frame: DEFAULT_MAX_FRAME,
        shuffle: None,
    }
}

fn launch(container: u64, slot: SlotKind, command: &str) -> Launch {
    let task = TaskId { job: JobId(3), stage: StageId(0), index: container as u32 };
    Launch {
        container: ContainerId(container),
        task,
        attempt: AttemptId(1),
        slot,
        command: command.into(),
        vars: TaskVars {
            job: JobId(3),
            stage: "map".into(),
            task: task.index,
            tasks: 4,
            attempt: AttemptId(1),
            input: None,
            stage_tasks: BTreeMap::new(),
        },
        account: AccountId("alice".into()),
    }
}

/// The states reported for each container, in the order they arrived.
fn by_container(reports: &[ContainerReport]) -> BTreeMap<u64, Vec<ContainerState>> {
    let mut map: BTreeMap<u64, Vec<ContainerState>> = BTreeMap::new();
    for r in reports {
        map.entry(r.container.0).or_default().push(r.state);
    }
    map
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_run_and_are_reported_kills_kill_and_shutdown_stops_everything() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let agent = tokio::spawn(run(config(dir.path(), &master), async {
        let _ = stop_rx.await;
    }));

    let mut link = master.accept().await;
    link.accept_registration(1, 200).await;

    // Two map tasks (one fails) and a third map task that finds no free slot: refused as
    // Killed, so the master retries it without spending an attempt.
    link.send(MasterToAgent::Launch(vec![
        launch(1, SlotKind::Map, "echo {task} > out"),
        launch(2, SlotKind::Map, "sleep 0.2; echo no such input >&2; exit 3"),
        launch(3, SlotKind::Map, "true"),
    ]))
    .await;
    let reports = link.reports(7).await;
    let states = by_container(&reports);
    assert_eq!(states[&1], [Acquired, Running, Completed]);
    assert_eq!(states[&2], [Acquired, Running, Failed]);
    assert_eq!(states[&3], [Killed]);
    let failed = reports.iter().find(|r| r.container == ContainerId(2) && r.state == Failed).unwrap();
    assert_eq!(failed.exit_code, Some(3));
    assert_eq!(failed.message.as_deref(), Some("stderr: no such input"));
    let out = dir.path().join("work/containers/c1/out");
    assert_eq!(std::fs::read_to_string(out).unwrap(), "1\n");

    // A running task killed by the master is reported Killed with the master's reason.
    link.send(MasterToAgent::Launch(vec![launch(4, SlotKind::Reduce, "sleep 30")])).await;
    assert_eq!(by_container(&link.reports(2).await)[&4], [Acquired, Running]);
    link.send(MasterToAgent::Kill { container: ContainerId(4), reason: "preempted".into() }).await;
    let killed = link.reports(1).await;
    assert_eq!((killed[0].state, killed[0].message.as_deref()), (Killed, Some("preempted")));

    // Shutdown says Leaving first, then kills what still runs, reports it, and ends the
    // control stream.
    link.send(MasterToAgent::Launch(vec![launch(5, SlotKind::Map, "sleep 30")])).await;
    assert_eq!(by_container(&link.reports(2).await)[&5], [Acquired, Running]);
    stop_tx.send(()).unwrap();
    loop {
        match link.next().await {
            AgentToMaster::Heartbeat => {}
            AgentToMaster::Leaving => break,
            other => panic!("expected Leaving before anything else, got {other:?}"),
        }
    }
    let last = link.reports_until_end().await;
    assert_eq!(last.len(), 1);
    assert_eq!((last[0].container, last[0].state), (ContainerId(5), Killed));
    assert_eq!(last[0].message.as_deref(), Some("agent shutting down"));
    tokio::time::timeout(WAIT, agent).await.expect("the agent did not stop").unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_keep_running_across_a_reconnect_and_are_re_registered() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let (_stop_tx, stop_rx) = oneshot::channel::<()>();
    let agent = tokio::spawn(run(config(dir.path(), &master), async {
        let _ = stop_rx.await;
    }));
    let mut link = master.accept().await;
    link.accept_registration(1, 200).await;
    link.send(MasterToAgent::Launch(vec![launch(1, SlotKind::Map, "sleep 1")])).await;
    assert_eq!(by_container(&link.reports(2).await)[&1], [Acquired, Running]);

    link.cut();
    let mut link = master.accept().await;
    let live: Vec<_> = link.register.live_containers.iter().map(|r| (r.container.0, r.state)).collect();
    assert_eq!(live, [(1, Running)]);
    link.accept_registration(2, 200).await;
    // The task finished on its own, connected or not; its end is reported exactly once.
    let done = link.reports(1).await;
    assert_eq!((done[0].container, done[0].state), (ContainerId(1), Completed));
    agent.abort();
    // An aborted agent does not release its cgroup; its one task is over, so it is empty.
    crate::containment::remove_agent_cgroup(NODE, &dir.path().join("work"));
}
