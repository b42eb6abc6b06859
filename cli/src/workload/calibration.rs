//! Checks the workload file's per-task estimates (`[estimate]`) against the task times a
//! run measured: the mean run time of the completed tasks of each program and task kind
//! (gen, map, reduce), from the master's task rows. Deadlines and MRM prices are built
//! on those estimates, so a run whose estimates are off by more than [`TOLERANCE`] says
//! so, and says to run the calibration workload first.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use slotmarket_common::protocol::TaskRow;
use slotmarket_common::spec::SlotKind;

use super::file::{Estimates, Program, TaskSeconds};
use super::plan::PlannedJob;

/// Relative error beyond which an estimate counts as off (30 %).
pub(crate) const TOLERANCE: f64 = 0.30;
/// Fewest completed tasks of a kind for its mean to be judged.
pub(crate) const MIN_SAMPLES: usize = 3;

/// Which per-task estimate a stage's tasks are priced by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TaskKind {
    /// The input generator stage (`gen`).
    Gen,
    /// Any other map-slot stage.
    Map,
    /// A reduce-slot stage.
    Reduce,
}

impl TaskKind {
    /// The kind of a stage, as the plan's estimate reads it.
    pub(crate) fn of(slot: SlotKind, stage: &str) -> TaskKind {
        match (slot, stage) {
            (SlotKind::Reduce, _) => TaskKind::Reduce,
            (SlotKind::Map, "gen") => TaskKind::Gen,
            (SlotKind::Map, _) => TaskKind::Map,
        }
    }

    /// Its key in `[estimate]`.
    fn key(self) -> &'static str {
        match self {
            TaskKind::Gen => "gen_s",
            TaskKind::Map => "map_s",
            TaskKind::Reduce => "reduce_s",
        }
    }

    /// Its seconds in `estimate`.
    pub(crate) fn seconds(self, estimate: TaskSeconds) -> f64 {
        match self {
            TaskKind::Gen => estimate.gen_s,
            TaskKind::Map => estimate.map_s,
            TaskKind::Reduce => estimate.reduce_s,
        }
    }
}

/// Completed-task run times by program and kind, in seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TaskTimes {
    samples: BTreeMap<(Program, TaskKind), Vec<f64>>,
}

impl TaskTimes {
    /// Adds the completed tasks of `job`, whose task rows are `rows`.
    pub(crate) fn add(&mut self, job: &PlannedJob, rows: &[TaskRow]) {
        for row in rows.iter().filter(|row| row.state == "completed") {
            let Some(stage) = job.spec.stages.iter().find(|stage| stage.name == row.stage) else { continue };
            let (Some(started), Some(finished)) = (row.started, row.finished) else { continue };
            let seconds = finished.saturating_since(started).as_secs_f64();
            let kind = TaskKind::of(stage.slot, &stage.name);
            self.samples.entry((job.program, kind)).or_default().push(seconds);
        }
    }
}

/// One estimate that is off.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Deviation {
    /// The program.
    pub(crate) program: Program,
    /// The task kind.
    pub(crate) kind: TaskKind,
    /// The file's seconds per task.
    pub(crate) estimate_s: f64,
    /// The measured mean.
    pub(crate) measured_s: f64,
    /// Completed tasks measured.
    pub(crate) tasks: usize,
}

impl Deviation {
    /// (measured − estimate) / estimate.
    fn relative(&self) -> f64 {
        (self.measured_s - self.estimate_s) / self.estimate_s
    }
}

/// The estimates off by more than [`TOLERANCE`] from the mean of at least
/// [`MIN_SAMPLES`] measured tasks, in program and kind order.
pub(crate) fn deviations(estimates: &Estimates, measured: &TaskTimes) -> Vec<Deviation> {
    measured
        .samples
        .iter()
        .filter(|(_, times)| times.len() >= MIN_SAMPLES)
        .map(|(&(program, kind), times)| Deviation {
            program,
            kind,
            estimate_s: kind.seconds(estimates.of(program)),
            measured_s: times.iter().sum::<f64>() / times.len() as f64,
            tasks: times.len(),
        })
        // An estimate of 0 is off by any measured time.
        .filter(|d| d.estimate_s <= 0.0 || d.relative().abs() > TOLERANCE)
        .collect()
}

