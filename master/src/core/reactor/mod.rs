//! The reactor: one `on_<event>` handler per [`Event`] variant, plus `on_tick` and the
//! carrying out of policy decisions. These are the only functions that change the
//! core's state; each writes what the driver must do into a [`Ctx`].
//!
//! - `jobs`: submit, cancel, and the transitions of a job's life (started, ended).
//! - `reports`: container reports, fencing, and what each container outcome does to its task.
//! - `agents`: registration (with adoption of live containers), heartbeats, loss by silence.
//! - `recovery`: rebuilding jobs from the store after a restart.
//! - `launch`: assignments and preemptions decided by the policy.
//! - `accounts`: creating accounts, granting budget, restoring the ledger after a restart.
//! - `placement`: which ready task and agent an assignment starts (retries avoid the
//!   nodes their task failed on).
//! - `drain`: agents leaving, admins draining and undraining nodes.
//! - `health`: quarantine of agents whose tasks keep failing fast.
//! - `waits`: jobs held until the jobs they run after complete; time limits.
//! - `outputs`: completed tasks re-run when the local-mode node holding their outputs is lost.

mod accounts;
mod agents;
mod drain;
mod health;
mod jobs;
mod launch;
mod outputs;
mod placement;
mod recovery;
mod reports;
pub(crate) mod reserve;
pub(crate) mod waits;

pub(crate) use reports::{ImpliedStart, on_container_reports, start_launched};

use std::time::Duration;

use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::Response;
use slotmarket_common::time::Timestamp;

use super::RequestId;
use super::command::{Command, Persist, Persists};
use super::event::Event;
use super::state::State;

pub(crate) use agents::next_deadline;
pub use health::NodeHealth;
pub(crate) use jobs::{admit, check_submit, may_see};
pub(crate) use launch::apply_decisions;

/// How many tasks a submit may bring: per job, and per account over its unfinished jobs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TaskLimits {
    /// Most tasks in one job.
    pub(crate) per_job: u64,
    /// Most tasks over one account's jobs that have not ended.
    pub(crate) per_account: u64,
}

impl TaskLimits {
    /// No limit at all.
    pub(crate) const NONE: TaskLimits = TaskLimits { per_job: u64::MAX, per_account: u64::MAX };
}

/// What one `handle`/`tick` call produces, and the time it happens at.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The time of this step (never earlier than any step before).
    pub(crate) now: Timestamp,
    /// How long silence is tolerated before an agent or orphan is lost.
    pub(crate) agent_timeout: Duration,
    /// How long ended jobs stay in the state (see `CoreConfig::ended_job_retention`).
    pub(crate) retention: Duration,
    /// When a node counts as unhealthy (see `CoreConfig::node_health`).
    pub(crate) health: NodeHealth,
    /// Limits checked when a job is submitted (see `CoreConfig::max_tasks_per_job`).
    pub(crate) task_limits: TaskLimits,
    /// Which `Persist` commands the driver wants (see `CoreConfig::persists`).
    pub(crate) persists: Persists,
    /// Whether a `Running` report may follow `Allocated` directly, standing for the
    /// agent's `Acquired` and `Running` at once (see `Core::set_start_reports`).
    pub(crate) one_start_report: bool,
    /// Set when the core starts each container it launches (`StartReports::Implied`): a
    /// launch then records its container as running at once, and lists here the starts
    /// whose rest waits for the end of the step (see `start_launched`).
    pub(crate) implied_starts: Option<Vec<ImpliedStart>>,
    /// The step's commands, after those the driver's buffer already held.
    out: Vec<Command>,
    /// Jobs whose status changed in this step, possibly repeated; one `JobChanged` each
    /// at the end. A vector rather than a set: a step touches one or two jobs, and the
    /// simulator takes millions of steps.
    changed: Vec<JobId>,
}

impl Ctx {
    /// A step at `now` appending to `out`, with the (empty) `changed` buffer kept from
    /// the step before. Writes all `Persist`s unless told otherwise.
    pub(crate) fn new(
        now: Timestamp,
        agent_timeout: Duration,
        retention: Duration,
        health: NodeHealth,
        (out, changed): (Vec<Command>, Vec<JobId>),
    ) -> Ctx {
        let (task_limits, persists, one_start_report, implied_starts) =
            (TaskLimits::NONE, Persists::All, false, None);
        Ctx {
            now,
            agent_timeout,
            retention,
            health,
            task_limits,
            persists,
            one_start_report,
            implied_starts,
            out,
            changed,
        }
    }

    /// A command buffer for one step's commands when the driver brings none.
    pub(crate) fn new_buffer() -> Vec<Command> {
        // Room for a typical step at once: a report's persist, a launch and its persist,
        // two notices. Five commands (720 bytes) also stay under glibc's per-thread cache
        // limit (1032 bytes); eight, or growing past four, did not, and the allocator's
        // slow path was a quarter of the simulator's profile.
        Vec::with_capacity(5)
    }

    /// Appends a command.
    pub(crate) fn push(&mut self, command: Command) {
        self.out.push(command);
    }

    /// Answers a client request.
    pub(crate) fn reply(&mut self, request: RequestId, response: Response) {
        self.push(Command::Reply { request, response: Box::new(response) });
    }

