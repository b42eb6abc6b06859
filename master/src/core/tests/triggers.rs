//! The core tells a policy why it schedules: [`Trigger::Event`] from `handle`,
//! [`Trigger::Tick`] from `tick`, so a policy can keep its periodic control off the
//! event path. A recording policy places work like `fifo` and logs every trigger.

use std::sync::{Arc, Mutex};

use slotmarket_common::container::ContainerState;
use slotmarket_common::time::Timestamp;

use super::builders::JobBuilder;
use super::env::{START, TestEnv};
use crate::core::policy::{Decisions, Fifo, Policy, PolicyName, SchedView, Trigger};

/// How often the recording policy wants a tick.
const INTERVAL_MS: u64 = 5_000;

/// Places work as `fifo` does on every call, logs `(now, trigger)`, and asks for a tick
/// every [`INTERVAL_MS`] after the last one, like a policy with an allocation interval.
#[derive(Debug)]
struct Recording {
    log: Arc<Mutex<Vec<(Timestamp, Trigger)>>>,
    last_tick: Timestamp,
}

impl Policy for Recording {
    fn name(&self) -> PolicyName {
        PolicyName::Fifo
    }

    fn schedule(&mut self, now: Timestamp, view: &SchedView<'_>, trigger: Trigger) -> Decisions {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push((now, trigger));
        if trigger == Trigger::Tick {
            self.last_tick = now;
        }
        Fifo::default().schedule(now, view, trigger)
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        Some(Timestamp(self.last_tick.0 + INTERVAL_MS))
    }
}

/// Takes what the policy logged since the last call.
fn drain(log: &Mutex<Vec<(Timestamp, Trigger)>>) -> Vec<(Timestamp, Trigger)> {
    std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()))
}

#[test]
fn a_policy_sees_tick_only_from_tick_and_event_from_everything_else() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut env = TestEnv::with_policy(Box::new(Recording { log: Arc::clone(&log), last_tick: START }));

    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(2).build());
    let first = env.take_launches(1);
    let events = drain(&log);
    assert_eq!(events.len(), 2, "one schedule per handle: {events:?}");
    assert!(events.iter().all(|&(at, t)| (at, t) == (START, Trigger::Event)), "{events:?}");

    // The policy's interval is the next wakeup (before the agent timeout); tick then.
    assert_eq!(env.core.next_wakeup(), Some(Timestamp(START.0 + INTERVAL_MS)));
    env.advance_ms(INTERVAL_MS);
    env.heartbeat("n1");
    assert!(drain(&log).iter().all(|&(_, t)| t == Trigger::Event));
    env.tick();
    assert_eq!(drain(&log), vec![(env.now, Trigger::Tick)]);
    assert_eq!(env.core.next_wakeup(), Some(Timestamp(env.now.0 + INTERVAL_MS)));

    // Reports are events again, and the work they free is placed on them, not on a tick.
    env.run_to(first[0].container, ContainerState::Completed);
    let events = drain(&log);
    assert!(!events.is_empty() && events.iter().all(|&(_, t)| t == Trigger::Event), "{events:?}");
    let second = env.take_launches(1);
    assert_eq!((second[0].task.job, second[0].task.index), (job, 1));
    env.assert_no_commands();
}
