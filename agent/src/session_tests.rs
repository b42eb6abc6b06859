//! Session tests: backoff arithmetic, which queued reports a `Register` supersedes, and
//! the real session against a fake master over loopback QUIC (register with the driver's
//! snapshot, heartbeat, reports, launches, reconnect with re-registration, refusal).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use slotmarket_common::container::ContainerState::{self, *};
use slotmarket_common::ids::{AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{
    AgentToMaster, ContainerReport, DEFAULT_MAX_FRAME, DataMode, InputHolder, Launch, Locate, Located,
    MasterToAgent, PROTOCOL_VERSION, StageOutputs,
};
use slotmarket_common::spec::{SlotKind, TaskVars};
use slotmarket_common::time::Timestamp;
use tokio::sync::{mpsc, oneshot};

use super::{
    Backoff, BackoffConfig, DataDirIdentity, LeavingAck, SessionConfig, SessionLinks, SnapshotReply,
    drop_superseded, run,
};
use crate::core::AgentEvent;
use crate::shuffle::locate::{Locator, SessionLocator};
use crate::test_support::{AgentLink, FakeMaster, NODE, WAIT};

fn report(container: u64, state: ContainerState) -> ContainerReport {
    ContainerReport {
        container: ContainerId(container),
        task: TaskId { job: JobId(1), stage: StageId(0), index: container as u32 },
        attempt: AttemptId(1),
        state,
        at: Timestamp(container * 10),
        exit_code: None,
        message: None,
    }
}

#[test]
fn backoff_doubles_to_the_cap_with_jitter_and_resets() {
    let config = BackoffConfig { initial: Duration::from_millis(200), max: Duration::from_secs(5) };
    let mut backoff = Backoff::new(config, 42);
    let steps = [200, 400, 800, 1600, 3200, 5000, 5000];
    for step in steps {
        let delay = backoff.next_delay();
        let step = Duration::from_millis(step);
        assert!(delay >= step / 2 && delay <= step, "{delay:?} outside [{:?}, {step:?}]", step / 2);
    }
    backoff.reset();
    assert!(backoff.next_delay() <= Duration::from_millis(200));
    backoff.give_up_quick_retries();
    assert!(backoff.next_delay() >= Duration::from_millis(2500));
}

#[test]
fn backoff_jitter_is_deterministic_per_seed_and_differs_between_seeds() {
    let config = BackoffConfig::default();
    let run = |seed| {
        let mut b = Backoff::new(config, seed);
        (0..8).map(|_| b.next_delay()).collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn reports_already_told_by_register_are_dropped_and_the_rest_kept_in_order() {
    let mut queue: VecDeque<_> = [
        report(1, Acquired),
        report(1, Running),
        report(2, Running),
        report(2, Completed),
        report(3, Acquired),
    ]
    .into();
    // c1 is registered as running, c3 in the state its queued report already has, c4 has
    // nothing queued; c2 had finished, so it is not live and its reports all stay.
    let live = [report(1, Running), report(3, Acquired), report(4, Running)];
    drop_superseded(&mut queue, &live);
    let kept: Vec<_> = queue.iter().map(|r| (r.container.0, r.state)).collect();
    assert_eq!(kept, [(2, Running), (2, Completed)]);

    // A report newer than the snapshot stays.
    let mut queue: VecDeque<_> = [report(1, Completed)].into();
    drop_superseded(&mut queue, &[report(1, Running)]);
    assert_eq!(queue.len(), 1);
}

struct Harness {
    events: mpsc::UnboundedReceiver<AgentEvent>,
    reports: Option<mpsc::UnboundedSender<ContainerReport>>,
    /// The session's requests for what `Register` carries; the test plays the driver.
    snapshots: mpsc::Receiver<SnapshotReply>,
    /// Where the test, as the driver, asks the session to say `Leaving`.
    leaving: mpsc::Sender<LeavingAck>,
    /// Asks the master where outputs are, through the session (as the fetch service does).
    locator: SessionLocator,
    session: tokio::task::JoinHandle<()>,
}

impl Harness {
    fn start(master: &FakeMaster) -> Harness {
        Harness::start_with(master, master.addr.to_string())
    }

    fn start_with(master: &FakeMaster, address: String) -> Harness {
        let config = SessionConfig {
            master: address,
            server_name: "localhost".into(),
            tls: master.agent_tls.clone(),
            node: NODE.into(),
            map_slots: 3,
            reduce_slots: 1,
            backoff: BackoffConfig { initial: Duration::from_millis(20), max: Duration::from_millis(100) },
            max_frame: DEFAULT_MAX_FRAME,
            data_dir: DataDirIdentity::default(),
            containers_dir: std::env::temp_dir().join("slotmarket-session-tests-none"),
            data_mode: DataMode::Shared,
        };
        let (events_tx, events) = mpsc::unbounded_channel();
        let (reports_tx, reports_rx) = mpsc::unbounded_channel();
        let (snapshot, snapshots) = mpsc::channel(1);
        let (leaving, leaving_rx) = mpsc::channel(1);
        let (locator, locates) = SessionLocator::new();
        let links =
            SessionLinks { events: events_tx, reports: reports_rx, snapshot, leaving: leaving_rx, locates };
        let session = tokio::spawn(run(config, links));
        Harness { events, reports: Some(reports_tx), snapshots, leaving, locator, session }
    }

    /// The session's next request for a snapshot: it is registering.
    async fn snapshot_request(&mut self) -> SnapshotReply {
        let request = tokio::time::timeout(WAIT, self.snapshots.recv());
        request.await.expect("the session did not ask for a snapshot").unwrap()
    }

    /// Accepts the session's next connection, answering its snapshot request with `live`
    /// (the handshake only completes while the master accepts, and `Register` waits for
    /// the snapshot, so both go on at once).
    async fn connect(&mut self, master: &FakeMaster, live: Vec<ContainerReport>) -> AgentLink {
        let answer = async { self.snapshot_request().await.send(live).unwrap() };
        tokio::join!(master.accept(), answer).0
    }

    async fn event(&mut self) -> AgentEvent {
        tokio::time::timeout(WAIT, self.events.recv()).await.expect("no event from the session").unwrap()
    }

    fn report(&self, report: ContainerReport) {
        self.reports.as_ref().unwrap().send(report).unwrap();
    }
}

fn launch(container: u64) -> Launch {
    Launch {
        container: ContainerId(container),
        task: TaskId { job: JobId(1), stage: StageId(0), index: 0 },
        attempt: AttemptId(1),
        slot: SlotKind::Map,
        command: "true".into(),
        vars: TaskVars {
            job: JobId(1),
            stage: "map".into(),
            task: 0,
            tasks: 1,
            attempt: AttemptId(1),
            input: None,
            stage_tasks: BTreeMap::new().into(),
        },
        account: "alice".into(),
    }
}

#[tokio::test]
async fn the_session_registers_heartbeats_reports_and_relays_the_master() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let mut h = Harness::start(&master);

    let mut link = h.connect(&master, Vec::new()).await;
    assert_eq!(link.register.version, PROTOCOL_VERSION);
    assert_eq!(
        (link.register.node.as_str(), link.register.map_slots, link.register.reduce_slots),
        (NODE, 3, 1)
    );
    assert!(link.register.live_containers.is_empty());
    link.accept_registration(1, 50).await;

    assert_eq!(link.next().await, AgentToMaster::Heartbeat);
    h.report(report(1, Acquired));
    h.report(report(1, Running));
    let got: Vec<_> = link.reports(2).await.iter().map(|r| r.state).collect();
    assert_eq!(got, [Acquired, Running]);

    link.send(MasterToAgent::Launch(vec![launch(2)])).await;
    assert_eq!(h.event().await, AgentEvent::Launch(vec![launch(2)]));
    link.send(MasterToAgent::Kill { container: ContainerId(1), reason: "cancelled".into() }).await;
    assert_eq!(h.event().await, AgentEvent::Kill { container: ContainerId(1), reason: "cancelled".into() });

    // The driver going away ends the session after the last reports are delivered.
    h.report(report(1, Killed));
    drop(h.reports.take());
    let last = link.reports_until_end().await;
    assert_eq!(last.iter().map(|r| r.state).collect::<Vec<_>>(), [Killed]);
    tokio::time::timeout(WAIT, h.session).await.expect("the session did not end").unwrap();
}

#[tokio::test]
async fn after_a_lost_connection_the_session_re_registers_and_flushes_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let mut h = Harness::start(&master);
    let mut link = h.connect(&master, Vec::new()).await;
    link.accept_registration(1, 1000).await;

    link.cut();
    let driver = async {
        // Asking for a snapshot again means the session noticed and is registering anew.
        let snapshot = h.snapshot_request().await;
        // Meanwhile the driver went on: c1 started then finished, c2 started. As the
        // driver does, the reports are queued before the snapshot is answered.
        for r in [report(1, Running), report(1, Completed), report(2, Acquired), report(2, Running)] {
            h.report(r);
        }
        snapshot.send(vec![report(2, Running)]).unwrap();
    };
    let (mut link, ()) = tokio::join!(master.accept(), driver);
    let live: Vec<_> = link.register.live_containers.iter().map(|r| (r.container.0, r.state)).collect();
    assert_eq!(live, [(2, Running)]);
    link.accept_registration(2, 1000).await;
    // c2's reports are superseded by the registration; c1's are not.
    let flushed: Vec<_> = link.reports(2).await.iter().map(|r| (r.container.0, r.state)).collect();
    assert_eq!(flushed, [(1, Running), (1, Completed)]);
}

#[tokio::test]
async fn a_refused_registration_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let mut h = Harness::start(&master);
    let mut link = h.connect(&master, Vec::new()).await;
    link.send(MasterToAgent::Refused { reason: "node1 is already connected".into() }).await;

    let mut link = h.connect(&master, Vec::new()).await;
    link.accept_registration(3, 1000).await;
    h.report(report(5, Acquired));
    assert_eq!(link.reports(1).await[0].container, ContainerId(5));
}

