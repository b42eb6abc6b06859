//! How good the estimator is on history it has not seen (MRM Tables 2–3): each job
//! name's newest runs are held out, OLS and the per-name bins are fitted on the rest,
//! and every held-out phase's actual work is compared with the prediction (R²) and
//! with the upper end of its prediction interval (coverage). The master answers
//! `slotmarket estimate --eval` with it; `slotmarket-sim estimate --eval` runs it on a
//! simulated history.

use std::collections::BTreeMap;

use slotmarket_common::protocol::{EstimateEvalReport, EvalMethod, EvalRow, JobHistory, JobState};
use slotmarket_common::spec::SlotKind;

use super::estimate::{self, EstimateError, PhaseEstimate, PhaseSample};

/// What the evaluation needs besides the history.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct EvalSettings {
    /// Percent of each name's runs, the newest, held out (1–99).
    pub holdout_pct: u32,
    /// One-sided PI level.
    pub pi_level: f64,
}

/// Pooled outcomes of one method on one slot kind.
#[derive(Default)]
struct Tally {
    /// (actual, predicted, PI upper end) of each predicted phase, slot-ms.
    points: Vec<(f64, f64, f64)>,
    unpredicted: u32,
}

impl Tally {
    fn row(&self, method: EvalMethod, slot: SlotKind) -> EvalRow {
        let n = self.points.len();
        let mean = self.points.iter().map(|p| p.0).sum::<f64>() / n.max(1) as f64;
        let ss_tot: f64 = self.points.iter().map(|p| (p.0 - mean).powi(2)).sum();
        let ss_res: f64 = self.points.iter().map(|p| (p.0 - p.1).powi(2)).sum();
        let inside = self.points.iter().filter(|p| p.0 <= p.2).count();
        EvalRow {
            method,
            slot,
            predicted: n as u32,
            unpredicted: self.unpredicted,
            r2: (n >= 2 && ss_tot > 0.0).then(|| 1.0 - ss_res / ss_tot),
            coverage_pct: (n > 0).then(|| 100.0 * inside as f64 / n as f64),
            // Folded from +0: an empty float sum is -0, which printed as "-0.0".
            mean_pi_width_ms: self.points.iter().fold(0.0, |sum, p| sum + (p.2 - p.1)) / n.max(1) as f64,
        }
    }
}

/// Evaluates both methods on `runs` (any order; only completed runs count), holding out
/// the newest `holdout_pct` % of each name's runs (by finish time, at least one, and at
/// least one left to train on). `name` restricts it to one job name.
pub fn evaluate(
    runs: &[&JobHistory],
    name: Option<&str>,
    settings: &EvalSettings,
) -> Result<EstimateEvalReport, EstimateError> {
    let z = estimate::z_for_level(settings.pi_level)?;
    let mut by_name: BTreeMap<&str, Vec<&JobHistory>> = BTreeMap::new();
    for run in runs.iter().filter(|r| r.state == JobState::Completed && name.is_none_or(|n| n == r.name)) {
        by_name.entry(run.name.as_str()).or_default().push(run);
    }
    let mut tallies: [[Tally; 2]; 2] = Default::default();
    let mut report = EstimateEvalReport {
        pi_level: settings.pi_level,
        holdout_pct: settings.holdout_pct,
        names: 0,
        train_runs: 0,
        test_runs: 0,
        rows: Vec::new(),
    };
    for runs in by_name.values_mut() {
        if runs.len() < 2 {
            continue;
        }
        runs.sort_by_key(|r| (r.finished, r.job));
        let held = held_out(runs.len(), settings.holdout_pct);
        let (train, test) = runs.split_at(runs.len() - held);
        report.names += 1;
        report.train_runs += train.len() as u32;
        report.test_runs += test.len() as u32;
        for kind in SlotKind::ALL {
            let trained = estimate::samples(train, kind);
            for actual in estimate::samples(test, kind) {
                for (m, method) in EvalMethod::ALL.into_iter().enumerate() {
                    let tally = &mut tallies[m][kind_ix(kind)];
                    match predict(method, &trained, &actual, z) {
                        Some(p) => tally.points.push((actual.work_ms, p.work_ms(), p.work_upper_ms())),
                        None => tally.unpredicted += 1,
                    }
                }
            }
        }
    }
    for (m, method) in EvalMethod::ALL.into_iter().enumerate() {
        for kind in SlotKind::ALL {
            report.rows.push(tallies[m][kind_ix(kind)].row(method, kind));
        }
    }
    Ok(report)
}

fn kind_ix(kind: SlotKind) -> usize {
    super::state::kind_ix(kind)
}

/// Runs of `n` held out at `pct` %: rounded up, at least one, at most `n − 1`.
fn held_out(n: usize, pct: u32) -> usize {
    (n * pct.min(100) as usize).div_ceil(100).clamp(1, n - 1)
}

