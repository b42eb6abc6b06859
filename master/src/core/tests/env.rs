//! `TestEnv`: drives a [`Core`] with a virtual clock, checks the invariants after every
//! step, round-trips every wire-bound command through postcard, and lets tests *take* the
//! commands they expect so `assert_no_commands` can prove nothing else happened.

use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;
use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::{AgentId, ContainerId, JobId};
use slotmarket_common::protocol::{
    ContainerReport, DataMode, JobHistory, JobStatus, Launch, MasterToAgent, Response,
};
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use crate::core::policy::Policy;
use crate::core::{Command, Core, CoreConfig, Event, Persist, RecoveredJob, RequestId, invariants};

/// Where the virtual clock starts; far from zero so subtraction bugs show.
pub(super) const START: Timestamp = Timestamp::from_secs(1_000_000);

/// A caller with the given role and principal.
pub(super) fn caller(role: Role, principal: &str) -> Identity {
    Identity { role, principal: principal.to_string() }
}

/// The user most tests submit as.
pub(super) fn alice() -> Identity {
    caller(Role::User, "alice")
}

/// Another user.
pub(super) fn bob() -> Identity {
    caller(Role::User, "bob")
}

/// An administrator.
pub(super) fn root() -> Identity {
    caller(Role::Admin, "root")
}

pub(super) struct TestEnv {
    pub(super) core: Core,
    pub(super) now: Timestamp,
    /// Launch, Kill, Reply and DropAgent commands not yet taken, in emission order.
    pending: Vec<Command>,
    /// Every `Persist` not yet taken, in order.
    persists: Vec<Persist>,
    /// Every `JobChanged` not yet taken, in order.
    changed: Vec<JobId>,
    /// The full output of the latest step, for tests about command order.
    pub(super) last: Vec<Command>,
    /// Which agent a container was launched on or adopted by, and its launch.
    launched: BTreeMap<ContainerId, (AgentId, Launch)>,
    agents: BTreeMap<String, AgentId>,
    /// The data mode each node registers with (shared unless set, see `set_local`).
    data_modes: BTreeMap<String, DataMode>,
    /// The data directory id each node registers with (empty unless set).
    data_dir_ids: BTreeMap<String, String>,
    next_agent: u32,
    next_request: u64,
}

impl TestEnv {
    pub(super) fn new() -> TestEnv {
        TestEnv::with_config(CoreConfig::default())
    }

    pub(super) fn with_config(config: CoreConfig) -> TestEnv {
        TestEnv {
            core: Core::new(config),
            now: START,
            pending: Vec::new(),
            persists: Vec::new(),
            changed: Vec::new(),
            last: Vec::new(),
            launched: BTreeMap::new(),
            agents: BTreeMap::new(),
            data_modes: BTreeMap::new(),
            data_dir_ids: BTreeMap::new(),
            next_agent: 1,
            next_request: 1,
        }
    }

    /// An environment whose core runs `policy` rather than the one a config names.
    pub(super) fn with_policy(policy: Box<dyn Policy>) -> TestEnv {
        TestEnv { core: Core::with_policy(CoreConfig::default(), policy), ..TestEnv::new() }
    }

    // ----- driving -----

    pub(super) fn handle(&mut self, event: Event) -> Vec<Command> {
        let out = self.core.handle(self.now, event);
        self.record(out)
    }

    pub(super) fn tick(&mut self) -> Vec<Command> {
        let out = self.core.tick(self.now);
        self.record(out)
    }

    pub(super) fn advance(&mut self, secs: u64) {
        self.advance_ms(secs * 1000);
    }

    pub(super) fn advance_ms(&mut self, ms: u64) {
        self.now = Timestamp(self.now.0 + ms);
    }

    fn record(&mut self, out: Vec<Command>) -> Vec<Command> {
        if let Err(broken) = invariants::check(&self.core) {
            panic!("invariant broken: {broken}\nafter {out:#?}");
        }
        for command in &out {
            round_trip_command(command);
            match command {
                Command::Persist(p) => self.persists.push(p.clone()),
                Command::JobChanged { job } => self.changed.push(*job),
                Command::Launch { agent, launch } => {
                    self.launched.insert(launch.container, (*agent, launch.clone()));
                    self.pending.push(command.clone());
                }
                _ => self.pending.push(command.clone()),
            }
        }
        self.last.clone_from(&out);
        out
    }

    // ----- agents -----

    pub(super) fn join_agent(&mut self, name: &str, map: u32, reduce: u32) -> AgentId {
        self.join_agent_with(name, map, reduce, Vec::new())
    }

    /// Registers `name` again (or for the first time) listing containers still alive.
    pub(super) fn join_agent_with(
        &mut self,
        name: &str,
        map: u32,
        reduce: u32,
        live: Vec<ContainerReport>,
    ) -> AgentId {
        let agent = AgentId(self.next_agent);
        self.next_agent += 1;
        self.agents.insert(name.to_string(), agent);
        for report in &live {
            let launch = self.launched.get(&report.container).map(|(_, l)| l.clone());
            if let Some(launch) = launch {
                self.launched.insert(report.container, (agent, launch));
            }
        }
        let event = Event::AgentJoined {
            agent,
            node: name.to_string(),
            map_slots: map,
            reduce_slots: reduce,
            live_containers: live,
            data_mode: self.data_modes.get(name).cloned().unwrap_or(DataMode::Shared),
            data_dir_id: self.data_dir_ids.get(name).cloned().unwrap_or_default(),
        };
        self.handle(event);
        agent
    }

