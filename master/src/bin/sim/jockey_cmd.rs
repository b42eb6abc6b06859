//! `slotmarket-sim jockey`: Jockey's §5 comparison over seeds — Jockey, without adaptation,
//! without the simulator (Amdahl), max allocation and plain FIFO — printed as a Markdown
//! table per deadline.

use anyhow::{Context, Result, anyhow};
use clap::Args;
use slotmarket_master::config::PolicyTable;
use slotmarket_master::core::{CoreConfig, PolicySettings};
use slotmarket_master::sim::SimConfig;
use std::path::Path;

use slotmarket_master::core::policy::jockey::Indicator;
use slotmarket_master::sim::jockey_experiment::{
    GuaranteeSplit, Outcome, Row, Variant, allocation_plot, completion_plot, indicator_markdown, markdown,
    run_one, split_markdown, trace_of,
};
use slotmarket_master::sim::jockey_gen::JockeyMix;
use slotmarket_master::sim::report::SloSample;

/// Flags of `jockey`.
#[derive(Args, Debug)]
pub(crate) struct JockeyArgs {
    /// Seeds 1..=N (each its own DAG, work factor and background).
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// The first seed run: seeds FIRST..=N (fresh seeds without re-running the earlier
    /// ones, or one seed alone with `--first-seed S --seeds S`).
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Deadlines, each as the slots the profiled work is spread over (plus the critical path).
    #[arg(long, value_delimiter = ',', default_value = "20,40")]
    deadline_slots: Vec<u32>,
    /// Simulated nodes (map slots only).
    #[arg(long, default_value_t = 25)]
    nodes: u32,
    /// Map slots per node.
    #[arg(long, default_value_t = 4)]
    map_slots: u32,
    /// Relative standard deviation of per-attempt noise on task times.
    #[arg(long, default_value_t = 0.2)]
    noise: f64,
    /// Probability that an attempt fails part-way.
    #[arg(long, default_value_t = 0.01)]
    fail_prob: f64,
    /// Mean seconds between best-effort jobs.
    #[arg(long, default_value_t = 15.0)]
    background_interarrival: f64,
    /// Largest work factor of the deadline run.
    #[arg(long, default_value_t = 2.0)]
    max_work_factor: f64,
    /// Move the deadline to FACTOR × the original AFTER seconds in (Fig. 7).
    #[arg(long, value_name = "AFTER:FACTOR", value_parser = parse_move)]
    move_deadline: Option<(f64, f64)>,
    /// A `[policy]` key for every Jockey variant, e.g. `--set slack=1.0 --set interval_s=30`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Also print every run's outcome.
    #[arg(long)]
    runs: bool,
    /// Only these variants (jockey, jockey-norescale, jockey-capped, no-adapt, amdahl, max,
    /// fifo).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Compare the progress indicators instead (Table 10): Jockey once per indicator.
    #[arg(long)]
    indicators: bool,
    /// Write SVG plots here: allocation over time of seed `--plot-seed` per variant
    /// (Fig. 6) and completion relative to the deadline over all seeds (Fig. 5).
    #[arg(long, value_name = "DIR")]
    plots: Option<std::path::PathBuf>,
    /// The seed whose allocation over time is plotted.
    #[arg(long, default_value_t = 1)]
    plot_seed: u64,
    /// Earlier runs of the job in its history before the deadline run (the first sets
    /// the deadline; the profile pools up to the policy's `profile_runs` of them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10))]
    profile_runs: u32,
    /// The earlier runs after the first need a drawn work factor, as the deadline run
    /// does (the cluster's slowdown then); without it they need the profiled work.
    #[arg(long)]
    profile_runs_slowed: bool,
}

fn parse_move(text: &str) -> Result<(f64, f64), String> {
    let (after, factor) = text.split_once(':').ok_or("write AFTER:FACTOR, e.g. 600:0.5")?;
    let number = |t: &str| t.trim().parse::<f64>().map_err(|e| format!("\"{t}\": {e}"));
    Ok((number(after)?, number(factor)?))
}

fn variants(args: &JockeyArgs) -> Result<Vec<Variant>> {
    let jockey = |label: &str, extra: &[&str]| -> Result<Variant> {
        let mut keys: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        keys.extend(args.set.iter().cloned());
        let policy =
            PolicyTable::layered(None, Some("jockey"), &keys).with_context(|| format!("{label}: --set"))?;
        Ok(Variant { label: label.into(), policy })
    };
    if args.indicators {
        return Indicator::ALL
            .iter()
            .map(|i| jockey(i.name(), &[&format!("indicator=\"{}\"", i.name())]))
            .collect();
    }
    let all = vec![
        jockey("jockey", &[])?,
        jockey("jockey-norescale", &["rescale=false"])?,
        jockey("jockey-capped", &["spare=false"])?,
        jockey("no-adapt", &["adapt=false"])?,
        jockey("amdahl", &["predictor=\"amdahl\""])?,
        jockey("max", &["predictor=\"max\""])?,
        Variant { label: "fifo".into(), policy: PolicySettings::Fifo {} },
    ];
    Ok(all.into_iter().filter(|v| args.only.is_empty() || args.only.contains(&v.label)).collect())
}

