//! The lighter driving interface changes nothing but what it says it changes: a core
//! told to build only some `Persist`s (the simulator's `Persists::JobStates`) emits
//! exactly the master's command stream with the other writes left out, and
//! `handle_into`/`tick_into` append exactly what `handle`/`tick` return (and
//! `reports_into` exactly what `handle` returns for the same `Event::ContainerReports`);
//! a core with its job notices off (`Core::set_job_notices`) leaves out exactly the
//! `JobChanged` commands; and a core told that one `Running` report stands for
//! `Acquired` and `Running` (`Core::set_start_reports`), fed no `Acquired` reports,
//! emits the same stream as one fed both.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AgentId, ContainerId, JobId};
use slotmarket_common::protocol::{ContainerReport, DataMode, Launch};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use super::builders::JobBuilder;
use super::env::{START, alice, bob};
use crate::core::{
    Command, Core, CoreConfig, Event, NodeHealth, Persist, Persists, PolicySettings, RequestId, StartReports,
};

/// Two cores fed the same events: `full` as the master runs it (every write, `handle`),
/// `light` with `persists` through `handle_into`/`tick_into` (reports through
/// `reports_into`) on one reused buffer, with its job notices on or off, and fed no
/// `Acquired` reports when it takes one start report.
struct Pair {
    full: Core,
    light: Core,
    persists: Persists,
    notices: bool,
    one_start: bool,
    buffer: Vec<Command>,
    now: Timestamp,
    /// Every command the full core emitted, for the test's own checks.
    seen: Vec<Command>,
}

/// A command standing for whatever a driver's buffer held before the call.
const EARLIER: Command = Command::JobChanged { job: JobId(u64::MAX) };

impl Pair {
    fn new(persists: Persists, notices: bool, one_start: bool) -> Pair {
        let mut light = Core::new(CoreConfig { persists, ..CoreConfig::default() });
        light.set_job_notices(notices);
        light.set_start_reports(if one_start { StartReports::Running } else { StartReports::default() });
        Pair {
            full: Core::new(CoreConfig::default()),
            light,
            persists,
            notices,
            one_start,
            buffer: Vec::new(),
            now: START,
            seen: Vec::new(),
        }
    }

    /// Feeds `event` to both (`None`: a tick) and checks the light stream against the
    /// full one; returns the full core's commands.
    fn step(&mut self, event: Option<Event>) -> Vec<Command> {
        self.buffer.clear();
        self.buffer.push(EARLIER);
        let full = match event {
            Some(Event::ContainerReports { agent, reports }) => {
                // The simulator's way in for reports: a buffer it keeps, left empty.
                let full =
                    self.full.handle(self.now, Event::ContainerReports { agent, reports: reports.clone() });
                let mut kept = reports;
                if self.one_start {
                    kept.retain(|r| r.state != ContainerState::Acquired);
                }
                self.light.reports_into(self.now, agent, &mut kept, &mut self.buffer);
                assert!(kept.is_empty(), "reports_into left {kept:?}");
                full
            }
            Some(event) => {
                let full = self.full.handle(self.now, event.clone());
                self.light.handle_into(self.now, event, &mut self.buffer);
                full
            }
            None => {
                let full = self.full.tick(self.now);
                self.light.tick_into(self.now, &mut self.buffer);
                full
            }
        };
        let wanted = |c: &&Command| match c {
            Command::Persist(p) => self.persists.wants(p),
            Command::JobChanged { .. } => self.notices,
            _ => true,
        };
        let expected: Vec<&Command> = std::iter::once(&EARLIER).chain(full.iter().filter(wanted)).collect();
        let got: Vec<&Command> = self.buffer.iter().collect();
        assert_eq!(got, expected, "at {}", self.now);
        self.seen.extend(full.iter().cloned());
        full
    }

    /// Runs every launched task to its end, `fail` deciding which attempts fail, until
    /// nothing is launched any more; one second per round.
    fn run_to_end(&mut self, first: Vec<Command>, fail: impl Fn(&Launch) -> bool) {
        let mut out = first;
        for _ in 0..100 {
            let launches: Vec<(AgentId, Launch)> = out
                .iter()
                .filter_map(|c| match c {
                    Command::Launch { agent, launch } => Some((*agent, launch.clone())),
                    _ => None,
                })
                .collect();
            if launches.is_empty() {
                return;
            }
            self.now = Timestamp(self.now.0 + 1000);
            out = Vec::new();
            for (agent, launch) in &launches {
                let reports = [ContainerState::Acquired, ContainerState::Running]
                    .map(|state| report(launch, state, self.now))
                    .to_vec();
                out.extend(self.step(Some(Event::ContainerReports { agent: *agent, reports })));
            }
            self.now = Timestamp(self.now.0 + 1000);
            out.extend(self.step(None));
            for (agent, launch) in &launches {
                let end = if fail(launch) { ContainerState::Failed } else { ContainerState::Completed };
                let reports = vec![report(launch, end, self.now)];
                out.extend(self.step(Some(Event::ContainerReports { agent: *agent, reports })));
            }
        }
        panic!("the jobs did not finish in 100 rounds");
    }
}

