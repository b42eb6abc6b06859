//! `fifo`: jobs in submission order. Each free slot goes to the earliest job with a ready
//! task of the slot's kind, so a later job's map tasks may use map slots an earlier job
//! cannot use while its reduce stage waits on its barrier. Slots are filled least-loaded
//! agent first, which spreads a job's tasks over the cluster.

use std::collections::{BTreeMap, BTreeSet};

use slotmarket_common::ids::AgentId;
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::{AgentSlots, Assignment, Decisions, Policy, PolicyName, SchedView};

/// The first-in-first-out policy. Stateless.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fifo;

impl Policy for Fifo {
    fn name(&self) -> PolicyName {
        PolicyName::Fifo
    }

    fn schedule(&mut self, _now: Timestamp, view: &SchedView<'_>) -> Decisions {
        let mut decisions = Decisions::default();
        for kind in SlotKind::ALL {
            fill(view, kind, &mut decisions.assignments);
        }
        decisions
    }
}

/// Assigns every free slot of `kind` it can, earliest job first. Costs
/// O((agents with free slots + assignments) × log agents + jobs given slots).
fn fill(view: &SchedView<'_>, kind: SlotKind, out: &mut Vec<Assignment>) {
    let mut jobs = view.jobs_with_ready(kind).map(|j| (j.id(), j.ready(kind))).peekable();
    if jobs.peek().is_none() {
        return;
    }
    let mut free = FreeSlots::new(view.agents_with_free(kind), kind);
    for (job, ready) in jobs {
        for _ in 0..ready {
            let Some(agent) = free.take() else { return };
            out.push(Assignment { agent, job, kind });
        }
    }
}

/// Free slots of one kind, ordered least-loaded agent first (fraction of slots in use,
/// then agent id so ties are deterministic).
struct FreeSlots {
    /// (load, agent) for agents with a free slot.
    order: BTreeSet<(u64, AgentId)>,
    /// (used, offered) per agent in `order`, updated as slots are taken.
    slots: BTreeMap<AgentId, (u32, u32)>,
}

impl FreeSlots {
    fn new(agents: impl Iterator<Item = AgentSlots>, kind: SlotKind) -> FreeSlots {
        let mut free = FreeSlots { order: BTreeSet::new(), slots: BTreeMap::new() };
        for a in agents {
            let (used, offered) = (a.used(kind), a.offered(kind));
            free.order.insert((load(used, offered), a.agent));
            free.slots.insert(a.agent, (used, offered));
        }
        free
    }

    /// Takes one slot on the least-loaded agent.
    fn take(&mut self) -> Option<AgentId> {
        let (_, agent) = self.order.pop_first()?;
        let (used, offered) = self.slots.get_mut(&agent)?;
        *used += 1;
        if *used < *offered {
            self.order.insert((load(*used, *offered), agent));
        }
        Some(agent)
    }
}

/// `used / offered` as a fixed-point number, so agents of different sizes compare fairly.
fn load(used: u32, offered: u32) -> u64 {
    (u64::from(used) << 32) / u64::from(offered.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_half_used_big_agent_is_less_loaded_than_a_full_small_one() {
        assert!(load(2, 8) < load(1, 2));
        assert_eq!(load(1, 2), load(4, 8));
        assert_eq!(load(0, 0), 0);
    }
}
