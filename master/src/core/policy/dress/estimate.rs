//! DRESS release estimation (paper §III-B and §IV-A/B): when the running containers of a
//! job will be released, from the start and finish times of its tasks. Tasks are grouped
//! into phases by their starts (Algorithm 1), each phase starts releasing at its first
//! finish γ once enough of its tasks finish together (Algorithm 2, filtering heading
//! tasks), and releases linearly over its start variation Δps (eq. 9). Trailing tasks,
//! still running well after their phase released, are predicted nothing: Algorithm 2
//! moves them to a later phase whose release is not known yet.
//!
//! Readings of the pseudo-code: Algorithm 1 compares running-task counts in a window
//! with a threshold t_s given in seconds; here a phase is a run of starts no more than
//! the window `pw` apart, which is what the count test detects. Algorithm 2's t_e is a
//! count of finishes within `pw` (the paper's "5s" mixes units).

use std::collections::BTreeMap;

use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use crate::core::state::kind_ix;

/// A task's container as the estimator recorded it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TaskTimes {
    /// Its slot kind.
    pub(crate) kind: SlotKind,
    /// When its process started running.
    pub(crate) started: Timestamp,
    /// When it completed; `None` while it runs.
    pub(crate) finished: Option<Timestamp>,
}

/// The tasks of one job that ran or run, by container.
#[derive(Clone, Debug, Default)]
struct JobTasks {
    tasks: BTreeMap<ContainerId, TaskTimes>,
    /// Completed tasks per kind as last seen, to tell completions from kills.
    completed: [u32; 2],
}

/// Algorithms 1–2 over every job the policy follows.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReleaseModel {
    jobs: BTreeMap<JobId, JobTasks>,
    /// The phase window `pw`, in milliseconds.
    window_ms: u64,
    /// Finishes within `pw` that start a phase's release (t_e); lone earlier finishes
    /// are heading tasks.
    heading: u32,
}

/// One phase of a job: tasks whose starts are within the window of each other.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Phase {
    /// First start (ps_f).
    pub(crate) first_start: Timestamp,
    /// Start variation Δps = ps_l − ps_f, in milliseconds.
    pub(crate) spread_ms: u64,
    /// Containers in the phase (c_p).
    pub(crate) containers: u32,
    /// Still running.
    pub(crate) running: u32,
    /// Finished so far.
    pub(crate) finished: u32,
    /// Heading tasks: finished before the release started (all finishes while it has
    /// not). They are left out of the release line.
    pub(crate) heading: u32,
    /// Start of its release (γ), once found.
    pub(crate) release_start: Option<Timestamp>,
    /// The latest finish, if any.
    pub(crate) last_finish: Option<Timestamp>,
}

impl ReleaseModel {
    /// A model with phase window `window_ms` and heading threshold `heading`.
    pub(crate) fn new(window_ms: u64, heading: u32) -> ReleaseModel {
        ReleaseModel { jobs: BTreeMap::new(), window_ms, heading: heading.max(1) }
    }

    /// Records a container of `job` seen running since `started`.
    pub(crate) fn running(&mut self, job: JobId, container: ContainerId, kind: SlotKind, started: Timestamp) {
        let entry = self.jobs.entry(job).or_default();
        entry.tasks.entry(container).or_insert(TaskTimes { kind, started, finished: None });
    }

    /// Containers of `job` recorded as running and not in `live` have ended by `now`;
    /// `completed` is the job's completed count per kind now. As many of them as the
    /// count grew by (earliest started first) completed at `now`; the others were killed
    /// or failed, and are forgotten (their tasks run again and start a new record).
    pub(crate) fn settle(
        &mut self,
        job: JobId,
        now: Timestamp,
        live: &dyn Fn(ContainerId) -> bool,
        completed: [u32; 2],
    ) {
        let Some(entry) = self.jobs.get_mut(&job) else { return };
        for kind in SlotKind::ALL {
            let k = kind_ix(kind);
            let mut grew = completed[k].saturating_sub(entry.completed[k]);
            let mut gone: Vec<(Timestamp, ContainerId)> = entry
                .tasks
                .iter()
                .filter(|(c, t)| t.kind == kind && t.finished.is_none() && !live(**c))
                .map(|(&c, t)| (t.started, c))
                .collect();
            gone.sort();
            for (_, c) in gone {
                if grew > 0 {
                    grew -= 1;
                    if let Some(t) = entry.tasks.get_mut(&c) {
                        t.finished = Some(now);
                    }
                } else {
                    entry.tasks.remove(&c);
                }
            }
            entry.completed[k] = completed[k];
        }
    }

