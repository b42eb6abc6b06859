//! `capacity`: the Hadoop Capacity Scheduler's baseline. Each queue is guaranteed a static
//! share of every slot kind; a free slot goes to the queue using the smallest fraction of
//! its guarantee (queues without one come last), and within a queue to the earliest job.
//! Slots a queue leaves idle are lent to the others. With preemption on, a queue below
//! its guarantee while no slot is free takes lent slots back, newest containers first.

use std::collections::{BTreeMap, VecDeque};

use slotmarket_common::ids::JobId;
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::preempt::{deficit, excess, kills_in_flight, newest_of};
use super::slots::FreeSlots;
use super::{Assignment, Decisions, KillReason, Policy, PolicyName, Preemption, SchedView, Trigger};

/// The queue-share policy.
#[derive(Clone, Debug, Default)]
pub struct Capacity {
    /// Guaranteed share per queue; empty means equal shares among active queues.
    shares: BTreeMap<String, f64>,
    preemption: bool,
}

/// One queue's standing for one slot kind in one step.
#[derive(Debug, Default)]
struct QueueUse {
    /// Guaranteed slots (share × slots offered).
    guaranteed: f64,
    /// Tasks running.
    used: u32,
    /// Jobs with ready tasks, in admission order, with how many.
    ready: VecDeque<(JobId, u32)>,
}

impl QueueUse {
    /// Serving order: queues with a guarantee by the fraction of it in use, then queues
    /// without one by tasks running. Lower goes first.
    fn key(&self) -> (bool, f64) {
        if self.guaranteed > 0.0 {
            (false, f64::from(self.used) / self.guaranteed)
        } else {
            (true, f64::from(self.used))
        }
    }
}

impl Capacity {
    /// A capacity policy with the given guaranteed shares.
    pub fn new(shares: BTreeMap<String, f64>, preemption: bool) -> Capacity {
        Capacity { shares, preemption }
    }

    /// Every queue with an active job: its guarantee, use and ready jobs for `kind`.
    fn queues<'a>(&self, view: &SchedView<'a>, kind: SlotKind) -> BTreeMap<&'a str, QueueUse> {
        let mut queues: BTreeMap<&'a str, QueueUse> = BTreeMap::new();
        for job in view.active_jobs() {
            let q = queues.entry(job.queue()).or_default();
            q.used += job.running(kind);
            if job.ready(kind) > 0 {
                q.ready.push_back((job.id(), job.ready(kind)));
            }
        }
        let total = f64::from(view.total_slots(kind));
        let even = total / queues.len().max(1) as f64;
        for (name, q) in &mut queues {
            q.guaranteed = if self.shares.is_empty() {
                even
            } else {
                self.shares.get(*name).map_or(0.0, |share| share * total)
            };
        }
        queues
    }
}

impl Policy for Capacity {
    fn name(&self) -> PolicyName {
        PolicyName::Capacity
    }

    fn forgets_when_idle(&self) -> bool {
        true
    }

    fn schedule(&mut self, _now: Timestamp, view: &SchedView<'_>, _trigger: Trigger) -> Decisions {
        let mut decisions = Decisions::default();
        for kind in SlotKind::ALL {
            let free = view.has_free(kind);
            if (!free && !self.preemption) || view.jobs_with_ready(kind).next().is_none() {
                continue;
            }
            let mut queues = self.queues(view, kind);
            if free {
                fill(view, kind, &mut queues, &mut decisions.assignments);
            } else {
                decisions.preemptions.extend(take_back(view, kind, &queues));
            }
        }
        decisions
    }
}

/// Hands out every free slot of `kind`, one at a time, to the front job of the queue
/// furthest below its guarantee (queue name on ties).
fn fill(
    view: &SchedView<'_>,
    kind: SlotKind,
    queues: &mut BTreeMap<&str, QueueUse>,
    out: &mut Vec<Assignment>,
) {
    let mut free = FreeSlots::new(view.agents_with_free(kind), kind);
    while free.remaining() > 0 {
        let neediest = queues
            .values_mut()
            .filter(|q| !q.ready.is_empty())
            .min_by(|a, b| a.key().0.cmp(&b.key().0).then(a.key().1.total_cmp(&b.key().1)));
        let Some(q) = neediest else { return };
        let Some(agent) = free.take() else { return };
        let Some(front) = q.ready.front_mut() else { return };
        out.push(Assignment { agent, job: front.0, kind });
        front.1 -= 1;
        if front.1 == 0 {
            q.ready.pop_front();
        }
        q.used += 1;
    }
}

/// Kills enough lent tasks to bring starved queues up to their guarantee of `kind`.
fn take_back(view: &SchedView<'_>, kind: SlotKind, queues: &BTreeMap<&str, QueueUse>) -> Vec<Preemption> {
    let owed: u32 =
        queues.values().map(|q| deficit(q.guaranteed, q.used, q.ready.iter().map(|&(_, n)| n).sum())).sum();
    if owed == 0 {
        return Vec::new();
    }
    let budget = owed.saturating_sub(kills_in_flight(view, kind));
    if budget == 0 {
        return Vec::new();
    }
    let mut victims: Vec<(usize, u32)> = queues
        .values()
        .enumerate()
        .map(|(i, q)| (i, excess(q.guaranteed, q.used)))
        .filter(|&(_, over)| over > 0)
        .collect();
    victims.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let names: Vec<&str> = queues.keys().copied().collect();
    let group = |job: JobId| view.job(job).and_then(|j| names.iter().position(|n| *n == j.queue()));
    let reason =
        KillReason::Preempted { policy: PolicyName::Capacity, why: "its queue is over its guarantee" };
    newest_of(view, kind, &victims, group, budget, reason)
}
