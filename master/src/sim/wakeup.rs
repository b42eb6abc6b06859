//! Which of the simulator's `Wakeup` events is current, so the core is ticked once per
//! wakeup it asks for (`Core::next_wakeup`) however often that moves earlier.

use slotmarket_common::time::Timestamp;

/// Which of the `Wakeup` events in the heap counts. A wakeup earlier than the one already
/// pushed is pushed too, and the later one stays behind (a heap cannot take it out); it is
/// recognised when it pops and skipped, so the core is ticked once per wakeup it asked for
/// and a superseded wakeup never leaves a second tick behind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Wakeup {
    /// The time of the current `Wakeup` event, as pushed.
    pushed: Option<Timestamp>,
}

impl Wakeup {
    /// The core asks to be ticked at `at`: the time to push a `Wakeup` event at (`at`, or
    /// `now` if that is past), unless the current one comes no later.
    pub(super) fn request(&mut self, at: Timestamp, now: Timestamp) -> Option<Timestamp> {
        let at = at.max(now);
        if self.pushed.is_some_and(|pushed| pushed <= at) {
            return None;
        }
        self.pushed = Some(at);
        Some(at)
    }

    /// Whether a wakeup the core asked for is still to come.
    pub(super) fn pending(&self) -> bool {
        self.pushed.is_some()
    }

    /// A `Wakeup` event of time `at` popped: whether it is the current one, which it then
    /// uses up. Any other is stale.
    pub(super) fn take_due(&mut self, at: Timestamp) -> bool {
        let due = self.pushed == Some(at);
        if due {
            self.pushed = None;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use super::*;

    /// A stub of the loop's heap: `Wakeup` events by time then push order, popped as the
    /// simulator pops them, with a core whose next wakeup is scripted. Counts ticks.
    #[derive(Default)]
    struct Loop {
        heap: BinaryHeap<Reverse<(Timestamp, u64)>>,
        seq: u64,
        wakeup: Wakeup,
        ticks: Vec<Timestamp>,
    }

    impl Loop {
        /// The core asks for `at` after a call at `now`.
        fn ask(&mut self, at: u64, now: u64) {
            if let Some(t) = self.wakeup.request(Timestamp(at), Timestamp(now)) {
                self.seq += 1;
                self.heap.push(Reverse((t, self.seq)));
            }
        }

        /// Pops every event; after each tick the core asks for `then(tick time)`, if anything.
        fn drain(&mut self, then: impl Fn(u64) -> Option<u64>) {
            while let Some(Reverse((at, _))) = self.heap.pop() {
                if self.wakeup.take_due(at) {
                    self.ticks.push(at);
                    if let Some(next) = then(at.0) {
                        self.ask(next, at.0);
                    }
                }
            }
        }
    }

    #[test]
    fn an_earlier_wakeup_leaves_no_second_tick_behind() {
        let mut sim = Loop::default();
        sim.ask(10, 0);
        // Something earlier comes up: 5 is pushed, 10 stays in the heap.
        sim.ask(5, 0);
        // Nothing later than the pending one is pushed again.
        sim.ask(7, 0);
        // After 5 the core wants 10 again, then 20, then nothing: one tick each.
        sim.drain(|t| match t {
            5 => Some(10),
            10 => Some(20),
            _ => None,
        });
        assert_eq!(sim.ticks, [Timestamp(5), Timestamp(10), Timestamp(20)]);
    }

    #[test]
    fn a_wakeup_in_the_past_is_pushed_now_and_only_once() {
        let mut sim = Loop::default();
        sim.ask(3, 8);
        sim.ask(3, 8);
        sim.ask(8, 8);
        assert_eq!(sim.heap.len(), 1);
        sim.drain(|_| None);
        assert_eq!(sim.ticks, [Timestamp(8)]);
        assert_eq!(sim.wakeup, Wakeup::default());
    }
}