    /// Makes room for `n` more commands at once (a launch storm after a submit would
    /// otherwise grow the buffer step by step, moving every command each time).
    pub(crate) fn reserve(&mut self, n: usize) {
        self.out.reserve(n);
    }

    /// Appends a durable write, if the driver wants writes of its kind.
    pub(crate) fn persist(&mut self, persist: Persist) {
        if self.persists.wants(&persist) {
            self.out.push(Command::Persist(persist));
        }
    }

    /// Whether the driver wants every durable write: the hot paths ask before building
    /// a `Persist::Container` or `Persist::JobAdmitted` that would only be dropped.
    pub(crate) fn persists_all(&self) -> bool {
        self.persists.all()
    }

    /// Notes that `job`'s status (counts or state) changed.
    // Inlined: every launch and completion notes one, from other modules.
    #[inline]
    pub(crate) fn changed(&mut self, job: JobId) {
        if self.changed.last() != Some(&job) {
            self.changed.push(job);
        }
    }

    /// The jobs noted as changed so far in this step (possibly repeated).
    pub(crate) fn changed_jobs(&self) -> &[JobId] {
        &self.changed
    }

    /// The commands of this step, with one `JobChanged` per changed job at the end (after
    /// every `Persist`, so a watcher never sees state the store does not have) when
    /// `notices` asks for them. The emptied `changed` buffer is handed back for the next
    /// step. Takes the context by reference (leaving it empty): moving it whole into this
    /// call was a copy per step. Inlined: it ends every step.
    #[inline]
    pub(crate) fn finish(&mut self, state: &State, changed: &mut Vec<JobId>, notices: bool) -> Vec<Command> {
        if notices {
            self.changed.sort_unstable();
            self.changed.dedup();
            for &job in &self.changed {
                if state.jobs.contains_key(&job) {
                    self.out.push(Command::JobChanged { job });
                }
            }
        }
        self.changed.clear();
        *changed = std::mem::take(&mut self.changed);
        std::mem::take(&mut self.out)
    }
}

/// Periodic work: agents and orphans lost by silence, jobs past their time limit, ended
/// jobs past their retention.
pub(crate) fn on_tick(state: &mut State, cx: &mut Ctx) {
    agents::on_tick(state, cx);
    waits::expire_time_limits(state, cx);
    jobs::drop_expired(state, cx.now);
}

/// Routes an event to its handler.
pub(crate) fn dispatch(state: &mut State, cx: &mut Ctx, event: Event) {
    match event {
        Event::AgentJoined {
            agent,
            node,
            map_slots,
            reduce_slots,
            live_containers,
            data_mode,
            data_dir_id,
        } => {
            let join = agents::Join {
                agent,
                node,
                map_slots,
                reduce_slots,
                live_containers,
                data_mode,
                data_dir_id,
            };
            agents::on_agent_joined(state, cx, join);
        }
        Event::AgentHeartbeat { agent } => agents::on_agent_heartbeat(state, cx, agent),
        Event::AgentDisconnected { agent } => agents::on_agent_disconnected(state, cx, agent),
        Event::ContainerReports { agent, reports } => {
            on_container_reports(state, cx, agent, reports.into_iter());
        }
        Event::JobSubmitted { request, caller, spec } => {
            jobs::on_job_submitted(state, cx, request, &caller, spec);
        }
        Event::JobCancelRequested { request, caller, job } => {
            jobs::on_job_cancel_requested(state, cx, request, &caller, job);
        }
        Event::JobRecovered(job) => recovery::on_job_recovered(state, cx, job),
        Event::StoreRecovered(recovery) => recovery::on_store_recovered(state, recovery),
        Event::AccountAddRequested { request, caller, account, budget, members } => {
            let add = accounts::AccountAdd { account, budget, members };
            accounts::on_account_add_requested(state, cx, request, &caller, add);
        }
        Event::BudgetAddRequested { request, caller, account, amount, memo } => {
            let add = accounts::BudgetAdd { account, amount, memo };
            accounts::on_budget_add_requested(state, cx, request, &caller, add);
        }
        Event::AccountsRecovered { accounts, ledger } => {
            accounts::on_accounts_recovered(state, accounts, ledger)
        }
        Event::AgentLeaving { agent } => drain::on_agent_leaving(state, cx, agent),
        Event::NodeDrainRequested { request, caller, node, drain } => {
            drain::on_node_drain_requested(state, cx, request, &caller, &node, drain);
        }
        Event::RateSetRequested { request, caller, account, rate } => {
            accounts::on_rate_set_requested(state, cx, request, &caller, account, rate);
        }
        // The core handles these itself before dispatch (the policy's models; MRM's
        // market, which the reactor does not hold).
        Event::CompletionModelBuilt(_) | Event::ChoiceSubmitted { .. } => {}
        Event::DeadlineSetRequested { request, caller, job, deadline } => {
            jobs::on_deadline_set_requested(state, cx, request, &caller, job, deadline);
        }
        Event::IncomeSetRequested { request, caller, account, income } => {
            accounts::on_income_set_requested(state, cx, request, &caller, account, income);
        }
        Event::AccountSettingsRecovered { rates, income } => state.accounts.restore_settings(rates, income),
    }
}