    /// Makes `name`'s next registrations local-mode, with a shuffle address and the data
    /// directory id `dir_id`.
    pub(super) fn set_local(&mut self, name: &str, dir_id: &str) {
        let port = 7000 + self.data_modes.len();
        let shuffle = format!("127.0.0.1:{port}").parse().expect("a socket address");
        self.data_modes.insert(name.to_string(), DataMode::Local { shuffle });
        self.data_dir_ids.insert(name.to_string(), dir_id.to_string());
    }

    pub(super) fn agent(&self, name: &str) -> AgentId {
        self.agents[name]
    }

    pub(super) fn heartbeat(&mut self, name: &str) {
        let agent = self.agent(name);
        self.handle(Event::AgentHeartbeat { agent });
    }

    pub(super) fn disconnect(&mut self, name: &str) {
        let agent = self.agent(name);
        self.handle(Event::AgentDisconnected { agent });
    }

    /// The agent says it is leaving (it got SIGTERM).
    pub(super) fn leave(&mut self, name: &str) {
        let agent = self.agent(name);
        self.handle(Event::AgentLeaving { agent });
    }

    // ----- containers -----

    /// What the agent holding `container` would report on entering `state`.
    pub(super) fn report_of(&self, container: ContainerId, state: ContainerState) -> ContainerReport {
        let (_, launch) = &self.launched[&container];
        let exit_code = match state {
            ContainerState::Completed => Some(0),
            ContainerState::Failed => Some(1),
            _ => None,
        };
        ContainerReport {
            container,
            task: launch.task,
            attempt: launch.attempt,
            state,
            at: self.now,
            exit_code,
            message: None,
        }
    }

    /// The holder of `container` reports it entered `state`.
    pub(super) fn report(&mut self, container: ContainerId, state: ContainerState) -> Vec<Command> {
        let report = self.report_of(container, state);
        self.report_raw(self.launched[&container].0, report)
    }

    pub(super) fn report_raw(&mut self, agent: AgentId, report: ContainerReport) -> Vec<Command> {
        self.handle(Event::ContainerReports { agent, reports: vec![report] })
    }

    /// Acquired, Running, Completed in one batch, as an agent reporting a fast task.
    pub(super) fn finish(&mut self, container: ContainerId) -> Vec<Command> {
        self.run_to(container, ContainerState::Completed)
    }

    /// Acquired, Running, then `end`, in one batch.
    pub(super) fn run_to(&mut self, container: ContainerId, end: ContainerState) -> Vec<Command> {
        let reports = [ContainerState::Acquired, ContainerState::Running, end]
            .into_iter()
            .map(|s| self.report_of(container, s))
            .collect();
        let agent = self.launched[&container].0;
        self.handle(Event::ContainerReports { agent, reports })
    }

    /// Acquired then Running.
    pub(super) fn start(&mut self, container: ContainerId) {
        let reports = [ContainerState::Acquired, ContainerState::Running]
            .into_iter()
            .map(|s| self.report_of(container, s))
            .collect();
        let agent = self.launched[&container].0;
        self.handle(Event::ContainerReports { agent, reports });
    }

    // ----- clients -----

