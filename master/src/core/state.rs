//! The core's state: jobs with their stages and tasks, the containers the core still
//! tracks, agents with their slot tables and recovered containers awaiting adoption; plus
//! the helpers that keep the indexes (ready queues, counters, slot use) consistent.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AgentId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{DataMode, DrainCause, JobState, Quarantine};
use slotmarket_common::spec::{JobSpec, SlotKind};
use slotmarket_common::time::Timestamp;

use super::accounting::Accounts;
use super::history::{History, HistoryLimits};
use super::id_table::IdTable;
use super::reactor::reserve::HeldSlots;
use super::reactor::waits::JobWaits;
use super::sorted_set::SortedSet;

/// Number of slot kinds; arrays indexed by [`kind_ix`].
pub(crate) const KINDS: usize = 2;

/// Position of a slot kind in per-kind arrays.
pub(crate) fn kind_ix(kind: SlotKind) -> usize {
    match kind {
        SlotKind::Map => 0,
        SlotKind::Reduce => 1,
    }
}

/// Everything the core knows.
#[derive(Debug)]
pub(crate) struct State {
    /// Every job, running or ended, by id (= admission order). Ended jobs are dropped
    /// after `CoreConfig::ended_job_retention`.
    pub(crate) jobs: IdTable<JobId, Job>,
    /// Jobs that have not ended, in admission order; lets policies that weigh every
    /// active job skip the ended ones.
    pub(crate) active: BTreeSet<JobId>,
    /// Tasks of each account's jobs that have not ended (all their tasks, whatever their
    /// phase), for the per-account limit checked at submit. Accounts at zero are removed.
    pub(crate) active_tasks: BTreeMap<AccountId, u64>,
    /// Containers holding (or about to release) a slot: live task attempts, plus
    /// containers of ended jobs whose kill has not been confirmed yet. Hashed, not
    /// ordered: every report looks one up, and only preemption walks them (sorting just
    /// the containers it picks from, see `SchedView::live_unordered`).
    pub(crate) containers: HashMap<ContainerId, ContainerRec, BuildHasherDefault<IdHasher>>,
    /// Registrations, connected or not.
    pub(crate) agents: IdTable<AgentId, Agent>,
    /// The current registration of each node name.
    pub(crate) nodes: BTreeMap<String, AgentId>,
    /// Recovered live containers per node, waiting for that node's agent to adopt them.
    pub(crate) orphans: BTreeMap<String, BTreeSet<ContainerId>>,
    /// Jobs with at least one ready task of each kind, in admission order; lets a
    /// policy find work without scanning every job.
    pub(crate) ready_jobs: [SortedSet<JobId>; KINDS],
    /// Connected agents with at least one free slot of each kind; lets a policy find
    /// room without scanning every agent on every report.
    pub(crate) free_agents: [SortedSet<AgentId>; KINDS],
    /// Agents in quarantine (see `reactor::health`), so their deadlines are found
    /// without walking every agent.
    pub(crate) quarantined: BTreeSet<AgentId>,
    /// Node names an admin drained: a new registration of one starts drained too.
    pub(crate) drained_nodes: BTreeSet<String>,
    /// The next job id to hand out; never goes down, so ids are never reused.
    pub(crate) next_job: u64,
    /// The next container id to hand out; never goes down.
    pub(crate) next_container: u64,
    /// Ended jobs still kept for status and listings, with the time each may be dropped,
    /// earliest first (see `CoreConfig::ended_job_retention`).
    pub(crate) ended: VecDeque<(Timestamp, JobId)>,
    /// What past jobs did, by name: the runs estimators and profiles learn from.
    pub(crate) history: History,
    /// Reports dropped by fencing (unknown container, wrong agent, stale attempt, refused
    /// transition). The core cannot log, so the driver may expose this count.
    pub(crate) ignored_reports: u64,
    /// Accounts, budgets and the ledger.
    pub(crate) accounts: Accounts,
    /// The slot partitions the policy stated last (see `reactor::reserve`).
    pub(crate) reservations: Vec<HeldSlots>,
    /// Jobs held for the jobs they run after, and time limits (see `reactor::waits`).
    pub(crate) waits: JobWaits,
    /// Jobs admitted, re-queued or ended since the core last took this list: with the
    /// step's changed jobs, what MRM's kept admission schedule must look at again
    /// (`quote::Market::note_changed`).
    pub(crate) touched: Vec<JobId>,
    /// Nodes last registered in local data mode, with their directories' ids (kept in
    /// the store; see `reactor::outputs`).
    pub(crate) local_nodes: BTreeMap<String, String>,
    /// Local-mode nodes holding recovered outputs that have not registered since the
    /// master restarted, with the time their outputs count as lost.
    pub(crate) awaited_holders: BTreeMap<Arc<str>, Timestamp>,
}