pub(crate) fn run(args: JockeyArgs) -> Result<()> {
    let variants = variants(&args)?;
    for &deadline_slots in &args.deadline_slots {
        let mut rows: Vec<Row> = variants
            .iter()
            .map(|v| Row { label: v.label.clone(), seeds: Vec::new(), outcomes: Vec::new() })
            .collect();
        // Two workers (the machine's cores), each taking every other seed.
        let results: Vec<Result<Vec<(u64, usize, Outcome)>>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..2u64)
                .map(|w| {
                    let (args, variants) = (&args, &variants);
                    let seeds: Vec<u64> = (args.first_seed..=args.seeds).filter(|s| s % 2 == w).collect();
                    scope.spawn(move || run_seeds(args, variants, deadline_slots, &seeds))
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| Err(anyhow!("a worker panicked"))))
                .collect()
        });
        for result in results {
            for (seed, i, outcome) in result? {
                if args.runs {
                    eprintln!(
                        "{deadline_slots} seed {seed} {}: met {} completion {:.3} above oracle {:+.3} share above {:.3} mean {:.1} oracle {} peak {} spare {:.3}",
                        rows[i].label,
                        outcome.met,
                        outcome.completion_vs_deadline,
                        outcome.above_oracle,
                        outcome.share_above_oracle,
                        outcome.mean_guarantee,
                        outcome.oracle,
                        outcome.peak,
                        outcome.spare_share
                    );
                    if !outcome.met {
                        print_miss(deadline_slots, seed, &rows[i].label, &outcome);
                    }
                }
                rows[i].seeds.push(seed);
                rows[i].outcomes.push(outcome);
            }
        }
        println!("deadline: profiled work over {deadline_slots} slots, plus 1.5 × the critical path\n");
        if args.indicators {
            println!("{}", indicator_markdown(&rows));
        } else {
            println!("{}", markdown(&rows));
            if let Some(feasible) = feasible_rows(&rows) {
                println!("the runs max allocation meets (a deadline no allocation can meet is left out):\n");
                println!("{}", markdown(&feasible));
                if args.runs {
                    println!(
                        "where the guaranteed slot time went, over the oracle's (the runs max allocation meets):\n"
                    );
                    println!("{}", split_markdown(&feasible));
                }
            }
        }
        if let Some(dir) = &args.plots {
            write_plots(dir, deadline_slots, args.plot_seed, &rows)?;
        }
    }
    Ok(())
}

/// A missed run: when it fell behind and what it ran then, and how long its tail was.
fn print_miss(deadline_slots: u32, seed: u64, label: &str, outcome: &Outcome) {
    let behind = outcome.fell_behind().map_or_else(
        || "predicted on time to its last step".to_string(),
        |s| {
            format!(
                "predicted late from {:.0} s of {:.0} on (progress {:.3}, guarantee {}, running {}, ready {})",
                s.at_ms as f64 / 1000.0,
                outcome.deadline_s,
                s.progress,
                s.guarantee,
                s.running,
                s.ready
            )
        },
    );
    let GuaranteeSplit { used, idle, rest } = outcome.split;
    eprintln!(
        "{deadline_slots} seed {seed} {label}: missed at {:.3}: {behind}; last {:.0} s at most 2 tasks, none ready; split used {used:.2} idle {idle:.2} rest {rest:.2}",
        outcome.completion_vs_deadline,
        outcome.tail_s(2),
    );
}

/// Every row cut down to the seeds the `max` variant met, when there is a `max` row: a
/// run that the whole cluster cannot finish in time says nothing about a policy.
fn feasible_rows(rows: &[Row]) -> Option<Vec<Row>> {
    let max = rows.iter().find(|r| r.label == "max")?;
    let met: Vec<u64> = max.seeds.iter().zip(&max.outcomes).filter(|(_, o)| o.met).map(|(&s, _)| s).collect();
    let keep = |row: &Row| {
        let (seeds, outcomes) = row
            .seeds
            .iter()
            .zip(&row.outcomes)
            .filter(|(s, _)| met.contains(s))
            .map(|(&s, o)| (s, o.clone()))
            .unzip();
        Row { label: row.label.clone(), seeds, outcomes }
    };
    Some(rows.iter().map(keep).collect())
}

