//! `slotmarket-sim gen KIND`: writes a seeded trace from one of the papers' workloads.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use slotmarket_master::sim::generate::{Dp, Dress, Mrm};
use slotmarket_master::sim::jockey_gen::JockeyMix;
use slotmarket_master::sim::workload::{TraceError, TraceJob, write_job};

/// Which workload to generate.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Kind {
    /// MRM Table 1: nine bins of map/reduce task counts, Poisson arrivals.
    Mrm,
    /// DRESS-style congested mix with a share of small-demand jobs.
    Dress,
    /// DP-style users each submitting a continuous stream of cluster-filling jobs.
    Dp,
    /// Jockey §5: a DAG job profiled alone, then run under a deadline amid best-effort work.
    Jockey,
}

/// Flags of `gen`. Defaults in brackets are per kind (mrm / dress / dp).
#[derive(Args, Debug)]
pub(crate) struct GenArgs {
    /// The workload.
    kind: Kind,
    /// Jobs to generate (over all users for dp); jockey generates one deadline run and as
    /// much background work as its deadline spans, and ignores it.
    #[arg(long, default_value_t = 100)]
    jobs: u64,
    /// Mean time between arrivals in seconds (Poisson for mrm, fixed for dress; for dp the
    /// pause between a user's jobs) [50 / 5 / 0].
    #[arg(long)]
    interarrival: Option<f64>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write the trace; `-` for standard output.
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// Base map task length in seconds [20 / 30 / 60].
    #[arg(long)]
    map_s: Option<f64>,
    /// Base reduce task length in seconds [30 / 20 / 30].
    #[arg(long)]
    reduce_s: Option<f64>,
    /// Coefficient of variation of task lengths within a stage [0.2 / 0.2 / 0.1].
    #[arg(long)]
    cv: Option<f64>,
    /// mrm: share of delay-sensitive jobs, the rest delay-tolerant; negative for no classes.
    #[arg(long, default_value_t = 0.5)]
    sensitive_share: f64,
    /// mrm: deadline = arrival + FACTOR × the job's length alone on the cluster (2 × FACTOR
    /// for delay-tolerant jobs); 0 for no deadlines.
    #[arg(long, default_value_t = 2.0)]
    deadline_factor: f64,
    /// mrm: map slots of the cluster the deadlines assume (40 nodes × 2).
    #[arg(long, default_value_t = 80)]
    cluster_map_slots: u32,
    /// mrm: reduce slots of the cluster the deadlines assume.
    #[arg(long, default_value_t = 80)]
    cluster_reduce_slots: u32,
    /// mrm, dp: number of users (default 10).
    #[arg(long, default_value_t = 10)]
    users: u32,
    /// mrm: distinct programs (job names `prog0`..), each with its own task length, so
    /// runs share a history (for `slotmarket-sim estimate --eval`); 0: a name per job.
    #[arg(long, default_value_t = 0)]
    programs: u32,
    /// dress: share of small-demand jobs.
    #[arg(long, default_value_t = 0.3)]
    small_share: f64,
    /// dress: containers in the cluster that demands are sized against.
    #[arg(long, default_value_t = 40)]
    containers: u32,
    /// dp: map tasks per job (DP sizes jobs to fill the cluster).
    #[arg(long, default_value_t = 80)]
    maps: u32,
    /// dp: reduce tasks per job.
    #[arg(long, default_value_t = 1)]
    reduces: u32,
    /// jockey: the deadline gives the job its profiled work over this many slots, plus its
    /// critical path (× 1.5).
    #[arg(long, default_value_t = 25)]
    deadline_slots: u32,
    /// jockey: largest factor of the profiled work the deadline run needs (drawn in [0.7, this]).
    #[arg(long, default_value_t = 2.0)]
    max_work_factor: f64,
    /// jockey: move the deadline to FACTOR × the original, AFTER seconds into the run.
    #[arg(long, value_name = "AFTER:FACTOR", value_parser = parse_move)]
    move_deadline: Option<(f64, f64)>,
}

/// Parses `AFTER:FACTOR` of `--move-deadline`.
fn parse_move(text: &str) -> Result<(f64, f64), String> {
    let (after, factor) = text.split_once(':').ok_or("write AFTER:FACTOR, e.g. 600:0.5")?;
    let number = |t: &str| t.trim().parse::<f64>().map_err(|e| format!("\"{t}\": {e}"));
    Ok((number(after)?, number(factor)?))
}

pub(crate) fn run(args: GenArgs) -> Result<()> {
    let stdout = args.output.as_os_str() == "-";
    let sink: Box<dyn Write> = if stdout {
        Box::new(std::io::stdout().lock())
    } else {
        let file =
            File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
        Box::new(file)
    };
    let mut out = BufWriter::new(sink);
    let emit = |job: TraceJob| write_job(&mut out, &job);
    generate(&args, emit).with_context(|| format!("writing {}", args.output.display()))?;
    out.flush().with_context(|| format!("writing {}", args.output.display()))
}

fn generate(args: &GenArgs, emit: impl FnMut(TraceJob) -> Result<(), TraceError>) -> Result<(), TraceError> {
    match args.kind {
        Kind::Mrm => mrm(args).generate(emit),
        Kind::Dress => dress(args).generate(emit),
        Kind::Dp => dp(args).generate(emit),
        Kind::Jockey => jockey(args).generate(emit),
    }
}

fn jockey(args: &GenArgs) -> JockeyMix {
    JockeyMix {
        seed: args.seed,
        deadline_slots: args.deadline_slots,
        max_work_factor: args.max_work_factor,
        background_interarrival_s: args
            .interarrival
            .unwrap_or(JockeyMix::default().background_interarrival_s),
        deadline_move: args.move_deadline,
        ..JockeyMix::default()
    }
}

fn mrm(args: &GenArgs) -> Mrm {
    let d = Mrm::default();
    Mrm {
        jobs: args.jobs,
        interarrival_s: args.interarrival.unwrap_or(d.interarrival_s),
        map_s: args.map_s.unwrap_or(d.map_s),
        reduce_s: args.reduce_s.unwrap_or(d.reduce_s),
        cv: args.cv.unwrap_or(d.cv),
        sensitive_share: (args.sensitive_share >= 0.0).then_some(args.sensitive_share),
        deadline_factor: (args.deadline_factor > 0.0).then_some(args.deadline_factor),
        map_slots: args.cluster_map_slots,
        reduce_slots: args.cluster_reduce_slots,
        users: args.users,
        seed: args.seed,
        programs: args.programs,
    }
}

fn dress(args: &GenArgs) -> Dress {
    let d = Dress::default();
    Dress {
        jobs: args.jobs,
        interarrival_s: args.interarrival.unwrap_or(d.interarrival_s),
        small_share: args.small_share,
        containers: args.containers,
        map_s: args.map_s.unwrap_or(d.map_s),
        reduce_s: args.reduce_s.unwrap_or(d.reduce_s),
        cv: args.cv.unwrap_or(d.cv),
        seed: args.seed,
        ..d
    }
}

fn dp(args: &GenArgs) -> Dp {
    let d = Dp::default();
    Dp {
        jobs: args.jobs,
        users: args.users,
        maps: args.maps,
        reduces: args.reduces,
        map_s: args.map_s.unwrap_or(d.map_s),
        reduce_s: args.reduce_s.unwrap_or(d.reduce_s),
        cv: args.cv.unwrap_or(d.cv),
        think_s: args.interarrival.unwrap_or(d.think_s),
        seed: args.seed,
    }
}
