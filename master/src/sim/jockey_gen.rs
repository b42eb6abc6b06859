//! `slotmarket-sim gen jockey`: a workload for Jockey's §5 experiments. One DAG job shaped
//! like the paper's (Table 2, Fig. 3: several stages joined by barriers, tens to hundreds
//! of tasks each, heavy-tailed task times with stragglers) runs once alone to leave a
//! profile in the history, then again under a deadline on a cluster kept busy by
//! best-effort work. The deadline run draws fresh task times scaled by a work factor
//! (up to twice the profiled work, Table 3), so a static allocation is not enough.
//! Failures and per-attempt noise come from the simulator's own `--fail-prob`/`--noise`.

use slotmarket_common::spec::SlotKind;

use super::rng::Rng;
use super::workload::{DeadlineMove, Dist, Durations, TraceJob, TraceStage};

/// Parameters of the Jockey workload.
#[derive(Clone, Debug)]
pub struct JockeyMix {
    /// Seed: the DAG, its task times, the work factor and the background load.
    pub seed: u64,
    /// Slots of the (map-only) cluster the deadline is sized for.
    pub slots: u32,
    /// The deadline gives the job the time it needs on this many slots (profiled work /
    /// slots), plus one and a half times its profiled critical path.
    pub deadline_slots: u32,
    /// Largest work factor of the deadline run (drawn uniformly in [0.7, this]).
    pub max_work_factor: f64,
    /// Mean seconds between best-effort jobs (0: none).
    pub background_interarrival_s: f64,
    /// Seconds after the deadline run's submission when its deadline is moved to
    /// `factor` × the original (Fig. 7), if any.
    pub deadline_move: Option<(f64, f64)>,
    /// Earlier runs of the job that leave their history before the deadline run (at
    /// least 1). The first sets the deadline; the others draw fresh task times, so the
    /// profile can pool several runs (§4.1: profiles from previous executions).
    pub profile_runs: u32,
    /// The earlier runs after the first draw their work factor as the deadline run does
    /// (the cluster's slowdown when they ran); `false`: the profiled work (factor 1).
    pub profile_runs_slowed: bool,
}

impl Default for JockeyMix {
    fn default() -> JockeyMix {
        JockeyMix {
            seed: 1,
            slots: 100,
            deadline_slots: 25,
            max_work_factor: 2.0,
            background_interarrival_s: 15.0,
            deadline_move: None,
            profile_runs: 1,
            profile_runs_slowed: false,
        }
    }
}

/// When the deadline run arrives: the profiling run has long finished on the idle cluster.
pub const SLO_ARRIVAL_S: f64 = 4.0 * 3600.0;
/// The trace id of the deadline run.
pub const SLO_ID: &str = "slo";
/// Seconds between the starts of the earlier runs: each has long finished on the idle
/// cluster before the next starts, up to five runs.
const PROFILE_SPACING_S: f64 = 2400.0;
/// The latest an earlier run starts: five runs' worth of spacing, so that the last has
/// finished before the background begins. More than five runs are packed closer into
/// that span and may overlap one another; their task times, which the profile keeps,
/// are the same either way.
const LAST_PROFILE_START_S: f64 = 4.0 * PROFILE_SPACING_S;
/// Tasks of each best-effort job, and their mean length in seconds.
const BACKGROUND_TASKS: u32 = 40;
const BACKGROUND_TASK_S: f64 = 30.0;

/// One stage of the DAG before task times are drawn.
struct StageShape {
    tasks: u32,
    mean_s: f64,
    after: Vec<usize>,
}

impl JockeyMix {
    /// Emits the profiling run, the deadline run and the best-effort jobs, in arrival
    /// order, then the further earlier runs (`profile_runs` above 1).
    pub fn generate<E>(&self, mut emit: impl FnMut(TraceJob) -> Result<(), E>) -> Result<(), E> {
        let mut rng = Rng::new(self.seed);
        let shape = dag_shape(&mut rng);
        let profiled = draw_stages(&shape, 1.0, &mut rng);
        let work_s: f64 = profiled.iter().map(stage_work_s).sum();
        let deadline_after_s = (work_s / f64::from(self.deadline_slots.max(1))
            + 1.5 * critical_path_s(&shape, &profiled))
        .round();
        emit(TraceJob { name: Some("dag".into()), ..TraceJob::new("profile", 0.0, "analyst", profiled) })?;
        let factor = 0.7 + rng.unit() * (self.max_work_factor - 0.7).max(0.0);
        let slo_stages = draw_stages(&shape, factor, &mut rng);
        let background_from = SLO_ARRIVAL_S - 600.0;
        let background_to = SLO_ARRIVAL_S + 3.0 * deadline_after_s;
        let mut at = background_from;
        let mut n = 0;
        let mut slo_emitted = false;
        while self.background_interarrival_s > 0.0 && at < background_to {
            if !slo_emitted && at >= SLO_ARRIVAL_S {
                emit(self.slo_job(slo_stages.clone(), deadline_after_s))?;
                slo_emitted = true;
            }
            n += 1;
            let stages = vec![TraceStage {
                name: "map".into(),
                slot: SlotKind::Map,
                tasks: BACKGROUND_TASKS,
                after: Vec::new(),
                duration_s: Durations::Drawn(Dist::Exp { mean: BACKGROUND_TASK_S }),
            }];
            emit(TraceJob::new(format!("be{n}"), (at * 1000.0).round() / 1000.0, "batch", stages))?;
            at += rng.exponential(self.background_interarrival_s);
        }
        if !slo_emitted {
            emit(self.slo_job(slo_stages, deadline_after_s))?;
        }
        // Last in the trace though they arrive first: every other job keeps its place,
        // which the simulator keys each attempt's noise and failure by.
        self.emit_more_profile_runs(&shape, &mut emit)
    }