impl State {
    /// An empty state keeping job history within `limits`.
    pub(crate) fn new(limits: HistoryLimits) -> State {
        State {
            jobs: IdTable::new(),
            active: BTreeSet::new(),
            active_tasks: BTreeMap::new(),
            containers: HashMap::default(),
            agents: IdTable::new(),
            nodes: BTreeMap::new(),
            orphans: BTreeMap::new(),
            ready_jobs: Default::default(),
            free_agents: Default::default(),
            quarantined: BTreeSet::new(),
            drained_nodes: BTreeSet::new(),
            next_job: 1,
            next_container: 1,
            ended: VecDeque::new(),
            history: History::new(limits),
            ignored_reports: 0,
            accounts: Accounts::default(),
            reservations: Vec::new(),
            waits: JobWaits::default(),
            touched: Vec::new(),
            local_nodes: BTreeMap::new(),
            awaited_holders: BTreeMap::new(),
        }
    }
}

/// A job and its progress.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) id: JobId,
    /// The account it runs on and is charged to.
    pub(crate) account: AccountId,
    /// The account's name, shared by every launch of the job.
    pub(crate) account_name: Arc<str>,
    /// The principal who submitted it; with admins, the only ones who may act on it.
    pub(crate) owner: AccountId,
    /// When it should finish, resolved at admission.
    pub(crate) deadline: Option<Timestamp>,
    pub(crate) spec: JobSpec,
    /// Tasks over all stages, counted once: `all_done` asks after every completion.
    total_tasks: u64,
    pub(crate) submitted: Timestamp,
    pub(crate) started: Option<Timestamp>,
    pub(crate) finished: Option<Timestamp>,
    pub(crate) state: JobState,
    /// Why it failed or was cancelled.
    pub(crate) message: Option<String>,
    /// One per spec stage, same order.
    pub(crate) stages: Vec<Stage>,
    /// Task counts by stage name, for `{tasks.STAGE}`; built once and shared by every
    /// launch (a per-launch copy of the map was a third of a launch's allocations).
    pub(crate) stage_tasks: Arc<BTreeMap<String, u32>>,
    /// Pending tasks whose barrier has passed, per slot kind, as (stage, index): the
    /// lowest stage and index go first, so a retried task is not starved by later ones.
    pub(crate) ready: [SortedSet<(u32, u32)>; KINDS],
    /// Nodes the failed attempts of a task, by (stage, index), ran on, oldest first: its
    /// retries go elsewhere while another schedulable node offers its slot kind. Only
    /// tasks that failed have an entry: a vector in every task's record cost a check per
    /// task when an ended job's records were dropped.
    pub(crate) failed_on: BTreeMap<(u32, u32), Vec<Arc<str>>>,
    /// Tasks completed, over all stages.
    pub(crate) completed: u64,
    /// Tasks with a live container, per slot kind.
    pub(crate) live: [u32; KINDS],
    /// Milliseconds its containers held slots, per kind, over every attempt (master clock:
    /// from allocation to the report that freed the slot).
    pub(crate) slot_ms: [u64; KINDS],
    /// The price of the deadline it bought under MRM admission, and what was charged.
    pub(crate) purchase: Option<(Credits, Credits)>,
}

