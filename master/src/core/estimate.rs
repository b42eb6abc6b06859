//! Runtime estimates with prediction intervals (MRM §3.2 and §5): for each slot kind of a
//! job, the expected time of one task and the upper end of a one-sided prediction
//! interval (PI) at a configurable level, learned from the runs of the same job name.
//!
//! Three methods, chosen by how much history there is:
//! - **OLS** (ordinary least squares) of a run's total phase work (slot-ms) on the
//!   phase's task count and the declared input size, once enough runs exist and those
//!   features vary; the PI is ŷ + z·s·√(1 + x₀ᵀ(XᵀX)⁻¹x₀).
//! - **Bins**: the mean and spread of the per-task time of past runs of the name; the PI
//!   is m + z·s·√(1 + 1/n).
//! - **Spec**: the submitter's `[estimate]`, for a name never seen: m + z·(spread·m).

use slotmarket_common::protocol::JobHistory;
use slotmarket_common::spec::{JobSpec, SlotKind};
use thiserror::Error;

use super::state::kind_ix;

/// The PI level when none is configured (MRM's 95 %).
pub const DEFAULT_PI_LEVEL: f64 = 0.95;
/// Runs of a name needed before OLS is tried.
pub const MIN_RUNS_OLS: usize = 8;
/// Runs of a name needed for the bins method (a spread needs two).
pub const MIN_RUNS_BINS: usize = 2;

/// How estimates are made.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct EstimateSettings {
    /// One-sided level of the prediction interval, in (0.5, 1).
    pub pi_level: f64,
}

impl Default for EstimateSettings {
    fn default() -> EstimateSettings {
        EstimateSettings { pi_level: DEFAULT_PI_LEVEL }
    }
}

/// Which method produced an estimate.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EstimateMethod {
    /// Least squares on the job's features.
    Ols,
    /// Mean and spread of the name's past runs.
    Bins,
    /// The spec's `[estimate]`.
    Spec,
    /// The phase has no tasks: nothing to estimate.
    Empty,
}

/// The estimate of one slot kind's work in a job.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct PhaseEstimate {
    /// Tasks of this kind.
    pub tasks: u32,
    /// Expected milliseconds of one task.
    pub task_ms: f64,
    /// Upper end of the prediction interval of one task's milliseconds.
    pub task_upper_ms: f64,
    /// Standard deviation of one task's time around the job's mean: how much the
    /// slowest of many tasks outlasts the rest.
    pub task_sd_ms: f64,
    /// How it was made.
    pub method: EstimateMethod,
}

impl PhaseEstimate {
    const EMPTY: PhaseEstimate = PhaseEstimate {
        tasks: 0,
        task_ms: 0.0,
        task_upper_ms: 0.0,
        task_sd_ms: 0.0,
        method: EstimateMethod::Empty,
    };

    /// Upper bound of the slowest of `n` of its tasks: the PI upper end plus the usual
    /// excess of the largest of `n` normal draws (√(2 ln n) standard deviations).
    pub fn slowest_upper_ms(&self, n: u32) -> f64 {
        let excess = (2.0 * f64::from(n.max(1)).ln()).sqrt();
        self.task_upper_ms + excess * self.task_sd_ms
    }

    /// PI upper bound of the phase's total work in slot-milliseconds.
    pub fn work_upper_ms(&self) -> f64 {
        self.task_upper_ms * f64::from(self.tasks)
    }

    /// Expected total work in slot-milliseconds.
    pub fn work_ms(&self) -> f64 {
        self.task_ms * f64::from(self.tasks)
    }
}

/// A job's estimate: map then reduce.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct JobEstimate {
    /// By slot kind, indexed by `kind_ix`.
    pub phases: [PhaseEstimate; 2],
}

impl JobEstimate {
    /// The phase of `kind`.
    pub fn phase(&self, kind: SlotKind) -> &PhaseEstimate {
        &self.phases[kind_ix(kind)]
    }

    /// Expected total work over both kinds, in slot-milliseconds.
    pub fn work_ms(&self) -> f64 {
        self.phases.iter().map(PhaseEstimate::work_ms).sum()
    }

    /// PI upper bound of the total work, in slot-milliseconds.
    pub fn work_upper_ms(&self) -> f64 {
        self.phases.iter().map(PhaseEstimate::work_upper_ms).sum()
    }
}

/// Why no estimate could be made.
#[derive(Clone, PartialEq, Debug, Error)]
pub enum EstimateError {
    /// Too little history of the name and no `[estimate]` for a kind the job uses.
    #[error(
        "no history of job name \"{name}\" and no [estimate] {field} in its spec; add one (e.g. {field} = 30000)"
    )]
    NoEstimate {
        /// The job's name.
        name: String,
        /// The `[estimate]` field that would do.
        field: &'static str,
    },
    /// The PI level is not in (0.5, 1).
    #[error("pi_level must be in (0.5, 1), got {0}")]
    Level(f64),
}

