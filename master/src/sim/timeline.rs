//! The simulator's queue of timed events: a calendar of buckets over a window ahead of
//! the clock, with a heap for what lies beyond it.
//!
//! It pops exactly what a `BinaryHeap` of `Reverse((time, push order, event))` pops, in
//! the same order: earliest time first, and at one time in push order. A bucket holds a
//! short span of time, its events sorted latest first (so the next is at its end) and,
//! at one time, the one pushed last furthest from the end. The window moves only forward,
//! to the time of the event last popped; events beyond it wait in the heap until the
//! window reaches them, and are moved into their buckets as soon as it does (before any
//! later push could land at their time), so they keep their place ahead of events pushed
//! after them. Every push must be no earlier than the last pop, as in the simulator, whose
//! events are never due before its clock.
//!
//! Why: the heap's pop sifts through some eight levels of a couple of hundred tasks in
//! flight; here a push is a short insertion into a bucket of one or two events and a pop
//! takes the last, because almost every task ends within the window. The window is kept
//! small (a few kilobytes: 1,024 buckets of 128 ms): a calendar of one bucket per
//! millisecond counted fewer instructions but took more time, its megabytes of buckets
//! missing the caches on every push and pop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use slotmarket_common::time::Timestamp;

/// Buckets in the window (a power of two).
const BUCKETS: u64 = 1024;
/// Milliseconds per bucket (a power of two): the window is 131 s, longer than almost any
/// task of the MRM mix (tens of seconds), so few events go the long way through the heap.
const SPAN: u64 = 128;
/// Words of the bitmap of non-empty buckets.
const WORDS: usize = (BUCKETS / 64) as usize;

/// Timed events, popped earliest first and in push order at one time.
#[derive(Clone, Debug)]
pub(super) struct Timeline<T> {
    /// The time of the event last popped: no event in a bucket is earlier, and the window
    /// is the `BUCKETS` buckets from the one holding it. Only moves forward.
    base: u64,
    /// Each bucket's events (time `t` is in bucket `t / SPAN % BUCKETS`), latest first.
    buckets: Vec<Vec<(u64, T)>>,
    /// Non-empty buckets, one bit each.
    bits: [u64; WORDS],
    /// The earliest time in a bucket, if any.
    next: Option<u64>,
    /// Events past the window, by time then push order.
    later: BinaryHeap<Reverse<(u64, u64, T)>>,
    /// Pushes so far (the order of events in `later`).
    seq: u64,
}

