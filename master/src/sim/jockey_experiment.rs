//! Jockey's §5 experiment in the simulator: the deadline run of a [`JockeyMix`] trace
//! under Jockey and the paper's comparison policies, over seeds, measured as the paper
//! measures it (Fig. 4, 5): whether the deadline was met, the completion time relative to
//! the deadline, and the job's average guaranteed allocation relative to the oracle
//! allocation ⌈T/d⌉ (T: the slot time the run actually used, d: its deadline), both as
//! the mean guarantee over the oracle and as §5.1 words it: the share of the allocation
//! requested that lies above the oracle, over the runs that met their deadline.

use std::fmt::Write as _;

use slotmarket_common::time::Timestamp;

use super::jockey_gen::{JockeyMix, SLO_ID};
use super::plot::{Series, series_chart};
use super::report::SloSample;
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
#[derive(Clone, PartialEq, Debug)]
pub struct Outcome {
    /// Finished by its (final) deadline.
    pub met: bool,
    /// (finish − submit) / (deadline − submit).
    pub completion_vs_deadline: f64,
    /// Average guaranteed slots over its run / the oracle's ⌈T/d⌉, less one.
    pub above_oracle: f64,
    /// §5.1's measure: the share of the guaranteed slot time that lies above the
    /// oracle allocation, `Σ max(0, g − O) dt / Σ g dt`, from the control steps'
    /// guarantees (each held until the next step or the end).
    pub share_above_oracle: f64,
    /// The largest guarantee.
    pub peak: u32,
    /// The average guarantee.
    pub mean_guarantee: f64,
    /// The oracle allocation ⌈T/d⌉.
    pub oracle: f64,
    /// The deadline, in seconds after submission.
    pub deadline_s: f64,
    /// The controller's state at every tick of the run, times relative to submission.
    pub timeline: Vec<SloSample>,
    /// Share of the slot time the run used that it ran above its guarantee (on spare
    /// slots).
    pub spare_share: f64,
    /// The guarantee the control steps sized, before any demand cap, averaged over the
    /// run, over the oracle, less one: `above_oracle` when nothing caps it.
    pub target_above_oracle: f64,
    /// Where the guaranteed slot time went, each over the oracle's slot time (oracle ×
    /// run time), so that the three add up to `above_oracle + 1`.
    pub split: GuaranteeSplit,
}

/// The guaranteed slot time of one run, each part over the oracle's slot time.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct GuaranteeSplit {
    /// Used by the job's running tasks.
    pub used: f64,
    /// Held above what ran while the job had no task waiting for a slot (barriers, the
    /// tail).
    pub idle: f64,
    /// Held above what ran while tasks waited (slots being taken back, assignments in
    /// flight).
    pub rest: f64,
}

impl Outcome {
    /// Table 10's first metric: the longest stretch, in seconds, over which the
    /// progress indicator did not move.
    pub fn longest_constant_s(&self) -> f64 {
        let mut longest = 0u64;
        let mut since: Option<&SloSample> = None;
        for sample in &self.timeline {
            match since {
                Some(start) if (sample.progress - start.progress).abs() < 1e-12 => {
                    longest = longest.max(sample.at_ms - start.at_ms);
                }
                _ => since = Some(sample),
            }
        }
        longest as f64 / 1000.0
    }

    /// When the run fell behind for good: the first control sample from which on every
    /// predicted finish (with slack) lies past the deadline; `None` when the last one
    /// was still on time (the run was late without the controller seeing it).
    pub fn fell_behind(&self) -> Option<&SloSample> {
        let deadline_ms = (self.deadline_s * 1000.0) as u64;
        let late = |s: &SloSample| s.predicted_finish_ms.is_some_and(|f| f > deadline_ms);
        let on_time_to = self.timeline.iter().rposition(|s| !late(s));
        match on_time_to {
            Some(i) => self.timeline.get(i + 1),
            None => self.timeline.first(),
        }
    }