/// Estimates `spec` from `runs` (past runs of its name, any order).
pub fn estimate(
    spec: &JobSpec,
    runs: &[&JobHistory],
    settings: &EstimateSettings,
) -> Result<JobEstimate, EstimateError> {
    let z = z_for_level(settings.pi_level)?;
    let mut phases = [PhaseEstimate::EMPTY; 2];
    for kind in SlotKind::ALL {
        let tasks: u32 = spec.stages.iter().filter(|s| s.slot == kind).map(|s| s.tasks).sum();
        if tasks == 0 {
            continue;
        }
        let samples = samples(runs, kind);
        let input_gb = input_gb(spec.input_bytes);
        let phase = ols(&samples, tasks, input_gb, z)
            .or_else(|| bins(&samples, tasks, z))
            .or_else(|| from_spec(spec, kind, tasks, z))
            .ok_or_else(|| EstimateError::NoEstimate { name: spec.name.clone(), field: spec_field(kind) })?;
        phases[kind_ix(kind)] = phase;
    }
    Ok(JobEstimate { phases })
}

/// The `[estimate]` field that gives `kind`'s task time.
fn spec_field(kind: SlotKind) -> &'static str {
    match kind {
        SlotKind::Map => "map_task_ms",
        SlotKind::Reduce => "reduce_task_ms",
    }
}

/// Input size in GB, the OLS feature (0 when not declared).
fn input_gb(bytes: Option<u64>) -> f64 {
    bytes.map_or(0.0, |b| b as f64 / 1e9)
}

/// One past run's phase: its task count, declared input and measured work.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) struct PhaseSample {
    pub(super) tasks: u32,
    pub(super) input_gb: f64,
    /// Sum of the completed tasks' run times.
    pub(super) work_ms: f64,
    /// Standard deviation of the tasks' times within the run.
    task_sd_ms: f64,
}

impl PhaseSample {
    fn task_ms(&self) -> f64 {
        self.work_ms / f64::from(self.tasks)
    }
}

/// The phase samples of `kind` from runs whose tasks of that kind all reported a time.
pub(super) fn samples(runs: &[&JobHistory], kind: SlotKind) -> Vec<PhaseSample> {
    runs.iter()
        .filter_map(|run| {
            let times: Vec<Option<u64>> =
                run.stages.iter().filter(|s| s.slot == kind).flat_map(|s| s.run_ms.iter().copied()).collect();
            let done: Vec<u64> = times.iter().flatten().copied().collect();
            // A run with a task that never completed says nothing reliable about time.
            (!done.is_empty() && done.len() == times.len()).then(|| PhaseSample {
                tasks: done.len() as u32,
                input_gb: input_gb(run.input_bytes),
                work_ms: done.iter().map(|&ms| ms as f64).sum(),
                task_sd_ms: mean_sd(done.iter().map(|&ms| ms as f64)).1,
            })
        })
        .collect()
}

/// Mean and sample standard deviation.
fn mean_sd(values: impl Iterator<Item = f64> + Clone) -> (f64, f64, usize) {
    let n = values.clone().count();
    let mean = values.clone().sum::<f64>() / n as f64;
    let var = values.map(|v| (v - mean).powi(2)).sum::<f64>() / (n.saturating_sub(1).max(1)) as f64;
    (mean, var.sqrt(), n)
}

/// Per-name bins: the mean and spread of per-task time over past runs.
pub(super) fn bins(samples: &[PhaseSample], tasks: u32, z: f64) -> Option<PhaseEstimate> {
    if samples.len() < MIN_RUNS_BINS {
        return None;
    }
    let (mean, sd, n) = mean_sd(samples.iter().map(PhaseSample::task_ms));
    let upper = mean + z * sd * (1.0 + 1.0 / n as f64).sqrt();
    let task_sd_ms = within_run_sd(samples);
    Some(PhaseEstimate {
        tasks,
        task_ms: mean,
        task_upper_ms: upper,
        task_sd_ms,
        method: EstimateMethod::Bins,
    })
}

/// The mean spread of task times within a run.
fn within_run_sd(samples: &[PhaseSample]) -> f64 {
    samples.iter().map(|s| s.task_sd_ms).sum::<f64>() / samples.len().max(1) as f64
}

