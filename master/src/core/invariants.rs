//! Executable cross-checks of the core's state, called after every step by the tests and
//! the simulator: slot tables match the containers, every live container belongs to
//! exactly one holder and its task's current attempt, counters match the tasks,
//! ended jobs have nothing live, and account totals match their ledger entries. Costs
//! O(tasks + containers + ledger entries); not for the hot path.

use std::collections::{BTreeMap, BTreeSet};

use slotmarket_common::ids::{AccountId, AgentId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::JobState;
use slotmarket_common::spec::SlotKind;

use super::Core;
use super::sorted_set::SortedSet;
use super::state::{Holder, Job, KINDS, State, TaskPhase, kind_ix};

/// Checks every invariant; the error names the first one broken.
pub fn check(core: &Core) -> Result<(), String> {
    let state = core.state();
    check_agents(state)?;
    check_containers(state)?;
    for job in state.jobs.values() {
        check_job(state, job)?;
    }
    check_ready_index(state)?;
    check_reservations(state)?;
    state.accounts.check()
}

fn check_agents(state: &State) -> Result<(), String> {
    // One pass over the containers collects what each agent holds; the agents are then
    // compared against it, so the check costs O(agents + containers).
    let mut holdings: BTreeMap<AgentId, ([u32; KINDS], BTreeSet<ContainerId>)> = BTreeMap::new();
    for (&c, rec) in &state.containers {
        if let Holder::Agent(a) = rec.holder {
            let (used, held) = holdings.entry(a).or_default();
            used[kind_ix(rec.kind)] += 1;
            held.insert(c);
        }
    }
    for (id, agent) in state.agents.iter() {
        let (mut used, held) = holdings.remove(&id).unwrap_or_default();
        for &kind in agent.strays.values().flatten() {
            used[kind_ix(kind)] += 1;
        }
        if used != agent.used {
            return Err(format!("{id}: slot table says {:?} used, containers say {used:?}", agent.used));
        }
        if (0..KINDS).any(|k| agent.used[k] > agent.offered[k]) {
            return Err(format!("{id}: uses {:?} slots but offers {:?}", agent.used, agent.offered));
        }
        if !held.iter().eq(agent.containers.iter()) {
            return Err(format!("{id}: container list {:?} differs from holders {held:?}", agent.containers));
        }
        if state.nodes.get(&*agent.node) != Some(&id) {
            return Err(format!(
                "{id}: node {} is registered as {:?}",
                agent.node,
                state.nodes.get(&*agent.node)
            ));
        }
    }
    for kind in SlotKind::ALL {
        let expected: SortedSet<AgentId> = state
            .agents
            .iter()
            .filter(|(_, a)| a.takes_work() && a.free(kind) > 0)
            .map(|(id, _)| id)
            .collect();
        if expected != state.free_agents[kind_ix(kind)] {
            let have = &state.free_agents[kind_ix(kind)];
            return Err(format!("free {kind} slot index is {have:?}, agents say {expected:?}"));
        }
    }
    check_quarantine_index(state)?;
    if state.nodes.len() != state.agents.len() {
        return Err(format!("{} node names for {} agents", state.nodes.len(), state.agents.len()));
    }
    Ok(())
}

/// No launch ate into a reservation: in the step that stated each reservation, jobs
/// outside its set gained no more slots of its kind than were free beyond the set's idle
/// reserved ones (slots they held already are not taken back).
fn check_reservations(state: &State) -> Result<(), String> {
    for held in &state.reservations {
        let now = held.outside_now(state);
        if now > held.outside_before + held.allowance {
            return Err(format!(
                "{}: jobs outside a reservation of {} hold {now} slots, up from {} with {} to spare",
                held.reservation.kind, held.reservation.slots, held.outside_before, held.allowance
            ));
        }
    }
    Ok(())
}

/// The quarantined index names exactly the agents in quarantine.
fn check_quarantine_index(state: &State) -> Result<(), String> {
    for (id, agent) in state.agents.iter() {
        if agent.quarantine.is_some() != state.quarantined.contains(&id) {
            return Err(format!(
                "{id}: quarantine {:?} but quarantined index {:?}",
                agent.quarantine, state.quarantined
            ));
        }
    }
    if state.quarantined.iter().any(|id| !state.agents.contains_key(id)) {
        return Err(format!("quarantined index {:?} names an unknown agent", state.quarantined));
    }
    Ok(())
}

fn check_containers(state: &State) -> Result<(), String> {
    for (&c, rec) in &state.containers {
        if c.0 >= state.next_container {
            return Err(format!("{c} is not below the next container id {}", state.next_container));
        }
        if rec.state.is_terminal() {
            return Err(format!("{c} is tracked in terminal state {}", rec.state));
        }
        match &rec.holder {
            Holder::Agent(a) if !state.agents.contains_key(a) => {
                return Err(format!("{c} is held by unknown agent {a}"));
            }
            Holder::Orphan { node, .. } if !state.orphans.get(node).is_some_and(|s| s.contains(&c)) => {
                return Err(format!("orphan {c} is missing from node {node}'s orphan list"));
            }
            _ => {}
        }
        if !rec.draining {
            check_live_container(state, c, rec.task, rec.attempt, rec.kind)?;
        }
    }
    for (node, set) in &state.orphans {
        for c in set {
            let ok = state
                .containers
                .get(c)
                .is_some_and(|r| matches!(&r.holder, Holder::Orphan { node: n, .. } if n == node));
            if !ok || set.is_empty() {
                return Err(format!("orphan list of {node} names {c}, which is not its orphan"));
            }
        }
    }
    Ok(())
}

fn check_live_container(
    state: &State,
    c: ContainerId,
    task: TaskId,
    attempt: AttemptId,
    kind: SlotKind,
) -> Result<(), String> {
    let job = state.jobs.get(&task.job).ok_or_else(|| format!("{c} runs {task} of an unknown job"))?;
    if job.state.is_terminal() {
        return Err(format!("{c} is live but its job {} is {}", job.id, job.state));
    }
    let t = job.task(task).ok_or_else(|| format!("{c} runs unknown task {task}"))?;
    if t.phase != TaskPhase::Live(c) || t.attempt != attempt {
        return Err(format!("{c} ({attempt}) is live but {task} is {:?} at {}", t.phase, t.attempt));
    }
    if job.stages[task.stage.0 as usize].kind != kind {
        return Err(format!("{c} occupies a {kind} slot for a task of another kind"));
    }
    Ok(())
}

fn check_job(state: &State, job: &Job) -> Result<(), String> {
    let id = job.id;
    if id.0 >= state.next_job {
        return Err(format!("{id} is not below the next job id {}", state.next_job));
    }
    if job.state.is_terminal() {
        return check_ended_job(job);
    }
    let (mut completed, mut live) = (0u64, [0u32; KINDS]);
    for (s, stage) in job.stages.iter().enumerate() {
        let mut counts = (0u32, 0u32);
        for (i, t) in stage.tasks.iter().enumerate() {
            let task = TaskId { job: id, stage: StageId(s as u32), index: i as u32 };
            let queued = job.ready[kind_ix(stage.kind)].contains(&(s as u32, i as u32));
            match t.phase {
                TaskPhase::Completed => counts.0 += 1,
                TaskPhase::Live(c) => {
                    counts.1 += 1;
                    if state.containers.get(&c).is_none_or(|r| r.draining || r.task != task) {
                        return Err(format!("{task} is live in {c}, which does not run it"));
                    }
                    if !stage.released {
                        return Err(format!("{task} runs before its stage's barrier passed"));
                    }
                }
                TaskPhase::Pending => {
                    let should = stage.released && !job.state.is_terminal();
                    if queued != should {
                        return Err(format!("{task} is pending; ready-queued {queued}, expected {should}"));
                    }
                    continue;
                }
            }
            if queued {
                return Err(format!("{task} is {:?} but still in the ready queue", t.phase));
            }
        }
        if counts != (stage.completed, stage.live) {
            let have = (stage.completed, stage.live);
            return Err(format!("{id} stage {s}: counted (completed, live) {counts:?}, recorded {have:?}"));
        }
        if stage.released && !stage.after.iter().all(|&d| job.stage_done(d)) {
            return Err(format!("{id} stage {s} released before its barrier passed"));
        }
        completed += u64::from(counts.0);
        live[kind_ix(stage.kind)] += counts.1;
    }
    check_job_totals(job, completed, live)
}

/// An ended job keeps only its counts: no per-task records, nothing live or ready.
fn check_ended_job(job: &Job) -> Result<(), String> {
    let id = job.id;
    if job.stages.iter().any(|s| !s.tasks.is_empty()) {
        return Err(format!("{id} is {} but still keeps per-task records", job.state));
    }
    let completed: u64 = job.stages.iter().map(|s| u64::from(s.completed)).sum();
    let live: u32 = job.stages.iter().map(|s| s.live).sum();
    if live > 0 || completed != job.completed {
        return Err(format!("{id}: stage counts ({completed}, {live}) differ from the job's"));
    }
    check_job_totals(job, completed, job.live)
}

fn check_job_totals(job: &Job, completed: u64, live: [u32; KINDS]) -> Result<(), String> {
    let id = job.id;
    if completed != job.completed || live != job.live {
        return Err(format!(
            "{id}: counters ({}, {:?}) differ from tasks ({completed}, {live:?})",
            job.completed, job.live
        ));
    }
    if job.state.is_terminal() && (job.live_total() > 0 || job.ready.iter().any(|r| !r.is_empty())) {
        return Err(format!("{id} is {} but has live or ready tasks", job.state));
    }
    if job.state == JobState::Completed && job.completed != job.total() {
        return Err(format!("{id} is completed with {} of {} tasks done", job.completed, job.total()));
    }
    Ok(())
}

fn check_ready_index(state: &State) -> Result<(), String> {
    let active: BTreeSet<JobId> =
        state.jobs.values().filter(|j| !j.state.is_terminal()).map(|j| j.id).collect();
    if active != state.active {
        return Err(format!("active index is {:?}, jobs say {active:?}", state.active));
    }
    let mut tasks: BTreeMap<AccountId, u64> = BTreeMap::new();
    for job in state.jobs.values().filter(|j| !j.state.is_terminal()) {
        *tasks.entry(job.account.clone()).or_default() += job.total();
    }
    if tasks != state.active_tasks {
        return Err(format!("active tasks per account are {:?}, jobs say {tasks:?}", state.active_tasks));
    }
    for k in 0..KINDS {
        let expected: SortedSet<JobId> =
            state.jobs.values().filter(|j| !j.ready[k].is_empty()).map(|j| j.id).collect();
        if expected != state.ready_jobs[k] {
            return Err(format!("ready index {k} is {:?}, jobs say {expected:?}", state.ready_jobs[k]));
        }
    }
    Ok(())
}