fn report(launch: &Launch, state: ContainerState, at: Timestamp) -> ContainerReport {
    let failed = state == ContainerState::Failed;
    ContainerReport {
        container: launch.container,
        task: launch.task,
        attempt: launch.attempt,
        state,
        at,
        exit_code: failed.then_some(3),
        message: failed.then(|| "boom".to_string()),
    }
}

fn join(n: u32) -> Event {
    Event::AgentJoined {
        agent: AgentId(n),
        node: format!("n{n}"),
        map_slots: 2,
        reduce_slots: 1,
        live_containers: Vec::new(),
        data_mode: DataMode::Shared,
        data_dir_id: String::new(),
    }
}

fn submit(request: u64, spec: JobSpec, by_bob: bool) -> Event {
    let caller = if by_bob { bob() } else { alice() };
    Event::JobSubmitted { request: RequestId(request), caller, spec }
}

/// Three jobs through two agents: one completes, one fails a task once and then
/// completes, one uses up its attempts and fails (killing its other live task); then a
/// fourth is cancelled while it runs.
fn scenario(persists: Persists, notices: bool) -> Pair {
    scenario_with(persists, notices, false)
}

/// [`scenario`], the light core fed no `Acquired` reports if `one_start`.
fn scenario_with(persists: Persists, notices: bool, one_start: bool) -> Pair {
    let mut pair = Pair::new(persists, notices, one_start);
    let mut out = Vec::new();
    for n in 1..=2 {
        out.extend(pair.step(Some(join(n))));
    }
    out.extend(pair.step(Some(submit(1, JobBuilder::map_reduce(3, 2).build(), false))));
    out.extend(pair.step(Some(submit(2, JobBuilder::maps(2).name("flaky").build(), true))));
    out.extend(pair.step(Some(submit(3, JobBuilder::maps(2).name("doomed").max_attempts(2).build(), false))));
    // Job 2's first task fails its first attempt; every attempt of job 3's first task fails.
    pair.run_to_end(out, |l| {
        (l.task.job == JobId(2) && l.task.index == 0 && l.attempt.0 == 1)
            || (l.task.job == JobId(3) && l.task.index == 0)
    });
    let out = pair.step(Some(submit(4, JobBuilder::maps(3).build(), false)));
    assert!(out.iter().any(|c| matches!(c, Command::Launch { .. })));
    pair.now = Timestamp(pair.now.0 + 1000);
    let cancel = Event::JobCancelRequested { request: RequestId(5), caller: alice(), job: JobId(4) };
    let out = pair.step(Some(cancel));
    for container in out.iter().filter_map(|c| match c {
        Command::Kill { container, .. } => Some(*container),
        _ => None,
    }) {
        let Some((agent, launch)) = launched(&pair.seen, container) else { panic!("{container} unknown") };
        let reports = vec![report(&launch, ContainerState::Killed, pair.now)];
        pair.step(Some(Event::ContainerReports { agent, reports }));
    }
    pair
}

fn launched(seen: &[Command], container: ContainerId) -> Option<(AgentId, Launch)> {
    seen.iter().find_map(|c| match c {
        Command::Launch { agent, launch } if launch.container == container => Some((*agent, launch.clone())),
        _ => None,
    })
}

/// What kinds of write the full stream held, to show the scenario covers them.
fn kinds(seen: &[Command]) -> [usize; 5] {
    let mut counts = [0; 5];
    for command in seen {
        match command {
            Command::Persist(Persist::Container { .. }) => counts[0] += 1,
            Command::Persist(Persist::JobAdmitted { .. }) => counts[1] += 1,
            Command::Persist(Persist::JobState { .. }) => counts[2] += 1,
            Command::Persist(Persist::History { .. }) => counts[3] += 1,
            Command::JobChanged { .. } => counts[4] += 1,
            _ => {}
        }
    }
    counts
}

