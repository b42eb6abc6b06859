//! `slotmarket-sim estimate --eval --trace T`: runs the trace (FIFO, no admission) to
//! get a history, then scores the estimator on it as `slotmarket estimate --eval` does on
//! a master's: R² and PI coverage per method on each name's newest runs held out.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use slotmarket_master::core::estimate_eval::{self, EvalSettings};
use slotmarket_master::sim::workload::Trace;
use slotmarket_master::sim::{self, SimConfig};

/// Flags of `estimate`.
#[derive(Args, Debug)]
pub(crate) struct EstimateArgs {
    /// Evaluate the estimator on held-out history (the only mode).
    #[arg(long, required = true)]
    eval: bool,
    /// The trace whose run makes the history (`gen mrm --programs 4` repeats names).
    #[arg(long)]
    trace: PathBuf,
    /// Seed of the run's drawn task durations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only this job name.
    #[arg(long)]
    name: Option<String>,
    /// Percent of each name's runs, the newest, held out.
    #[arg(long, default_value_t = 20)]
    holdout_pct: u32,
    /// One-sided level of the prediction interval.
    #[arg(long, default_value_t = 0.95)]
    pi_level: f64,
    /// Relative standard deviation of per-attempt noise on task durations.
    #[arg(long, default_value_t = 0.0)]
    noise: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: EstimateArgs) -> Result<()> {
    if !(1..=99).contains(&args.holdout_pct) {
        bail!("--holdout-pct must be in 1..=99, got {}", args.holdout_pct);
    }
    let file = File::open(&args.trace).with_context(|| format!("opening trace {}", args.trace.display()))?;
    let trace = Trace::read(BufReader::new(file))
        .with_context(|| format!("reading trace {}", args.trace.display()))?;
    let config = SimConfig { seed: args.seed, noise: args.noise, keep_history: true, ..SimConfig::default() };
    let result = sim::run(&trace, &config).context("simulation failed")?;
    let runs: Vec<_> = result.history.iter().collect();
    let settings = EvalSettings { holdout_pct: args.holdout_pct, pi_level: args.pi_level };
    let report = estimate_eval::evaluate(&runs, args.name.as_deref(), &settings).context("--pi-level")?;
    if args.json {
        println!("{}", serde_json::to_string(&report).context("the report as JSON")?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
