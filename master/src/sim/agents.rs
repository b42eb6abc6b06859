//! The simulated agents: every live task attempt with when it started and how it will
//! end, the reports an agent would send, and the slot time used and lost. Durations are
//! keyed by (seed, job, stage, task) and noise and failures additionally by attempt, so
//! a task lasts as long under every policy and a re-run attempt draws afresh.
//! Slot time is kept per kind and per job, so the run summary has both.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AgentId, AttemptId, ContainerId, TaskId};
use slotmarket_common::protocol::{ContainerReport, Launch};
use slotmarket_common::time::Timestamp;

use super::report::SlotUsage;
use super::rng;
use super::workload::MIN_TASK_MS;
#[cfg(doc)]
use super::workload::task_key;
use slotmarket_common::spec::SlotKind;

/// Salts that keep the draws of one task apart.
const NOISE: u64 = 1;
const FAILS: u64 = 2;
const FAIL_AT: u64 = 3;

/// A task attempt whose process runs.
#[derive(Clone, Copy, Debug)]
struct Attempt {
    agent: AgentId,
    /// Trace index of its job.
    ix: u32,
    task: TaskId,
    attempt: AttemptId,
    kind: SlotKind,
    start: Timestamp,
    /// It fails (at its end time) rather than completing.
    fails: bool,
}

/// Where a running attempt is kept: its place in the agents' table, which its end event
/// carries so that the end finds it without a look-up.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) struct Place(u32);

/// Every agent's running attempts and the reports they owe the core.
pub(super) struct Agents {
    noise: f64,
    fail_prob: f64,
    /// Running attempts with their containers, each at its [`Place`]; vacated places are
    /// reused, so the table holds at most one entry per busy slot. A hashed map by
    /// container id cost an insertion and a removal per task.
    live: Vec<Option<(ContainerId, Attempt)>>,
    /// Vacated places in `live`: every other place holds an attempt.
    vacant: Vec<u32>,
    /// Reports not yet fed to the core, in the order they happened.
    reports: Vec<(AgentId, ContainerReport)>,
    usage: SlotUsage,
    busy_ms: [u64; 2],
    /// Slot time per trace job, by trace index.
    job_busy_ms: Vec<u64>,
    lost_ms: u64,
    failed: u64,
    /// Whether a start is reported (`Running`); not when the core applies it itself.
    report_starts: bool,
}

/// What the agents add up over a run.
pub(super) struct SlotTotals {
    /// Slot use over time.
    pub(super) usage: SlotUsage,
    /// Busy slot time per kind (map, reduce), in milliseconds.
    pub(super) busy_ms: [u64; 2],
    /// Busy slot time per trace job, in milliseconds.
    pub(super) job_busy_ms: Vec<u64>,
    /// Slot time of attempts that were killed or failed, in milliseconds.
    pub(super) lost_ms: u64,
    /// Attempts that failed.
    pub(super) failed: u64,
}

impl Agents {
    /// Agents for a trace of `jobs` jobs, reporting each start if `report_starts`.
    /// Their draws are keyed by each task's key, which the caller passes to
    /// [`launch`](Agents::launch).
    pub(super) fn new(noise: f64, fail_prob: f64, jobs: usize, report_starts: bool) -> Agents {
        Agents {
            noise,
            fail_prob,
            live: Vec::new(),
            vacant: Vec::new(),
            reports: Vec::new(),
            usage: SlotUsage::new(),
            busy_ms: [0; 2],
            job_busy_ms: vec![0; jobs],
            lost_ms: 0,
            failed: 0,
            report_starts,
        }
    }

    /// Starts an attempt now and returns when it ends and where it is kept (for
    /// [`end`](Agents::end)): reports it `Running` (one report
    /// for `Acquired` and `Running`), unless the core applies the start itself in the
    /// step that launched it (`StartReports::Implied`).
    /// `base` is the task's drawn duration and `key` the [`task_key`] it was drawn by;
    /// noise and failure are drawn per attempt from the key.
    // Called once per attempt from one place: kept inline, where the compiler's choice
    // flipped with unrelated changes elsewhere in the crate (about 1 % of a run's
    // instructions, with `end`).
    #[inline]
    pub(super) fn launch(
        &mut self,
        agent: AgentId,
        launch: &Launch,
        ix: u32,
        (key, base): (u64, u64),
        now: Timestamp,
    ) -> (Timestamp, Place) {
        let salt = |s: u64| rng::hash(&[key, u64::from(launch.attempt.0), s]);
        let mut ms = base;
        if self.noise > 0.0 {
            let factor = (1.0 + self.noise * rng::normal(salt(NOISE), salt(NOISE) ^ 1)).max(0.05);
            ms = ((base as f64 * factor).round() as u64).max(MIN_TASK_MS);
        }
        let fails = self.fail_prob > 0.0 && rng::unit(salt(FAILS)) < self.fail_prob;
        if fails {
            // A failure strikes somewhere in the attempt, wasting the work up to it.
            ms = ((ms as f64 * rng::unit(salt(FAIL_AT))).round() as u64).max(MIN_TASK_MS);
        }
        let attempt = Attempt {
            agent,
            ix,
            task: launch.task,
            attempt: launch.attempt,
            kind: launch.slot,
            start: now,
            fails,
        };
        let entry = Some((launch.container, attempt));
        let place = match self.vacant.pop() {
            Some(place) => {
                self.live[place as usize] = entry;
                place
            }
            None => {
                self.live.push(entry);
                (self.live.len() - 1) as u32
            }
        };
        if self.report_starts {
            self.reports.push((agent, report(launch.container, &attempt, ContainerState::Running, now)));
        }
        (now + std::time::Duration::from_millis(ms), Place(place))
    }

