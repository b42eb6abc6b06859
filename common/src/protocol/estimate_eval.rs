//! The estimator's evaluation on held-out history (MRM Tables 2–3): per method and slot
//! kind, the coefficient of determination (R²) of the predicted phase work and the share
//! of actual phase work inside the prediction interval. The master computes it in its
//! core (`slotmarket estimate --eval`); the simulator computes the same from a simulated
//! history.

use serde::{Deserialize, Serialize};

use crate::spec::SlotKind;

/// What `slotmarket estimate --eval` asks for.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct EstimateEvalQuery {
    /// Only the runs of this job name (all names when `None`).
    pub name: Option<String>,
    /// Percent of each name's runs, the newest, held out for testing (1–99).
    pub holdout_pct: u32,
}

/// An estimation method that is evaluated.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalMethod {
    /// Least squares of phase work on the task count and input size.
    Ols,
    /// Mean and spread of the name's past per-task times.
    Bins,
}

impl EvalMethod {
    /// Both, in the order they are reported.
    pub const ALL: [EvalMethod; 2] = [EvalMethod::Ols, EvalMethod::Bins];

    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            EvalMethod::Ols => "ols",
            EvalMethod::Bins => "bins",
        }
    }
}

/// One method's figures on one slot kind's phases.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct EvalRow {
    /// The method.
    pub method: EvalMethod,
    /// The phase's slot kind.
    pub slot: SlotKind,
    /// Held-out phases the method predicted.
    pub predicted: u32,
    /// Held-out phases it could not predict (too little training history of the name).
    pub unpredicted: u32,
    /// 1 − Σ(actual − predicted)² / Σ(actual − mean actual)², over the predicted phases;
    /// `None` with fewer than two or when every actual is the same.
    pub r2: Option<f64>,
    /// Share of predicted phases whose actual work was at most the PI's upper end, in
    /// percent; `None` without predictions.
    pub coverage_pct: Option<f64>,
    /// Mean distance from the prediction to the PI's upper end, in slot-milliseconds; 0
    /// without predictions.
    pub mean_pi_width_ms: f64,
}

/// The evaluation's answer.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct EstimateEvalReport {
    /// One-sided PI level the intervals were made at.
    pub pi_level: f64,
    /// Percent of each name's runs held out.
    pub holdout_pct: u32,
    /// Job names with at least one held-out run.
    pub names: u32,
    /// Runs the methods were trained on.
    pub train_runs: u32,
    /// Runs held out.
    pub test_runs: u32,
    /// Per method, then slot kind.
    pub rows: Vec<EvalRow>,
}

impl EstimateEvalReport {
    /// As a text table, one line per method and slot kind (what `estimate --eval`
    /// prints in the CLI and in the simulator).
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} names; {} runs trained on, {} held out (newest {} % of each name); PI level {:.0} %\n",
            self.names,
            self.train_runs,
            self.test_runs,
            self.holdout_pct,
            self.pi_level * 100.0
        );
        out.push_str("method  phase   predicted  unpredicted      R²  coverage%  mean PI width (slot-s)\n");
        let cell = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        for row in &self.rows {
            out.push_str(&format!(
                "{:<7} {:<7} {:>9} {:>12} {:>7} {:>10} {:>23}\n",
                row.method.name(),
                row.slot.name(),
                row.predicted,
                row.unpredicted,
                cell(row.r2, 3),
                cell(row.coverage_pct, 1),
                cell((row.predicted > 0).then_some(row.mean_pi_width_ms / 1000.0), 1)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(method: EvalMethod, predicted: u32, mean_pi_width_ms: f64) -> EvalRow {
        let some = (predicted > 0).then_some(50.0);
        EvalRow {
            method,
            slot: SlotKind::Map,
            predicted,
            unpredicted: 2,
            r2: some,
            coverage_pct: some,
            mean_pi_width_ms,
        }
    }

    #[test]
    fn a_method_without_predictions_shows_dashes() {
        let report = EstimateEvalReport {
            pi_level: 0.9,
            holdout_pct: 20,
            names: 1,
            train_runs: 4,
            test_runs: 1,
            rows: vec![row(EvalMethod::Ols, 0, 0.0), row(EvalMethod::Bins, 3, 1500.0)],
        };
        let table = report.table();
        let lines: Vec<Vec<&str>> = table.lines().skip(2).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines[0], ["ols", "map", "0", "2", "-", "-", "-"], "{table}");
        assert_eq!(lines[1], ["bins", "map", "3", "2", "50.000", "50.0", "1.5"], "{table}");
    }
}