    /// The earlier runs after the first, from a stream of their own so that the first
    /// run, the deadline run and the background are the same whatever their number.
    fn emit_more_profile_runs<E>(
        &self,
        shape: &[StageShape],
        emit: &mut impl FnMut(TraceJob) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut rng = Rng::new(self.seed ^ 0x005E_ED0F_EA21_1E12);
        let spacing = PROFILE_SPACING_S.min(LAST_PROFILE_START_S / f64::from(self.profile_runs.max(2) - 1));
        for run in 2..=self.profile_runs {
            let factor = if self.profile_runs_slowed {
                0.7 + rng.unit() * (self.max_work_factor - 0.7).max(0.0)
            } else {
                1.0
            };
            let stages = draw_stages(shape, factor, &mut rng);
            let at = f64::from(run - 1) * spacing;
            let id = format!("profile{run}");
            emit(TraceJob { name: Some("dag".into()), ..TraceJob::new(id, at, "analyst", stages) })?;
        }
        Ok(())
    }

    fn slo_job(&self, stages: Vec<TraceStage>, deadline_after_s: f64) -> TraceJob {
        let deadline_moves = self
            .deadline_move
            .map(|(after_s, factor)| DeadlineMove {
                after_s,
                deadline_after_s: (deadline_after_s * factor).round(),
            })
            .into_iter()
            .collect();
        TraceJob {
            name: Some("dag".into()),
            deadline_s: Some(SLO_ARRIVAL_S + deadline_after_s),
            deadline_moves,
            ..TraceJob::new(SLO_ID, SLO_ARRIVAL_S, "analyst", stages)
        }
    }
}

/// Five to nine stages: two roots, each later stage after one or two earlier ones, and
/// a final stage after every stage nothing else waits on.
fn dag_shape(rng: &mut Rng) -> Vec<StageShape> {
    let n = rng.range(5, 9) as usize;
    let mut shape: Vec<StageShape> = Vec::with_capacity(n);
    for s in 0..n {
        let mut after = Vec::new();
        if s >= 2 && s + 1 < n {
            after.push(rng.range(0, s as u32 - 1) as usize);
            if rng.chance(0.5) {
                let other = rng.range(0, s as u32 - 1) as usize;
                if !after.contains(&other) {
                    after.push(other);
                }
            }
        }
        if s + 1 == n {
            after = (0..s).filter(|&d| !shape.iter().any(|st| st.after.contains(&d))).collect();
        }
        let tasks = if s + 1 == n { rng.range(1, 10) } else { rng.range(20, 200) };
        shape.push(StageShape { tasks, mean_s: 15.0 + rng.unit() * 45.0, after });
    }
    shape
}

/// Task times for every stage, scaled by `factor`: lognormal around the stage mean
/// (σ = 0.5), and one task in twenty a straggler two to five times longer.
fn draw_stages(shape: &[StageShape], factor: f64, rng: &mut Rng) -> Vec<TraceStage> {
    shape
        .iter()
        .enumerate()
        .map(|(s, st)| {
            let times = (0..st.tasks)
                .map(|_| {
                    let normal = super::rng::normal(rng.next_u64(), rng.next_u64());
                    let mut t = st.mean_s * (0.5 * normal - 0.125).exp();
                    if rng.chance(0.05) {
                        t *= 2.0 + 3.0 * rng.unit();
                    }
                    ((t * factor).max(1.0) * 1000.0).round() / 1000.0
                })
                .collect();
            TraceStage {
                name: format!("s{s}"),
                slot: SlotKind::Map,
                tasks: st.tasks,
                after: st.after.iter().map(|d| format!("s{d}")).collect(),
                duration_s: Durations::PerTask(times),
            }
        })
        .collect()
}