#[test]
fn a_core_building_only_job_states_emits_the_masters_stream_without_the_other_writes() {
    let pair = scenario(Persists::JobStates, true);
    let [containers, admitted, states, histories, _] = kinds(&pair.seen);
    // Every kind the simulator leaves unbuilt was there to leave out.
    assert!(containers > 20 && admitted == 4 && histories == 4, "{:?}", kinds(&pair.seen));
    // Three jobs ran (the fourth was cancelled before a task reported running), and the
    // four ended: completed, completed, failed, cancelled.
    assert_eq!(states, 7);
    let failed = pair.seen.iter().any(|c| {
        matches!(c, Command::Persist(Persist::JobState { job: JobId(3), state, .. }) if state.name() == "failed")
    });
    assert!(failed, "job 3 should have failed");
}

#[test]
fn a_core_building_job_states_and_history_emits_the_masters_stream_without_the_other_writes() {
    scenario(Persists::JobStatesAndHistory, true);
}

#[test]
fn every_write_through_handle_into_is_the_stream_handle_returns() {
    scenario(Persists::All, true);
}

#[test]
fn a_core_without_job_notices_emits_the_stream_without_them() {
    // The simulator's setting, and the same with every write.
    for persists in [Persists::JobStates, Persists::All] {
        let pair = scenario(persists, false);
        let [.., notices] = kinds(&pair.seen);
        // The full stream had notices to leave out: several per job.
        assert!(notices > 8, "{:?}", kinds(&pair.seen));
    }
}

#[test]
fn a_core_taking_one_start_report_emits_the_stream_of_one_fed_acquired_and_running() {
    // The simulator's settings: the `Acquired` transition's own write is not built.
    let pair = scenario_with(Persists::JobStates, false, true);
    let [containers, .., states, _, _] = kinds(&pair.seen);
    assert!(containers > 20 && states == 7, "{:?}", kinds(&pair.seen));
}

#[test]
fn a_running_report_straight_after_allocated_is_refused_unless_the_core_takes_one_start_report() {
    for one_start in [false, true] {
        let mut core = Core::new(CoreConfig::default());
        core.set_start_reports(if one_start { StartReports::Running } else { StartReports::default() });
        let _ = core.handle(START, join(1));
        let out = core.handle(START, submit(1, JobBuilder::maps(1).build(), false));
        let Some((agent, launch)) = out.iter().find_map(|c| match c {
            Command::Launch { agent, launch } => Some((*agent, launch.clone())),
            _ => None,
        }) else {
            panic!("nothing launched: {out:?}")
        };
        let reports = vec![report(&launch, ContainerState::Running, START)];
        let out = core.handle(START, Event::ContainerReports { agent, reports });
        let started = out.iter().any(
            |c| matches!(c, Command::Persist(Persist::JobState { state, .. }) if state.name() == "running"),
        );
        let persisted = out.iter().any(|c| matches!(c, Command::Persist(Persist::Container { .. })));
        assert_eq!((started, persisted), (one_start, one_start), "one start report: {one_start}");
    }
}

#[test]
fn persists_wants_only_what_it_names() {
    let state = Persist::JobState {
        job: JobId(1),
        state: slotmarket_common::protocol::JobState::Running,
        at: START,
        message: None,
        tasks_completed: 0,
    };
    let deadline = Persist::Deadline { job: JobId(1), deadline: None };
    assert!(Persists::All.wants(&state) && Persists::All.wants(&deadline));
    assert!(Persists::JobStates.wants(&state) && !Persists::JobStates.wants(&deadline));
    assert!(Persists::JobStatesAndHistory.wants(&state) && !Persists::JobStatesAndHistory.wants(&deadline));
    assert!(
        Persists::All.history() && Persists::JobStatesAndHistory.history() && !Persists::JobStates.history()
    );
}

/// A core driven as the simulator drives it: the starts of each step's launches reported
/// at once, one batch per agent in id order (`Acquired` and `Running`, or only
/// `Running`), unless the core applies them itself; every live task ending a second
/// after the last round.
struct LikeTheSimulator {
    core: Core,
    now: Timestamp,
    /// Every command emitted, in order.
    seen: Vec<Command>,
    /// Launched attempts whose end has not been reported.
    live: Vec<(AgentId, Launch)>,
    calls: usize,
}

impl LikeTheSimulator {
    fn new(config: CoreConfig, starts: StartReports, notices: bool) -> LikeTheSimulator {
        let mut core = Core::new(config);
        core.set_job_notices(notices);
        core.set_start_reports(starts);
        LikeTheSimulator { core, now: START, seen: Vec::new(), live: Vec::new(), calls: 0 }
    }

