//! `slotmarket-sim`: generates workload traces, runs them through the master's scheduling
//! core on a simulated cluster with a virtual clock, and plots the results.
//!
//! ```text
//! slotmarket-sim gen mrm --jobs 1000 --interarrival 50 --seed 1 -o mrm.jsonl
//! slotmarket-sim run --trace mrm.jsonl --policy fair --seed 1 --json
//! slotmarket-sim run --trace mrm.jsonl --policy capacity --set preemption=true --set queues.small=0.1
//! slotmarket-sim run --trace mrm.jsonl --policy-config configs/master.toml
//! slotmarket-sim --trace mrm.jsonl --policy fifo --seed 1        # `run` may be left out
//! slotmarket-sim run --trace mrm.jsonl --policy fifo --out runs/fifo
//! slotmarket-sim run --trace mrm.jsonl --policy edf --admission mrm --kappa 2 --alpha 1.5
//! slotmarket-sim report runs/fifo runs/fair -o plots
//! slotmarket-sim estimate --eval --trace mrm.jsonl --holdout-pct 20
//! ```
//!
//! Standard output carries only results, so two runs with the same trace, policy and
//! seed print the same bytes; `--timing` adds speed and memory figures on standard error.

mod estimate_cmd;
mod gen_cmd;
mod jockey_cmd;
mod quote_cmd;
mod report_cmd;

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use slotmarket_common::report::Report;
use slotmarket_common::time::Timestamp;
use slotmarket_master::config::PolicyTable;
use slotmarket_master::core::pricing::PriceCurve;
use slotmarket_master::core::{AdmissionMode, AdmissionSettings, CoreConfig, PolicySettings};
use slotmarket_master::sim::accounts::read_account_events;
use slotmarket_master::sim::market::{MarketConfig, MarketSummary, SimAdmission};
use slotmarket_master::sim::report::{Summary, write_jobs_csv, write_slots_csv};
use slotmarket_master::sim::workload::{Trace, secs_to_ms};
use slotmarket_master::sim::{self, SimConfig, SimRun};
use tracing::info;

/// Discrete-event simulator for Slotmarket's scheduling policies.
#[derive(Parser, Debug)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand, the flags of `run`.
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write a seeded workload trace (JSON lines).
    Gen(gen_cmd::GenArgs),
    /// Run a trace through a policy and print the summary.
    Run(RunArgs),
    /// Render SVG plots from the CSVs of one or more `run --out` directories.
    Report(report_cmd::ReportArgs),
    /// Time one MRM quote against N admitted deadline jobs (scripts/bench/quote.sh).
    BenchQuote(quote_cmd::QuoteArgs),
    /// Jockey's §5 comparison over seeds, as Markdown tables.
    Jockey(jockey_cmd::JockeyArgs),
    /// The estimator's R² and PI coverage on held-out runs of a simulated history.
    Estimate(estimate_cmd::EstimateArgs),
    /// Draw a deadline job's allocation over time (Fig. 6) from a timeline CSV.
    PlotAllocation(jockey_cmd::PlotAllocationArgs),
}