    /// Seconds at the end of the run over which it ran at most `width` tasks with none
    /// ready: its tail.
    pub fn tail_s(&self, width: u32) -> f64 {
        let end = self.timeline.last().map_or(0, |s| s.at_ms);
        let start = self
            .timeline
            .iter()
            .rev()
            .take_while(|s| s.running <= width && s.ready == 0)
            .last()
            .map_or(end, |s| s.at_ms);
        end.saturating_sub(start) as f64 / 1000.0
    }

    /// Table 10's second metric: the mean change, in seconds, of the predicted finish
    /// from one control step to the next.
    pub fn mean_delta_t_s(&self) -> f64 {
        let finishes: Vec<f64> =
            self.timeline.iter().filter_map(|s| s.predicted_finish_ms).map(|t| t as f64).collect();
        let changes: Vec<f64> = finishes.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
        changes.iter().sum::<f64>() / changes.len().max(1) as f64 / 1000.0
    }
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
    let share_above_oracle = share_above(&result.slo_timeline, ended.0, oracle);
    let spare_share = result.spare_ms.unwrap_or(0) as f64 / result.slot_ms.max(1) as f64;
    let oracle_ms = oracle * ran_ms as f64;
    let final_state = result.slo_final.as_deref().copied().unwrap_or_default();
    let split = GuaranteeSplit {
        used: final_state.used_slot_ms as f64 / oracle_ms,
        idle: final_state.idle_slot_ms as f64 / oracle_ms,
        rest: guaranteed_ms.saturating_sub(final_state.used_slot_ms + final_state.idle_slot_ms) as f64
            / oracle_ms,
    };
    Ok(Outcome {
        met: ended <= deadline,
        completion_vs_deadline: ran_ms as f64 / deadline_after_ms.max(1) as f64,
        above_oracle: guaranteed_ms as f64 / ran_ms as f64 / oracle - 1.0,
        share_above_oracle,
        peak,
        mean_guarantee: guaranteed_ms as f64 / ran_ms as f64,
        oracle,
        deadline_s: deadline_after_ms as f64 / 1000.0,
        timeline: result
            .slo_timeline
            .iter()
            .map(|s| SloSample {
                at_ms: s.at_ms.saturating_sub(submitted.0),
                predicted_finish_ms: s.predicted_finish_ms.map(|t| t.saturating_sub(submitted.0)),
                ..*s
            })
            .collect(),
        spare_share: spare_share.min(1.0),
        target_above_oracle: final_state.target_slot_ms as f64 / oracle_ms - 1.0,
        split,
    })
}

/// The share of the guaranteed slot time above `oracle` slots: each sample's guarantee
/// held until the next sample (the last until `end_ms`).
pub fn share_above(timeline: &[SloSample], end_ms: u64, oracle: f64) -> f64 {
    let (mut above, mut all) = (0.0, 0.0);
    for (i, sample) in timeline.iter().enumerate() {
        let until = timeline.get(i + 1).map_or(end_ms, |next| next.at_ms);
        let held = until.saturating_sub(sample.at_ms) as f64;
        let g = f64::from(sample.guarantee);
        above += (g - oracle).max(0.0) * held;
        all += g * held;
    }
    if all > 0.0 { above / all } else { 0.0 }
}

/// Aggregates of one variant over seeds.
#[derive(Clone, Debug)]
pub struct Row {
    /// The variant.
    pub label: String,
    /// The seed of each outcome.
    pub seeds: Vec<u64>,
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

    /// §5.1's measure averaged over the runs that met their deadline.
    pub fn mean_share_above_oracle_met(&self) -> f64 {
        let met: Vec<f64> = self.outcomes.iter().filter(|o| o.met).map(|o| o.share_above_oracle).collect();
        met.iter().sum::<f64>() / met.len().max(1) as f64
    }

    /// Mean share of the slot time runs used on spare slots.
    pub fn mean_spare_share(&self) -> f64 {
        self.outcomes.iter().map(|o| o.spare_share).sum::<f64>() / self.outcomes.len().max(1) as f64
    }