/// The submitter's `[estimate]` for `kind`.
fn from_spec(spec: &JobSpec, kind: SlotKind, tasks: u32, z: f64) -> Option<PhaseEstimate> {
    let given = spec.estimate?;
    let mean = given.task_ms(kind)? as f64;
    let upper = mean * (1.0 + z * given.spread());
    let task_sd_ms = mean * given.task_spread();
    Some(PhaseEstimate {
        tasks,
        task_ms: mean,
        task_upper_ms: upper,
        task_sd_ms,
        method: EstimateMethod::Spec,
    })
}

/// OLS of phase work on `[1, tasks, input_gb]` (input dropped when it never varies).
/// `None` when there are too few runs or the features do not vary enough to fit.
pub(super) fn ols(samples: &[PhaseSample], tasks: u32, input_gb: f64, z: f64) -> Option<PhaseEstimate> {
    if samples.len() < MIN_RUNS_OLS {
        return None;
    }
    let varies = |f: fn(&PhaseSample) -> f64| samples.iter().any(|s| (f(s) - f(&samples[0])).abs() > 1e-12);
    let use_input = varies(|s| s.input_gb);
    let features = |t: f64, gb: f64| if use_input { vec![1.0, t, gb] } else { vec![1.0, t] };
    let rows: Vec<Vec<f64>> = samples.iter().map(|s| features(f64::from(s.tasks), s.input_gb)).collect();
    let ys: Vec<f64> = samples.iter().map(|s| s.work_ms).collect();
    let p = rows[0].len();
    if samples.len() <= p || !varies(|s| f64::from(s.tasks)) {
        return None;
    }
    let xtx_inv = invert(&gram(&rows))?;
    let xty: Vec<f64> = (0..p).map(|j| rows.iter().zip(&ys).map(|(r, y)| r[j] * y).sum()).collect();
    let beta: Vec<f64> = (0..p).map(|i| (0..p).map(|j| xtx_inv[i][j] * xty[j]).sum()).collect();
    let rss: f64 = rows.iter().zip(&ys).map(|(r, y)| (y - dot(r, &beta)).powi(2)).sum();
    let s = (rss / (samples.len() - p) as f64).sqrt();
    let x0 = features(f64::from(tasks), input_gb);
    let leverage: f64 = (0..p).map(|i| (0..p).map(|j| x0[i] * xtx_inv[i][j] * x0[j]).sum::<f64>()).sum();
    let work = dot(&x0, &beta).max(0.0);
    let upper = work + z * s * (1.0 + leverage).sqrt();
    let per_task = f64::from(tasks);
    Some(PhaseEstimate {
        tasks,
        task_ms: work / per_task,
        task_upper_ms: upper / per_task,
        task_sd_ms: within_run_sd(samples),
        method: EstimateMethod::Ols,
    })
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// XᵀX of the rows.
fn gram(rows: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let p = rows[0].len();
    (0..p).map(|i| (0..p).map(|j| rows.iter().map(|r| r[i] * r[j]).sum()).collect()).collect()
}

/// Gauss–Jordan inverse with partial pivoting; `None` for a (near-)singular matrix.
fn invert(m: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = m.len();
    let scale = m.iter().flatten().fold(0.0f64, |a, v| a.max(v.abs())).max(1.0);
    let mut a: Vec<Vec<f64>> = m
        .iter()
        .enumerate()
        .map(|(i, r)| r.iter().copied().chain((0..n).map(|j| f64::from(u8::from(i == j)))).collect())
        .collect();
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() < 1e-10 * scale {
            return None;
        }
        a.swap(col, pivot);
        let d = a[col][col];
        a[col].iter_mut().for_each(|v| *v /= d);
        for row in 0..n {
            if row != col {
                let f = a[row][col];
                let pivot_row = a[col].clone();
                a[row].iter_mut().zip(&pivot_row).for_each(|(v, p)| *v -= f * p);
            }
        }
    }
    Some(a.into_iter().map(|r| r[n..].to_vec()).collect())
}

/// The standard normal quantile at `level` (Acklam's rational approximation, relative
/// error under 1.2e-9): 1.645 at 95 %, MRM's "m + 1.64 s".
pub fn z_for_level(level: f64) -> Result<f64, EstimateError> {
    if !(level > 0.5 && level < 1.0) {
        return Err(EstimateError::Level(level));
    }
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let p_high = 1.0 - 0.02425;
    if level <= p_high {
        let q = level - 0.5;
        let r = q * q;
        let num = ((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5];
        let den = ((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0;
        Ok(num * q / den)
    } else {
        let q = (-2.0 * (1.0 - level).ln()).sqrt();
        let num = ((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5];
        let den = (((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0;
        Ok(-num / den)
    }
}

#[cfg(test)]
#[path = "estimate_tests.rs"]
mod tests;