/// One stage of a job.
#[derive(Debug)]
pub(crate) struct Stage {
    pub(crate) kind: SlotKind,
    /// The spec's stage name and command template, shared by every launch of the stage.
    pub(crate) name: Arc<str>,
    pub(crate) command: Arc<str>,
    /// Indices of the stages this one waits for.
    pub(crate) after: Vec<usize>,
    /// Whether every stage in `after` has completed, so its tasks may run.
    pub(crate) released: bool,
    pub(crate) tasks: Vec<Task>,
    pub(crate) completed: u32,
    pub(crate) live: u32,
    /// Attempts that failed, were killed or were lost with their agent (not those an
    /// agent that was leaving handed back).
    pub(crate) failed_attempts: u32,
}

/// One task of a stage.
#[derive(Debug)]
pub(crate) struct Task {
    /// The latest attempt launched; `a0` before the first launch.
    pub(crate) attempt: AttemptId,
    /// Failed attempts, counted against `max_attempts` (kills and losses are not).
    pub(crate) failures: u32,
    pub(crate) phase: TaskPhase,
    /// How long the attempt that completed it ran (agent clock, `Running` to `Completed`).
    pub(crate) run_ms: Option<u64>,
    /// The node whose agent completed it, while it is completed: where its output is
    /// if that agent keeps its own data directory (see `locate`). Recovered from the
    /// store's container rows after a restart.
    pub(crate) output_on: Option<Arc<str>>,
}

/// Where a task is.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum TaskPhase {
    /// Waiting for its barrier or for a slot (or dropped, once its job ended).
    #[default]
    Pending,
    /// Its current attempt runs in this container.
    Live(ContainerId),
    /// Done; never runs again.
    Completed,
}

/// A container the core tracks.
#[derive(Clone, Debug)]
pub(crate) struct ContainerRec {
    pub(crate) task: TaskId,
    pub(crate) attempt: AttemptId,
    pub(crate) kind: SlotKind,
    pub(crate) holder: Holder,
    /// The last accepted state; never terminal (terminal reports remove the record).
    pub(crate) state: ContainerState,
    /// Its job ended: it no longer counts for the task and only waits for its kill to be
    /// confirmed, holding its slot until then.
    pub(crate) draining: bool,
    /// A kill was sent (preemption or job end); do not ask twice.
    pub(crate) kill_sent: bool,
    /// When the master allocated it (or recovered it), on the master's clock.
    pub(crate) allocated: Timestamp,
    /// When it entered `state`, as its report says (the agent's clock).
    pub(crate) entered: Timestamp,
    /// When its process started running (the agent's clock), once it did.
    pub(crate) started: Option<Timestamp>,
}

impl ContainerRec {
    /// A live container of `task`'s `attempt` that entered `state` at `at`, held by
    /// `holder`: neither draining nor sent a kill yet.
    pub(crate) fn new(
        task: TaskId,
        attempt: AttemptId,
        kind: SlotKind,
        holder: Holder,
        (state, at): (ContainerState, Timestamp),
    ) -> ContainerRec {
        let started = (state >= ContainerState::Running).then_some(at);
        let (draining, kill_sent) = (false, false);
        ContainerRec {
            task,
            attempt,
            kind,
            holder,
            state,
            draining,
            kill_sent,
            allocated: at,
            entered: at,
            started,
        }
    }
}

/// Who holds a container.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Holder {
    /// A registered agent, whose slot it occupies.
    Agent(AgentId),
    /// Recovered after a master restart; waits until `deadline` for an agent of `node`.
    Orphan { node: String, deadline: Timestamp },
}