    /// The guaranteed slot time's split over the oracle, averaged over the runs.
    pub fn mean_split(&self) -> GuaranteeSplit {
        let n = self.outcomes.len().max(1) as f64;
        let sum =
            |part: fn(&GuaranteeSplit) -> f64| self.outcomes.iter().map(|o| part(&o.split)).sum::<f64>() / n;
        GuaranteeSplit { used: sum(|s| s.used), idle: sum(|s| s.idle), rest: sum(|s| s.rest) }
    }

    /// Mean of the sized target above the oracle (the measure before any demand cap).
    pub fn mean_target_above_oracle(&self) -> f64 {
        self.outcomes.iter().map(|o| o.target_above_oracle).sum::<f64>() / self.outcomes.len().max(1) as f64
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
        "| policy | runs | missed | allocation above oracle (mean) | share above oracle (§5.1, met) | completion / deadline (median) | (p90) | (max) | on spare slots (mean) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({:.1} %) | {:+.1} % | {:.1} % | {:.2} | {:.2} | {:.2} | {:.1} % |",
            row.label,
            row.outcomes.len(),
            row.outcomes.iter().filter(|o| !o.met).count(),
            100.0 * row.missed(),
            100.0 * row.mean_above_oracle(),
            100.0 * row.mean_share_above_oracle_met(),
            row.completion_quantile(0.5),
            row.completion_quantile(0.9),
            row.completion_quantile(1.0),
            100.0 * row.mean_spare_share(),
        );
    }
    out
}

/// Where each row's guarantee went, in Markdown: the mean guaranteed slot time over the
/// oracle's, split into what running tasks used, what was held while no task waited and
/// the rest, beside the allocation above the oracle and the sized target's.
pub fn split_markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| policy | runs | allocation above oracle (guarantee) | (target, before any demand cap) | used by running tasks | held, no task waiting | held, tasks waiting |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let split = row.mean_split();
        let _ = writeln!(
            out,
            "| {} | {} | {:+.1} % | {:+.1} % | {:.1} % | {:.1} % | {:.1} % |",
            row.label,
            row.outcomes.len(),
            100.0 * row.mean_above_oracle(),
            100.0 * row.mean_target_above_oracle(),
            100.0 * split.used,
            100.0 * split.idle,
            100.0 * split.rest,
        );
    }
    out
}

/// The indicator comparison (Table 10) in Markdown: per row, the missed share and
/// allocation above the oracle, with the mean longest interval the indicator stood still
/// and the mean step-to-step change of the predicted finish.
pub fn indicator_markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| indicator | runs | missed | allocation above oracle (mean) | longest constant interval (mean s) | average ΔT (mean s) |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let n = row.outcomes.len().max(1) as f64;
        let constant = row.outcomes.iter().map(Outcome::longest_constant_s).sum::<f64>() / n;
        let delta = row.outcomes.iter().map(Outcome::mean_delta_t_s).sum::<f64>() / n;
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} % | {:+.1} % | {constant:.0} | {delta:.0} |",
            row.label,
            row.outcomes.len(),
            100.0 * row.missed(),
            100.0 * row.mean_above_oracle(),
        );
    }
    out
}