impl<T: Ord> Default for Timeline<T> {
    fn default() -> Timeline<T> {
        Timeline {
            base: 0,
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            bits: [0; WORDS],
            next: None,
            later: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T: Ord> Timeline<T> {
    /// Queues `event` at `at`, which must be no earlier than the last event popped (an
    /// earlier one is queued at that event's time, after what is there).
    pub(super) fn push(&mut self, at: Timestamp, event: T) {
        let at = at.0.max(self.base);
        self.seq += 1;
        if self.in_window(at) {
            self.insert(at, event);
        } else {
            self.later.push(Reverse((at, self.seq, event)));
        }
    }

    /// The time of the next event.
    pub(super) fn peek(&self) -> Option<Timestamp> {
        self.next.or_else(|| self.later.peek().map(|Reverse((at, _, _))| *at)).map(Timestamp)
    }

    /// Takes the next event with its time. Inlined into the loop, which takes one per
    /// event: left to itself the compiler inlined it or not as unrelated code changed.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<(Timestamp, T)> {
        let at = match self.next {
            Some(at) => at,
            None => self.later.peek()?.0.0,
        };
        self.advance(at);
        let bucket = bucket_of(at);
        let (at, event) = self.buckets[bucket].pop()?;
        match self.buckets[bucket].last() {
            Some(&(t, _)) => self.next = Some(t),
            None => {
                self.bits[bucket / 64] &= !(1 << (bucket % 64));
                self.next = self.first_from(bucket).and_then(|b| self.buckets[b].last()).map(|&(t, _)| t);
            }
        }
        Some((Timestamp(at), event))
    }

    /// Whether `at` (no earlier than `base`) falls in the window's buckets.
    fn in_window(&self, at: u64) -> bool {
        at / SPAN - self.base / SPAN < BUCKETS
    }

    /// Moves the window to start at `at` (no bucket holds anything earlier) and brings in
    /// the events of `later` it now covers, in their order.
    fn advance(&mut self, at: u64) {
        self.base = at;
        while let Some(Reverse((t, _, _))) = self.later.peek() {
            if !self.in_window(*t) {
                break;
            }
            let Some(Reverse((t, _, event))) = self.later.pop() else { break };
            self.insert(t, event);
        }
    }

    /// Puts `event` (at `at`, inside the window) into its bucket: after the later events
    /// and before those at `at` or earlier, which were pushed before it or are due first.
    fn insert(&mut self, at: u64, event: T) {
        let bucket = bucket_of(at);
        let events = &mut self.buckets[bucket];
        let place = events.partition_point(|&(t, _)| t > at);
        events.insert(place, (at, event));
        self.bits[bucket / 64] |= 1 << (bucket % 64);
        self.next = Some(self.next.map_or(at, |next| next.min(at)));
    }

    /// The first non-empty bucket in window order from bucket `from` (the window's
    /// first), wrapping round the ring; `None` if all are empty.
    fn first_from(&self, from: usize) -> Option<usize> {
        let word = from / 64;
        let here = self.bits[word] & (u64::MAX << (from % 64));
        if here != 0 {
            return Some(word * 64 + here.trailing_zeros() as usize);
        }
        // The ring wraps: the first word comes round again last, for its buckets before
        // `from`.
        (word + 1..WORDS)
            .chain(0..=word)
            .find(|&w| self.bits[w] != 0)
            .map(|w| w * 64 + self.bits[w].trailing_zeros() as usize)
    }
}

/// The bucket of time `t`.
fn bucket_of(t: u64) -> usize {
    (t / SPAN % BUCKETS) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::Rng;

    /// The reference: what the simulator used before.
    #[derive(Default)]
    struct Heap {
        heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
        seq: u64,
    }

    impl Heap {
        fn push(&mut self, at: u64, event: u32) {
            self.seq += 1;
            self.heap.push(Reverse((at, self.seq, event)));
        }
        fn peek(&self) -> Option<u64> {
            self.heap.peek().map(|Reverse((at, _, _))| *at)
        }
        fn pop(&mut self) -> Option<(u64, u32)> {
            self.heap.pop().map(|Reverse((at, _, event))| (at, event))
        }
    }

    /// Drives both with the same pushes (at the clock or after it, near and far, many at
    /// one time) and pops, and compares every peek and pop.
    fn same_as_the_heap(seed: u64, far: u32, steps: u32) {
        let mut rng = Rng::new(seed);
        let (mut timeline, mut heap) = (Timeline::default(), Heap::default());
        let mut now = 0;
        for step in 0..steps {
            if rng.chance(0.55) || heap.peek().is_none() {
                // Ties are common: the delay is often zero or a round number.
                let delay = match rng.range(0, 3) {
                    0 => 0,
                    1 => u64::from(rng.range(0, 3)) * 1000,
                    _ => u64::from(rng.range(0, far)),
                };
                timeline.push(Timestamp(now + delay), step);
                heap.push(now + delay, step);
            } else {
                let popped = heap.pop();
                assert_eq!(timeline.pop().map(|(at, e)| (at.0, e)), popped, "step {step}");
                now = popped.map_or(now, |(at, _)| at);
            }
            assert_eq!(timeline.peek().map(|t| t.0), heap.peek(), "step {step}");
        }
        while let Some(popped) = heap.pop() {
            assert_eq!(timeline.pop().map(|(at, e)| (at.0, e)), Some(popped));
        }
        assert_eq!(timeline.pop(), None);
    }

    #[test]
    fn pops_what_a_heap_of_time_and_push_order_pops() {
        for seed in 1..=20 {
            same_as_the_heap(seed, 60_000, 20_000);
        }
    }

    #[test]
    fn events_past_the_window_keep_their_place_among_later_pushes() {
        // Delays up to several windows: most events go through the heap beyond it, and
        // pushes at their time after the window reaches them must come after them.
        for seed in 1..=20 {
            same_as_the_heap(seed, (5 * SPAN * BUCKETS) as u32, 20_000);
        }
    }

    #[test]
    fn one_time_far_ahead_keeps_push_order_across_the_window_move() {
        let mut timeline = Timeline::default();
        let far = SPAN * BUCKETS + 10;
        timeline.push(Timestamp(far), 1);
        timeline.push(Timestamp(5), 0);
        assert_eq!(timeline.pop(), Some((Timestamp(5), 0)));
        // The window now reaches `far`: the event waiting beyond it is in its bucket, and
        // this one goes after it.
        timeline.push(Timestamp(far), 2);
        assert_eq!(timeline.pop(), Some((Timestamp(far), 1)));
        assert_eq!(timeline.pop(), Some((Timestamp(far), 2)));
        assert_eq!(timeline.pop(), None);
        assert_eq!(timeline.peek(), None);
    }
}
