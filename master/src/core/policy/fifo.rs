//! `fifo`: jobs in submission order. Each free slot goes to the earliest job with a ready
//! task of the slot's kind, so a later job's map tasks may use map slots an earlier job
//! cannot use while its reduce stage waits on its barrier. Slots are filled least-loaded
//! agent first, which spreads a job's tasks over the cluster.

use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::slots::FreeSlots;
use super::{Assignment, Decisions, JobInfo, Policy, PolicyName, SchedView, Trigger};

/// The first-in-first-out policy. Stateless.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fifo;

impl Policy for Fifo {
    fn name(&self) -> PolicyName {
        PolicyName::Fifo
    }

    fn schedule(&mut self, _now: Timestamp, view: &SchedView<'_>, _trigger: Trigger) -> Decisions {
        let mut decisions = Decisions::default();
        for kind in SlotKind::ALL {
            fill_in_order(view, kind, view.jobs_with_ready(kind), &mut decisions.assignments);
        }
        decisions
    }
}

/// Assigns every free slot of `kind` it can to `jobs`, in the order given, each job
/// taking as many as it has ready tasks. Shared with `priority`, which orders by class.
/// Costs O((agents with free slots + assignments) × log agents + jobs given slots).
pub(super) fn fill_in_order<'a>(
    view: &SchedView<'a>,
    kind: SlotKind,
    jobs: impl Iterator<Item = JobInfo<'a>>,
    out: &mut Vec<Assignment>,
) {
    // Look for room before looking for work: with a full cluster (the common case under
    // load) the job iterator, which may filter, is never touched.
    if !view.has_free(kind) {
        return;
    }
    let mut jobs = jobs.peekable();
    if jobs.peek().is_none() {
        return;
    }
    let mut free = FreeSlots::new(view.agents_with_free(kind), kind);
    for job in jobs {
        for _ in 0..job.ready(kind) {
            let Some(agent) = free.take() else { return };
            out.push(Assignment { agent, job: job.id(), kind });
        }
    }
}