/// One agent registration.
#[derive(Debug)]
pub(crate) struct Agent {
    pub(crate) node: Arc<str>,
    pub(crate) connected: bool,
    pub(crate) last_seen: Timestamp,
    pub(crate) offered: [u32; KINDS],
    pub(crate) used: [u32; KINDS],
    /// The containers it holds, ascending. At most its slots and strays, a handful: a
    /// plain vector's scan and shift cost less than a ring buffer's search (every launch
    /// and every end come here).
    pub(crate) containers: Vec<ContainerId>,
    /// Containers the agent still runs that the master killed as unknown when it
    /// registered: each holds its slot (counted in `used`) until the agent reports it ended,
    /// so nothing is launched into a slot the agent cannot give.
    pub(crate) strays: BTreeMap<ContainerId, Vec<SlotKind>>,
    /// Set when it takes no new work: an admin drained it, or it said it is leaving.
    pub(crate) drain: Option<DrainCause>,
    /// Set while it takes no new work because its tasks kept failing fast.
    pub(crate) quarantine: Option<Quarantine>,
    /// Its current run of fast task failures (see `reactor::health`).
    pub(crate) streak: FailStreak,
    /// Whether its data directory is shared or its own (see `reactor::outputs`).
    pub(crate) data_mode: DataMode,
    /// Its data directory's id, as it registered.
    pub(crate) data_dir_id: String,
}

/// An agent's current run of fast task failures: a completion or a slow failure ends it.
#[derive(Clone, Debug, Default)]
pub(crate) struct FailStreak {
    /// Fast failures in a row.
    pub(crate) count: u32,
    /// The job of the first of them.
    pub(crate) first_job: Option<JobId>,
    /// Whether they span more than one job.
    pub(crate) several_jobs: bool,
}

impl Task {
    /// A task never launched.
    pub(crate) fn new() -> Task {
        Task { attempt: AttemptId(0), failures: 0, phase: TaskPhase::Pending, run_ms: None, output_on: None }
    }
}

impl Agent {
    /// A freshly registered agent with no containers.
    pub(crate) fn new(node: String, map_slots: u32, reduce_slots: u32, now: Timestamp) -> Agent {
        Agent {
            node: node.into(),
            connected: true,
            last_seen: now,
            offered: [map_slots, reduce_slots],
            used: [0; KINDS],
            containers: Vec::new(),
            strays: BTreeMap::new(),
            drain: None,
            quarantine: None,
            streak: FailStreak::default(),
            data_mode: DataMode::Shared,
            data_dir_id: String::new(),
        }
    }

    /// Whether the agent may be given new work: connected, not draining, not quarantined.
    /// Policies see only such agents, so draining is a property of the view, not a rule
    /// every policy must remember.
    pub(crate) fn takes_work(&self) -> bool {
        self.connected && self.drain.is_none() && self.quarantine.is_none()
    }

    /// Slots of `kind` not in use.
    pub(crate) fn free(&self, kind: SlotKind) -> u32 {
        let k = kind_ix(kind);
        self.offered[k].saturating_sub(self.used[k])
    }

    /// Adds `container` to the ones it holds. Ids are handed out rising, so a launch
    /// appends; an adopted container may go anywhere.
    fn hold(&mut self, container: ContainerId) {
        if self.containers.last().is_none_or(|&last| last < container) {
            self.containers.push(container);
        } else if let Err(at) = self.containers.binary_search(&container) {
            self.containers.insert(at, container);
        }
    }

    /// Removes `container` from the ones it holds (in one pass: for a handful of ids,
    /// finding it and then shifting the rest by `memmove` cost more).
    fn let_go(&mut self, container: ContainerId) {
        self.containers.retain(|&c| c != container);
    }
}

