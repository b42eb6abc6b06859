//! Jockey's job profile (§4.1): what past runs of a job name say about each stage — its
//! task count, task run times, failure probability and the stage DAG with its barriers.
//! Built from the core's job history and the running job's own spec, so a stage whose
//! task count changed keeps its per-task times and takes the new count.

use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobHistory, ProfileView, StageProfileView};
use slotmarket_common::spec::{JobSpec, SlotKind};

/// One stage of a profile.
#[derive(Clone, PartialEq, Debug)]
pub struct StageProfile {
    /// The stage's name in the spec.
    pub name: String,
    /// Its slot kind.
    pub kind: SlotKind,
    /// Tasks in the running job's spec.
    pub tasks: u32,
    /// Run times of completed tasks over the kept runs, in milliseconds, ascending.
    /// Never empty: a stage no run completed borrows the job's overall mean.
    pub run_ms: Vec<u64>,
    /// Share of attempts that failed (`(attempts - 1) / attempts` over the kept runs).
    pub failure: f64,
    /// Stages (by index) that must complete before this one starts.
    pub after: Vec<usize>,
    /// Total time the stage's tasks wait for a slot once ready (`Q_s`), in milliseconds.
    /// History does not record waits, so this starts at 0 and the completion-model
    /// builder fills it from its simulation of the profile at the a-priori allocation.
    pub queue_ms: f64,
}

impl StageProfile {
    /// Mean task run time in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        self.run_ms.iter().sum::<u64>() as f64 / self.run_ms.len().max(1) as f64
    }

    /// Longest task run time seen (`l_s` of §4.1).
    pub fn longest_ms(&self) -> u64 {
        self.run_ms.last().copied().unwrap_or(0)
    }

    /// Total work of the stage (`T_s`): tasks × mean run time, inflated by retries.
    pub fn work_ms(&self) -> f64 {
        f64::from(self.tasks) * self.mean_ms() / (1.0 - self.failure.min(0.9))
    }
}

/// A job's profile: its stages in spec order.
#[derive(Clone, PartialEq, Debug)]
pub struct JobProfile {
    /// The job name the profile is for.
    pub name: String,
    /// The newest run it was built from: a newer one means the profile may have changed.
    pub newest_run: u64,
    /// Runs it was built from.
    pub runs: usize,
    /// Stages in spec order.
    pub stages: Vec<StageProfile>,
}

/// Tasks' worth of "as profiled" evidence that [`JobProfile::observed_slowdown`] starts
/// from, so that the first few completions move it only a little.
pub const SLOWDOWN_PRIOR_TASKS: f64 = 10.0;
/// The slowdown a run is believed to have at most and at least.
pub const SLOWDOWN_RANGE: (f64, f64) = (0.5, 4.0);

/// Time assumed for a task of a stage when no kept run completed any task at all.
const UNKNOWN_TASK_MS: u64 = 60_000;