/// Fig. 6: one run's guaranteed and running slots over time (minutes since submission),
/// with the oracle allocation and the deadline marked.
pub fn allocation_plot(title: &str, outcome: &Outcome) -> String {
    let minutes = |ms: u64| ms as f64 / 60_000.0;
    let guarantee = outcome.timeline.iter().map(|s| (minutes(s.at_ms), f64::from(s.guarantee))).collect();
    let running = outcome.timeline.iter().map(|s| (minutes(s.at_ms), f64::from(s.running))).collect();
    let top = outcome.timeline.iter().map(|s| s.guarantee.max(s.running)).max().unwrap_or(1).max(1);
    let end = outcome.timeline.last().map_or(0.0, |s| minutes(s.at_ms));
    let deadline = outcome.deadline_s / 60.0;
    let series = [
        Series { label: "guaranteed".into(), colour: 0, dashed: false, points: guarantee },
        Series { label: "running".into(), colour: 2, dashed: false, points: running },
        Series {
            label: "oracle".into(),
            colour: 3,
            dashed: true,
            points: vec![(0.0, outcome.oracle), (end.max(deadline), outcome.oracle)],
        },
        Series {
            label: "deadline".into(),
            colour: 1,
            dashed: true,
            points: vec![(deadline, 0.0), (deadline, f64::from(top))],
        },
    ];
    series_chart(title, "minutes since submission", "slots", &series, None)
}

/// Fig. 5: per variant, the CDF over runs of completion time relative to the deadline.
pub fn completion_plot(title: &str, rows: &[Row]) -> String {
    let series: Vec<Series> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut values: Vec<f64> = row.outcomes.iter().map(|o| o.completion_vs_deadline).collect();
            values.sort_by(f64::total_cmp);
            let n = values.len().max(1) as f64;
            let points = values.iter().enumerate().map(|(k, &v)| (v, (k + 1) as f64 / n)).collect();
            Series { label: row.label.clone(), colour: i, dashed: false, points }
        })
        .collect();
    series_chart(title, "completion time / deadline", "fraction of runs", &series, Some(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, guarantee: u32) -> SloSample {
        SloSample {
            at_ms,
            guarantee,
            running: 0,
            progress: 0.0,
            predicted_finish_ms: None,
            raw: 0,
            slowdown: 1.0,
            ready: 0,
        }
    }

    #[test]
    fn the_share_above_the_oracle_weighs_each_guarantee_by_how_long_it_was_held() {
        // 30 slots for 60 s, then 10 for 120 s, against an oracle of 10: 20 × 60 of
        // 30 × 60 + 10 × 120 slot-seconds lie above it.
        let timeline = [sample(1_000, 30), sample(61_000, 10)];
        let share = share_above(&timeline, 181_000, 10.0);
        assert!((share - 1_200.0 / 3_000.0).abs() < 1e-12, "{share}");
        // Never above the oracle: nothing.
        assert_eq!(share_above(&timeline, 181_000, 40.0), 0.0);
        assert_eq!(share_above(&[], 181_000, 10.0), 0.0);
    }

    #[test]
    fn a_missed_run_is_late_from_the_step_after_its_last_on_time_prediction() {
        // Deadline 1000 s: predicted late at 60 s, on time at 120 s, late from 180 s on.
        let at = |t_s: u64, finish_s: u64, running: u32, ready: u32| SloSample {
            predicted_finish_ms: Some(finish_s * 1000),
            running,
            ready,
            ..sample(t_s * 1000, 10)
        };
        let mut outcome = Outcome {
            met: false,
            completion_vs_deadline: 1.1,
            above_oracle: 0.0,
            share_above_oracle: 0.0,
            peak: 10,
            mean_guarantee: 10.0,
            oracle: 10.0,
            deadline_s: 1000.0,
            timeline: vec![
                at(60, 1100, 10, 50),
                at(120, 900, 10, 40),
                at(180, 1050, 3, 0),
                at(240, 1100, 1, 0),
            ],
            spare_share: 0.0,
            target_above_oracle: 0.0,
            split: GuaranteeSplit::default(),
        };
        assert_eq!(outcome.fell_behind().map(|s| s.at_ms), Some(180_000));
        // Its tail: from 180 s it ran at most 3 tasks with none ready; at most 1 only at 240 s.
        assert_eq!(outcome.tail_s(3), 60.0);
        assert_eq!(outcome.tail_s(1), 0.0);
        // On time at its last step: the controller never saw it coming.
        outcome.timeline[3].predicted_finish_ms = Some(990_000);
        assert!(outcome.fell_behind().is_none());
    }
}
