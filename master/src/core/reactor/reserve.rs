//! Enforcing the slot partitions a policy states with its decisions ([`Reservation`]):
//! slots of a kind held for a set of jobs. The reactor refuses an assignment that would
//! leave fewer free slots of that kind than the set still has reserved and idle, unless
//! the job is in the set. A reservation is not a container state: it names how many
//! slots, not which ones, so a reserved job takes whichever free slot placement gives it.
//!
//! Reservations do not preempt: slots other jobs already hold when a reservation grows
//! stay theirs until released, and the reservation fills as they are. The partition is
//! stated afresh with every decision; the last one stated is kept for views and for
//! `invariants::check_reservations`.

use std::collections::BTreeSet;

use slotmarket_common::ids::JobId;
use slotmarket_common::spec::SlotKind;

use crate::core::policy::Reservation;
use crate::core::state::{State, kind_ix};

/// A reservation as last stated, with what the invariant needs to check it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct HeldSlots {
    /// The partition the policy stated.
    pub(crate) reservation: Reservation,
    /// Slots of its kind that jobs outside the set held (on agents that take work)
    /// before the decisions it came with were carried out.
    pub(crate) outside_before: u32,
    /// How many more the launches could give them: the free slots beyond the set's idle
    /// reserved ones, then.
    pub(crate) allowance: u32,
}

impl HeldSlots {
    /// Slots of its kind that jobs outside the set hold now.
    pub(crate) fn outside_now(&self, state: &State) -> u32 {
        let kind = self.reservation.kind;
        used_slots(state, kind).saturating_sub(used_by(state, kind, &self.reservation.jobs))
    }
}

/// The running tally of one step's reservations while its assignments are carried out.
#[derive(Debug)]
pub(crate) struct Gate {
    /// Per reservation: its kind, its set, and its slots not yet used by its set.
    held: Vec<(SlotKind, BTreeSet<JobId>, u32)>,
    /// Free slots per kind on agents that take work.
    free: [u32; 2],
}

impl Gate {
    /// Opens the gate for `reservations` over the state before any assignment; `None`
    /// when nothing is reserved, so every slot may go to any job. Inlined into every
    /// step: most policies reserve nothing, and the call alone cost more than that case's
    /// two checks (as did dropping an empty gate, out of line, at the step's end).
    #[inline]
    pub(crate) fn open(state: &mut State, reservations: Vec<Reservation>) -> Option<Gate> {
        if reservations.is_empty() {
            // Most policies reserve nothing: spare them a walk over the agents per step,
            // and the write when nothing was reserved before either.
            if !state.reservations.is_empty() {
                state.reservations.clear();
            }
            return None;
        }
        Some(Gate::open_held(state, reservations))
    }

    /// [`open`](Gate::open) for a step that states reservations.
    fn open_held(state: &mut State, reservations: Vec<Reservation>) -> Gate {
        let mut free = [0u32; 2];
        for agent in state.agents.values().filter(|a| a.takes_work()) {
            for kind in SlotKind::ALL {
                free[kind_ix(kind)] += agent.free(kind);
            }
        }
        let held: Vec<(SlotKind, BTreeSet<JobId>, u32)> = reservations
            .iter()
            .map(|r| (r.kind, r.jobs.clone(), r.slots.saturating_sub(used_by(state, r.kind, &r.jobs))))
            .collect();
        state.reservations = reservations
            .into_iter()
            .map(|r| {
                let kind = r.kind;
                // Every reservation of the kind that is not this one's is owed too.
                let owed: u32 = held.iter().filter(|h| h.0 == kind).map(|h| h.2).sum();
                let set_used = used_by(state, kind, &r.jobs);
                HeldSlots {
                    outside_before: used_slots(state, kind).saturating_sub(set_used),
                    allowance: free[kind_ix(kind)].saturating_sub(owed),
                    reservation: r,
                }
            })
            .collect();
        Gate { held, free }
    }

    /// Whether a slot of `kind` may go to `job`: it may if the free slots left after it
    /// still cover every reservation of that kind `job` is not part of.
    pub(crate) fn allows(&self, job: JobId, kind: SlotKind) -> bool {
        let owed: u32 =
            self.held.iter().filter(|(k, set, _)| *k == kind && !set.contains(&job)).map(|h| h.2).sum();
        self.free[kind_ix(kind)] > owed
    }

    /// Records that `job` took a slot of `kind`.
    pub(crate) fn took(&mut self, job: JobId, kind: SlotKind) {
        let free = &mut self.free[kind_ix(kind)];
        *free = free.saturating_sub(1);
        for (k, set, idle) in &mut self.held {
            if *k == kind && set.contains(&job) {
                *idle = idle.saturating_sub(1);
            }
        }
    }
}

/// Slots of `kind` the jobs in `jobs` hold now.
pub(crate) fn used_by(state: &State, kind: SlotKind, jobs: &BTreeSet<JobId>) -> u32 {
    jobs.iter().filter_map(|id| state.jobs.get(id)).map(|j| j.live[kind_ix(kind)]).sum()
}

/// Used slots of `kind` on agents that take work.
fn used_slots(state: &State, kind: SlotKind) -> u32 {
    state.agents.values().filter(|a| a.takes_work()).map(|a| a.used[kind_ix(kind)]).sum()
}