impl Job {
    /// A new job of `account`, submitted by its own principal and without a deadline
    /// until told otherwise, with every task pending; stages without `after` are released,
    /// but the ready queues are filled by [`State::release_stages`].
    pub(crate) fn new(id: JobId, account: AccountId, spec: JobSpec, submitted: Timestamp) -> Job {
        let stages = spec
            .stages
            .iter()
            .map(|s| {
                let after: Vec<usize> = s.after.iter().filter_map(|name| spec.stage_index(name)).collect();
                Stage {
                    kind: s.slot,
                    name: s.name.as_str().into(),
                    command: s.command.as_str().into(),
                    released: false,
                    after,
                    tasks: (0..s.tasks).map(|_| Task::new()).collect(),
                    completed: 0,
                    live: 0,
                    failed_attempts: 0,
                }
            })
            .collect();
        let stage_tasks = Arc::new(spec.stages.iter().map(|s| (s.name.clone(), s.tasks)).collect());
        Job {
            id,
            owner: account.clone(),
            account_name: account.0.as_str().into(),
            account,
            deadline: None,
            submitted,
            started: None,
            finished: None,
            state: JobState::Pending,
            message: None,
            stages,
            stage_tasks,
            ready: Default::default(),
            failed_on: BTreeMap::new(),
            completed: 0,
            live: [0; KINDS],
            slot_ms: [0; KINDS],
            purchase: None,
            total_tasks: spec.total_tasks(),
            spec,
        }
    }

    /// Tasks over all stages (counted from the spec at admission: an ended job no longer
    /// keeps its tasks, and a spec's stages never change).
    pub(crate) fn total(&self) -> u64 {
        self.total_tasks
    }

    /// The number of tasks of stage `ix` (from the spec, see [`total`](Job::total)).
    pub(crate) fn stage_size(&self, ix: usize) -> u32 {
        self.spec.stages.get(ix).map_or(0, |s| s.tasks)
    }

    /// Frees the per-task records of an ended job: it keeps its counts, which is all its
    /// status needs, and a retained job of 100,000 tasks stops costing megabytes.
    pub(crate) fn release_tasks(&mut self) {
        debug_assert!(self.state.is_terminal() && self.live_total() == 0);
        for stage in &mut self.stages {
            stage.tasks = Vec::new();
        }
        self.ready = Default::default();
        self.failed_on = BTreeMap::new();
    }

    /// Tasks with a live container, all kinds.
    pub(crate) fn live_total(&self) -> u64 {
        self.live.iter().map(|&n| u64::from(n)).sum()
    }

    /// The task `id`, if it belongs to this job.
    pub(crate) fn task(&self, id: TaskId) -> Option<&Task> {
        self.stages.get(id.stage.0 as usize)?.tasks.get(id.index as usize)
    }

    /// The task `id`, mutably.
    pub(crate) fn task_mut(&mut self, id: TaskId) -> Option<&mut Task> {
        self.stages.get_mut(id.stage.0 as usize)?.tasks.get_mut(id.index as usize)
    }

    /// Moves a task to `phase`, keeping the stage and job counters in step. Returns the
    /// old phase, or `None` if the task does not exist.
    pub(crate) fn set_phase(&mut self, id: TaskId, phase: TaskPhase) -> Option<TaskPhase> {
        let stage = self.stages.get_mut(id.stage.0 as usize)?;
        let k = kind_ix(stage.kind);
        let old = std::mem::replace(&mut stage.tasks.get_mut(id.index as usize)?.phase, phase);
        match old {
            TaskPhase::Pending => {}
            TaskPhase::Live(_) => {
                stage.live -= 1;
                self.live[k] -= 1;
            }
            TaskPhase::Completed => {
                stage.completed -= 1;
                self.completed -= 1;
            }
        }
        match phase {
            TaskPhase::Pending => {}
            TaskPhase::Live(_) => {
                stage.live += 1;
                self.live[k] += 1;
            }
            TaskPhase::Completed => {
                stage.completed += 1;
                self.completed += 1;
            }
        }
        Some(old)
    }

    /// Whether every task of stage `ix` has completed.
    pub(crate) fn stage_done(&self, ix: usize) -> bool {
        self.stages.get(ix).is_some_and(|s| s.completed == self.stage_size(ix))
    }
}

impl State {
    /// Adds a newly admitted or recovered job, indexing it as active unless it has ended.
    pub(crate) fn insert_job(&mut self, mut job: Job) {
        self.touched.push(job.id);
        if job.state.is_terminal() {
            job.release_tasks();
        } else {
            self.active.insert(job.id);
            *self.active_tasks.entry(job.account.clone()).or_default() += job.total();
        }
        self.jobs.insert(job.id, job);
    }