#[tokio::test]
async fn the_session_ends_promptly_when_the_driver_stops_while_the_master_is_away() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    // Point the agent at a UDP port where nobody answers: the handshake just hangs.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut h = Harness::start_with(&master, silent.local_addr().unwrap().to_string());
    h.report(report(1, Completed));
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(h.reports.take());
    tokio::time::timeout(Duration::from_secs(1), h.session).await.expect("the session hung").unwrap();
}

#[tokio::test]
async fn leaving_is_sent_after_the_reports_queued_before_it_and_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let mut h = Harness::start(&master);
    let mut link = h.connect(&master, Vec::new()).await;
    link.accept_registration(1, 60_000).await;

    // As the driver does on SIGTERM: reports of earlier steps, then the request.
    h.report(report(1, Completed));
    let (ack, acked) = oneshot::channel();
    h.leaving.send(ack).await.unwrap();
    assert_eq!(link.reports(1).await[0].state, Completed);
    assert_eq!(link.next().await, AgentToMaster::Leaving);
    tokio::time::timeout(WAIT, acked).await.expect("no acknowledgement").unwrap();
    // The kills that follow are still delivered.
    h.report(report(2, Killed));
    drop(h.reports.take());
    let last = link.reports_until_end().await;
    assert_eq!(last.iter().map(|r| r.state).collect::<Vec<_>>(), [Killed]);
}