fn per_task(stage: &TraceStage) -> &[f64] {
    match &stage.duration_s {
        Durations::PerTask(times) => times,
        _ => &[],
    }
}

fn stage_work_s(stage: &TraceStage) -> f64 {
    per_task(stage).iter().sum()
}

/// The longest chain of longest tasks through the DAG.
fn critical_path_s(shape: &[StageShape], stages: &[TraceStage]) -> f64 {
    let mut end = vec![0.0f64; shape.len()];
    for (s, st) in shape.iter().enumerate() {
        let start = st.after.iter().map(|&d| end[d]).fold(0.0, f64::max);
        end[s] = start + per_task(&stages[s]).iter().copied().fold(0.0, f64::max);
    }
    end.into_iter().fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(mix: &JockeyMix) -> Vec<TraceJob> {
        let mut out = Vec::new();
        mix.generate(|job| {
            out.push(job);
            Ok::<(), ()>(())
        })
        .unwrap();
        out
    }

    #[test]
    fn a_profiling_run_then_the_deadline_run_of_the_same_name_amid_background_work() {
        let mix = JockeyMix { deadline_move: Some((600.0, 0.5)), ..JockeyMix::default() };
        let trace = jobs(&mix);
        let profile = &trace[0];
        let slo = trace.iter().find(|j| j.id == SLO_ID).unwrap();
        assert_eq!((profile.name.as_deref(), slo.name.as_deref()), (Some("dag"), Some("dag")));
        assert_eq!(profile.deadline_s, None);
        assert_eq!(slo.stages.len(), profile.stages.len());
        assert!((5..=9).contains(&slo.stages.len()));
        let deadline_after = slo.deadline_s.unwrap() - SLO_ARRIVAL_S;
        assert!(deadline_after > 60.0, "{deadline_after}");
        assert_eq!(
            slo.deadline_moves,
            vec![DeadlineMove { after_s: 600.0, deadline_after_s: (deadline_after * 0.5).round() }]
        );
        // The last stage waits on every stage nothing else waits on: one sink.
        let last = slo.stages.last().unwrap();
        let waited: Vec<&String> = slo.stages.iter().flat_map(|s| &s.after).collect();
        for s in &slo.stages[..slo.stages.len() - 1] {
            assert!(waited.contains(&&s.name), "{} is a second sink", s.name);
        }
        assert!(!last.after.is_empty());
        assert!(trace.iter().filter(|j| j.id.starts_with("be")).count() > 10);
        let arrivals: Vec<f64> = trace.iter().map(|j| j.arrival_s).collect();
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]), "arrival order");
        assert_eq!(jobs(&mix), trace, "the same seed gives the same trace");
    }

    #[test]
    fn further_earlier_runs_come_last_and_leave_the_rest_of_the_trace_as_it_was() {
        let one = jobs(&JockeyMix::default());
        let three = jobs(&JockeyMix { profile_runs: 3, ..JockeyMix::default() });
        assert_eq!(&three[..one.len()], &one[..]);
        let more = &three[one.len()..];
        assert_eq!(more.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), ["profile2", "profile3"]);
        let first = &one[0];
        for run in more {
            assert_eq!(run.name.as_deref(), Some("dag"));
            assert_eq!(run.deadline_s, None);
            assert!(run.arrival_s > first.arrival_s && run.arrival_s < SLO_ARRIVAL_S - 600.0);
            // The same DAG, fresh task times at the profiled work.
            let shape =
                |j: &TraceJob| j.stages.iter().map(|s| (s.tasks, s.after.clone())).collect::<Vec<_>>();
            assert_eq!(shape(run), shape(first));
            assert_ne!(run.stages, first.stages);
        }
        // Slowed, they need a drawn factor of the work: the same DAG, other times.
        let slowed = jobs(&JockeyMix { profile_runs: 3, profile_runs_slowed: true, ..JockeyMix::default() });
        assert_eq!(&slowed[..one.len()], &one[..]);
        assert_ne!(&slowed[one.len()..], more);
    }

    #[test]
    fn up_to_five_earlier_runs_are_spaced_apart_and_more_are_packed_before_the_background() {
        let starts = |runs| {
            let trace = jobs(&JockeyMix { profile_runs: runs, ..JockeyMix::default() });
            trace.iter().filter(|j| j.id.starts_with("profile")).map(|j| j.arrival_s).collect::<Vec<_>>()
        };
        let five: Vec<f64> = (0..5).map(|k| f64::from(k) * PROFILE_SPACING_S).collect();
        assert_eq!(starts(5), five);
        let ten = starts(10);
        assert_eq!(ten.len(), 10);
        assert!(ten.windows(2).all(|w| w[0] < w[1]), "{ten:?}");
        assert_eq!(ten.last().copied(), Some(LAST_PROFILE_START_S));
    }
}
