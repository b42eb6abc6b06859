//! `CoreView`: read-only answers to status, listing, node, account and ledger queries,
//! with the access rules that users see only their own jobs and the accounts they
//! belong to, and admins see everything; and the reservation view (`reservation`),
//! which lists only the reserved jobs the caller may see.

use slotmarket_common::ids::{AccountId, AgentId, JobId};
use std::ops::Bound;

use slotmarket_common::protocol::{
    AccountSummary, DemandClass, ErrorKind, ErrorReply, JobHistory, JobState, JobStatus, JobSummary,
    JobsQuery, LedgerPage, NodeSummary, ProfileView, ReservationView, ReservedKind, RunCursor, SloStatus,
    StageOutputs, StageStatus,
};
use slotmarket_common::spec::{JobSpec, StageSpec};
use std::collections::BTreeSet;

use super::Caller;
use super::accounting::AccountError;
use super::policy::jockey::JobProfile;
use super::policy::{DressReport, Policy, PolicyName};
use super::reactor::may_see;
use super::reactor::reserve;
use super::state::{Agent, Job, State, kind_ix};
use slotmarket_common::spec::SlotKind;

/// A spec with a recorded run's stages (names, slot kinds, task counts), no barriers.
fn spec_of_run(run: &JobHistory) -> JobSpec {
    let stages = run
        .stages
        .iter()
        .map(|s| StageSpec {
            name: s.name.clone(),
            tasks: s.run_ms.len() as u32,
            slot: s.slot,
            command: String::new(),
            after: Vec::new(),
        })
        .collect();
    JobSpec {
        name: run.name.clone(),
        input: None,
        max_attempts: None,
        stages,
        class: run.class,
        queue: None,
        deadline: None,
        account: None,
        input_bytes: run.input_bytes,
        estimate: None,
        time_limit: None,
        after: Vec::new(),
        utility: None,
    }
}

/// A borrowed, read-only look at the core.
#[derive(Clone, Copy, Debug)]
pub struct CoreView<'a> {
    state: &'a State,
    /// The running policy, for what its controller knows of deadline jobs (Jockey).
    policy: Option<&'a dyn Policy>,
}