    /// Takes an ended job out of the active index and its account's task count, and
    /// frees its per-task records.
    pub(crate) fn deactivate(&mut self, id: JobId) {
        self.touched.push(id);
        let Some(job) = self.jobs.get_mut(&id) else { return };
        if !self.active.remove(&id) {
            return;
        }
        job.release_tasks();
        if let Some(count) = self.active_tasks.get_mut(&job.account) {
            *count = count.saturating_sub(job.total());
            if *count == 0 {
                self.active_tasks.remove(&job.account);
            }
        }
    }

    /// Tasks held by the unfinished jobs of `account`.
    pub(crate) fn active_tasks_of(&self, account: &AccountId) -> u64 {
        self.active_tasks.get(account).copied().unwrap_or(0)
    }

    /// Releases every stage whose barrier has passed and queues its pending tasks.
    pub(crate) fn release_stages(&mut self, job: JobId) {
        let Some(j) = self.jobs.get_mut(&job) else { return };
        if j.state.is_terminal() {
            return;
        }
        for ix in 0..j.stages.len() {
            let stage = &j.stages[ix];
            if stage.released || !stage.after.iter().all(|&dep| j.stage_done(dep)) {
                continue;
            }
            let k = kind_ix(stage.kind);
            // Added as one ascending run: appended at once when no later stage is queued
            // (inserting a stage's tasks one at a time was most of a submit's cost).
            let tasks = 0..stage.tasks.len() as u32;
            if stage.live == 0 && stage.completed == 0 {
                // Every task pending, as a stage released for the first time has them: a
                // run of known length is written in one go, not grown task by task.
                j.ready[k].extend_sorted(tasks.map(|i| (ix as u32, i)));
            } else {
                let pending = tasks.filter(|&i| stage.tasks[i as usize].phase == TaskPhase::Pending);
                j.ready[k].extend_sorted(pending.map(|i| (ix as u32, i)));
            }
            j.stages[ix].released = true;
        }
        self.sync_ready_index(job);
    }

    /// Puts a task back to pending and, if its stage is released, in its ready queue.
    pub(crate) fn requeue(&mut self, task: TaskId) {
        self.touched.push(task.job);
        let Some(j) = self.jobs.get_mut(&task.job) else { return };
        j.set_phase(task, TaskPhase::Pending);
        let Some(stage) = j.stages.get(task.stage.0 as usize) else { return };
        if stage.released && !j.state.is_terminal() {
            j.ready[kind_ix(stage.kind)].insert((task.stage.0, task.index));
        }
        self.sync_ready_index(task.job);
    }

    /// Takes the first ready task of `kind` from `job`. Inlined: every launch takes one.
    #[inline]
    pub(crate) fn pop_ready(&mut self, job: JobId, kind: SlotKind) -> Option<TaskId> {
        let k = kind_ix(kind);
        let j = self.jobs.get_mut(&job)?;
        let (stage, index) = j.ready[k].pop_first()?;
        // Only this kind's queue shrank; the index changes only if it emptied. This runs
        // on every launch, so it skips `sync_ready_index`'s look at both kinds.
        if j.ready[k].is_empty() {
            self.ready_jobs[k].remove(&job);
        }
        Some(TaskId { job, stage: StageId(stage), index })
    }

    /// Takes the ready task `(stage, index)` of `kind` from `job`, if it is queued.
    pub(crate) fn take_ready(&mut self, job: JobId, kind: SlotKind, key: (u32, u32)) -> Option<TaskId> {
        let k = kind_ix(kind);
        let j = self.jobs.get_mut(&job)?;
        if !j.ready[k].remove(&key) {
            return None;
        }
        if j.ready[k].is_empty() {
            self.ready_jobs[k].remove(&job);
        }
        Some(TaskId { job, stage: StageId(key.0), index: key.1 })
    }