/// The warning for `off` (empty when nothing is off): each estimate against its
/// measured mean, then what to do about it.
pub(crate) fn warning(off: &[Deviation]) -> String {
    if off.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "warning: the workload's [estimate] per-task times are off by more than {:.0}% from this run's:\n",
        TOLERANCE * 100.0
    );
    for d in off {
        let change =
            if d.estimate_s > 0.0 { format!("{:+.0}%", d.relative() * 100.0) } else { "estimate 0".into() };
        let _ = writeln!(
            text,
            "  {}.{}: estimate {:.2}s, measured {:.2}s ({change}, mean of {} tasks)",
            d.program.name(),
            d.kind.key(),
            d.estimate_s,
            d.measured_s,
            d.tasks
        );
    }
    text.push_str(
        "  deadlines and prices built on them are off too: run the calibration first \
         (`slotmarket workload run configs/workloads/calibrate.toml`, each job alone on the \
         cluster) and set [estimate] to the per-task times it measures\n",
    );
    text
}

#[cfg(test)]
mod tests {
    use slotmarket_common::time::Timestamp;

    use super::*;
    use crate::workload::file::{WorkloadFile, tests::SMALL};
    use crate::workload::plan;

    fn row(stage: &str, state: &str, started_ms: u64, took_ms: u64) -> TaskRow {
        TaskRow {
            stage: stage.into(),
            index: 0,
            attempts: 1,
            container: None,
            node: None,
            state: state.into(),
            started: Some(Timestamp(started_ms)),
            finished: Some(Timestamp(started_ms + took_ms)),
            exit_code: Some(0),
            message: None,
        }
    }

    fn estimates(map_s: f64) -> Estimates {
        let per_task = TaskSeconds { gen_s: 0.5, map_s, reduce_s: 0.2 };
        Estimates {
            wordcount: Some(per_task),
            grep: Some(per_task),
            sort: Some(per_task),
            pi: Some(per_task),
        }
    }

    /// The first planned job of the small test workload, with `map_ms` per map task.
    fn measured(map_ms: &[u64]) -> TaskTimes {
        let plan = plan::generate(&WorkloadFile::parse(SMALL).unwrap(), 1).unwrap();
        let job = plan.jobs.iter().find(|job| job.spec.stages.iter().any(|s| s.name == "map")).unwrap();
        let mut rows: Vec<TaskRow> = map_ms.iter().map(|&ms| row("map", "completed", 1_000, ms)).collect();
        // Neither a killed task nor a stage the plan does not have is measured.
        rows.push(row("map", "killed", 1_000, 60_000));
        rows.push(row("elsewhere", "completed", 1_000, 60_000));
        let mut times = TaskTimes::default();
        times.add(job, &rows);
        times
    }

    #[test]
    fn estimates_within_thirty_percent_pass() {
        // Mean 1.25 s against 1.0 s: 25 % off.
        assert!(deviations(&estimates(1.0), &measured(&[1_000, 1_500, 1_250])).is_empty());
    }

    #[test]
    fn an_estimate_off_by_more_than_thirty_percent_is_named_with_both_times() {
        let off = deviations(&estimates(1.0), &measured(&[1_400, 1_300, 1_300]));
        assert_eq!(off.len(), 1);
        assert_eq!((off[0].kind, off[0].tasks), (TaskKind::Map, 3));
        assert!((off[0].measured_s - 1.333).abs() < 0.001, "{off:?}");
        let text = warning(&off);
        assert!(text.contains(".map_s: estimate 1.00s, measured 1.33s (+33%, mean of 3 tasks)"), "{text}");
        assert!(text.contains("run the calibration first"), "{text}");
        // Too slow an estimate is off as well.
        assert_eq!(deviations(&estimates(2.0), &measured(&[1_300, 1_300, 1_300])).len(), 1);
    }

    #[test]
    fn too_few_tasks_are_not_judged() {
        assert!(deviations(&estimates(1.0), &measured(&[5_000, 5_000])).is_empty());
        assert_eq!(warning(&[]), "");
    }

    #[test]
    fn task_kinds_follow_the_plans_reading_of_stages() {
        assert_eq!(TaskKind::of(SlotKind::Map, "gen"), TaskKind::Gen);
        assert_eq!(TaskKind::of(SlotKind::Map, "map"), TaskKind::Map);
        assert_eq!(TaskKind::of(SlotKind::Reduce, "gen"), TaskKind::Reduce);
    }
}