impl<'a> CoreView<'a> {
    pub(crate) fn new(state: &'a State, policy: Option<&'a dyn Policy>) -> CoreView<'a> {
        CoreView { state, policy }
    }

    /// One job in detail, or [`no_such_job`] if there is no such job or the caller may
    /// not act for its owner.
    pub fn job_status(&self, job: JobId, caller: &Caller) -> Result<JobStatus, ErrorReply> {
        let j = self.state.jobs.get(&job).filter(|j| may_see(caller, j));
        let utility_from_spec = j.is_some_and(|j| j.spec.utility.is_some());
        let mut status = j.map(status).ok_or_else(|| no_such_job(job))?;
        status.summary.demand_class = self.demand_class(job);
        // The controller keeps an ended job's last measured progress; a completed one has
        // done all its work.
        let completed = status.summary.state == JobState::Completed;
        status.slo = self.policy.and_then(|p| p.slo_state(job)).map(|s| SloStatus {
            progress_permille: if completed { 1000 } else { (s.progress * 1000.0).round() as u32 },
            predicted_finish: s.predicted_finish,
            guaranteed: s.guarantee,
            peak_guaranteed: s.peak_guarantee,
            finish_interval: s.finish_interval,
            slowdown_permille: (s.slowdown * 1000.0).round() as u32,
            utility_from_spec,
        });
        Ok(status)
    }

    /// Where the outputs of `job`'s stage `stage` are (an agent's `Locate`): which
    /// local-mode agent completed each task. Refused, with why, for an unknown or ended
    /// job, an unknown stage, or an `agent` that runs no live container of the job.
    pub fn stage_outputs(&self, agent: AgentId, job: JobId, stage: &str) -> Result<StageOutputs, String> {
        super::locate::stage_outputs(self.state, agent, job, stage)
    }

    /// Whether the core still holds `job` (ended jobs leave after their retention).
    pub fn has_job(&self, job: JobId) -> bool {
        self.state.jobs.contains_key(&job)
    }

    /// The jobs in memory that `query` selects and the caller may see, in the query's
    /// order from its cursor on. Ended jobs past their retention are not here: the server
    /// merges these with the store's.
    pub fn jobs<'q>(
        &self,
        caller: &'q Caller,
        query: &'q JobsQuery,
    ) -> impl Iterator<Item = JobSummary> + use<'a, 'q> {
        let range = match (query.after, query.newest_first) {
            (Some(after), false) => (Bound::Excluded(after), Bound::Unbounded),
            (Some(after), true) => (Bound::Unbounded, Bound::Excluded(after)),
            (None, _) => (Bound::Unbounded, Bound::Unbounded),
        };
        let jobs = self.state.jobs.range(range);
        let ordered: Box<dyn Iterator<Item = _>> =
            if query.newest_first { Box::new(jobs.rev()) } else { Box::new(jobs) };
        let view = *self;
        ordered
            .map(|(_, j)| j)
            .filter(move |j| selects(query, caller, j))
            .map(move |j| JobSummary { demand_class: view.demand_class(j.id), ..summary(j) })
    }

    /// The class the running policy gave `job` (DRESS), if any.
    fn demand_class(&self, job: JobId) -> Option<DemandClass> {
        self.policy.and_then(|p| p.demand_class(job))
    }

    /// The newest recorded runs the caller may see (all for admins; a user's own
    /// account's otherwise), of one name or every name, older than `before` if given
    /// (newest first by [`RunCursor`]), at most `limit`.
    pub fn history(
        &self,
        caller: &Caller,
        name: Option<&str>,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Vec<JobHistory> {
        let mut runs: Vec<&JobHistory> = match name {
            Some(name) => self.state.history.runs(name).collect(),
            None => self.state.history.all().collect(),
        };
        runs.retain(|r| caller.may_act_for(&r.account) && before.is_none_or(|b| RunCursor::of(r) < b));
        // The history may hold many thousands of runs; sort only the page's.
        let newest_first = |r: &&JobHistory| std::cmp::Reverse(RunCursor::of(r));
        if runs.len() > limit {
            if limit > 0 {
                runs.select_nth_unstable_by_key(limit - 1, newest_first);
            }
            runs.truncate(limit);
        }
        runs.sort_by_key(newest_first);
        runs.into_iter().cloned().collect()
    }

    /// The Jockey profile of job name `name` from the recorded runs the caller may see;
    /// `None` without one. The stage DAG is taken from the newest job of that name the
    /// core holds, else from the newest run's stages without barriers.
    pub fn profile(&self, caller: &Caller, name: &str) -> Option<ProfileView> {
        let runs: Vec<&JobHistory> =
            self.state.history.runs(name).filter(|r| caller.may_act_for(&r.account)).collect();
        let held = self.state.jobs.values().rev().find(|j| j.spec.name == name).map(|j| j.spec.clone());
        let dag_known = held.is_some();
        let spec = match held {
            Some(spec) => spec,
            None => spec_of_run(runs.iter().max_by_key(|r| r.job)?),
        };
        JobProfile::from_history(&spec, runs).map(|p| p.view(dag_known))
    }

    /// Every agent registration, by id.
    pub fn nodes(&self) -> Vec<NodeSummary> {
        self.state.agents.iter().map(|(agent, a)| node_summary(agent, a)).collect()
    }

    /// Every job in memory the caller may see, oldest first.
    #[cfg(test)]
    pub(crate) fn all_jobs(&self, caller: &Caller) -> Vec<JobSummary> {
        let query = JobsQuery { newest_first: false, ..JobsQuery::default() };
        self.jobs(caller, &query).collect()
    }

    /// A job's state, without access checks.
    #[cfg(test)]
    pub(crate) fn job_state(&self, job: JobId) -> Option<JobState> {
        self.state.jobs.get(&job).map(|j| j.state)
    }

    /// `Some(account)` as the caller may see it, or (`None`) every account they may read.
    /// Another user's account answers `NotFound`, exactly as a missing one does.
    pub fn accounts(
        &self,
        caller: &Caller,
        account: Option<&AccountId>,
    ) -> Result<Vec<AccountSummary>, ErrorReply> {
        let accounts = &self.state.accounts;
        match account {
            None => Ok(accounts.visible(caller)),
            Some(account) => accounts.summary(caller, account).map(|s| vec![s]).map_err(not_found),
        }
    }

    /// A page of `account`'s ledger: entries after `after_seq`, at most `limit` (capped at
    /// `MAX_LEDGER_PAGE`), with the same `NotFound` rule as [`accounts`](CoreView::accounts).
    pub fn ledger(
        &self,
        caller: &Caller,
        account: &AccountId,
        after_seq: u64,
        limit: u32,
    ) -> Result<LedgerPage, ErrorReply> {
        self.state.accounts.ledger_page(caller, account, after_seq, limit).map_err(not_found)
    }

    /// Stored ledger records the core could not apply at recovery (0 unless the store's
    /// own check was bypassed); the server logs it when it is not zero.
    pub fn accounts_refused_on_replay(&self) -> u64 {
        self.state.accounts.refused_on_replay()
    }

    /// Container reports dropped by fencing since start (wrong agent, stale attempt,
    /// unknown container, refused transition); the server logs it when it grows.
    pub fn ignored_reports(&self) -> u64 {
        self.state.ignored_reports
    }
}