#[tokio::test]
async fn a_locate_is_asked_on_the_control_stream_and_answered_by_request_id() {
    let dir = tempfile::tempdir().unwrap();
    let master = FakeMaster::start(dir.path());
    let mut h = Harness::start(&master);
    let mut link = h.connect(&master, Vec::new()).await;
    assert_eq!(link.register.data_mode, DataMode::Shared);
    link.accept_registration(1, 60_000).await;

    let locator = h.locator.clone();
    let asking = tokio::spawn(async move { locator.locate(JobId(7), "map".into()).await });
    let AgentToMaster::Locate(Locate { request, job, stage }) = link.next().await else {
        panic!("expected a Locate");
    };
    assert_eq!((job, stage.as_str()), (JobId(7), "map"));
    let holder = InputHolder { node: "n2".into(), shuffle: "127.0.0.1:7401".parse().unwrap() };
    let outputs = StageOutputs { holders: vec![holder], task_holder: vec![Some(0), None] };
    // An answer to another request does not satisfy this one.
    link.send(MasterToAgent::Located(Located { request: request + 1, outcome: Err("other".into()) })).await;
    link.send(MasterToAgent::Located(Located { request, outcome: Ok(outputs.clone()) })).await;
    let answer = tokio::time::timeout(WAIT, asking).await.expect("no answer").unwrap();
    assert_eq!(answer, Ok(outputs));

    // A connection lost before the answer fails the question instead of hanging it.
    let locator = h.locator.clone();
    let asking = tokio::spawn(async move { locator.locate(JobId(7), "map".into()).await });
    assert!(matches!(link.next().await, AgentToMaster::Locate(_)));
    link.cut();
    let answer = tokio::time::timeout(WAIT, asking).await.expect("the question hung").unwrap();
    assert!(answer.unwrap_err().contains("lost"), "a lost connection is named");
}
