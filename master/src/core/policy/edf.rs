//! `edf`: MRM's deadline-aware scheduler (§5). Ready tasks of jobs with a deadline go
//! first, earliest deadline first (ties in admission order); jobs without one (best
//! effort) fill what is left in admission order, so no slot idles while work waits.
//! Non-preemptive: a running task keeps its slot, and admission's model accounts for it.

use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::fifo::fill_in_order;
use super::slots::SlotTable;
use super::{Decisions, JobInfo, Policy, PolicyName, SchedView, Trigger};

/// The earliest-deadline-first policy. Keeps nothing between steps but the room for its
/// free-slot table.
#[derive(Clone, Debug, Default)]
pub struct Edf {
    table: SlotTable,
}

impl Policy for Edf {
    fn name(&self) -> PolicyName {
        PolicyName::Edf
    }

    fn forgets_when_idle(&self) -> bool {
        true
    }

    fn schedule(&mut self, _now: Timestamp, view: &SchedView<'_>, _trigger: Trigger) -> Decisions {
        let mut decisions = Decisions::default();
        for kind in SlotKind::ALL {
            if !view.has_free(kind) {
                continue;
            }
            let table = &mut self.table;
            fill_in_order(view, kind, edf_order(view, kind).into_iter(), table, &mut decisions.assignments);
        }
        decisions
    }

    /// Deadline jobs by deadline, then the rest, as `schedule` serves them.
    fn queue_rank(&self, job: &JobInfo<'_>) -> u64 {
        job.deadline().map_or(u64::MAX, |at| at.0)
    }
}

/// Jobs with ready tasks of `kind`: by deadline, then those without one in admission order.
fn edf_order<'a>(view: &SchedView<'a>, kind: SlotKind) -> Vec<JobInfo<'a>> {
    let (mut due, best_effort): (Vec<JobInfo<'a>>, Vec<JobInfo<'a>>) =
        view.jobs_with_ready(kind).partition(|j| j.deadline().is_some());
    due.sort_by_key(|j| (j.deadline(), j.id()));
    due.extend(best_effort);
    due
}