/// Whether a listing `query` by `caller` includes `j`.
fn selects(query: &JobsQuery, caller: &Caller, j: &Job) -> bool {
    may_see(caller, j)
        && (query.states.is_empty() || query.states.contains(&j.state))
        && query.account.as_ref().is_none_or(|a| *a == j.account)
}

/// An account query's refusal: only ever `NotFound`, whatever the reason.
fn not_found(err: AccountError) -> ErrorReply {
    ErrorReply::new(ErrorKind::NotFound, err.to_string())
}

/// The answer for a job that does not exist and for one the caller may not see: the same
/// kind and text, so probing ids reveals neither which jobs exist nor who owns them.
pub fn no_such_job(job: JobId) -> ErrorReply {
    ErrorReply::new(ErrorKind::NotFound, format!("no job {job}"))
}

/// One agent registration as `nodes` and `node drain` show it.
pub(crate) fn node_summary(agent: AgentId, a: &Agent) -> NodeSummary {
    let map = kind_ix(SlotKind::Map);
    let reduce = kind_ix(SlotKind::Reduce);
    NodeSummary {
        agent,
        node: a.node.to_string(),
        connected: a.connected,
        map_slots: a.offered[map],
        map_used: a.used[map],
        reduce_slots: a.offered[reduce],
        reduce_used: a.used[reduce],
        last_seen: a.last_seen,
        draining: a.drain,
        quarantine: a.quarantine.clone(),
    }
}

fn summary(j: &Job) -> JobSummary {
    JobSummary {
        id: j.id,
        name: j.spec.name.clone(),
        account: j.account.clone(),
        state: j.state,
        submitted: j.submitted,
        started: j.started,
        finished: j.finished,
        tasks_total: j.total(),
        tasks_completed: j.completed,
        tasks_running: j.live_total(),
        owner: j.owner.clone(),
        deadline: j.deadline,
        // Filled in by the driver from `Core::predicted_finishes`: it needs the clock.
        predicted_finish: None,
        price: j.purchase.map(|(price, _)| price),
        paid: j.purchase.map(|(_, paid)| paid),
        demand_class: None,
    }
}

fn status(j: &Job) -> JobStatus {
    let ended = j.state.is_terminal();
    let stages = j
        .spec
        .stages
        .iter()
        .zip(&j.stages)
        .map(|(spec, stage)| {
            let tasks = spec.tasks;
            // Pending tasks of an ended job were dropped; they are not waiting for anything.
            let pending = if ended { 0 } else { tasks - stage.completed - stage.live };
            StageStatus {
                name: spec.name.clone(),
                slot: spec.slot,
                tasks,
                pending,
                running: stage.live,
                completed: stage.completed,
                failed_attempts: stage.failed_attempts,
            }
        })
        .collect();
    JobStatus { summary: summary(j), stages, message: j.message.clone(), slo: None }
}

/// The reservation view: the partitions the policy stated last, per kind, with the
/// policy's δ and predictions, and the reserved jobs `caller` may see.
pub(crate) fn reservation(
    state: &State,
    policy: PolicyName,
    report: Option<DressReport>,
    caller: &Caller,
) -> ReservationView {
    let mut kinds = Vec::new();
    let mut small = BTreeSet::new();
    for kind in SlotKind::ALL {
        let held: Vec<_> = state.reservations.iter().filter(|h| h.reservation.kind == kind).collect();
        if held.is_empty() {
            continue;
        }
        let agents = || state.agents.values().filter(|a| a.takes_work());
        kinds.push(ReservedKind {
            kind,
            total: agents().map(|a| a.offered[kind_ix(kind)]).sum(),
            reserved: held.iter().map(|h| h.reservation.slots).sum(),
            reserved_used: held.iter().map(|h| reserve::used_by(state, kind, &h.reservation.jobs)).sum(),
            free: agents().map(|a| a.free(kind)).sum(),
        });
        small.extend(held.iter().flat_map(|h| h.reservation.jobs.iter().copied()));
    }
    let small_jobs = small
        .into_iter()
        .filter(|id| state.jobs.get(id).is_some_and(|j| !j.state.is_terminal() && may_see(caller, j)))
        .collect();
    ReservationView {
        policy: policy.name().to_string(),
        delta: report.as_ref().map(|r| r.delta),
        kinds,
        predicted_small: report.as_ref().map(|r| r.predicted.0),
        predicted_large: report.as_ref().map(|r| r.predicted.1),
        small_jobs,
    }
}