/// Flags of `run`.
#[derive(Args, Debug)]
struct RunArgs {
    /// The trace to run (JSON lines, see `slotmarket_master::sim::workload`).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Scheduling policy: fifo, fair, priority, capacity, gang-fifo, dress, edf, proportional or jockey, with its default settings
    /// (replaces the table from --policy-config) [default: fifo].
    #[arg(long)]
    policy: Option<String>,
    /// A master.toml whose `[policy]` table configures the policy, as it would the master
    /// (its other settings are checked but unused; a file with only `[policy]` will do).
    #[arg(long, value_name = "FILE")]
    policy_config: Option<PathBuf>,
    /// Set one key of the `[policy]` table, after --policy-config and --policy: a TOML
    /// value, dotted keys for nested tables, e.g. `--set preemption=true --set
    /// queues.small=0.1` or `--set name=fair`. Repeat for each key.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seed for drawn task durations, noise and failures.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Simulated nodes.
    #[arg(long, default_value_t = 40)]
    nodes: u32,
    /// Map slots per node.
    #[arg(long, default_value_t = 2)]
    map_slots: u32,
    /// Reduce slots per node.
    #[arg(long, default_value_t = 2)]
    reduce_slots: u32,
    /// Relative standard deviation of per-attempt noise on task durations.
    #[arg(long, default_value_t = 0.0)]
    noise: f64,
    /// Probability that a task attempt fails part-way.
    #[arg(long, default_value_t = 0.0)]
    fail_prob: f64,
    /// Stop at this virtual time (seconds) even if work is left.
    #[arg(long)]
    horizon: Option<f64>,
    /// Stop with an error after this many events [default: from the trace's size].
    #[arg(long)]
    max_steps: Option<u64>,
    /// Check the core's invariants after every step (slow).
    #[arg(long)]
    check_invariants: bool,
    /// Threads that run stretches of the trace at once, cut where the cluster drains,
    /// with the same result as one run [default: the machine's cores]. Used by the
    /// policies that keep no state between steps (fifo, fair, priority, capacity, edf,
    /// gang-fifo) without admission, followers, account events, deadline moves,
    /// --horizon or --max-steps; other runs use one thread and a helper.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Write summary.txt, summary.json, jobs.csv and slots.csv into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print speed (jobs/s, events/s) and peak memory on standard error.
    #[arg(long)]
    timing: bool,
    /// Deadline admission: `mrm` (each job buys a deadline from the price-deadline curve
    /// by the buyer model; run with --policy edf) or `fcfs` (each job is promised the
    /// finish behind every admitted job, a baseline's promise). Adds the market table.
    #[arg(long, value_parser = ["mrm", "fcfs", "none"])]
    admission: Option<String>,
    /// κ of the price-deadline curve (eq. 13).
    #[arg(long, default_value_t = 2.0)]
    kappa: f64,
    /// A delay-sensitive job pays at most α times its estimated work.
    #[arg(long, default_value_t = 2.0)]
    alpha: f64,
    /// One-sided level of the runtime prediction interval.
    #[arg(long, default_value_t = 0.95)]
    pi_level: f64,
    /// Relative standard deviation of each job's runtime estimate around its true mean.
    #[arg(long, default_value_t = 0.1)]
    estimate_noise: f64,
    /// Ask for the trace's `deadline_s` instead of buying by class (refused if
    /// infeasible, and counted).
    #[arg(long)]
    trace_deadlines: bool,
    /// With --admission: also run the trace first-come first-served (fifo, no
    /// admission, same seed) and add the paper's jump-ahead figures: the share of each
    /// class that finished before a job that finished before it under FCFS.
    #[arg(long)]
    compare_fcfs: bool,
    /// proportional: the allocation interval in seconds (`--set interval_s=S`).
    #[arg(long, value_name = "S")]
    interval: Option<f64>,
    /// proportional: preempt tasks of accounts over their share (`--set preemption=true`).
    #[arg(long)]
    preempt: bool,
    /// proportional: account budgets and spending-rate changes over time, JSON lines
    /// (`{"at_s":0,"user":"u1","budget":1000,"rate":2}`; see `sim::accounts`).
    #[arg(long, value_name = "FILE")]
    accounts: Option<PathBuf>,
}

/// The market the flags ask for, with the core's admission settings.
fn market(args: &RunArgs) -> Result<(Option<MarketConfig>, AdmissionSettings)> {
    let settings = AdmissionSettings {
        mode: AdmissionMode::Mrm,
        pi_level: args.pi_level,
        price: PriceCurve::Eq13 { kappa: args.kappa },
    };
    let admission = match args.admission.as_deref() {
        None | Some("none") => return Ok((None, AdmissionSettings::default())),
        Some("fcfs") => SimAdmission::Fcfs,
        Some(_) => SimAdmission::Mrm,
    };
    settings.check().map_err(|(field, problem)| anyhow::anyhow!("{field}: {problem}"))?;
    if !(args.alpha >= 1.0 && args.estimate_noise >= 0.0 && args.estimate_noise < 1.0) {
        bail!("--alpha must be at least 1 and --estimate-noise in [0, 1)");
    }
    let config = MarketConfig {
        admission,
        alpha: args.alpha,
        estimate_noise: args.estimate_noise,
        trace_deadlines: args.trace_deadlines,
    };
    Ok((Some(config), settings))
}

fn main() -> Result<(), Report> {
    slotmarket_common::logging::init(tracing::Level::WARN);
    let cli = Cli::parse();
    let done = match cli.command {
        Some(Command::Gen(args)) => gen_cmd::run(args),
        Some(Command::Run(args)) => run(args),
        Some(Command::Report(args)) => report_cmd::run(args),
        Some(Command::BenchQuote(args)) => quote_cmd::run(args),
        Some(Command::Jockey(args)) => jockey_cmd::run(args),
        Some(Command::Estimate(args)) => estimate_cmd::run(args),
        Some(Command::PlotAllocation(args)) => jockey_cmd::plot_allocation(args),
        None => run(cli.run),
    };
    Ok(done?)
}

impl TryFrom<&RunArgs> for SimConfig {
    type Error = anyhow::Error;

    fn try_from(args: &RunArgs) -> Result<SimConfig> {
        let mut set = args.set.clone();
        set.extend(args.interval.map(|s| format!("interval_s={s:?}")));
        set.extend(args.preempt.then(|| "preemption=true".to_string()));
        let policy = PolicyTable::layered(args.policy_config.as_deref(), args.policy.as_deref(), &set)
            .context("the policy (--policy-config, --policy, --set, --interval, --preempt)")?;
        let (market, admission) = market(args)?;
        let account_events = match &args.accounts {
            None => Vec::new(),
            Some(path) => {
                let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
                read_account_events(BufReader::new(file))
                    .with_context(|| format!("reading {}", path.display()))?
            }
        };
        Ok(SimConfig {
            core: CoreConfig { policy, admission, ..CoreConfig::default() },
            market,
            nodes: args.nodes,
            map_slots: args.map_slots,
            reduce_slots: args.reduce_slots,
            seed: args.seed,
            noise: args.noise,
            fail_prob: args.fail_prob,
            horizon: args.horizon.map(|h| Timestamp(secs_to_ms(h))),
            max_steps: args.max_steps,
            check_invariants: args.check_invariants,
            account_events,
            keep_history: false,
            threads: match args.threads {
                Some(n) => usize::from(n),
                None => std::thread::available_parallelism().map_or(1, |n| n.get()),
            },
        })
    }
}

