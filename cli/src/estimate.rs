//! `slotmarket estimate --eval [--name N] [--holdout-pct P]`: how good the master's
//! runtime estimates are on its own history. Each job name's newest runs are held out,
//! OLS and the per-name bins are fitted on the older ones, and each method's R² and PI
//! coverage (share of actual phase times at or under the interval's upper end) are
//! printed per slot kind, like MRM's Tables 2–3.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use slotmarket_common::protocol::EstimateEvalQuery;

use crate::connection::{self, ConnectionArgs};
use crate::output;

/// Arguments of `estimate`.
#[derive(Debug, Args)]
pub(crate) struct EstimateArgs {
    /// Evaluate the estimator on held-out history (the only mode).
    #[arg(long, required = true)]
    eval: bool,
    /// Only runs of jobs with this name.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Percent of each name's runs, the newest, held out for testing.
    #[arg(long, default_value_t = 20, value_name = "P")]
    holdout_pct: u32,
}

/// Runs `estimate`.
pub(crate) async fn run(conn: &ConnectionArgs, args: EstimateArgs, json: bool) -> Result<ExitCode> {
    if !(1..=99).contains(&args.holdout_pct) {
        bail!("--holdout-pct must be in 1..=99, got {}", args.holdout_pct);
    }
    let client = connection::connect_from_args(conn).await?;
    let query = EstimateEvalQuery { name: args.name, holdout_pct: args.holdout_pct };
    let report =
        connection::bounded(client.estimate_eval(query)).await.context("evaluating the estimator")?;
    connection::close(client).await;
    if json {
        output::print_json(&report)?;
    } else if report.test_runs == 0 {
        println!("no job name has two completed runs yet: nothing to hold out");
    } else {
        print!("{}", report.table());
    }
    Ok(ExitCode::SUCCESS)
}