/// `method`'s estimate of the phase `actual` from `trained`, with `actual`'s features.
fn predict(
    method: EvalMethod,
    trained: &[PhaseSample],
    actual: &PhaseSample,
    z: f64,
) -> Option<PhaseEstimate> {
    match method {
        EvalMethod::Ols => estimate::ols(trained, actual.tasks, actual.input_gb, z),
        EvalMethod::Bins => estimate::bins(trained, actual.tasks, z),
    }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::StageHistory;
    use slotmarket_common::time::Timestamp;

    use super::*;

    /// A completed run of `name` finishing at `at` ms whose maps took `map_ms` each.
    fn run(job: u64, name: &str, at: u64, map_ms: &[u64]) -> JobHistory {
        JobHistory {
            finished: Timestamp(at),
            stages: vec![StageHistory {
                name: "map".into(),
                slot: SlotKind::Map,
                run_ms: map_ms.iter().map(|&m| Some(m)).collect(),
                attempts: vec![1; map_ms.len()],
            }],
            ..crate::core::completed_run(job, name)
        }
    }

    fn row(report: &EstimateEvalReport, method: EvalMethod, slot: SlotKind) -> &EvalRow {
        report.rows.iter().find(|r| r.method == method && r.slot == slot).unwrap()
    }

    const SETTINGS: EvalSettings = EvalSettings { holdout_pct: 20, pi_level: 0.95 };

    #[test]
    fn the_newest_fifth_is_held_out_and_scored_against_the_older_runs() {
        // Ten runs of one task; the older eight take 10 s ± 1 s, the newest two 10 s
        // and 30 s. Bins: mean 10 s, sd 1.07 s, upper ≈ 11.86 s: the 10 s run is inside,
        // the 30 s one outside (coverage 50 %). R² over actuals {10, 30} s (mean 20,
        // ss_tot = 200 s²), both predicted 10 s (ss_res = 0 + 400 s²): 1 − 400/200 = −1.
        let mut runs: Vec<JobHistory> =
            (0..8).map(|i| run(i, "wc", 100 + i, &[if i % 2 == 0 { 9_000 } else { 11_000 }])).collect();
        runs.push(run(8, "wc", 200, &[10_000]));
        runs.push(run(9, "wc", 201, &[30_000]));
        let refs: Vec<&JobHistory> = runs.iter().rev().collect();
        let report = evaluate(&refs, None, &SETTINGS).unwrap();
        assert_eq!((report.names, report.train_runs, report.test_runs), (1, 8, 2));
        let bins = row(&report, EvalMethod::Bins, SlotKind::Map);
        assert_eq!((bins.predicted, bins.unpredicted), (2, 0));
        assert_eq!(bins.coverage_pct, Some(50.0));
        let r2 = bins.r2.unwrap();
        assert!((r2 - (1.0 - 400.0 / 200.0)).abs() < 1e-9, "{r2}");
        // Every training run has one task: OLS has no feature that varies.
        let ols = row(&report, EvalMethod::Ols, SlotKind::Map);
        assert_eq!((ols.predicted, ols.unpredicted, ols.r2, ols.coverage_pct), (0, 2, None, None));
        assert_eq!(row(&report, EvalMethod::Bins, SlotKind::Reduce).predicted, 0);
    }

    #[test]
    fn ols_explains_work_that_grows_with_the_task_count() {
        // Work is exactly 5 s per task over 1..=10 tasks: OLS fits it perfectly (R² = 1,
        // every actual at its prediction, inside the interval); bins predict the mean
        // per-task time, also 5 s, so they are exact too.
        let runs: Vec<JobHistory> =
            (1..=10u64).map(|t| run(t, "sort", t, &vec![5_000; t as usize])).collect();
        let refs: Vec<&JobHistory> = runs.iter().collect();
        let report = evaluate(&refs, None, &SETTINGS).unwrap();
        assert_eq!(report.test_runs, 2);
        let ols = row(&report, EvalMethod::Ols, SlotKind::Map);
        assert_eq!((ols.predicted, ols.coverage_pct), (2, Some(100.0)));
        assert!((ols.r2.unwrap() - 1.0).abs() < 1e-9);
        assert!(ols.mean_pi_width_ms.abs() < 1e-6);
    }

    #[test]
    fn per_name_bins_are_worse_when_per_task_time_varies_with_the_size() {
        // Per-task time grows with the job: 1 s + 1 s per task. OLS on the task count
        // (work = t + t²) underfits a little, bins (one mean per-task time) a lot.
        let runs: Vec<JobHistory> =
            (1..=20u64).map(|t| run(t, "grep", t, &vec![1_000 + 1_000 * t; t as usize])).collect();
        let refs: Vec<&JobHistory> = runs.iter().collect();
        let report = evaluate(&refs, Some("grep"), &SETTINGS).unwrap();
        let ols = row(&report, EvalMethod::Ols, SlotKind::Map).r2.unwrap();
        let bins = row(&report, EvalMethod::Bins, SlotKind::Map).r2.unwrap();
        assert!(bins < ols, "bins {bins} vs ols {ols}");
        assert_eq!(evaluate(&refs, Some("other"), &SETTINGS).unwrap().names, 0);
    }

    #[test]
    fn a_name_with_one_run_and_failed_runs_are_left_out() {
        let mut failed = run(2, "b", 5, &[1_000]);
        failed.state = JobState::Failed;
        let runs = [run(1, "a", 1, &[1_000]), failed, run(3, "b", 6, &[1_000])];
        let refs: Vec<&JobHistory> = runs.iter().collect();
        let report = evaluate(&refs, None, &SETTINGS).unwrap();
        assert_eq!((report.names, report.test_runs), (0, 0));
        assert!(report.rows.iter().all(|r| r.predicted == 0 && r.r2.is_none()));
        // No prediction, no width: +0 (not the -0 of an empty float sum), and JSON
        // names the method as the table does.
        assert!(report.rows.iter().all(|r| r.mean_pi_width_ms.to_bits() == 0.0f64.to_bits()));
        let json = serde_json::to_value(&report.rows[0]).unwrap();
        assert_eq!(json["method"], report.rows[0].method.name());
        assert!(evaluate(&refs, None, &EvalSettings { pi_level: 1.5, ..SETTINGS }).is_err());
    }

    #[test]
    fn held_out_keeps_at_least_one_run_on_each_side() {
        assert_eq!(held_out(2, 20), 1);
        assert_eq!(held_out(10, 20), 2);
        assert_eq!(held_out(11, 20), 3);
        assert_eq!(held_out(5, 100), 4);
    }
}
