//! `fifo`: jobs in submission order. Each free slot goes to the earliest job with a ready
//! task of the slot's kind, so a later job's map tasks may use map slots an earlier job
//! cannot use while its reduce stage waits on its barrier. Slots are filled least-loaded
//! agent first, which spreads a job's tasks over the cluster.

use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::slots::{FreeSlots, SlotTable};
use super::{AgentSlots, Assignment, Decisions, JobInfo, Policy, PolicyName, SchedView, Trigger};

/// The first-in-first-out policy. Keeps nothing between steps but the room for its
/// free-slot table and for its assignments.
#[derive(Clone, Debug, Default)]
pub struct Fifo {
    table: SlotTable,
    /// The last decisions' assignment buffer, handed back empty (see `Policy::recycle`).
    spare: Vec<Assignment>,
}

impl Policy for Fifo {
    fn name(&self) -> PolicyName {
        PolicyName::Fifo
    }

    fn forgets_when_idle(&self) -> bool {
        true
    }

    fn ignores_starts(&self) -> bool {
        true
    }

    fn schedule(&mut self, _now: Timestamp, view: &SchedView<'_>, _trigger: Trigger) -> Decisions {
        let mut decisions =
            Decisions { assignments: std::mem::take(&mut self.spare), ..Decisions::default() };
        for kind in SlotKind::ALL {
            fill_in_order(
                view,
                kind,
                view.jobs_with_ready(kind),
                &mut self.table,
                &mut decisions.assignments,
            );
        }
        decisions
    }

    fn recycle(&mut self, mut assignments: Vec<Assignment>) {
        assignments.clear();
        self.spare = assignments;
    }
}

/// Assigns every free slot of `kind` it can to `jobs`, in the order given, each job
/// taking as many as it has ready tasks, building the free-slot table in `table`'s room.
/// Shared with `priority`, which orders by class. Costs O((agents with free slots +
/// assignments) × log agents + jobs given slots).
pub(super) fn fill_in_order<'a>(
    view: &SchedView<'a>,
    kind: SlotKind,
    jobs: impl Iterator<Item = JobInfo<'a>>,
    table: &mut SlotTable,
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
    if let Some(agent) = view.sole_agent_with_free(kind) {
        fill_from_one(agent, kind, jobs, out);
        return;
    }
    let mut free = FreeSlots::in_table(std::mem::take(table), view.agents_with_free(kind), kind);
    // At most one assignment per free slot: reserve them at once rather than growing.
    out.reserve(free.remaining() as usize);
    for job in jobs {
        // Stop when the slots run out rather than when a take finds none: that take
        // scanned every agent of the table for nothing, in most steps (one slot freed,
        // a job with more ready tasks than that).
        if free.remaining() == 0 {
            break;
        }
        for _ in 0..job.ready(kind).min(free.remaining()) {
            let Some(agent) = free.take() else { break };
            out.push(Assignment { agent, job: job.id(), kind });
        }
    }
    *table = free.into_table();
}

/// [`fill_in_order`] when one agent alone has free slots of `kind`: every slot taken is
/// that agent's, as the free-slot table would hand them out (least loaded first: the only
/// one), so the table is not built.
fn fill_from_one<'a>(
    agent: AgentSlots,
    kind: SlotKind,
    jobs: impl Iterator<Item = JobInfo<'a>>,
    out: &mut Vec<Assignment>,
) {
    let mut remaining = agent.free(kind);
    for job in jobs {
        if remaining == 0 {
            break;
        }
        let take = job.ready(kind).min(remaining);
        out.extend((0..take).map(|_| Assignment { agent: agent.agent, job: job.id(), kind }));
        remaining -= take;
    }
}

/// Gang-start first-come-first-served, the baseline of the DRESS paper's Figure 1: a
/// job's ready tasks of a kind start together or not at all, and a job that cannot start
/// holds back every later job of that kind. Stateless.
#[derive(Clone, Copy, Debug, Default)]
pub struct GangFifo;

impl Policy for GangFifo {
    fn name(&self) -> PolicyName {
        PolicyName::GangFifo
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
            let mut free = FreeSlots::new(view.agents_with_free(kind), kind);
            let mut room = free.remaining();
            let widest = Some(view.total_slots(kind));
            fill_jobs(
                kind,
                view.jobs_with_ready(kind),
                &mut free,
                &mut room,
                widest,
                &mut decisions.assignments,
            );
        }
        decisions
    }
}

/// Hands out slots from `free`, at most `room` of them, to `jobs` in the order given.
/// With `gang = Some(widest)`, a job starts all its ready tasks of `kind` at once (at
/// most `widest`, so a job wider than its share can still start) or none, and a job that
/// cannot start blocks the jobs behind it. Without, each job takes what it can.
pub(super) fn fill_jobs<'a>(
    kind: SlotKind,
    jobs: impl Iterator<Item = JobInfo<'a>>,
    free: &mut FreeSlots,
    room: &mut u32,
    gang: Option<u32>,
    out: &mut Vec<Assignment>,
) {
    for job in jobs {
        let ready = job.ready(kind);
        let take = match gang {
            Some(widest) if ready.min(widest) > (*room).min(free.remaining()) => return,
            Some(_) | None => ready.min(*room),
        };
        for _ in 0..take {
            let Some(agent) = free.take() else { return };
            *room -= 1;
            out.push(Assignment { agent, job: job.id(), kind });
        }
        if *room == 0 {
            return;
        }
    }
}