/// Fig. 6 (allocation over time of one seed, one plot per variant) and Fig. 5
/// (completion relative to the deadline, as a CDF over seeds per variant).
fn write_plots(dir: &Path, deadline_slots: u32, seed: u64, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for row in rows {
        let Some(outcome) = row.seeds.iter().position(|&s| s == seed).map(|i| &row.outcomes[i]) else {
            continue;
        };
        let svg =
            allocation_plot(&format!("{}, seed {seed}, deadline N = {deadline_slots}", row.label), outcome);
        let path = dir.join(format!("allocation-{}-n{deadline_slots}-seed{seed}.svg", row.label));
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        let path = path.with_extension("csv");
        std::fs::write(&path, timeline_csv(outcome))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let svg = completion_plot(&format!("Completion / deadline (CDF over seeds), N = {deadline_slots}"), rows);
    let path = dir.join(format!("completion-n{deadline_slots}.svg"));
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))
}

/// Every variant on each of `seeds`: (variant index, outcome) pairs.
fn run_seeds(
    args: &JockeyArgs,
    variants: &[Variant],
    deadline_slots: u32,
    seeds: &[u64],
) -> Result<Vec<(u64, usize, Outcome)>> {
    let mut out = Vec::new();
    for &seed in seeds {
        let mix = JockeyMix {
            seed,
            slots: args.nodes * args.map_slots,
            deadline_slots,
            max_work_factor: args.max_work_factor,
            background_interarrival_s: args.background_interarrival,
            deadline_move: args.move_deadline,
            profile_runs: args.profile_runs,
            profile_runs_slowed: args.profile_runs_slowed,
        };
        let trace = trace_of(&mix).with_context(|| format!("seed {seed}: the trace"))?;
        let cluster = SimConfig {
            core: CoreConfig::default(),
            nodes: args.nodes,
            map_slots: args.map_slots,
            reduce_slots: 0,
            seed,
            noise: args.noise,
            fail_prob: args.fail_prob,
            ..SimConfig::default()
        };
        for (i, variant) in variants.iter().enumerate() {
            let outcome = run_one(&trace, &cluster, variant)
                .with_context(|| format!("seed {seed}, {}", variant.label))?;
            out.push((seed, i, outcome));
        }
    }
    Ok(out)
}

/// The controller's state at every tick of one run, as CSV (the data behind Fig. 6).
fn timeline_csv(outcome: &Outcome) -> String {
    let mut csv =
        String::from("t_s,guarantee,running,progress,predicted_finish_s,deadline_s,raw,slowdown,ready\n");
    for s in &outcome.timeline {
        let finish = s.predicted_finish_ms.map_or_else(String::new, |f| format!("{:.0}", f as f64 / 1000.0));
        csv.push_str(&format!(
            "{:.0},{},{},{:.4},{finish},{:.0},{},{:.3},{}\n",
            s.at_ms as f64 / 1000.0,
            s.guarantee,
            s.running,
            s.progress,
            outcome.deadline_s,
            s.raw,
            s.slowdown,
            s.ready
        ));
    }
    csv
}

/// Flags of `plot-allocation`.
#[derive(Args, Debug)]
pub(crate) struct PlotAllocationArgs {
    /// A timeline CSV with the columns t_s, guarantee, running and deadline_s (as
    /// `jockey --plots` and scripts/jockey-live.sh write them).
    csv: std::path::PathBuf,
    /// The plot's title.
    #[arg(long, default_value = "Allocation over time")]
    title: String,
    /// Where to write the SVG.
    #[arg(short, long)]
    out: std::path::PathBuf,
}

/// Draws Fig. 6 from a timeline CSV: a live run's or a simulated one's.
pub(crate) fn plot_allocation(args: PlotAllocationArgs) -> Result<()> {
    let text =
        std::fs::read_to_string(&args.csv).with_context(|| format!("reading {}", args.csv.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| anyhow!("{}: no column {name}", args.csv.display()))
    };
    let (t, guarantee, running, deadline) =
        (column("t_s")?, column("guarantee")?, column("running")?, column("deadline_s")?);
    let mut outcome = Outcome {
        met: true,
        completion_vs_deadline: 0.0,
        above_oracle: 0.0,
        share_above_oracle: 0.0,
        peak: 0,
        mean_guarantee: 0.0,
        oracle: 0.0,
        deadline_s: 0.0,
        timeline: Vec::new(),
        spare_share: 0.0,
        target_above_oracle: 0.0,
        split: GuaranteeSplit::default(),
    };
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let cells: Vec<&str> = line.split(',').collect();
        let number = |i: usize| -> Result<f64> {
            let cell = cells.get(i).copied().unwrap_or_default().trim();
            cell.parse::<f64>()
                .with_context(|| format!("{} line {}: {cell:?} is not a number", args.csv.display(), n + 2))
        };
        outcome.deadline_s = number(deadline)?;
        outcome.timeline.push(SloSample {
            at_ms: (number(t)? * 1000.0).max(0.0) as u64,
            guarantee: number(guarantee)?.max(0.0) as u32,
            running: number(running)?.max(0.0) as u32,
            progress: 0.0,
            predicted_finish_ms: None,
            raw: 0,
            slowdown: 1.0,
            ready: 0,
        });
    }
    std::fs::write(&args.out, allocation_plot(&args.title, &outcome))
        .with_context(|| format!("writing {}", args.out.display()))
}
