//! `IdTable`: a map from ids handed out in sequence and never reused (job and agent ids)
//! to their records, stored in a window of slots indexed by the id, so a look-up is an
//! offset and a bounds check instead of a walk down an ordered tree. Iteration goes in id
//! order, exactly as the `BTreeMap` it replaces did, so everything that lists or weighs
//! jobs in id order sees the same order.
//!
//! The window runs from the lowest id present to the highest; removing the lowest (or
//! highest) shrinks it past every vacated slot. A vacated slot inside the window costs one
//! pointer (records are boxed), so one long-lived job among many ended ones keeps the
//! window wide but cheap: 500,000 vacated slots are 4 MB.

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, Index, RangeBounds};

use slotmarket_common::ids::{AgentId, JobId};

/// An id handed out in sequence: its position in an [`IdTable`].
pub(crate) trait SeqId: Copy {
    /// The id's position.
    fn index(self) -> u64;
    /// The id at position `index`.
    fn from_index(index: u64) -> Self;
}

impl SeqId for JobId {
    fn index(self) -> u64 {
        self.0
    }

    fn from_index(index: u64) -> JobId {
        JobId(index)
    }
}

impl SeqId for AgentId {
    fn index(self) -> u64 {
        u64::from(self.0)
    }

    fn from_index(index: u64) -> AgentId {
        // Only positions of ids that were inserted are turned back into ids.
        AgentId(index as u32)
    }
}

/// A map from sequential ids to records, iterated in id order (see the module header).
pub(crate) struct IdTable<K, V> {
    /// The id position of `slots[0]`.
    base: u64,
    /// One slot per id from `base` on; `None` for ids removed (or never inserted) inside
    /// the window. Neither the first nor the last slot is ever `None`.
    slots: VecDeque<Option<Box<V>>>,
    /// Slots holding a record.
    len: usize,
    key: PhantomData<K>,
}

impl<K, V> Default for IdTable<K, V> {
    fn default() -> Self {
        IdTable { base: 0, slots: VecDeque::new(), len: 0, key: PhantomData }
    }
}

impl<K: SeqId, V> IdTable<K, V> {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The number of records.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The slot position of `id`, if it lies inside the window.
    fn position(&self, id: K) -> Option<usize> {
        let offset = id.index().checked_sub(self.base)?;
        usize::try_from(offset).ok().filter(|&p| p < self.slots.len())
    }

    /// The record of `id`.
    pub(crate) fn get(&self, id: &K) -> Option<&V> {
        self.slots.get(self.position(*id)?)?.as_deref()
    }

    /// The record of `id`, mutably.
    pub(crate) fn get_mut(&mut self, id: &K) -> Option<&mut V> {
        let position = self.position(*id)?;
        self.slots.get_mut(position)?.as_deref_mut()
    }

    /// Whether `id` has a record.
    pub(crate) fn contains_key(&self, id: &K) -> bool {
        self.get(id).is_some()
    }

    /// Stores `value` as `id`'s record, returning the record it replaces. Widens the
    /// window to take `id` in (ids are expected in rising order; an earlier one, as a
    /// recovery may insert, widens it at the front).
    pub(crate) fn insert(&mut self, id: K, value: V) -> Option<V> {
        let index = id.index();
        if self.slots.is_empty() {
            self.base = index;
        }
        while index < self.base {
            self.slots.push_front(None);
            self.base -= 1;
        }
        let Ok(position) = usize::try_from(index - self.base) else {
            unreachable!("an id table's window is bounded by memory, hence by usize")
        };
        if position >= self.slots.len() {
            self.slots.resize_with(position + 1, || None);
        }
        let old = self.slots[position].replace(Box::new(value));
        if old.is_none() {
            self.len += 1;
        }
        old.map(|b| *b)
    }

    /// Takes `id`'s record out, shrinking the window past vacated slots at either end.
    pub(crate) fn remove(&mut self, id: &K) -> Option<V> {
        let position = self.position(*id)?;
        let old = self.slots[position].take()?;
        self.len -= 1;
        while self.slots.front().is_some_and(Option::is_none) {
            self.slots.pop_front();
            self.base += 1;
        }
        while self.slots.back().is_some_and(Option::is_none) {
            self.slots.pop_back();
        }
        Some(*old)
    }

    /// Every `(id, record)`, in id order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> {
        let base = self.base;
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(p, slot)| Some((K::from_index(base + p as u64), slot.as_deref()?)))
    }

    /// Every record, in id order.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.slots.iter().filter_map(|slot| slot.as_deref())
    }

    /// The `(id, record)`s with ids in `range`, in id order.
    pub(crate) fn range(&self, range: impl RangeBounds<K>) -> impl DoubleEndedIterator<Item = (K, &V)> {
        let end = self.base + self.slots.len() as u64;
        let start = match range.start_bound() {
            Bound::Included(id) => id.index(),
            Bound::Excluded(id) => id.index().saturating_add(1),
            Bound::Unbounded => self.base,
        };
        let stop = match range.end_bound() {
            Bound::Included(id) => id.index().saturating_add(1),
            Bound::Excluded(id) => id.index(),
            Bound::Unbounded => end,
        };
        // Clamped to the window, then made window positions (empty when reversed).
        let (start, stop) = (start.clamp(self.base, end) - self.base, stop.clamp(self.base, end) - self.base);
        let (start, stop) = (start as usize, (stop as usize).max(start as usize));
        let base = self.base;
        self.slots
            .range(start..stop)
            .enumerate()
            .filter_map(move |(p, slot)| Some((K::from_index(base + (start + p) as u64), slot.as_deref()?)))
    }
}