    pub(super) fn request(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    /// Submits as alice and returns the job id from the reply.
    pub(super) fn submit(&mut self, spec: JobSpec) -> JobId {
        match self.submit_as(alice(), spec) {
            Response::Submitted { job } => job,
            other => panic!("submit refused: {other:?}"),
        }
    }

    /// Submits and takes the reply.
    pub(super) fn submit_as(&mut self, caller: Identity, spec: JobSpec) -> Response {
        let request = self.request();
        self.handle(Event::JobSubmitted { request, caller, spec });
        self.take_reply(request)
    }

    /// Asks to cancel and takes the reply.
    pub(super) fn cancel_as(&mut self, caller: Identity, job: JobId) -> Response {
        let request = self.request();
        self.handle(Event::JobCancelRequested { request, caller, job });
        self.take_reply(request)
    }

    /// Asks to drain (`drain`) or undrain `node` and takes the reply.
    pub(super) fn drain_as(&mut self, caller: Identity, node: &str, drain: bool) -> Response {
        let request = self.request();
        self.handle(Event::NodeDrainRequested { request, caller, node: node.to_string(), drain });
        self.take_reply(request)
    }

    pub(super) fn recover(&mut self, job: RecoveredJob) {
        self.handle(Event::JobRecovered(job));
    }

    pub(super) fn status(&self, job: JobId) -> JobStatus {
        self.core.view().job_status(job, &root()).expect("job exists")
    }

    /// The Jockey controller's state of `job`.
    pub(super) fn jockey_state(&self, job: JobId) -> crate::core::policy::jockey::SloState {
        self.core.slo_state(job).expect("the policy controls the job")
    }

    // ----- taking commands -----

    /// Takes every pending launch; there must be exactly `n`.
    pub(super) fn take_launches(&mut self, n: usize) -> Vec<Launch> {
        self.take(n, "launches", |c| match c {
            Command::Launch { launch, .. } => Some(launch.clone()),
            _ => None,
        })
    }

    /// Takes however many launches are pending (for loops that drive many tasks).
    pub(super) fn take_all_launches(&mut self) -> Vec<Launch> {
        let n = self.pending.iter().filter(|c| matches!(c, Command::Launch { .. })).count();
        self.take_launches(n)
    }

    /// Takes every pending launch with its agent; there must be exactly `n`.
    pub(super) fn take_launches_on(&mut self, n: usize) -> Vec<(AgentId, Launch)> {
        self.take(n, "launches", |c| match c {
            Command::Launch { agent, launch } => Some((*agent, launch.clone())),
            _ => None,
        })
    }

    /// Takes every pending kill as (agent, container, reason); there must be exactly `n`.
    pub(super) fn take_kills(&mut self, n: usize) -> Vec<(AgentId, ContainerId, String)> {
        self.take(n, "kills", |c| match c {
            Command::Kill { agent, container, reason } => Some((*agent, *container, reason.to_string())),
            _ => None,
        })
    }

    /// Takes every pending agent drop; there must be exactly `n`.
    pub(super) fn take_drops(&mut self, n: usize) -> Vec<AgentId> {
        self.take(n, "drops", |c| match c {
            Command::DropAgent { agent, .. } => Some(*agent),
            _ => None,
        })
    }

    /// Takes the one reply to `request`.
    pub(super) fn take_reply(&mut self, request: RequestId) -> Response {
        let mut replies = self.take(1, "replies", |c| match c {
            Command::Reply { request: r, response } if *r == request => Some((**response).clone()),
            _ => None,
        });
        replies.remove(0)
    }

    /// Takes every persist emitted so far.
    pub(super) fn take_persists(&mut self) -> Vec<Persist> {
        std::mem::take(&mut self.persists)
    }

    /// Takes every job-changed notice emitted so far.
    pub(super) fn take_changed(&mut self) -> Vec<JobId> {
        std::mem::take(&mut self.changed)
    }

    fn take<T: Debug>(&mut self, n: usize, what: &str, pick: impl Fn(&Command) -> Option<T>) -> Vec<T> {
        let mut taken = Vec::new();
        self.pending.retain(|c| match pick(c) {
            Some(t) => {
                taken.push(t);
                false
            }
            None => true,
        });
        assert_eq!(taken.len(), n, "expected {n} {what}, got {taken:#?}");
        taken
    }

    /// Takes every pending request for a completion model (Jockey).
    pub(super) fn take_model_requests(&mut self) -> Vec<crate::core::policy::jockey::ModelRequest> {
        let n = self.pending.iter().filter(|c| matches!(c, Command::BuildCompletionModel(_))).count();
        self.take(n, "model requests", |c| match c {
            Command::BuildCompletionModel(request) => Some((**request).clone()),
            _ => None,
        })
    }

    /// Nothing the test has not taken: no launch, kill, reply or drop is left.
    pub(super) fn assert_no_commands(&self) {
        assert!(self.pending.is_empty(), "unexpected commands: {:#?}", self.pending);
    }
}

/// Encodes what would cross the wire or reach the store and checks it decodes unchanged.
fn round_trip_command(command: &Command) {
    match command {
        Command::Launch { launch, .. } => round_trip(&MasterToAgent::Launch(vec![launch.clone()])),
        Command::Kill { container, reason, .. } => {
            round_trip(&MasterToAgent::Kill { container: *container, reason: reason.to_string() });
        }
        Command::DropAgent { reason, .. } => round_trip(&MasterToAgent::Refused { reason: reason.clone() }),
        Command::Reply { response, .. } => round_trip(response),
        Command::Persist(Persist::JobAdmitted { spec, .. }) => round_trip(spec),
        Command::Persist(Persist::Container { report, .. }) => round_trip(report),
        Command::Persist(Persist::History { record, .. }) => {
            round_trip(record);
            // The store keeps history as JSON.
            let json = serde_json::to_string(record).expect("encodes as JSON");
            assert_eq!(&serde_json::from_str::<JobHistory>(&json).expect("decodes from JSON"), &**record);
        }
        Command::Persist(Persist::Ledger(entry)) => round_trip(entry),
        Command::Persist(
            Persist::JobState { .. }
            | Persist::Account { .. }
            | Persist::Deadline { .. }
            | Persist::Rate { .. }
            | Persist::Income { .. }
            | Persist::Capacity { .. }
            | Persist::OutputsLost { .. }
            | Persist::LocalNode { .. },
        )
        | Command::JobChanged { .. }
        | Command::BuildCompletionModel(_) => {}
    }
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let bytes = postcard::to_allocvec(value).expect("encodes");
    let back: T = postcard::from_bytes(&bytes).expect("decodes");
    assert_eq!(&back, value, "postcard round trip changed the value");
}