impl JobProfile {
    /// The profile of `spec` from its kept `runs` (any order); `None` without a
    /// completed run to learn from.
    pub fn from_history<'a>(
        spec: &JobSpec,
        runs: impl IntoIterator<Item = &'a JobHistory>,
    ) -> Option<JobProfile> {
        let runs: Vec<&JobHistory> = runs.into_iter().filter(|r| r.name == spec.name).collect();
        let newest_run = runs.iter().map(|r| r.job.0).max()?;
        let all_ms: Vec<u64> = runs
            .iter()
            .flat_map(|r| r.stages.iter().flat_map(|s| s.run_ms.iter().flatten().copied()))
            .collect();
        let overall = if all_ms.is_empty() {
            UNKNOWN_TASK_MS
        } else {
            all_ms.iter().sum::<u64>() / all_ms.len() as u64
        };
        let stages = spec
            .stages
            .iter()
            .map(|stage| {
                let past = runs.iter().flat_map(|r| r.stages.iter().filter(|s| s.name == stage.name));
                let (mut run_ms, mut attempts, mut completed) = (Vec::new(), 0u64, 0u64);
                for s in past {
                    run_ms.extend(s.run_ms.iter().flatten().copied());
                    attempts += s.attempts.iter().map(|&a| u64::from(a)).sum::<u64>();
                    completed += s.run_ms.iter().flatten().count() as u64;
                }
                if run_ms.is_empty() {
                    run_ms.push(overall);
                }
                run_ms.sort_unstable();
                let failure = if attempts == 0 {
                    0.0
                } else {
                    attempts.saturating_sub(completed) as f64 / attempts as f64
                };
                let after = stage.after.iter().filter_map(|dep| spec.stage_index(dep)).collect();
                StageProfile {
                    name: stage.name.clone(),
                    kind: stage.slot,
                    tasks: stage.tasks,
                    run_ms,
                    failure,
                    after,
                    queue_ms: 0.0,
                }
            })
            .collect();
        Some(JobProfile { name: spec.name.clone(), newest_run, runs: runs.len(), stages })
    }

    /// The profile of `spec` from the newest `keep` of its name's `runs` (0: all of
    /// them), as [`from_history`](Self::from_history) pools them.
    pub fn from_newest_runs<'a>(
        spec: &JobSpec,
        runs: impl IntoIterator<Item = &'a JobHistory>,
        keep: u32,
    ) -> Option<JobProfile> {
        let mut runs: Vec<&JobHistory> = runs.into_iter().filter(|r| r.name == spec.name).collect();
        if keep > 0 {
            runs.sort_unstable_by_key(|r| std::cmp::Reverse(r.job.0));
            runs.truncate(keep as usize);
        }
        JobProfile::from_history(spec, runs)
    }

    /// Total work of the job in slot-milliseconds (`Σ T_s`).
    pub fn work_ms(&self) -> f64 {
        self.stages.iter().map(StageProfile::work_ms).sum()
    }

    /// How much slower than profiled this run's tasks are so far: the run time its
    /// completed tasks took (`observed_ms[s]` over `completed[s]` tasks per stage) over
    /// what the profile expects of them, shrunk towards 1 by a prior of
    /// [`SLOWDOWN_PRIOR_TASKS`] tasks at the profiled mean, and kept in
    /// [`SLOWDOWN_RANGE`]. The `completed[s]` of the `started[s]` tasks a stage has
    /// completed or running are expected to be the shortest of them (the quick ones
    /// finish first), so a stage's first completions are compared with the profile's
    /// shortest `completed / started` share, not its shortest `completed / tasks`: a
    /// stage of 200 tasks on 20 slots finishes the quickest of 20, not of 200, first.
    pub fn observed_slowdown(&self, completed: &[u32], started: &[u32], observed_ms: &[u64]) -> f64 {
        let (mut observed, mut expected, mut seen) = (0.0, 0.0, 0u64);
        let stages = self.stages.iter().zip(completed).zip(started).zip(observed_ms);
        for (((stage, &c), &n), &ms) in stages {
            if c == 0 || stage.run_ms.is_empty() {
                continue;
            }
            let share = (f64::from(c) / f64::from(n.max(c))).clamp(0.0, 1.0);
            let shortest = ((share * stage.run_ms.len() as f64).ceil() as usize).clamp(1, stage.run_ms.len());
            let mean_shortest = stage.run_ms[..shortest].iter().sum::<u64>() as f64 / shortest as f64;
            observed += ms as f64;
            expected += f64::from(c) * mean_shortest;
            seen += u64::from(c);
        }
        if seen == 0 || expected <= 0.0 {
            return 1.0;
        }
        let prior = SLOWDOWN_PRIOR_TASKS * expected / seen as f64;
        ((observed + prior) / (expected + prior)).clamp(SLOWDOWN_RANGE.0, SLOWDOWN_RANGE.1)
    }

    /// [`observed_slowdown`](Self::observed_slowdown) with the running tasks counted
    /// too: each that has run longer than its stage's longest profiled task (a straggler
    /// outside the profile) counts as one more completed task that took its elapsed time
    /// so far, a lower bound on its run time, so it is seen before it ends.
    /// `running_ms[s]`: how long each of stage `s`'s running tasks has run.
    pub fn observed_slowdown_with_running(
        &self,
        completed: &[u32],
        started: &[u32],
        observed_ms: &[u64],
        running_ms: &[Vec<u64>],
    ) -> f64 {
        let (mut completed, mut observed_ms) = (completed.to_vec(), observed_ms.to_vec());
        for ((stage, running), (c, ms)) in
            self.stages.iter().zip(running_ms).zip(completed.iter_mut().zip(observed_ms.iter_mut()))
        {
            for &elapsed in running.iter().filter(|&&e| e > stage.longest_ms()) {
                *c += 1;
                *ms += elapsed;
            }
        }
        self.observed_slowdown(&completed, started, &observed_ms)
    }

    /// Every profiled task time over its stage's mean, ascending: how much longer than
    /// its stage's typical task a task of this job runs.
    pub fn straggler_ratios(&self) -> Vec<f64> {
        let mut ratios: Vec<f64> = self
            .stages
            .iter()
            .flat_map(|s| s.run_ms.iter().map(move |&t| t as f64 / s.mean_ms().max(1.0)))
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios
    }

    /// Time to keep in hand, `scale` of it, for a straggler in the stages not yet done
    /// (`left[s]`: tasks of stage `s` not completed): for each such stage, the
    /// `quantile` of the longest of its `left[s]` tasks drawn from the job's
    /// [`straggler_ratios`](Self::straggler_ratios) (the ratio at `quantile^(1 / left)`,
    /// so a stage of many tasks left is more exposed than one of few; `quantile` 1: the
    /// job's worst straggler) times the stage's mean, less the stage's own longest
    /// task, which the completion model already draws; the worst stage counts. A stage
    /// of a few tasks rarely shows a straggler in its own samples, yet one straggling
    /// task in the last stage decides when the job ends: keeping this in hand starts
    /// that stage earlier. 0 once every stage is done, or with `scale` 0.
    pub fn straggler_reserve_ms(&self, left: &[u32], scale: f64, quantile: f64) -> f64 {
        if scale <= 0.0 {
            return 0.0;
        }
        let ratios = self.straggler_ratios();
        let Some(last) = ratios.len().checked_sub(1) else { return 0.0 };
        let exposed = self.stages.iter().zip(left).filter(|&(_, &n)| n > 0);
        let extra = exposed.map(|(s, &n)| {
            let q = quantile.clamp(0.0, 1.0).powf(1.0 / f64::from(n));
            let ratio = ratios[((last as f64 * q).round() as usize).min(last)];
            ratio * s.mean_ms() - s.longest_ms() as f64
        });
        scale * extra.fold(0.0, f64::max)
    }

    /// The stage reserve as a chance rather than a worst case
    /// ([`JockeyConfig::stage_reserve_chance`](super::JockeyConfig::stage_reserve_chance)):
    /// the distribution of the time the longest of the tasks left (`left[s]` per stage)
    /// adds beyond what the completion model draws, `scale` of it, as `(probability,
    /// extra ms)` pairs with positive extra, ascending. Each task left is drawn from the
    /// job's [`straggler_ratios`](Self::straggler_ratios) times its stage's mean, less
    /// the stage's longest profiled task (as [`straggler_reserve_ms`](Self::straggler_reserve_ms)
    /// prices it); the longest of a stage's `n` draws is at most `x` with probability
    /// `F(x)^n`, and of every stage's with the product of those. The probabilities sum
    /// to the chance that any task left straggles past its stage's profile (π); with
    /// `1 − π` nothing is added. Empty when nothing is left, or with `scale` 0.
    pub fn straggler_outcomes(&self, left: &[u32], scale: f64) -> Vec<(f64, f64)> {
        let ratios = self.straggler_ratios();
        if scale <= 0.0 || ratios.is_empty() {
            return Vec::new();
        }
        let exposed: Vec<(f64, f64, i32)> = self
            .stages
            .iter()
            .zip(left)
            .filter(|&(_, &n)| n > 0)
            .map(|(s, &n)| (s.mean_ms(), s.longest_ms() as f64, n.min(i32::MAX as u32) as i32))
            .collect();
        // Extras at which some stage's distribution steps: every positive one.
        let mut steps: Vec<f64> = exposed
            .iter()
            .flat_map(|&(mean, longest, _)| ratios.iter().map(move |r| scale * (r * mean - longest)))
            .filter(|&x| x > 0.0)
            .collect();
        steps.sort_by(f64::total_cmp);
        steps.dedup();
        let count = ratios.len() as f64;
        // P(every stage's longest task adds at most `x`).
        let cdf = |x: f64| -> f64 {
            exposed
                .iter()
                .map(|&(mean, longest, n)| {
                    let within = ratios.partition_point(|r| scale * (r * mean - longest) <= x);
                    (within as f64 / count).powi(n)
                })
                .product()
        };
        let mut below = cdf(0.0);
        let mut outcomes = Vec::with_capacity(steps.len());
        for x in steps {
            let at = cdf(x);
            if at > below {
                outcomes.push((at - below, x));
            }
            below = at;
        }
        outcomes
    }

    /// The longest chain of longest tasks through the DAG, in milliseconds.
    pub fn critical_path_ms(&self) -> u64 {
        let after = self.path_after_ms();
        self.stages.iter().zip(&after).map(|(s, a)| s.longest_ms() + a).max().unwrap_or(0)
    }

    /// The profile as `slotmarket profile` shows it; `dag_known` says whether the
    /// barriers come from a spec.
    pub fn view(&self, dag_known: bool) -> ProfileView {
        let quantile =
            |ms: &[u64], q: f64| ms.get(((ms.len().max(1) - 1) as f64 * q).round() as usize).copied();
        let stages = self
            .stages
            .iter()
            .map(|s| StageProfileView {
                name: s.name.clone(),
                slot: s.kind,
                tasks: s.tasks,
                after: s.after.iter().filter_map(|&d| self.stages.get(d)).map(|d| d.name.clone()).collect(),
                samples: s.run_ms.len() as u32,
                mean_ms: s.mean_ms().round() as u64,
                p50_ms: quantile(&s.run_ms, 0.5).unwrap_or(0),
                p90_ms: quantile(&s.run_ms, 0.9).unwrap_or(0),
                max_ms: s.longest_ms(),
                failure_permille: (s.failure * 1000.0).round() as u32,
                work_ms: s.work_ms().round() as u64,
            })
            .collect();
        ProfileView {
            name: self.name.clone(),
            runs: self.runs as u32,
            newest_run: JobId(self.newest_run),
            dag_known,
            work_ms: self.work_ms().round() as u64,
            critical_path_ms: self.critical_path_ms(),
            stages,
        }
    }

    /// `L_s` of §4.1 for every stage: the longest chain of longest tasks from the end of
    /// stage `s` to the end of the job (0 for a stage nothing waits on).
    pub fn path_after_ms(&self) -> Vec<u64> {
        let n = self.stages.len();
        let mut after = vec![0u64; n];
        // Stages only wait on earlier-validated names; iterate to a fixed point so the
        // order of stages in the spec does not matter (at most n rounds on a DAG).
        for _ in 0..n {
            let mut moved = false;
            for (s, stage) in self.stages.iter().enumerate() {
                for &dep in &stage.after {
                    let through = stage.longest_ms() + after[s];
                    if dep < n && after[dep] < through {
                        after[dep] = through;
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        after
    }

    /// When each stage starts and ends, relative to the job's start, with unlimited slots:
    /// a stage starts when its last dependency ends and lasts its longest task. The
    /// `minstage` indicator reads its typical stage times from here.
    pub fn unconstrained_times(&self) -> Vec<(u64, u64)> {
        let n = self.stages.len();
        let mut times = vec![(0u64, 0u64); n];
        for _ in 0..n.max(1) {
            for (s, stage) in self.stages.iter().enumerate() {
                let begin = stage.after.iter().filter(|&&d| d < n).map(|&d| times[d].1).max().unwrap_or(0);
                times[s] = (begin, begin + stage.longest_ms());
            }
        }
        times
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use slotmarket_common::protocol::StageHistory;
    use slotmarket_common::spec::StageSpec;

    use super::*;

    /// A spec of stages `(name, tasks, after)`, all map slots.
    pub(crate) fn spec(name: &str, stages: &[(&str, u32, &[&str])]) -> JobSpec {
        let stages = stages
            .iter()
            .map(|&(n, tasks, after)| StageSpec {
                name: n.into(),
                tasks,
                slot: SlotKind::Map,
                command: "true".into(),
                after: after.iter().map(|a| a.to_string()).collect(),
            })
            .collect();
        JobSpec {
            name: name.into(),
            input: None,
            max_attempts: None,
            stages,
            class: None,
            queue: None,
            deadline: None,
            account: None,
            input_bytes: None,
            estimate: None,
            time_limit: None,
            after: Vec::new(),
            utility: None,
        }
    }

    /// A completed run with per-stage `(name, run_ms per task, attempts per task)`.
    pub(crate) fn run(job: u64, name: &str, stages: &[(&str, &[u64], &[u32])]) -> JobHistory {
        JobHistory {
            stages: stages
                .iter()
                .map(|&(n, ms, attempts)| StageHistory {
                    name: n.into(),
                    slot: SlotKind::Map,
                    run_ms: ms.iter().map(|&m| Some(m)).collect(),
                    attempts: attempts.to_vec(),
                })
                .collect(),
            ..crate::core::completed_run(job, name)
        }
    }

    #[test]
    fn a_profile_pools_runs_per_stage_and_takes_the_specs_task_counts() {
        let spec = spec("etl", &[("extract", 4, &[]), ("load", 1, &["extract"])]);
        let runs = [
            run(3, "etl", &[("extract", &[1_000, 3_000], &[1, 1]), ("load", &[5_000], &[2])]),
            run(7, "etl", &[("extract", &[2_000], &[1]), ("load", &[5_000], &[2])]),
            run(9, "other", &[("extract", &[99_000], &[1])]),
        ];
        let profile = JobProfile::from_history(&spec, &runs).unwrap();
        assert_eq!(profile.newest_run, 7);
        assert_eq!(profile.runs, 2);
        let extract = &profile.stages[0];
        assert_eq!(extract.run_ms, vec![1_000, 2_000, 3_000]);
        assert_eq!(extract.tasks, 4);
        assert_eq!(extract.work_ms(), 8_000.0);
        let load = &profile.stages[1];
        assert_eq!(load.after, vec![0]);
        assert!((load.failure - 0.5).abs() < 1e-9, "{}", load.failure);
        // One task of 5 s, every other attempt failing: 10 s of work expected.
        assert!((load.work_ms() - 10_000.0).abs() < 1e-6);
        assert_eq!(profile.path_after_ms(), vec![5_000, 0]);
        assert_eq!(profile.unconstrained_times(), vec![(0, 3_000), (3_000, 8_000)]);
    }

    #[test]
    fn a_profile_pools_only_the_newest_runs_it_is_told_to() {
        let spec = spec("etl", &[("extract", 2, &[])]);
        // Oldest first, as history keeps them.
        let runs = [
            run(2, "etl", &[("extract", &[9_000, 9_000], &[2, 2])]),
            run(4, "etl", &[("extract", &[1_000, 2_000], &[1, 1])]),
            run(5, "other", &[("extract", &[50_000], &[1])]),
            run(6, "etl", &[("extract", &[3_000, 4_000], &[1, 1])]),
        ];
        let newest = JobProfile::from_newest_runs(&spec, &runs, 1).unwrap();
        assert_eq!((newest.runs, newest.newest_run), (1, 6));
        assert_eq!(newest.stages[0].run_ms, vec![3_000, 4_000]);
        let two = JobProfile::from_newest_runs(&spec, &runs, 2).unwrap();
        assert_eq!(two.stages[0].run_ms, vec![1_000, 2_000, 3_000, 4_000]);
        assert_eq!(two.stages[0].failure, 0.0);
        // 0, or more than there are: every run of the name, its failures included.
        let all = JobProfile::from_newest_runs(&spec, &runs, 0).unwrap();
        assert_eq!(all, JobProfile::from_history(&spec, &runs).unwrap());
        assert_eq!(all.runs, 3);
        assert!((all.stages[0].failure - 2.0 / 8.0).abs() < 1e-9, "{}", all.stages[0].failure);
        assert_eq!(JobProfile::from_newest_runs(&spec, &runs, 9).unwrap(), all);
    }

    #[test]
    fn a_running_straggler_longer_than_any_profiled_reads_as_a_slowdown_before_it_ends() {
        let spec = spec("etl", &[("extract", 4, &[]), ("load", 1, &["extract"])]);
        let runs =
            [run(3, "etl", &[("extract", &[1_000, 1_000, 3_000, 3_000], &[1; 4]), ("load", &[5_000], &[1])])];
        let profile = JobProfile::from_history(&spec, &runs).unwrap();
        // Three done in the 5 s the profile's quickest three took: as profiled, whether
        // the fourth has run 2 s (within the profiled 3 s) or not counted at all.
        let (done, started, seen) = ([3, 0], [4, 0], [5_000, 0]);
        assert!((profile.observed_slowdown(&done, &started, &seen) - 1.0).abs() < 1e-9);
        let within = profile.observed_slowdown_with_running(&done, &started, &seen, &[vec![2_000], vec![]]);
        assert!((within - 1.0).abs() < 1e-9, "{within}");
        // The fourth has run 12 s, longer than any profiled: it counts as a task of 12 s,
        // (17 + 10 × 2) / (8 + 10 × 2) s with the stage's 2 s mean as the prior.
        let beyond = profile.observed_slowdown_with_running(&done, &started, &seen, &[vec![12_000], vec![]]);
        assert!((beyond - 37.0 / 28.0).abs() < 1e-9, "{beyond}");
    }

    #[test]
    fn a_run_slower_than_its_profile_reads_as_a_slowdown() {
        let spec = spec("etl", &[("extract", 4, &[]), ("load", 1, &["extract"])]);
        let runs =
            [run(3, "etl", &[("extract", &[1_000, 1_000, 3_000, 3_000], &[1; 4]), ("load", &[5_000], &[1])])];
        let profile = JobProfile::from_history(&spec, &runs).unwrap();
        // Nothing done yet: as profiled.
        assert_eq!(profile.observed_slowdown(&[0, 0], &[4, 0], &[0, 0]), 1.0);
        // Half the stage done, all of it started: its two shortest tasks were expected
        // (1 s each), 4 s seen: (4 + 10 × 1) / (2 + 10 × 1) s.
        let half = profile.observed_slowdown(&[2, 0], &[4, 0], &[4_000, 0]);
        assert!((half - 14.0 / 12.0).abs() < 1e-9, "{half}");
        // All of it twice as slow: (16 + 10 × 2) / (8 + 10 × 2) s with the 2 s mean.
        let all = profile.observed_slowdown(&[4, 0], &[4, 0], &[16_000, 0]);
        assert!((all - 36.0 / 28.0).abs() < 1e-9, "{all}");
        // Faster than profiled reads below 1, but never below the range.
        assert!(profile.observed_slowdown(&[4, 0], &[4, 0], &[4_000, 0]) < 1.0);
        let instant = profile.observed_slowdown(&[4, 1], &[4, 1], &[0, 0]);
        assert!((instant - 26.0 / 39.0).abs() < 1e-9, "{instant}");
        let mut wide = profile.clone();
        wide.stages[0].tasks = 400;
        assert_eq!(wide.observed_slowdown(&[400, 0], &[400, 0], &[0, 0]), SLOWDOWN_RANGE.0);
        assert_eq!(wide.observed_slowdown(&[400, 0], &[400, 0], &[8_000_000, 0]), SLOWDOWN_RANGE.1);
        // Two of 400 done, four started: the quicker half of what started, so the
        // profile's quicker half (1 s each) is expected of them; 2 s each reads slower.
        let first = wide.observed_slowdown(&[2, 0], &[4, 0], &[4_000, 0]);
        assert!((first - 14.0 / 12.0).abs() < 1e-9, "{first}");
        // Three of four started done: the shortest three of the profile's four
        // (1, 1 and 3 s: 5 s) are expected, not the shortest 1 % (1 s each).
        let most = wide.observed_slowdown(&[3, 0], &[4, 0], &[5_000, 0]);
        assert!((most - 1.0).abs() < 1e-9, "{most}");
        let by_tasks = wide.observed_slowdown(&[3, 0], &[400, 0], &[5_000, 0]);
        assert!(by_tasks > 1.1, "{by_tasks}");
    }

    #[test]
    fn the_view_shows_each_stage_with_its_barriers_and_times() {
        let spec = spec("etl", &[("extract", 4, &[]), ("load", 1, &["extract"])]);
        let runs = [run(
            3,
            "etl",
            &[("extract", &[1_000, 2_000, 3_000, 4_000], &[1, 1, 1, 1]), ("load", &[5_000], &[2])],
        )];
        let view = JobProfile::from_history(&spec, &runs).unwrap().view(true);
        assert_eq!(view.newest_run, JobId(3));
        assert_eq!(view.critical_path_ms, 9_000);
        let extract = &view.stages[0];
        assert_eq!(
            (extract.samples, extract.mean_ms, extract.p50_ms, extract.p90_ms, extract.max_ms),
            (4, 2_500, 3_000, 4_000, 4_000)
        );
        assert_eq!(view.stages[1].after, vec!["extract".to_string()]);
        assert_eq!(view.stages[1].failure_permille, 500);
        // 4 × 2.5 s, plus one 5 s task failing every other attempt (10 s).
        assert_eq!(view.work_ms, 20_000);
    }

    #[test]
    fn no_history_no_profile_and_unseen_stages_borrow_the_mean() {
        let spec = spec("etl", &[("extract", 2, &[]), ("new", 1, &[])]);
        assert_eq!(JobProfile::from_history(&spec, &[]), None);
        let runs = [run(1, "etl", &[("extract", &[2_000, 4_000], &[1, 1])])];
        let profile = JobProfile::from_history(&spec, &runs).unwrap();
        assert_eq!(profile.stages[1].run_ms, vec![3_000]);
    }

    #[test]
    fn a_straggler_reserve_prices_the_jobs_stragglers_on_the_stages_left() {
        // Stage a shows a straggler (mean 20 s, longest 60 s: ratio 3); the last stage
        // z, two tasks of 10 s, shows none.
        let spec = spec("etl", &[("a", 5, &[]), ("z", 2, &["a"])]);
        let a: &[u64] = &[10_000, 10_000, 10_000, 10_000, 60_000];
        let history = [run(1, "etl", &[("a", a, &[]), ("z", &[10_000, 10_000], &[])])];
        let profile = JobProfile::from_history(&spec, &history).unwrap();
        assert_eq!(profile.straggler_ratios(), vec![0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 3.0]);
        // The worst straggler (quantile 1) with everything left: a's own longest covers
        // it (3 × 20 − 60 = 0), z's does not (3 × 10 − 10 = 20 s).
        assert!((profile.straggler_reserve_ms(&[5, 2], 1.0, 1.0) - 20_000.0).abs() < 1e-6);
        assert!((profile.straggler_reserve_ms(&[0, 1], 0.5, 1.0) - 10_000.0).abs() < 1e-6);
        // At the 0.9 quantile one task left draws the ratio at 0.9 (the sixth of seven:
        // 1.0), nothing beyond z's own 10 s; two left draw it at 0.95 (the worst, 3).
        assert_eq!(profile.straggler_reserve_ms(&[0, 1], 1.0, 0.9), 0.0);
        assert!((profile.straggler_reserve_ms(&[0, 2], 1.0, 0.9) - 20_000.0).abs() < 1e-6);
        // Nothing left, or the reserve off: nothing kept.
        assert_eq!(profile.straggler_reserve_ms(&[0, 0], 1.0, 1.0), 0.0);
        assert_eq!(profile.straggler_reserve_ms(&[5, 2], 0.0, 1.0), 0.0);
    }

    #[test]
    fn the_straggler_outcomes_are_the_longest_task_lefts_chance_of_each_extra() {
        // The profile above: ratios 0.5 (four), 1.0 (two), 3.0 (one); only the 3 adds
        // anything, and only on z (3 × 10 − 10 = 20 s; on a, 3 × 20 − 60 = 0).
        let spec = spec("etl", &[("a", 5, &[]), ("z", 2, &["a"])]);
        let a: &[u64] = &[10_000, 10_000, 10_000, 10_000, 60_000];
        let history = [run(1, "etl", &[("a", a, &[]), ("z", &[10_000, 10_000], &[])])];
        let profile = JobProfile::from_history(&spec, &history).unwrap();
        let close = |got: Vec<(f64, f64)>, want: &[(f64, f64)]| {
            assert_eq!(got.len(), want.len(), "{got:?}");
            for (g, w) in got.iter().zip(want) {
                assert!((g.0 - w.0).abs() < 1e-12 && (g.1 - w.1).abs() < 1e-6, "{got:?} {want:?}");
            }
        };
        // One of z's tasks left draws the 3 one time in seven; two, 1 − (6/7)² = 13/49
        // of the time. The worst-case reserve keeps the 20 s every time.
        close(profile.straggler_outcomes(&[0, 1], 1.0), &[(1.0 / 7.0, 20_000.0)]);
        close(profile.straggler_outcomes(&[0, 2], 1.0), &[(13.0 / 49.0, 20_000.0)]);
        // a's tasks left add nothing its own longest does not cover.
        close(profile.straggler_outcomes(&[5, 2], 1.0), &[(13.0 / 49.0, 20_000.0)]);
        close(profile.straggler_outcomes(&[0, 2], 0.5), &[(13.0 / 49.0, 10_000.0)]);
        // Nothing left, or the reserve off: no straggler to price.
        close(profile.straggler_outcomes(&[0, 0], 1.0), &[]);
        close(profile.straggler_outcomes(&[5, 2], 0.0), &[]);
    }
}