/// `table[&id]`, as on a map: panics if `id` has no record (tests read records this way).
impl<K: SeqId + fmt::Debug, V> Index<&K> for IdTable<K, V> {
    type Output = V;

    fn index(&self, id: &K) -> &V {
        match self.get(id) {
            Some(value) => value,
            None => panic!("no record for {id:?}"),
        }
    }
}

impl<K: SeqId + fmt::Debug, V: fmt::Debug> fmt::Debug for IdTable<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ids(table: &IdTable<JobId, &'static str>) -> Vec<u64> {
        table.iter().map(|(id, _)| id.0).collect()
    }

    #[test]
    fn looks_up_inserted_ids_and_misses_others() {
        let mut table = IdTable::new();
        assert_eq!(table.len(), 0);
        assert_eq!(table.insert(JobId(5), "five"), None);
        assert_eq!(table.insert(JobId(7), "seven"), None);
        assert_eq!(table.get(&JobId(5)), Some(&"five"));
        assert_eq!(table.get(&JobId(7)), Some(&"seven"));
        for missing in [0, 4, 6, 8, u64::MAX] {
            assert_eq!(table.get(&JobId(missing)), None, "id {missing}");
        }
        assert_eq!(table.len(), 2);
        assert_eq!(table.insert(JobId(7), "seven again"), Some("seven"));
        assert_eq!(table.len(), 2);
        *table.get_mut(&JobId(5)).unwrap() = "FIVE";
        assert_eq!(ids(&table), [5, 7]);
        assert_eq!(table.values().copied().collect::<Vec<_>>(), ["FIVE", "seven again"]);
    }

    #[test]
    fn removing_the_ends_shrinks_the_window_and_a_hole_stays_a_miss() {
        let mut table = IdTable::new();
        for i in 1..=6 {
            table.insert(JobId(i), "x");
        }
        assert_eq!(table.remove(&JobId(3)), Some("x"));
        assert_eq!(table.remove(&JobId(3)), None);
        assert_eq!(table.remove(&JobId(1)), Some("x"));
        assert_eq!(table.remove(&JobId(2)), Some("x"));
        // 1 and 2 gone and 3 already vacated: the window starts at 4.
        assert_eq!((table.base, table.slots.len()), (4, 3));
        assert_eq!(table.remove(&JobId(6)), Some("x"));
        assert_eq!((table.base, table.slots.len()), (4, 2));
        assert_eq!(ids(&table), [4, 5]);
        table.remove(&JobId(4));
        table.remove(&JobId(5));
        assert!(table.len() == 0 && table.slots.is_empty());
        // Empty again: the next id starts a new window wherever it is.
        table.insert(JobId(100), "y");
        assert_eq!((table.base, ids(&table)), (100, vec![100]));
    }

    #[test]
    fn an_earlier_id_widens_the_window_at_the_front() {
        let mut table = IdTable::new();
        table.insert(AgentId(10), 'a');
        table.insert(AgentId(8), 'b');
        table.insert(AgentId(12), 'c');
        let listed: Vec<(u32, char)> = table.iter().map(|(id, &v)| (id.0, v)).collect();
        assert_eq!(listed, [(8, 'b'), (10, 'a'), (12, 'c')]);
        assert_eq!(table.get(&AgentId(9)), None);
        assert_eq!(table.get(&AgentId(8)), Some(&'b'));
    }

    #[test]
    fn iterates_and_ranges_as_an_ordered_map_does() {
        // The same operations on a BTreeMap and an IdTable list the same entries.
        let mut table = IdTable::new();
        let mut map = BTreeMap::new();
        let mut x: u64 = 12345;
        for step in 0..2000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let id = JobId(step / 2 + (x >> 60));
            if x >> 63 == 0 {
                assert_eq!(table.insert(id, step), map.insert(id, step));
            } else {
                assert_eq!(table.remove(&id), map.remove(&id));
            }
            assert_eq!(table.len(), map.len());
        }
        let listed: Vec<(JobId, u64)> = table.iter().map(|(k, &v)| (k, v)).collect();
        let expected: Vec<(JobId, u64)> = map.iter().map(|(&k, &v)| (k, v)).collect();
        assert_eq!(listed, expected);
        let reversed: Vec<JobId> = table.iter().rev().map(|(k, _)| k).collect();
        assert_eq!(reversed, map.keys().rev().copied().collect::<Vec<_>>());
        let first = map.keys().next().copied().unwrap_or(JobId(0)).0;
        for (lo, hi) in
            [(0, 5), (first, first + 40), (first + 3, first + 3), (first + 9, first + 2), (900, 5000)]
        {
            let (lo, hi) = (JobId(lo), JobId(hi));
            let got: Vec<JobId> =
                table.range((Bound::Excluded(lo), Bound::Unbounded)).map(|(k, _)| k).collect();
            let want: Vec<JobId> =
                map.range((Bound::Excluded(lo), Bound::Unbounded)).map(|(&k, _)| k).collect();
            assert_eq!(got, want, "after {lo:?}");
            let got: Vec<JobId> =
                table.range((Bound::Unbounded, Bound::Excluded(hi))).rev().map(|(k, _)| k).collect();
            let want: Vec<JobId> =
                map.range((Bound::Unbounded, Bound::Excluded(hi))).rev().map(|(&k, _)| k).collect();
            assert_eq!(got, want, "before {hi:?}");
            if lo <= hi {
                let got: Vec<JobId> = table.range(lo..=hi).map(|(k, _)| k).collect();
                let want: Vec<JobId> = map.range(lo..=hi).map(|(&k, _)| k).collect();
                assert_eq!(got, want, "{lo:?}..={hi:?}");
            }
        }
    }
}
