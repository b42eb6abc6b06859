//! Reservations as decisions: a policy holds slots of a kind for a set of jobs, and the
//! reactor refuses assignments to other jobs that would eat into them, whatever the
//! policy asks. The greedy policy here asks for every free slot for the earliest job
//! while reserving slots for the jobs named in its shared set.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use slotmarket_common::ids::JobId;
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::builders::JobBuilder;
use super::env::TestEnv;
use crate::core::invariants;
use crate::core::policy::{Assignment, Decisions, Fifo, Policy, PolicyName, Reservation, SchedView, Trigger};

/// `fifo`'s assignments, then the free slots again for every later job, plus a map
/// reservation of `held.0` slots for the jobs in `held.1`.
#[derive(Debug)]
struct Reserving {
    held: Held,
}

/// The reservation the test changes while the core runs: slots and the jobs they are for.
type Held = Arc<Mutex<(u32, BTreeSet<JobId>)>>;

impl Policy for Reserving {
    fn name(&self) -> PolicyName {
        PolicyName::Fifo
    }

    fn schedule(&mut self, now: Timestamp, view: &SchedView<'_>, trigger: Trigger) -> Decisions {
        // FIFO first, so the earliest job asks for every free slot; then the same slots
        // again for later jobs, which the reactor takes once the earlier were refused.
        let mut decisions = Fifo::default().schedule(now, view, trigger);
        let jobs: Vec<_> = view.jobs_with_ready(SlotKind::Map).skip(1).collect();
        for job in jobs {
            for agent in view.agents_with_free(SlotKind::Map) {
                for _ in 0..agent.free(SlotKind::Map).min(job.ready(SlotKind::Map)) {
                    decisions.assignments.push(Assignment {
                        agent: agent.agent,
                        job: job.id(),
                        kind: SlotKind::Map,
                    });
                }
            }
        }
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        decisions.reservations.push(Reservation { kind: SlotKind::Map, slots: held.0, jobs: held.1.clone() });
        decisions
    }
}

fn env_with(slots: u32, jobs: &[u64]) -> (TestEnv, Held) {
    let held = Arc::new(Mutex::new((slots, jobs.iter().map(|&j| JobId(j)).collect())));
    (TestEnv::with_policy(Box::new(Reserving { held: Arc::clone(&held) })), held)
}

#[test]
fn other_jobs_cannot_take_reserved_slots_even_when_the_policy_assigns_them() {
    // Job 2 is reserved 2 of 6 map slots; job 1 (first in FIFO) asks for all 6.
    let (mut env, _held) = env_with(2, &[2]);
    env.join_agent("n1", 3, 0);
    env.join_agent("n2", 3, 0);
    let big = env.submit(JobBuilder::maps(10).build());
    assert_eq!(big, JobId(1));
    assert_eq!(env.take_all_launches().len(), 4, "two of six slots stay held for job 2");
    let small = env.submit(JobBuilder::maps(2).build());
    let launches = env.take_all_launches();
    assert_eq!(launches.len(), 2);
    assert!(launches.iter().all(|l| l.task.job == small), "{launches:?}");
    env.assert_no_commands();
}

#[test]
fn a_reserved_job_may_use_free_slots_beyond_its_reservation() {
    let (mut env, _held) = env_with(1, &[1]);
    env.join_agent("n1", 4, 0);
    env.submit(JobBuilder::maps(3).build());
    assert_eq!(env.take_all_launches().len(), 3, "the reserved job is not capped by its reservation");
    env.assert_no_commands();
}

#[test]
fn a_reservation_fills_as_slots_are_released_and_lifts_when_no_longer_stated() {
    let (mut env, held) = env_with(0, &[]);
    env.join_agent("n1", 4, 0);
    env.submit(JobBuilder::maps(8).build());
    let first = env.take_all_launches();
    assert_eq!(first.len(), 4);
    // Now hold 2 slots for job 2 (not yet submitted): slots job 1 holds are not taken
    // back, but as they are released they stay idle for job 2.
    *held.lock().unwrap_or_else(|e| e.into_inner()) = (2, BTreeSet::from([JobId(2)]));
    env.finish(first[0].container);
    assert!(env.take_all_launches().is_empty(), "the freed slot is held for job 2");
    env.finish(first[1].container);
    assert!(env.take_all_launches().is_empty());
    env.finish(first[2].container);
    assert_eq!(env.take_all_launches().len(), 1, "a third free slot is beyond the reservation");
    // Lifting the reservation lets job 1 take the idle slots at the next step.
    *held.lock().unwrap_or_else(|e| e.into_inner()) = (0, BTreeSet::new());
    env.tick();
    assert_eq!(env.take_all_launches().len(), 2);
    env.assert_no_commands();
}

#[test]
fn the_invariant_catches_outside_jobs_that_gained_more_than_the_spare_slots() {
    let (mut env, _held) = env_with(2, &[2]);
    env.join_agent("n1", 6, 0);
    env.submit(JobBuilder::maps(10).build());
    assert_eq!(env.take_all_launches().len(), 4);
    assert_eq!(invariants::check(&env.core), Ok(()));
    // The submit step launched job 1's four tasks: none held before, six free of which
    // two were reserved, so four to spare. Had there been one to spare, four would break it.
    let held = &mut env.core.state.reservations[0];
    assert_eq!((held.outside_before, held.allowance), (0, 4));
    held.allowance = 1;
    let broken = invariants::check(&env.core).unwrap_err();
    assert!(
        broken.contains("outside a reservation of 2 hold 4 slots, up from 0 with 1 to spare"),
        "{broken}"
    );
}
