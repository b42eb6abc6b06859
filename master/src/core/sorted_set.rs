//! `SortedSet`: an ordered set of small keys kept as one sorted ring buffer, for the
//! core's indexes that are mostly appended to at the high end and taken from at the low
//! end: the agents with free slots (ids handed out in rising order), and a job's ready
//! tasks (released a stage at a time, launched lowest first).
//! Those are a `BTreeSet`'s operations at a `VecDeque`'s cost: one allocation instead of
//! a tree of nodes, `O(1)` at either end, a binary search and a short move in the middle
//! (the sets are small: a cluster's agents, a job's tasks). Iteration is in key order, as the
//! `BTreeSet`s they replace iterated.

use std::collections::VecDeque;
use std::fmt;

/// An ordered set of `T` (see the module header).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SortedSet<T> {
    /// The keys, ascending, without duplicates.
    keys: VecDeque<T>,
}

impl<T> Default for SortedSet<T> {
    fn default() -> Self {
        SortedSet { keys: VecDeque::new() }
    }
}

impl<T: Ord + Copy> SortedSet<T> {
    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `key` is in the set.
    pub(crate) fn contains(&self, key: &T) -> bool {
        self.keys.binary_search(key).is_ok()
    }

    /// Adds `key`; `false` if it was already there. A key above every other (the common
    /// case) is appended without a search.
    pub(crate) fn insert(&mut self, key: T) -> bool {
        if self.keys.back().is_none_or(|last| *last < key) {
            self.keys.push_back(key);
            return true;
        }
        match self.keys.binary_search(&key) {
            Ok(_) => false,
            Err(at) => {
                self.keys.insert(at, key);
                true
            }
        }
    }

    /// Removes `key`; `false` if it was not there.
    pub(crate) fn remove(&mut self, key: &T) -> bool {
        if self.keys.front() == Some(key) {
            self.keys.pop_front();
            return true;
        }
        match self.keys.binary_search(key) {
            Ok(at) => {
                self.keys.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// The lowest key.
    pub(crate) fn first(&self) -> Option<&T> {
        self.keys.front()
    }

    /// Takes the lowest key out.
    pub(crate) fn pop_first(&mut self) -> Option<T> {
        self.keys.pop_front()
    }

    /// The keys in ascending order.
    pub(crate) fn iter(&self) -> std::collections::vec_deque::Iter<'_, T> {
        self.keys.iter()
    }

    /// Keeps only the keys `keep` accepts.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.keys.retain(keep);
    }

    /// Adds every key of `sorted`, which must be ascending: appended at once when it
    /// starts above every key already here (a newly released stage after the earlier
    /// ones), merged otherwise.
    pub(crate) fn extend_sorted(&mut self, sorted: impl IntoIterator<Item = T>) {
        let mut sorted = sorted.into_iter().peekable();
        match (self.keys.back(), sorted.peek()) {
            (_, None) => {}
            (None, Some(_)) => self.keys.extend(sorted),
            (Some(last), Some(first)) if last < first => self.keys.extend(sorted),
            (Some(_), Some(_)) => {
                let old = std::mem::take(&mut self.keys);
                self.keys = merge(old, sorted);
            }
        }
    }
}

/// The ascending union of two ascending sequences, without duplicates.
fn merge<T: Ord + Copy>(a: VecDeque<T>, b: impl Iterator<Item = T>) -> VecDeque<T> {
    let mut out = VecDeque::with_capacity(a.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (None, None) => return out,
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (Some(x), Some(y)) if x < y => a.next(),
            (Some(x), Some(y)) if y < x => b.next(),
            (Some(_), Some(_)) => {
                b.next();
                a.next()
            }
        };
        out.extend(next);
    }
}

impl<T: Ord + Copy> FromIterator<T> for SortedSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut keys: Vec<T> = iter.into_iter().collect();
        keys.sort_unstable();
        keys.dedup();
        SortedSet { keys: keys.into() }
    }
}

impl<'a, T: Ord + Copy> IntoIterator for &'a SortedSet<T> {
    type Item = &'a T;
    type IntoIter = std::collections::vec_deque::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.keys.iter()
    }
}

impl<T: fmt::Debug> fmt::Debug for SortedSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.keys.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn listed(set: &SortedSet<u32>) -> Vec<u32> {
        set.iter().copied().collect()
    }

    #[test]
    fn behaves_as_a_btree_set_under_mixed_operations() {
        let (mut set, mut tree) = (SortedSet::default(), BTreeSet::new());
        let mut x: u64 = 99;
        for step in 0..3000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = step / 3 + (x >> 59) as u32;
            match x >> 62 {
                0 | 1 => assert_eq!(set.insert(key), tree.insert(key)),
                2 => assert_eq!(set.remove(&key), tree.remove(&key)),
                _ => assert_eq!(set.pop_first(), tree.pop_first()),
            }
            assert_eq!(set.first(), tree.first());
            assert_eq!(set.contains(&key), tree.contains(&key));
            assert_eq!((set.len(), set.is_empty()), (tree.len(), tree.is_empty()));
        }
        assert_eq!(listed(&set), tree.iter().copied().collect::<Vec<_>>());
    }

    #[test]
    fn extend_sorted_appends_above_and_merges_below() {
        let mut set: SortedSet<u32> = [5, 1, 3].into_iter().collect();
        assert_eq!(listed(&set), [1, 3, 5]);
        set.extend_sorted([6, 8]);
        assert_eq!(listed(&set), [1, 3, 5, 6, 8]);
        set.extend_sorted([0, 3, 4, 9]);
        assert_eq!(listed(&set), [0, 1, 3, 4, 5, 6, 8, 9]);
        set.extend_sorted([]);
        assert_eq!(set.len(), 8);
        let mut empty = SortedSet::default();
        empty.extend_sorted([2, 7]);
        assert_eq!(listed(&empty), [2, 7]);
    }

    #[test]
    fn insert_and_remove_report_presence_and_retain_filters() {
        let mut set = SortedSet::default();
        assert!(set.insert(4) && set.insert(2) && !set.insert(4));
        assert!(set.remove(&2) && !set.remove(&2) && !set.remove(&9));
        set.extend_sorted(10..20);
        set.retain(|k| k % 2 == 0);
        assert_eq!(listed(&set), [4, 10, 12, 14, 16, 18]);
        assert_eq!(format!("{set:?}"), "{4, 10, 12, 14, 16, 18}");
    }
}
