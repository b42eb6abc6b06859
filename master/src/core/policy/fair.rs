//! `fair`: an equal share of each slot kind for every active job, the Hadoop Fair
//! Scheduler's baseline without pools. Each free slot goes to the job with a ready task
//! that runs the fewest tasks of the slot's kind (earliest job on ties), so shares even
//! out as tasks finish. With preemption on, a job below its max-min share while no slot
//! is free takes slots back at once from jobs above theirs, newest containers first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use slotmarket_common::ids::JobId;
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::preempt::{deficit, excess, kills_in_flight, max_min_shares, newest_of};
use super::slots::{FreeSlots, SlotTable};
use super::{Assignment, Decisions, KillReason, Policy, PolicyName, Preemption, SchedView, Trigger};

/// The equal-share policy. Keeps nothing between steps but the room for its free-slot
/// table.
#[derive(Clone, Debug, Default)]
pub struct Fair {
    preemption: bool,
    table: SlotTable,
}

impl Fair {
    /// A fair policy that kills over-share tasks when `preemption` is set.
    pub fn new(preemption: bool) -> Fair {
        Fair { preemption, table: SlotTable::default() }
    }
}

impl Policy for Fair {
    fn name(&self) -> PolicyName {
        PolicyName::Fair
    }

    fn forgets_when_idle(&self) -> bool {
        true
    }

    fn schedule(&mut self, _now: Timestamp, view: &SchedView<'_>, _trigger: Trigger) -> Decisions {
        let mut decisions = Decisions::default();
        for kind in SlotKind::ALL {
            if view.has_free(kind) {
                fill_fewest_running_first(view, kind, &mut self.table, &mut decisions.assignments);
            } else if self.preemption {
                // Only when nothing was free at the start of the step: the running counts
                // in the view then include everything this step decided.
                decisions.preemptions.extend(take_back(view, kind));
            }
        }
        decisions
    }
}

/// Gives each free slot of `kind` to the ready job running the fewest tasks of it,
/// building the free-slot table in `table`'s room. Costs O(jobs with ready tasks +
/// assignments × log of that).
fn fill_fewest_running_first(
    view: &SchedView<'_>,
    kind: SlotKind,
    table: &mut SlotTable,
    out: &mut Vec<Assignment>,
) {
    // Work before room: most steps have free slots but nothing waiting for them.
    let mut heap: BinaryHeap<Reverse<(u32, JobId, u32)>> =
        view.jobs_with_ready(kind).map(|j| Reverse((j.running(kind), j.id(), j.ready(kind)))).collect();
    if heap.is_empty() {
        return;
    }
    let mut free = FreeSlots::in_table(std::mem::take(table), view.agents_with_free(kind), kind);
    while free.remaining() > 0 {
        let Some(Reverse((running, job, ready))) = heap.pop() else { break };
        let Some(agent) = free.take() else { break };
        out.push(Assignment { agent, job, kind });
        if ready > 1 {
            heap.push(Reverse((running + 1, job, ready - 1)));
        }
    }
    *table = free.into_table();
}

/// Kills enough tasks of over-share jobs to give starved jobs their max-min share of
/// `kind`, counting kills already on their way.
fn take_back(view: &SchedView<'_>, kind: SlotKind) -> Vec<Preemption> {
    if view.jobs_with_ready(kind).next().is_none() {
        return Vec::new();
    }
    // (job, running, ready) of every job that wants slots of this kind.
    let jobs: Vec<(JobId, u32, u32)> = view
        .active_jobs()
        .map(|j| (j.id(), j.running(kind), j.ready(kind)))
        .filter(|&(_, running, ready)| running + ready > 0)
        .collect();
    let demands: Vec<u32> = jobs.iter().map(|&(_, running, ready)| running + ready).collect();
    let shares = max_min_shares(f64::from(view.total_slots(kind)), &demands);
    let owed: u32 = jobs.iter().zip(&shares).map(|(&(_, run, ready), &s)| deficit(s, run, ready)).sum();
    if owed == 0 {
        return Vec::new();
    }
    let budget = owed.saturating_sub(kills_in_flight(view, kind));
    let mut victims: Vec<(JobId, u32)> = jobs
        .iter()
        .zip(&shares)
        .map(|(&(id, running, _), &s)| (id, excess(s, running)))
        .filter(|&(_, over)| over > 0)
        .collect();
    // Most over first; among equals the youngest job, which has the least sunk work.
    victims.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
    let reason = KillReason::Preempted { policy: PolicyName::Fair, why: "its job is over its fair share" };
    newest_of(view, kind, &victims, Some, budget, reason)
}