    /// Empties a job's ready queues (it ended).
    pub(crate) fn clear_ready(&mut self, job: JobId) {
        if let Some(j) = self.jobs.get_mut(&job) {
            j.ready = Default::default();
        }
        self.sync_ready_index(job);
    }

    /// Brings `ready_jobs` in line with the job's ready queues.
    fn sync_ready_index(&mut self, job: JobId) {
        for k in 0..KINDS {
            let has = self.jobs.get(&job).is_some_and(|j| !j.ready[k].is_empty());
            if has {
                self.ready_jobs[k].insert(job);
            } else {
                self.ready_jobs[k].remove(&job);
            }
        }
    }

    /// Brings `free_agents` in line with an agent's slot table and whether it takes work;
    /// call after registering, removing, disconnecting, draining or quarantining it (and
    /// lifting either) and after any change to its slot use.
    pub(crate) fn sync_free_index(&mut self, agent: AgentId) {
        for kind in SlotKind::ALL {
            let free = self.agents.get(&agent).is_some_and(|a| a.takes_work() && a.free(kind) > 0);
            let index = &mut self.free_agents[kind_ix(kind)];
            if free {
                index.insert(agent);
            } else {
                index.remove(&agent);
            }
        }
    }

    /// The node a holder is on.
    pub(crate) fn holder_node(&self, holder: &Holder) -> Arc<str> {
        match holder {
            Holder::Agent(a) => self.agents.get(a).map_or_else(|| Arc::from(""), |a| a.node.clone()),
            Holder::Orphan { node, .. } => Arc::from(node.as_str()),
        }
    }

    /// Binds a container record to `holder`, occupying a slot if it is an agent.
    pub(crate) fn attach(&mut self, id: ContainerId, rec: ContainerRec) {
        match &rec.holder {
            Holder::Agent(a) => {
                if let Some(agent) = self.agents.get_mut(a) {
                    let k = kind_ix(rec.kind);
                    agent.used[k] += 1;
                    agent.hold(id);
                    // The index changes only when the last free slot goes (every launch
                    // comes here, so no second look-up of the agent).
                    if agent.free(rec.kind) == 0 {
                        self.free_agents[k].remove(a);
                    }
                }
            }
            Holder::Orphan { node, .. } => {
                self.orphans.entry(node.clone()).or_default().insert(id);
            }
        }
        self.containers.insert(id, rec);
    }

    /// Removes a container record and frees what its holder had for it.
    pub(crate) fn detach(&mut self, id: ContainerId) -> Option<ContainerRec> {
        let rec = self.containers.remove(&id)?;
        self.release_holder(id, &rec);
        Some(rec)
    }

    /// Frees what the holder of `rec`, already taken out of the container table (the
    /// rest of [`detach`](State::detach)), had for container `id`.
    pub(crate) fn release_holder(&mut self, id: ContainerId, rec: &ContainerRec) {
        match &rec.holder {
            Holder::Agent(a) => {
                if let Some(agent) = self.agents.get_mut(a) {
                    let k = kind_ix(rec.kind);
                    agent.used[k] -= 1;
                    agent.let_go(id);
                    // Only the first slot freed puts an agent that takes work in the index.
                    if agent.takes_work() && agent.free(rec.kind) == 1 {
                        self.free_agents[k].insert(*a);
                    }
                }
            }
            Holder::Orphan { node, .. } => {
                if let Some(set) = self.orphans.get_mut(node) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.orphans.remove(node);
                    }
                }
            }
        }
    }

    /// Hands out the next job id.
    pub(crate) fn alloc_job(&mut self) -> JobId {
        let id = JobId(self.next_job);
        self.next_job += 1;
        id
    }

    /// Hands out the next container id.
    pub(crate) fn alloc_container(&mut self) -> ContainerId {
        let id = ContainerId(self.next_container);
        self.next_container += 1;
        id
    }
}

/// A hasher for integer ids: one multiply, no per-map random state (so no hidden
/// randomness either; nothing iterates a hashed map in an order that reaches output).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}
