//! Jockey's §5 experiment in the simulator: the deadline run of a [`JockeyMix`] trace
//! under Jockey and the paper's comparison policies, over seeds, measured as the paper
//! measures it (Fig. 4, 5): whether the deadline was met, the completion time relative to
//! the deadline, and the job's average guaranteed allocation relative to the oracle
//! allocation ⌈T/d⌉ (T: the slot time the run actually used, d: its deadline).

use std::fmt::Write as _;

use slotmarket_common::time::Timestamp;

use super::jockey_gen::{JockeyMix, SLO_ID};
use super::workload::{Trace, TraceError};
use super::{SimConfig, SimError};
use crate::core::{CoreConfig, PolicySettings};

/// One policy of the comparison, as `[policy]` settings.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Its label in tables.
    pub label: String,
    /// The policy.
    pub policy: PolicySettings,
}

/// What one run of the deadline job showed.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Outcome {
    /// Finished by its (final) deadline.
    pub met: bool,
    /// (finish − submit) / (deadline − submit).
    pub completion_vs_deadline: f64,
    /// Average guaranteed slots over its run / the oracle's ⌈T/d⌉, less one.
    pub above_oracle: f64,
    /// The largest guarantee.
    pub peak: u32,
    /// The average guarantee.
    pub mean_guarantee: f64,
    /// The oracle allocation ⌈T/d⌉.
    pub oracle: f64,
}

/// Why the experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The generated trace was refused.
    #[error("trace: {0}")]
    Trace(#[from] TraceError),
    /// A run failed.
    #[error("simulation: {0}")]
    Sim(#[from] SimError),
    /// The deadline run did not finish (or was not admitted) within the run.
    #[error("seed {seed}, {label}: the deadline run did not complete")]
    Unfinished {
        /// The seed.
        seed: u64,
        /// The variant.
        label: String,
    },
}

/// The generated trace of `mix`.
pub fn trace_of(mix: &JockeyMix) -> Result<Trace, ExperimentError> {
    let mut jobs = Vec::new();
    mix.generate(|job| {
        jobs.push(job);
        Ok::<(), TraceError>(())
    })?;
    Ok(Trace::new(jobs)?)
}

/// Runs the deadline job of `trace` under `variant` on `cluster` (whose policy is replaced).
pub fn run_one(trace: &Trace, cluster: &SimConfig, variant: &Variant) -> Result<Outcome, ExperimentError> {
    let config = SimConfig {
        core: CoreConfig { policy: variant.policy.clone(), ..cluster.core.clone() },
        ..cluster.clone()
    };
    let run = super::run(trace, &config)?;
    let unfinished = || ExperimentError::Unfinished { seed: cluster.seed, label: variant.label.clone() };
    let ix = trace.jobs.iter().position(|j| j.id == SLO_ID).ok_or_else(unfinished)?;
    let job = &trace.jobs[ix];
    let result = &run.jobs[ix];
    let (Some(submitted), Some(ended)) = (result.submitted, result.ended) else { return Err(unfinished()) };
    let deadline_after_ms = match job.deadline_moves.last() {
        Some(step) => super::workload::secs_to_ms(step.deadline_after_s),
        None => job.deadline().map_or(0, |d| d.0.saturating_sub(submitted.0)),
    };
    let deadline = Timestamp(submitted.0 + deadline_after_ms);
    let ran_ms = ended.0.saturating_sub(submitted.0).max(1);
    let oracle = (result.slot_ms as f64 / deadline_after_ms.max(1) as f64).ceil().max(1.0);
    let (guaranteed_ms, peak) = result.guaranteed.unwrap_or((0, 0));
    Ok(Outcome {
        met: ended <= deadline,
        completion_vs_deadline: ran_ms as f64 / deadline_after_ms.max(1) as f64,
        above_oracle: guaranteed_ms as f64 / ran_ms as f64 / oracle - 1.0,
        peak,
        mean_guarantee: guaranteed_ms as f64 / ran_ms as f64,
        oracle,
    })
}

/// Aggregates of one variant over seeds.
#[derive(Clone, Debug)]
pub struct Row {
    /// The variant.
    pub label: String,
    /// Each run's outcome, by seed.
    pub outcomes: Vec<Outcome>,
}

impl Row {
    /// Share of runs that missed.
    pub fn missed(&self) -> f64 {
        self.outcomes.iter().filter(|o| !o.met).count() as f64 / self.outcomes.len().max(1) as f64
    }

    /// Mean allocation above the oracle.
    pub fn mean_above_oracle(&self) -> f64 {
        self.outcomes.iter().map(|o| o.above_oracle).sum::<f64>() / self.outcomes.len().max(1) as f64
    }

    /// The `q` quantile of completion relative to the deadline.
    pub fn completion_quantile(&self, q: f64) -> f64 {
        let mut values: Vec<f64> = self.outcomes.iter().map(|o| o.completion_vs_deadline).collect();
        values.sort_by(f64::total_cmp);
        values.get(((values.len().max(1) - 1) as f64 * q).round() as usize).copied().unwrap_or(f64::NAN)
    }
}

/// The table of rows, in Markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| policy | runs | missed | allocation above oracle (mean) | completion / deadline (median) | (p90) | (max) |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} % | {:+.1} % | {:.2} | {:.2} | {:.2} |",
            row.label,
            row.outcomes.len(),
            100.0 * row.missed(),
            100.0 * row.mean_above_oracle(),
            row.completion_quantile(0.5),
            row.completion_quantile(0.9),
            row.completion_quantile(1.0),
        );
    }
    out
}
