//! Map and reduce slot accounting: how many slots of each kind the agent offers, how
//! many are in use, and whether one more launch fits. Pure: no I/O, no clock.

use std::fmt;

use slotmarket_common::spec::SlotKind;
use thiserror::Error;

/// Slots of one kind: a fixed capacity and a use count that never exceeds it.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotPool {
    total: u32,
    used: u32,
}

impl SlotPool {
    /// A pool of `total` free slots.
    pub fn new(total: u32) -> SlotPool {
        SlotPool { total, used: 0 }
    }

    /// Slots offered.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Slots in use.
    pub fn used(&self) -> u32 {
        self.used
    }

    /// Slots free.
    pub fn free(&self) -> u32 {
        self.total - self.used
    }
}

impl fmt::Debug for SlotPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.used, self.total)
    }
}

/// Why a slot could not be taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Error)]
pub enum SlotRefusal {
    /// Every slot of the kind is in use (or the agent offers none of that kind).
    #[error("no free {kind} slot: {used} of {total} in use")]
    Full {
        /// The kind asked for.
        kind: SlotKind,
        /// Slots of that kind in use.
        used: u32,
        /// Slots of that kind offered.
        total: u32,
    },
}

/// The agent's slot table: one pool per [`SlotKind`].
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotTable {
    map: SlotPool,
    reduce: SlotPool,
}

impl SlotTable {
    /// A table offering `map` map slots and `reduce` reduce slots, all free.
    pub fn new(map: u32, reduce: u32) -> SlotTable {
        SlotTable { map: SlotPool::new(map), reduce: SlotPool::new(reduce) }
    }

    /// The pool of one kind.
    pub fn pool(&self, kind: SlotKind) -> SlotPool {
        match kind {
            SlotKind::Map => self.map,
            SlotKind::Reduce => self.reduce,
        }
    }

    fn pool_mut(&mut self, kind: SlotKind) -> &mut SlotPool {
        match kind {
            SlotKind::Map => &mut self.map,
            SlotKind::Reduce => &mut self.reduce,
        }
    }

    /// Takes one slot of `kind`, or says why it cannot.
    pub fn acquire(&mut self, kind: SlotKind) -> Result<(), SlotRefusal> {
        let pool = self.pool_mut(kind);
        if pool.used >= pool.total {
            return Err(SlotRefusal::Full { kind, used: pool.used, total: pool.total });
        }
        pool.used += 1;
        Ok(())
    }

    /// Gives back one slot of `kind`. Returns false (and changes nothing) if none of that
    /// kind was in use, which means the caller's bookkeeping is wrong.
    pub fn release(&mut self, kind: SlotKind) -> bool {
        let pool = self.pool_mut(kind);
        if pool.used == 0 {
            return false;
        }
        pool.used -= 1;
        true
    }

    /// Slots in use over both kinds.
    pub fn used(&self) -> u32 {
        self.map.used + self.reduce.used
    }
}

impl fmt::Debug for SlotTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "map {:?}, reduce {:?}", self.map, self.reduce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_until_the_pool_is_full() {
        let mut table = SlotTable::new(2, 1);
        assert_eq!(table.acquire(SlotKind::Map), Ok(()));
        assert_eq!(table.acquire(SlotKind::Map), Ok(()));
        assert_eq!(
            table.acquire(SlotKind::Map),
            Err(SlotRefusal::Full { kind: SlotKind::Map, used: 2, total: 2 })
        );
        // A full map pool does not affect reduce slots.
        assert_eq!(table.acquire(SlotKind::Reduce), Ok(()));
        assert_eq!(table.used(), 3);
        assert_eq!(format!("{table:?}"), "map 2/2, reduce 1/1");
    }

    #[test]
    fn released_slots_can_be_taken_again() {
        let mut table = SlotTable::new(1, 1);
        table.acquire(SlotKind::Reduce).unwrap();
        assert!(table.acquire(SlotKind::Reduce).is_err());
        assert!(table.release(SlotKind::Reduce));
        assert_eq!(table.pool(SlotKind::Reduce).free(), 1);
        assert_eq!(table.acquire(SlotKind::Reduce), Ok(()));
    }

    #[test]
    fn releasing_an_unused_slot_is_reported_and_harmless() {
        let mut table = SlotTable::new(1, 0);
        assert!(!table.release(SlotKind::Map));
        assert_eq!(table.pool(SlotKind::Map), SlotPool::new(1));
    }

    #[test]
    fn an_agent_without_reduce_slots_refuses_reduce_tasks() {
        let mut table = SlotTable::new(4, 0);
        let err = table.acquire(SlotKind::Reduce).unwrap_err();
        assert_eq!(err.to_string(), "no free reduce slot: 0 of 0 in use");
    }
}