    /// Takes the attempt of `container` out of `place`, if it is still there.
    fn take(&mut self, container: ContainerId, place: usize) -> Option<Attempt> {
        let entry = self.live.get_mut(place)?;
        if !matches!(entry, Some((c, _)) if *c == container) {
            return None;
        }
        let (_, attempt) = entry.take()?;
        self.vacant.push(place as u32);
        Some(attempt)
    }

    /// The attempt's process ends: its report, or `None` if it was killed already (its
    /// place is then empty or another container's).
    #[inline]
    pub(super) fn end(
        &mut self,
        container: ContainerId,
        Place(place): Place,
        now: Timestamp,
    ) -> Option<(AgentId, ContainerReport)> {
        let attempt = self.take(container, place as usize)?;
        let used = self.release(&attempt, now);
        let state = if attempt.fails {
            self.failed += 1;
            self.lost_ms += used;
            ContainerState::Failed
        } else {
            ContainerState::Completed
        };
        Some((attempt.agent, report(container, &attempt, state, now)))
    }

    /// Kills an attempt, losing its work; returns its job's trace index. Unknown
    /// containers (already ended) are ignored, as a real agent would.
    pub(super) fn kill(&mut self, container: ContainerId, now: Timestamp) -> Option<u32> {
        // Found by a scan: kills are rare beside ends, and the table has one entry per
        // busy slot at most.
        let place = self.live.iter().position(|entry| matches!(entry, Some((c, _)) if *c == container))?;
        let attempt = self.take(container, place)?;
        self.lost_ms += self.release(&attempt, now);
        self.reports.push((attempt.agent, report(container, &attempt, ContainerState::Killed, now)));
        Some(attempt.ix)
    }

    /// Moves the reports owed into `batches`, one batch per agent (agents in id order,
    /// reports in the order they happened), each batch in a buffer from `spare` when it
    /// has one. Buffers are reused: this runs after every call into the core.
    pub(super) fn take_reports(
        &mut self,
        batches: &mut Vec<(AgentId, Vec<ContainerReport>)>,
        spare: &mut Vec<Vec<ContainerReport>>,
    ) {
        // Stable, so each agent's reports keep their order. Usually one report: sorted.
        if !self.reports.is_sorted_by_key(|(agent, _)| *agent) {
            self.reports.sort_by_key(|(agent, _)| *agent);
        }
        for (agent, report) in self.reports.drain(..) {
            match batches.last_mut() {
                Some((a, batch)) if *a == agent => batch.push(report),
                _ => {
                    let mut batch = spare.pop().unwrap_or_else(|| Vec::with_capacity(2));
                    batch.push(report);
                    batches.push((agent, batch));
                }
            }
        }
    }

    /// Whether reports wait for [`take_reports`](Agents::take_reports).
    pub(super) fn owes_reports(&self) -> bool {
        !self.reports.is_empty()
    }

    /// Whether an attempt's noise or failure is drawn (from its task's key): otherwise
    /// [`launch`](Agents::launch) does not read the key.
    pub(super) fn draws_per_attempt(&self) -> bool {
        self.noise > 0.0 || self.fail_prob > 0.0
    }

    /// Whether no attempt is running.
    pub(super) fn idle(&self) -> bool {
        self.live.len() == self.vacant.len()
    }

    /// Stops the clock: attempts still running count as used up to `now`.
    pub(super) fn close(mut self, now: Timestamp) -> SlotTotals {
        let live: Vec<Attempt> = self.live.drain(..).flatten().map(|(_, a)| a).collect();
        for attempt in &live {
            self.release(attempt, now);
        }
        SlotTotals {
            usage: self.usage,
            busy_ms: self.busy_ms,
            job_busy_ms: self.job_busy_ms,
            lost_ms: self.lost_ms,
            failed: self.failed,
        }
    }

    /// Accounts an attempt's slot time; returns it in milliseconds.
    fn release(&mut self, attempt: &Attempt, now: Timestamp) -> u64 {
        let used = now.0.saturating_sub(attempt.start.0);
        let k = usize::from(attempt.kind == SlotKind::Reduce);
        self.busy_ms[k] += used;
        if let Some(job) = self.job_busy_ms.get_mut(attempt.ix as usize) {
            *job += used;
        }
        self.usage.add(k, attempt.start, now);
        used
    }
}

fn report(container: ContainerId, a: &Attempt, state: ContainerState, at: Timestamp) -> ContainerReport {
    let exit_code = match state {
        ContainerState::Completed => Some(0),
        ContainerState::Failed => Some(1),
        _ => None,
    };
    ContainerReport { container, task: a.task, attempt: a.attempt, state, at, exit_code, message: None }
}