    /// Feeds `event` and the start reports its launches owe, breadth first.
    fn feed(&mut self, event: Event) {
        let mut queue = std::collections::VecDeque::from([event]);
        while let Some(event) = queue.pop_front() {
            self.calls += 1;
            let out = self.core.handle(self.now, event);
            let mut started: Vec<(AgentId, Launch)> = launches(&out);
            self.live.extend(started.iter().cloned());
            self.seen.extend(out);
            let states = match self.core.start_reports() {
                StartReports::AcquiredAndRunning => &[ContainerState::Acquired, ContainerState::Running][..],
                StartReports::Running => &[ContainerState::Running][..],
                StartReports::Implied => continue,
            };
            started.sort_by_key(|(agent, _)| *agent);
            for batch in started.chunk_by(|a, b| a.0 == b.0) {
                let reports =
                    batch.iter().flat_map(|(_, l)| states.iter().map(|&s| report(l, s, self.now))).collect();
                queue.push_back(Event::ContainerReports { agent: batch[0].0, reports });
            }
        }
    }

    /// The scenario of [`scenario`] (less the cancel): three jobs on two agents, one
    /// task failing once and one failing all its attempts.
    fn run(mut self) -> LikeTheSimulator {
        for n in 1..=2 {
            self.feed(join(n));
        }
        self.feed(submit(1, JobBuilder::map_reduce(3, 2).build(), false));
        self.feed(submit(2, JobBuilder::maps(2).name("flaky").build(), true));
        self.feed(submit(3, JobBuilder::maps(2).name("doomed").max_attempts(2).build(), false));
        let fail = |l: &Launch| {
            (l.task.job == JobId(2) && l.task.index == 0 && l.attempt.0 == 1)
                || (l.task.job == JobId(3) && l.task.index == 0)
        };
        for _ in 0..100 {
            if self.live.is_empty() {
                return self;
            }
            self.now = Timestamp(self.now.0 + 1000);
            for (agent, launch) in std::mem::take(&mut self.live) {
                let end = if fail(&launch) { ContainerState::Failed } else { ContainerState::Completed };
                self.feed(Event::ContainerReports { agent, reports: vec![report(&launch, end, self.now)] });
            }
        }
        panic!("the jobs did not finish in 100 rounds");
    }
}

fn launches(out: &[Command]) -> Vec<(AgentId, Launch)> {
    out.iter()
        .filter_map(|c| match c {
            Command::Launch { agent, launch } => Some((*agent, launch.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_fifo_core_applying_its_launches_starts_emits_the_stream_of_one_fed_them() {
    // The simulator's setting: a retry need not keep off the node its task failed on.
    let node_health = NodeHealth { retry_elsewhere: false, ..NodeHealth::default() };
    let config = CoreConfig { node_health, ..CoreConfig::default() };
    let full = LikeTheSimulator::new(config.clone(), StartReports::default(), true).run();
    let light_config = CoreConfig { persists: Persists::JobStates, ..config };
    let light = LikeTheSimulator::new(light_config, StartReports::Implied, false).run();
    assert_eq!(light.core.start_reports(), StartReports::Implied);
    let wanted = |c: &&Command| match c {
        Command::Persist(p) => Persists::JobStates.wants(p),
        Command::JobChanged { .. } => false,
        _ => true,
    };
    let expected: Vec<&Command> = full.seen.iter().filter(wanted).collect();
    assert_eq!(light.seen.iter().collect::<Vec<_>>(), expected);
    // The stream has starts and ends to get right: three jobs ran; one failed.
    let [_, _, states, _, _] = kinds(&full.seen);
    assert_eq!(states, 6, "{:?}", kinds(&full.seen));
    // Every launch's start report batch was a call the light core was spared.
    let started = launches(&full.seen).len();
    assert!(
        started > 10 && full.calls >= light.calls + started / 2,
        "{} {} {started}",
        full.calls,
        light.calls
    );
}

#[test]
fn a_policy_other_than_fifo_is_given_one_running_report_for_implied_starts() {
    let config = CoreConfig { policy: PolicySettings::GangFifo {}, ..CoreConfig::default() };
    let mut core = Core::new(config.clone());
    core.set_start_reports(StartReports::Implied);
    assert_eq!(core.start_reports(), StartReports::Running);
    // And it runs the scenario on those reports as the master's core does on both.
    let full = LikeTheSimulator::new(config.clone(), StartReports::default(), true).run();
    let light = LikeTheSimulator::new(config, StartReports::Implied, true).run();
    let wanted = |c: &&Command| !matches!(c, Command::Persist(Persist::Container { report, .. }) if report.state == ContainerState::Acquired);
    assert_eq!(light.seen.iter().collect::<Vec<_>>(), full.seen.iter().filter(wanted).collect::<Vec<_>>());
}
