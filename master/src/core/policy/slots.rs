//! Free slots of one kind as the policies hand them out: least-loaded agent first, so a
//! job's tasks spread over the cluster, with ties broken by agent id so runs repeat.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use slotmarket_common::ids::AgentId;
use slotmarket_common::spec::SlotKind;

use super::AgentSlots;

/// Takes served by a linear scan before building a heap. Most steps take one slot (a
/// task ended, its slot goes to the next task); a scan of a few dozen agents is cheaper
/// than collecting and ordering them.
const SCAN_TAKES: usize = 4;

/// Room reserved for the table of agents with free slots: a 64-node cluster's without
/// growing (1.5 KiB; larger clusters grow it as usual).
const TABLE_CAPACITY: usize = 64;

/// ([`rank`], used, offered) of an agent with a free slot.
type Slot = (u64, u32, u32);

/// Room for a [`FreeSlots`] table kept by a policy between scheduling steps, so that
/// building the table allocates nothing (its allocation was a quarter of building it,
/// in a step the simulator takes hundreds of thousands of times).
#[derive(Clone, Debug, Default)]
pub(super) struct SlotTable(Vec<Slot>);

/// The free slots of one kind, taken one at a time.
pub(super) struct FreeSlots {
    /// (rank, used, offered) for agents with a free slot, in no particular order (the
    /// lowest rank is unique). An agent leaves the table when its last free slot is
    /// taken, so a take scans no full agent.
    agents: Vec<Slot>,
    /// The same, least loaded on top, once more than `SCAN_TAKES` slots were taken.
    heap: Option<BinaryHeap<Reverse<Slot>>>,
    /// Slots taken so far.
    taken: usize,
    /// Slots still free over all agents.
    free: u32,
}

impl FreeSlots {
    /// The free slots of `kind` on `agents`.
    pub(super) fn new(agents: impl Iterator<Item = AgentSlots>, kind: SlotKind) -> FreeSlots {
        FreeSlots::in_table(SlotTable::default(), agents, kind)
    }

    /// [`new`](FreeSlots::new) in `table`'s room; [`into_table`](FreeSlots::into_table)
    /// hands it back for the next step.
    pub(super) fn in_table(
        SlotTable(mut table): SlotTable,
        agents: impl Iterator<Item = AgentSlots>,
        kind: SlotKind,
    ) -> FreeSlots {
        let mut free = 0;
        // The view's iterator cannot tell its length, so `collect` would grow the vector
        // from empty (five reallocations for 40 agents, in every scheduling step).
        table.clear();
        table.reserve(TABLE_CAPACITY);
        table.extend(agents.filter(|a| a.used(kind) < a.offered(kind)).map(|a| {
            let (used, offered) = (a.used(kind), a.offered(kind));
            free += offered - used;
            (rank(used, offered, a.agent), used, offered)
        }));
        FreeSlots { agents: table, heap: None, taken: 0, free }
    }

    /// The table's room, for the next step's [`in_table`](FreeSlots::in_table).
    pub(super) fn into_table(self) -> SlotTable {
        match self.heap {
            // Collected in place, as the heap was from the table.
            Some(heap) => SlotTable(heap.into_vec().into_iter().map(|Reverse(slot)| slot).collect()),
            None => SlotTable(self.agents),
        }
    }

    /// Slots not taken yet.
    pub(super) fn remaining(&self) -> u32 {
        self.free
    }

    /// Takes one slot on the least-loaded agent (lowest id among equals).
    pub(super) fn take(&mut self) -> Option<AgentId> {
        self.taken += 1;
        if self.taken > SCAN_TAKES && self.heap.is_none() {
            let agents = std::mem::take(&mut self.agents);
            self.heap = Some(agents.into_iter().map(Reverse).collect());
        }
        let agent = match &mut self.heap {
            Some(heap) => {
                let Reverse((rank, used, offered)) = heap.pop()?;
                let agent = agent_of(rank);
                if used + 1 < offered {
                    heap.push(Reverse((self::rank(used + 1, offered, agent), used + 1, offered)));
                }
                agent
            }
            None => {
                let (at, best) = self.agents.iter_mut().enumerate().min_by_key(|(_, a)| a.0)?;
                let agent = agent_of(best.0);
                best.1 += 1;
                best.0 = rank(best.1, best.2, agent);
                if best.1 == best.2 {
                    self.agents.swap_remove(at);
                }
                agent
            }
        };
        self.free = self.free.saturating_sub(1);
        Some(agent)
    }
}

/// `used / offered` as a fixed-point number, so agents of different sizes compare fairly.
fn load(used: u32, offered: u32) -> u64 {
    (u64::from(used) << 32) / u64::from(offered.max(1))
}

/// The order agents with a free slot are taken in, least loaded first and ties to the
/// lower id, as one integer: the load (below 2^32 while a slot is free) in the high half,
/// the id in the low. One comparison per agent scanned, not two.
fn rank(used: u32, offered: u32, agent: AgentId) -> u64 {
    (load(used, offered) << 32) | u64::from(agent.0)
}

/// The agent a [`rank`] is of.
fn agent_of(rank: u64) -> AgentId {
    AgentId(rank as u32)
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

    #[test]
    fn a_rank_orders_by_load_then_id_and_names_its_agent() {
        assert!(rank(0, 2, AgentId(9)) < rank(1, 4, AgentId(1)));
        assert!(rank(1, 2, AgentId(1)) < rank(2, 4, AgentId(2)));
        assert!(rank(98, 100, AgentId(u32::MAX)) < rank(99, 100, AgentId(0)));
        assert_eq!(agent_of(rank(99, 100, AgentId(u32::MAX))), AgentId(u32::MAX));
    }

    #[test]
    fn the_scan_and_the_heap_hand_out_slots_in_the_same_order() {
        let agent = |id: u32, used: u32, offered: u32| (rank(used, offered, AgentId(id)), used, offered);
        // A table holds agents with a free slot only (agent 4, full, is left out).
        let table = vec![agent(3, 1, 4), agent(1, 1, 2), agent(2, 0, 2)];
        let mut slots = FreeSlots { agents: table, heap: None, taken: 0, free: 6 };
        let order: Vec<u32> = std::iter::from_fn(|| slots.take()).map(|a| a.0).collect();
        // Loads: 1 = 1/2, 2 = 0, 3 = 1/4. Ties go to the lower id, in any table order.
        assert_eq!(order, vec![2, 3, 1, 2, 3, 3]);
    }

    #[test]
    fn a_reused_table_hands_out_the_same_slots_as_a_fresh_one() {
        let agents = || {
            [(1, 1, 2), (2, 0, 2), (3, 1, 4), (4, 2, 2)].map(|(id, used, offered)| AgentSlots {
                agent: AgentId(id),
                offered: [offered, 0],
                used: [used, 0],
            })
        };
        let fresh: Vec<u32> = {
            let mut slots = FreeSlots::new(agents().into_iter(), SlotKind::Map);
            std::iter::from_fn(|| slots.take()).map(|a| a.0).collect()
        };
        // Twice through one table: once past the heap's threshold, once within it.
        let mut table = SlotTable::default();
        for takes in [fresh.len(), 2] {
            let mut slots = FreeSlots::in_table(table, agents().into_iter(), SlotKind::Map);
            assert_eq!(slots.remaining(), 6);
            let order: Vec<u32> = (0..takes).filter_map(|_| slots.take()).map(|a| a.0).collect();
            assert_eq!(order, fresh[..takes]);
            table = slots.into_table();
        }
    }
}
