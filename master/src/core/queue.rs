//! The queue view (`slotmarket queue`): jobs with pending tasks in the policy's service
//! order, each with the first reason that explains why its next task is not running.

use std::collections::BTreeSet;

use slotmarket_common::protocol::{JobState, QueueEntry, QueueView, WaitReason};
use slotmarket_common::spec::SlotKind;

use super::Caller;
use super::policy::{JobInfo, Policy, SchedView};
use super::reactor::may_see;
use super::state::State;

/// The queue as `caller` may see it: every job's place and reason, but the names and
/// owners of their own jobs only (every job's for admins).
pub(crate) fn queue(state: &State, policy: &dyn Policy, caller: &Caller) -> QueueView {
    let view = SchedView::new(state);
    let mut jobs: Vec<JobInfo<'_>> =
        view.active_jobs().filter(|j| SlotKind::ALL.iter().any(|&kind| j.pending(kind) > 0)).collect();
    jobs.sort_by_key(|j| (policy.queue_rank(j), j.id()));
    // Slot kinds a job earlier in the order is ready to take.
    let mut wanted_ahead = BTreeSet::new();
    let mut entries = Vec::with_capacity(jobs.len());
    for job in jobs {
        let waiting_for: Vec<_> = state.waits.blocked.get(&job.id()).into_iter().flatten().copied().collect();
        let ready: Vec<SlotKind> = SlotKind::ALL.into_iter().filter(|&kind| job.ready(kind) > 0).collect();
        let reason = if !waiting_for.is_empty() {
            WaitReason::Dependency
        } else if ready.is_empty() {
            WaitReason::Barrier
        } else if ready.iter().all(|kind| wanted_ahead.contains(kind)) {
            WaitReason::Priority
        } else if ready.iter().any(|&kind| view.has_free(kind)) {
            WaitReason::Policy
        } else {
            WaitReason::Resources
        };
        wanted_ahead.extend(ready);
        let visible = state.jobs.get(&job.id()).filter(|j| may_see(caller, j));
        entries.push(QueueEntry {
            job: job.id(),
            name: visible.map(|j| j.spec.name.clone()),
            owner: visible.map(|j| j.owner.clone()),
            state: state.jobs.get(&job.id()).map_or(JobState::Pending, |j| j.state),
            pending_map: job.pending(SlotKind::Map),
            pending_reduce: job.pending(SlotKind::Reduce),
            reason,
            waiting_for,
            deadline: job.deadline(),
        });
    }
    QueueView { policy: policy.name().to_string(), entries }
}