fn run(args: RunArgs) -> Result<()> {
    let Some(path) = &args.trace else {
        bail!("no trace: pass --trace FILE (make one with `slotmarket-sim gen mrm --jobs 100 -o FILE`)");
    };
    let config = SimConfig::try_from(&args)?;
    let started = Instant::now();
    let file = File::open(path).with_context(|| format!("opening trace {}", path.display()))?;
    let trace =
        Trace::read(BufReader::new(file)).with_context(|| format!("reading trace {}", path.display()))?;
    let loaded = started.elapsed();
    info!(jobs = trace.len(), tasks = trace.total_tasks(), secs = loaded.as_secs_f64(), "trace loaded");
    let result = sim::run(&trace, &config).context("simulation failed")?;
    let simulated = started.elapsed() - loaded;
    info!(
        steps = result.stats.steps,
        attempts = result.stats.attempts,
        secs = simulated.as_secs_f64(),
        "run done"
    );
    let summary = Summary::new(&trace, &result, &config);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        stdout.write_all(summary.to_json().as_bytes())?;
    } else {
        summary.write_text(&mut stdout)?;
    }
    let mut market_summary =
        config.market.is_some().then(|| MarketSummary::new(&trace, &result.jobs, &result.purchases));
    if let (Some(m), true) = (market_summary.as_mut(), args.compare_fcfs) {
        let fcfs = fcfs_config(&config);
        let fcfs_run = sim::run(&trace, &fcfs).context("the FCFS run for --compare-fcfs failed")?;
        m.compare_with_fcfs(&trace, &result.jobs, &fcfs_run.jobs);
    }
    if let Some(m) = &market_summary {
        if args.json {
            writeln!(stdout, "{}", serde_json::to_string(m).context("market summary as JSON")?)?;
        } else {
            writeln!(stdout)?;
            m.write_text(&mut stdout)?;
        }
    }
    stdout.flush()?;
    if let Some(dir) = &args.out {
        write_outputs(dir, &trace, &result, &config, &summary)?;
        if let Some(m) = &market_summary {
            let json = serde_json::to_string_pretty(m).context("market summary as JSON")?;
            std::fs::write(dir.join("market.json"), json).context("writing market.json")?;
        }
    }
    if args.timing {
        let secs = simulated.as_secs_f64().max(1e-9);
        eprintln!(
            "simulated {} jobs, {} attempts, {} events in {:.2} s (+{:.2} s loading): {:.0} jobs/s, {:.0} events/s; peak RSS {}",
            trace.len(),
            result.stats.attempts,
            result.stats.steps,
            secs,
            loaded.as_secs_f64(),
            trace.len() as f64 / secs,
            result.stats.steps as f64 / secs,
            peak_rss().map_or("unknown".to_string(), |kib| format!("{:.0} MiB", kib as f64 / 1024.0)),
        );
    }
    // The process ends here: its memory goes back at exit in one piece, where freeing
    // half a million jobs' trace entries and results one by one took 0.1-0.2 s.
    std::mem::forget(result);
    std::mem::forget(trace);
    Ok(())
}

/// `config` run first-come first-served: fifo, no admission, nothing bought.
fn fcfs_config(config: &SimConfig) -> SimConfig {
    let core = CoreConfig {
        policy: PolicySettings::Fifo {},
        admission: AdmissionSettings::default(),
        ..config.core.clone()
    };
    SimConfig { core, market: None, ..config.clone() }
}

/// Writes the summary (text and JSON) and both CSVs into `dir`.
fn write_outputs(
    dir: &Path,
    trace: &Trace,
    run: &SimRun,
    config: &SimConfig,
    summary: &Summary,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let create = |name: &str| -> Result<BufWriter<File>> {
        let path = dir.join(name);
        Ok(BufWriter::new(File::create(&path).with_context(|| format!("creating {}", path.display()))?))
    };
    let mut text = create("summary.txt")?;
    summary.write_text(&mut text)?;
    text.flush()?;
    let mut json = create("summary.json")?;
    json.write_all(summary.to_json().as_bytes())?;
    json.flush()?;
    let mut jobs = create("jobs.csv")?;
    write_jobs_csv(trace, run, &mut jobs)?;
    jobs.flush()?;
    let mut slots = create("slots.csv")?;
    write_slots_csv(run, config, &mut slots)?;
    slots.flush().context("writing slots.csv")
}

/// Peak resident set size of this process in KiB (Linux `VmHWM`), if known.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
