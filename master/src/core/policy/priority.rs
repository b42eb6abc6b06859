//! `priority`: MRM's non-preemptive priority baseline (§6.3). Delay-sensitive jobs come
//! before unclassed ones, which come before delay-tolerant ones; FIFO within a class.
//! Running tasks are never killed, so a delay-sensitive job still waits for slots that
//! earlier jobs hold.

use slotmarket_common::spec::{JobClass, SlotKind};
use slotmarket_common::time::Timestamp;

use super::fifo::fill_in_order;
use super::slots::SlotTable;
use super::{Decisions, Policy, PolicyName, SchedView, Trigger};

/// The class-priority policy. Keeps nothing between steps but the room for its
/// free-slot table.
#[derive(Clone, Debug, Default)]
pub struct Priority {
    table: SlotTable,
}

/// Serving order of a class: lower first.
fn rank(class: Option<JobClass>) -> u8 {
    match class {
        Some(JobClass::DelaySensitive) => 0,
        None => 1,
        Some(JobClass::DelayTolerant) => 2,
    }
}

impl Policy for Priority {
    fn name(&self) -> PolicyName {
        PolicyName::Priority
    }

    fn forgets_when_idle(&self) -> bool {
        true
    }

    fn schedule(&mut self, _now: Timestamp, view: &SchedView<'_>, _trigger: Trigger) -> Decisions {
        let mut decisions = Decisions::default();
        for kind in SlotKind::ALL {
            // One pass per class over the ready index, lazily: filling stops as soon as
            // the free slots run out, usually within the first class.
            let v = *view;
            let by_class =
                (0..3u8).flat_map(move |r| v.jobs_with_ready(kind).filter(move |j| rank(j.class()) == r));
            fill_in_order(view, kind, by_class, &mut self.table, &mut decisions.assignments);
        }
        decisions
    }

    /// By class, as `schedule` serves them.
    fn queue_rank(&self, job: &super::JobInfo<'_>) -> u64 {
        u64::from(rank(job.class()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_sensitive_ranks_before_unclassed_before_delay_tolerant() {
        assert!(rank(Some(JobClass::DelaySensitive)) < rank(None));
        assert!(rank(None) < rank(Some(JobClass::DelayTolerant)));
    }
}