    /// Drops a job that ended.
    pub(crate) fn forget(&mut self, job: JobId) {
        self.jobs.remove(&job);
    }

    /// Jobs recorded.
    pub(crate) fn jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.jobs.keys().copied()
    }

    /// The phases of `job`'s tasks of `kind` (Algorithms 1 and 2).
    pub(crate) fn phases(&self, job: JobId, kind: SlotKind) -> Vec<Phase> {
        let Some(entry) = self.jobs.get(&job) else { return Vec::new() };
        let mut tasks: Vec<TaskTimes> = entry.tasks.values().filter(|t| t.kind == kind).copied().collect();
        tasks.sort_by_key(|t| t.started);
        let mut phases = Vec::new();
        let mut group: Vec<TaskTimes> = Vec::new();
        for task in tasks {
            let apart = group.last().is_some_and(|last| task.started.0 > last.started.0 + self.window_ms);
            if apart {
                phases.push(self.phase_of(&group));
                group.clear();
            }
            group.push(task);
        }
        if !group.is_empty() {
            phases.push(self.phase_of(&group));
        }
        phases
    }

    /// One phase's parameters from its tasks (sorted by start).
    fn phase_of(&self, tasks: &[TaskTimes]) -> Phase {
        let first_start = tasks.first().map_or(Timestamp::ZERO, |t| t.started);
        let last_start = tasks.last().map_or(first_start, |t| t.started);
        let mut finishes: Vec<Timestamp> = tasks.iter().filter_map(|t| t.finished).collect();
        finishes.sort();
        let containers = tasks.len() as u32;
        // Algorithm 2: the release starts at the first finish followed, within the
        // window, by enough others; lone earlier finishes are heading tasks.
        let needed = self.heading.min(containers) as usize;
        let release_start = finishes
            .iter()
            .enumerate()
            .find(|&(i, f)| {
                finishes[i..].iter().take_while(|g| g.0 <= f.0 + self.window_ms).count() >= needed
            })
            .map(|(_, f)| *f);
        Phase {
            first_start,
            spread_ms: last_start.0 - first_start.0,
            containers,
            running: containers - finishes.len() as u32,
            finished: finishes.len() as u32,
            heading: finishes.iter().filter(|f| release_start.is_none_or(|g| f.0 < g.0)).count() as u32,
            release_start,
            last_finish: finishes.last().copied(),
        }
    }

    /// Containers of `job` and `kind` predicted to be released in `(now, now + horizon_ms]`
    /// (eq. 9 summed over phases, eq. 5).
    pub(crate) fn predicted(&self, job: JobId, kind: SlotKind, now: Timestamp, horizon_ms: u64) -> f64 {
        self.phases(job, kind).iter().map(|p| self.phase_release(p, now, horizon_ms)).sum()
    }

    /// One phase's share of [`predicted`](Self::predicted).
    fn phase_release(&self, p: &Phase, now: Timestamp, horizon_ms: u64) -> f64 {
        let Some(gamma) = p.release_start else { return 0.0 };
        if p.running == 0 || self.trailing(p, now) {
            return 0.0;
        }
        // eq. 9: by time t, c × (t − γ) / Δps of the phase has been released, c counting
        // the tasks that did not head off alone before γ.
        let share = |t: u64| {
            if t < gamma.0 {
                0.0
            } else if p.spread_ms == 0 {
                1.0
            } else {
                ((t - gamma.0) as f64 / p.spread_ms as f64).min(1.0)
            }
        };
        let due = f64::from(p.containers - p.heading) * share(now.0 + horizon_ms);
        (due - f64::from(p.finished - p.heading)).clamp(0.0, f64::from(p.running))
    }

    /// Whether the phase's remaining tasks trail: its release window and a phase window
    /// after it have passed with no finish in the last window (Algorithm 2, line 11).
    fn trailing(&self, p: &Phase, now: Timestamp) -> bool {
        let (Some(gamma), Some(last)) = (p.release_start, p.last_finish) else { return false };
        now.0 > gamma.0 + p.spread_ms + self.window_ms && now.0 > last.0 + self.window_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1000;

    /// A synthetic job: phase 1 is ten map tasks started one second apart (Δps = 9 s)
    /// running 30 s each, except a heading task of 4 s and a trailing one of 90 s;
    /// phase 2 is four tasks started together at 70 s running 20 s. Returns (start, end).
    fn synthetic() -> Vec<(u64, u64)> {
        let mut tasks: Vec<(u64, u64)> = (0..10).map(|i| (i * S, i * S + 30 * S)).collect();
        tasks[0].1 = 4 * S; // heading
        tasks[9].1 = 9 * S + 90 * S; // trailing
        tasks.extend((0..4).map(|_| (70 * S, 90 * S)));
        tasks
    }

    /// The model after replaying `tasks` up to `now`, observing every second.
    fn replay(tasks: &[(u64, u64)], now: u64) -> ReleaseModel {
        let mut model = ReleaseModel::new(10 * S, 2);
        let job = JobId(1);
        let mut done = 0;
        for t in (0..=now).step_by(S as usize) {
            for (i, &(start, _)) in tasks.iter().enumerate() {
                if start <= t {
                    model.running(job, ContainerId(i as u64), SlotKind::Map, Timestamp(start));
                }
            }
            let live = |c: ContainerId| tasks.get(c.0 as usize).is_some_and(|&(s, e)| s <= t && e > t);
            let ended = tasks.iter().filter(|&&(_, e)| e <= t).count() as u32;
            done = done.max(ended);
            model.settle(job, Timestamp(t), &live, [done, 0]);
        }
        model
    }

    /// Releases that really happen in `(now, now + horizon]`.
    fn actual(tasks: &[(u64, u64)], now: u64, horizon: u64) -> f64 {
        tasks.iter().filter(|&&(_, e)| e > now && e <= now + horizon).count() as f64
    }

    #[test]
    fn phases_are_found_from_starts_and_the_heading_task_does_not_start_the_release() {
        let model = replay(&synthetic(), 75 * S);
        let phases = model.phases(JobId(1), SlotKind::Map);
        assert_eq!(phases.len(), 2, "{phases:#?}");
        assert_eq!((phases[0].containers, phases[0].spread_ms), (10, 9 * S));
        // The heading task finished at 4 s alone; the release starts at 31 s, when the
        // task started at 1 s finished and the next followed within the window.
        assert_eq!(phases[0].release_start, Some(Timestamp(31 * S)));
        assert_eq!((phases[1].containers, phases[1].spread_ms, phases[1].release_start), (4, 0, None));
    }

    #[test]
    fn predicted_releases_follow_the_actual_ones_within_a_container() {
        let tasks = synthetic();
        for now in [20, 32, 35, 38] {
            let model = replay(&tasks, now * S);
            let predicted = model.predicted(JobId(1), SlotKind::Map, Timestamp(now * S), 5 * S);
            let actual = actual(&tasks, now * S, 5 * S);
            assert!(
                (predicted - actual).abs() <= 1.0 + 1e-9,
                "at {now} s: predicted {predicted}, actual {actual}"
            );
        }
        // Before any finish nothing is predicted (eq. 9 is 0 before γ), though a release
        // is near: the estimate only starts once a phase shows its first finish.
        let early = replay(&tasks, 20 * S).predicted(JobId(1), SlotKind::Map, Timestamp(20 * S), 5 * S);
        assert_eq!(early, 0.0);
    }

    #[test]
    fn the_trailing_task_is_predicted_nothing_and_the_second_phase_releases_at_once() {
        let tasks = synthetic();
        let model = replay(&tasks, 60 * S);
        assert_eq!(model.predicted(JobId(1), SlotKind::Map, Timestamp(60 * S), 5 * S), 0.0);
        // Had two of phase 2's tasks (all four started together, Δps = 0) finished at
        // 89 s, the other two would be due at once.
        let tasks2: Vec<(u64, u64)> = tasks
            .iter()
            .enumerate()
            .map(|(i, &(s, e))| if i >= 12 { (s, e) } else { (s, e.min(89 * S)) })
            .collect();
        let model = replay(&tasks2, 89 * S);
        assert_eq!(model.predicted(JobId(1), SlotKind::Map, Timestamp(89 * S), 5 * S), 2.0);
    }
}
