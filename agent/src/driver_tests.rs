//! The whole agent (driver, core, processes, session) against a fake master over
//! loopback QUIC: launches run and are reported in order (failures with their stderr),
//! kills kill, and shutdown says `Leaving` before it kills.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use slotmarket_common::container::ContainerState::{self, *};
use slotmarket_common::ids::{AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{AgentToMaster, ContainerReport, DEFAULT_MAX_FRAME, Launch, MasterToAgent};
use slotmarket_common::spec::{SlotKind, TaskVars};
use tokio::sync::oneshot;

use super::{run, run_on_worker};
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
        adopt_orphans: false,
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
            stage_tasks: BTreeMap::new().into(),
        },
        account: "alice".into(),
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

/// As `main` runs it: the driver's loop is a task of the runtime's workers (the shutdown
/// future it polls sees a task id and a thread other than the one blocking on the agent),
/// and a launch is reported in order as before.
#[test]
fn run_on_worker_drives_the_agent_as_a_runtime_task_and_reports_in_order() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let blocking_thread = std::thread::current().id();
    let (polled_tx, polled_rx) = std::sync::mpsc::channel();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let master = FakeMaster::start(dir.path());
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = polled_tx.send((tokio::task::try_id().is_some(), std::thread::current().id()));
            let _ = stop_rx.await;
        };
        let agent = run_on_worker(config(dir.path(), &master), shutdown);
        let master_side = async {
            let mut link = master.accept().await;
            link.accept_registration(1, 200).await;
            link.send(MasterToAgent::Launch(vec![launch(1, SlotKind::Map, "true")])).await;
            assert_eq!(by_container(&link.reports(3).await)[&1], [Acquired, Running, Completed]);
            stop_tx.send(()).unwrap();
        };
        let (stopped, ()) = tokio::time::timeout(WAIT, async { tokio::join!(agent, master_side) })
            .await
            .expect("the agent did not stop");
        stopped.unwrap();
    });
    let (in_a_task, thread) = polled_rx.try_recv().expect("the driver never polled its shutdown");
    assert!(in_a_task, "the driver ran outside any runtime task");
    assert_ne!(thread, blocking_thread, "the driver ran on the thread blocking on it");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_agent_on_the_same_work_dir_is_refused_and_kills_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let first = tokio::spawn(run(config(dir.path(), &master), async {
        let _ = stop_rx.await;
    }));
    let mut link = master.accept().await;
    link.accept_registration(1, 200).await;
    link.send(MasterToAgent::Launch(vec![launch(1, SlotKind::Map, "sleep 1")])).await;
    assert_eq!(by_container(&link.reports(2).await)[&1], [Acquired, Running]);

    // A double start (the same name and work directory) stops before it touches anything.
    let second = tokio::time::timeout(WAIT, run(config(dir.path(), &master), std::future::pending()))
        .await
        .expect("the second agent gives up at once");
    let err = second.unwrap_err().to_string();
    assert!(err.starts_with("another agent is using ") && err.contains("agent.lock"), "{err}");
    // The first agent's task was not taken for a leftover: it runs to its end.
    let done = link.reports(1).await;
    assert_eq!((done[0].container, done[0].state), (ContainerId(1), Completed));
    stop_tx.send(()).unwrap();
    tokio::time::timeout(WAIT, first).await.expect("the first agent stops").unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_mode_agent_registers_its_shuffle_address_and_fetches_for_its_tasks() {
    use slotmarket_common::protocol::{
        DataMode, FetchPart, InputHolder, LocalFetch, LocalFetchReply, Locate, Located, StageOutputs,
    };

    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    // Another agent, holding map 0's output for reducer 1 of job 3.
    let other_tls = slotmarket_common::pki::issue(
        &dir.path().join("pki"),
        slotmarket_common::identity::Role::Agent,
        "node2",
    )
    .unwrap();
    let other_data = dir.path().join("node2-data");
    std::fs::create_dir_all(other_data.join("jobs/j3/map-0")).unwrap();
    std::fs::write(other_data.join("jobs/j3/map-0/part-1"), "apple\t3\n").unwrap();
    let other = crate::shuffle::server::bind("127.0.0.1:0".parse().unwrap(), &other_tls).unwrap();
    let other_addr = other.local_addr().unwrap();
    tokio::spawn(crate::shuffle::server::serve(other, other_data, 2));

    let mut config = config(dir.path(), &master);
    config.shuffle = Some(crate::config::ShuffleConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        max_fetches: 2,
    });
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let agent = tokio::spawn(run(config, async {
        let _ = stop_rx.await;
    }));
    let mut link = master.accept().await;
    let DataMode::Local { shuffle } = link.register.data_mode else {
        panic!("a local-mode agent registered {:?}", link.register.data_mode)
    };
    assert!(shuffle.ip().is_loopback() && shuffle.port() != 0, "the bound address: {shuffle}");
    link.accept_registration(1, 60_000).await;

    // The task sees the socket and its token; it stays alive while the test fetches for it.
    let command = "echo \"$SLOTMARKET_FETCH_SOCKET $SLOTMARKET_FETCH_TOKEN\" > env; sleep 30";
    link.send(MasterToAgent::Launch(vec![launch(1, SlotKind::Reduce, command)])).await;
    assert_eq!(by_container(&link.reports(2).await)[&1], [Acquired, Running]);
    let env_file = dir.path().join("work/containers/c1/env");
    let deadline = tokio::time::Instant::now() + WAIT;
    while std::fs::read_to_string(&env_file).map_or(true, |s| !s.ends_with('\n')) {
        assert!(tokio::time::Instant::now() < deadline, "the task wrote no env");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let env = std::fs::read_to_string(&env_file).unwrap();
    let (socket, token) = env.trim_end().split_once(' ').unwrap();
    assert_eq!(Path::new(socket), dir.path().join("work/fetch.sock"));
    assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");

    let part = FetchPart { stage: "map".into(), task: 0, path: "map-0/part-1".into() };
    let request = LocalFetch { token: token.into(), parts: vec![part] };
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    crate::shuffle::fetch::write_unix_frame(&mut stream, &request).await.unwrap();
    // The agent asks the master where map's outputs are, on its control stream.
    let AgentToMaster::Locate(Locate { request, job, stage }) = link.next().await else {
        panic!("expected Locate")
    };
    assert_eq!((job, stage.as_str()), (JobId(3), "map"));
    let holders = vec![InputHolder { node: "node2".into(), shuffle: other_addr }];
    let outputs = StageOutputs { holders, task_holder: vec![Some(0)] };
    link.send(MasterToAgent::Located(Located { request, outcome: Ok(outputs) })).await;
    let reply: LocalFetchReply =
        tokio::time::timeout(WAIT, crate::shuffle::fetch::read_unix_frame(&mut stream))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(reply, LocalFetchReply::Fetched { bytes: 8 });
    let fetched = dir.path().join("data/jobs/j3/map-0/part-1");
    assert_eq!(std::fs::read_to_string(fetched).unwrap(), "apple\t3\n");
    stop_tx.send(()).unwrap();
    while link.next().await != AgentToMaster::Leaving {}
    link.reports_until_end().await;
    tokio::time::timeout(WAIT, agent).await.expect("the agent did not stop").unwrap().unwrap();
}
