//! `slotmarket workload run WORKLOAD.toml`: submits a generated trace of real MapReduce
//! jobs to a live cluster at Poisson arrival times (MRM Table 1 size bins scaled to the
//! cluster, a delay-sensitive/tolerant split), follows them to the end and writes the
//! per-job CSV and the summary the simulator prints (`slotmarket_common::metrics`: one
//! implementation for both tools), so live and simulated runs compare line by line.
//!
//! - `file` — the WORKLOAD.toml format;
//! - `rng` — the keyed streams the plan is drawn from (the shared SplitMix64);
//! - `plan` — WORKLOAD.toml → (arrival, job spec) per job;
//! - `run` — submitting on schedule and following the jobs;
//! - `calibration` — the file's per-task estimates against the task times a run measured;
//! - `buyer` — the MRM §6.3 buyer model a run with `--alpha` buys deadlines by;
//! - `market` — that run's purchases, predicted and actual finishes;
//! - `report` — the master's listings → the shared per-job records, the plan and usage
//!   CSVs, the lines above the summary table and the JSON document.

mod buyer;
mod calibration;
mod file;
mod market;
mod plan;
mod report;
mod rng;
mod run;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use slotmarket_common::client::Client;
use slotmarket_common::metrics::{self, RunFacts, round};
use slotmarket_common::time::Timestamp;

use self::file::WorkloadFile;
use self::plan::Plan;
use self::report::{RunDocument, RunInfo};
use self::run::{Ending, Outcome};
use crate::connection::{self, ConnectionArgs};
use crate::output;

/// Exit code for a workload file that does not parse or plan, like clap's for bad arguments.
const EXIT_INVALID_WORKLOAD: u8 = 2;
/// Exit code after Ctrl-C, as shells report a SIGINT death.
const EXIT_INTERRUPTED: u8 = 130;

/// The `workload` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum WorkloadCommand {
    /// Submit a generated trace of jobs at their arrival times, wait for them and write
    /// per-job CSV and a summary.
    Run(RunArgs),
}

/// Arguments of `workload run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The workload (TOML; see configs/workloads/).
    #[arg(value_name = "WORKLOAD.toml")]
    pub(crate) workload: PathBuf,
    /// Directory for plan.csv, jobs.csv, usage.csv, summary.txt and summary.json
    /// [default: workload-runs/NAME-seedS].
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Seed of the plan, instead of the file's.
    #[arg(long, value_name = "S")]
    pub(crate) seed: Option<u64>,
    /// Give up after this many seconds, cancelling the jobs still running.
    #[arg(long, default_value_t = 900, value_name = "SECS")]
    pub(crate) timeout: u64,
    /// Write the plan (plan.csv) and print it, without connecting.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Buy each job's deadline (a master with `[admission] mode = "mrm"`): quote it, then
    /// a delay-sensitive job buys the earliest deadline costing at most ALPHA times its
    /// processing time and the others pay their processing time (the cheapest deadline).
    /// Adds mrm.csv, predictions.csv and mrm.txt.
    #[arg(long, value_name = "ALPHA")]
    pub(crate) alpha: Option<f64>,
}

/// Runs a `workload` subcommand.
pub(crate) async fn run(conn: &ConnectionArgs, command: WorkloadCommand, json: bool) -> Result<ExitCode> {
    match command {
        WorkloadCommand::Run(args) => run_workload(conn, args, json).await,
    }
}

/// `workload run`: plan, submit, follow, report.
async fn run_workload(conn: &ConnectionArgs, args: RunArgs, json: bool) -> Result<ExitCode> {
    let (file, plan) = match load(&args)? {
        Ok(loaded) => loaded,
        Err(problem) => {
            // The problem names the field; add which file.
            eprintln!("error: {}: {problem}", args.workload.display());
            return Ok(ExitCode::from(EXIT_INVALID_WORKLOAD));
        }
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("workload-runs/{}-seed{}", plan.name, plan.seed)));
    std::fs::create_dir_all(&out).with_context(|| format!("creating output directory {}", out.display()))?;
    write(&out, "plan.csv", report::plan_csv(&plan))?;
    if args.dry_run {
        print_plan(&plan, &out, json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let client = connection::connect_from_args(conn).await?;
    announce_cluster(&client, &plan).await;
    let started = Instant::now();
    let buyer = args.alpha.map(|alpha| run::Buyer { alpha, estimates: file.estimate });
    let outcome = run::execute(&client, &plan, Duration::from_secs(args.timeout), buyer).await;
    if let Ok(outcome) = &outcome {
        eprint!("{}", estimate_warning(&client, &file, &plan, outcome).await);
    }
    connection::close(client).await;
    let outcome = outcome?;
    let document = finish(&file, &plan, &outcome, started.elapsed(), &out)?;
    let market = args.alpha.map(|alpha| finish_market(&plan, &outcome, alpha, &out)).transpose()?;
    if json {
        output::print_json(&document)?;
    } else {
        print!("{}{}", report::render_head(&document.run), document.summary);
        if let Some(market) = &market {
            print!("\n{market}");
        }
        let extra = if market.is_some() { " mrm.csv predictions.csv mrm.txt" } else { "" };
        println!("\nfiles in {}: plan.csv jobs.csv usage.csv summary.txt summary.json{extra}", out.display());
    }
    Ok(match outcome.ending {
        Ending::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        _ if document.summary.all.completed == plan.jobs.len() as u64 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// Reads the file (an I/O error is the outer error) and plans it (a problem with the
/// file is the inner one, for exit code 2).
fn load(args: &RunArgs) -> Result<Result<(WorkloadFile, Plan), String>> {
    let path = &args.workload;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading workload file {}", path.display()))?;
    Ok(WorkloadFile::parse(&text).and_then(|file| {
        let seed = args.seed.unwrap_or(file.seed);
        plan::generate(&file, seed).map(|plan| (file, plan))
    }))
}

/// Says what the cluster offers before the first submit, and warns if it has no agent.
async fn announce_cluster(client: &Client, plan: &Plan) {
    let tasks: u64 = plan.jobs.iter().map(|j| j.spec.total_tasks()).sum();
    let span = plan.jobs.last().map_or(0.0, |j| j.arrival_s);
    match run::list_nodes(client).await {
        Ok(nodes) => {
            let slots = run::Slots::of(&nodes);
            if slots.map_slots == 0 {
                eprintln!("warning: no agent is connected; jobs will wait until one registers");
            }
            eprintln!(
                "cluster: {} map and {} reduce slots; submitting {} jobs ({tasks} tasks) over {span:.0}s",
                slots.map_slots,
                slots.reduce_slots,
                plan.jobs.len()
            );
        }
        Err(err) => {
            eprintln!("warning: cannot list nodes ({err:#}); slot totals come from the workload file")
        }
    }
}

/// Measures the run times of the completed jobs' tasks and answers the warning to print
/// when the file's `[estimate]` is off from them (empty when it is not; see
/// [`calibration`]). A listing the master refuses only skips the check.
async fn estimate_warning(client: &Client, file: &WorkloadFile, plan: &Plan, outcome: &Outcome) -> String {
    let mut measured = calibration::TaskTimes::default();
    let completed = outcome.jobs.iter().filter(|job| {
        job.last.as_ref().is_some_and(|s| s.state == slotmarket_common::protocol::JobState::Completed)
    });
    for job in completed {
        let Some(planned) = plan.jobs.iter().find(|planned| planned.index == job.index) else { continue };
        match connection::bounded(client.tasks(job.id)).await {
            Ok(list) => measured.add(planned, &list.tasks),
            Err(err) => {
                return format!(
                    "warning: cannot list the tasks of {} ({err:#}); estimates not checked\n",
                    job.id
                );
            }
        }
    }
    calibration::warning(&calibration::deviations(&file.estimate, &measured))
}

/// Builds the records, summary and run facts, and writes every output file.
fn finish(
    file: &WorkloadFile,
    plan: &Plan,
    outcome: &Outcome,
    elapsed: Duration,
    out: &Path,
) -> Result<RunDocument> {
    let (records, origin) = report::records(plan, outcome);
    let (slots, slots_source) = report::slots(&outcome.usage, file.cluster);
    let facts = RunFacts { slots: Some(slots), stopped_s: report::stopped_s(&outcome.usage, origin) };
    let summary = metrics::summarise(&records, facts);
    let (map_utilisation, reduce_utilisation) = match (origin, summary.all.makespan_s) {
        (Some(origin), Some(span)) => {
            let end = Timestamp(origin.as_millis() + (span * 1000.0).round() as u64);
            report::node_utilisation(&outcome.usage, origin, end)
        }
        _ => (None, None),
    };
    let run = RunInfo {
        workload: plan.name.clone(),
        seed: plan.seed,
        planned: plan.jobs.len(),
        submitted: outcome.jobs.len(),
        ending: report::ending_name(outcome.ending),
        elapsed_s: round(elapsed.as_secs_f64(), 3),
        slots: Some(slots),
        slots_source,
        utilisation_source: report::UTILISATION_SOURCE,
        map_utilisation,
        reduce_utilisation,
        price: report::PRICE_NOTE,
    };
    let document = RunDocument { summary, run };
    let mut jobs_csv = Vec::new();
    metrics::write_jobs_csv(&records, &mut jobs_csv).context("formatting jobs.csv")?;
    write(out, "jobs.csv", jobs_csv)?;
    write(out, "usage.csv", report::usage_csv(&outcome.usage, origin))?;
    let text = format!("{}{}", report::render_head(&document.run), document.summary);
    write(out, "summary.txt", text)?;
    let json = serde_json::to_string_pretty(&document).context("encoding the summary")?;
    write(out, "summary.json", format!("{json}\n"))?;
    Ok(document)
}

/// Writes a buying run's files; answers the summary (`mrm.txt`).
fn finish_market(plan: &Plan, outcome: &Outcome, alpha: f64, out: &Path) -> Result<String> {
    let jobs = market::bought_jobs(plan, outcome);
    write(out, "mrm.csv", market::mrm_csv(&jobs))?;
    write(out, "predictions.csv", market::predictions_csv(plan, outcome))?;
    let text = market::summary(&jobs, alpha, outcome.refused.len());
    write(out, "mrm.txt", &text)?;
    Ok(text)
}

/// Prints the plan of a dry run: per bin and class counts, or the rows as JSON.
fn print_plan(plan: &Plan, out: &Path, json: bool) -> Result<()> {
    let tasks: u64 = plan.jobs.iter().map(|j| j.spec.total_tasks()).sum();
    let span = plan.jobs.last().map_or(0.0, |j| j.arrival_s);
    if json {
        let rows: Vec<serde_json::Value> = plan
            .jobs
            .iter()
            .map(|j| {
                serde_json::json!({
                    "index": j.index, "name": j.spec.name, "program": j.program, "bin": j.bin,
                    "class": j.class.map(|c| c.name()), "arrival_s": round(j.arrival_s, 3),
                    "maps": j.maps, "reduces": j.reduces, "tasks": j.spec.total_tasks(),
                    "input_bytes": j.input_bytes, "estimate_s": round(j.estimate_s, 3),
                    "deadline_after_s": j.deadline_after_s.map(|d| round(d, 3)),
                })
            })
            .collect();
        return output::print_json(
            &serde_json::json!({ "workload": plan.name, "seed": plan.seed, "jobs": rows }),
        );
    }
    let mut bins = std::collections::BTreeMap::<usize, (usize, u64)>::new();
    for job in &plan.jobs {
        let entry = bins.entry(job.bin).or_default();
        entry.0 += 1;
        entry.1 += job.spec.total_tasks();
    }
    let mut table = output::Table::new(&[
        ("bin", output::Align::Right),
        ("jobs", output::Align::Right),
        ("tasks", output::Align::Right),
    ]);
    for (bin, (jobs, tasks)) in bins {
        table.row(vec![bin.to_string(), jobs.to_string(), tasks.to_string()]);
    }
    println!(
        "workload {} (seed {}): {} jobs, {tasks} tasks, arrivals over {span:.1}s; plan in {}",
        plan.name,
        plan.seed,
        plan.jobs.len(),
        out.join("plan.csv").display()
    );
    print!("{}", table.render());
    Ok(())
}

/// Writes `text` to `dir/name`.
fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use slotmarket_common::ids::JobId;
    use slotmarket_common::protocol::{JobState, JobsPage, Request, Response};

    use super::*;
    use crate::fake_master::{FakeMaster, status};

    #[test]
    fn the_example_workloads_parse_and_plan() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/workloads");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let file = WorkloadFile::parse(&std::fs::read_to_string(&path).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(plan::generate(&file, file.seed).is_ok(), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen >= 1, "no workload in {}", dir.display());
    }

    #[test]
    fn workload_run_takes_its_flags_and_the_global_ones() {
        use clap::Parser;
        let argv = [
            "slotmarket",
            "workload",
            "run",
            "w.toml",
            "--seed",
            "4",
            "--out",
            "o",
            "--master",
            "h:1",
            "--json",
        ];
        let cli = crate::Cli::try_parse_from(argv).unwrap();
        assert!(cli.json);
        assert_eq!(cli.connection.master.as_deref(), Some("h:1"));
        let crate::Command::Workload(WorkloadCommand::Run(args)) = cli.command else {
            panic!("not workload run")
        };
        assert_eq!(
            (args.workload, args.out, args.seed),
            (PathBuf::from("w.toml"), Some(PathBuf::from("o")), Some(4))
        );
        assert_eq!((args.timeout, args.dry_run), (900, false));
    }

    #[tokio::test]
    async fn a_dry_run_writes_the_plan_without_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let workload = dir.path().join("w.toml");
        std::fs::write(&workload, file::tests::SMALL).unwrap();
        let out = dir.path().join("out");
        let args = RunArgs {
            workload,
            out: Some(out.clone()),
            seed: Some(3),
            timeout: 1,
            dry_run: true,
            alpha: None,
        };
        // Nothing listens there: a connection attempt would fail the test.
        let conn = ConnectionArgs { master: Some("127.0.0.1:1".into()), ..ConnectionArgs::default() };
        let code = run_workload(&conn, args, true).await.unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        let plan = std::fs::read_to_string(out.join("plan.csv")).unwrap();
        assert_eq!(plan.lines().count(), 9);
    }

    #[tokio::test]
    async fn a_run_writes_the_csv_and_the_summary() {
        let next = Arc::new(AtomicU64::new(1));
        let fake = FakeMaster::start(move |request| match request {
            Request::Submit { .. } => {
                vec![Response::Submitted { job: JobId(next.fetch_add(1, Ordering::SeqCst)) }]
            }
            // Every job the fake has handed out is listed as completed.
            Request::Jobs(_) => {
                let count = next.load(Ordering::SeqCst);
                let jobs = (1..count).map(|j| status(JobId(j), "x", JobState::Completed).summary).collect();
                vec![Response::Jobs(JobsPage { jobs, next: None })]
            }
            Request::Nodes => vec![Response::Nodes(vec![])],
            _ => vec![],
        });
        let dir = tempfile::tempdir().unwrap();
        let workload = dir.path().join("w.toml");
        let text = file::tests::SMALL
            .replace("jobs = 8", "jobs = 3")
            .replace("interarrival_s = 2.0", "interarrival_s = 0.01");
        std::fs::write(&workload, text).unwrap();
        let out = dir.path().join("out");
        let args = RunArgs {
            workload,
            out: Some(out.clone()),
            seed: None,
            timeout: 20,
            dry_run: false,
            alpha: None,
        };
        let conn = fake.conn_args("alice");
        assert_eq!(run_workload(&conn, args, true).await.unwrap(), ExitCode::SUCCESS);
        let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
        assert_eq!(csv.lines().next(), Some(metrics::JOB_COLUMNS));
        assert_eq!(csv.lines().count(), 4);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!((doc["jobs"].as_u64(), doc["completed"].as_u64()), (Some(3), Some(3)));
        assert!(doc["classes"].is_object() && doc["violation_rate"].is_number(), "{doc}");
        // No agent listed: utilisation is relative to the file's 9 slots.
        assert_eq!(
            (doc["run"]["ending"].as_str(), doc["run"]["slots"].as_u64()),
            (Some("all-ended"), Some(9))
        );
        assert!(out.join("plan.csv").is_file() && out.join("usage.csv").is_file());
        // The table ends summary.txt, after the run's own lines and a blank line, and is
        // what the shared code prints for the records read back from jobs.csv: the lines
        // the simulator prints for a run with these jobs.
        let text = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        let read = metrics::read_jobs_csv(&csv).unwrap();
        let again = metrics::summarise(&read, RunFacts { slots: Some(9), stopped_s: None });
        assert_eq!(text.split_once("\n\n").map(|(_, table)| table), Some(again.to_string().as_str()));
        assert!(again.to_string().starts_with("metric "), "{again}");
    }

    #[tokio::test]
    async fn jobs_the_timeout_cancelled_count_as_unfinished_never_as_failed_or_met() {
        // A real master answers a cancelled job's later listings as `cancelled`.
        let cancelled = Arc::new(AtomicU64::new(0));
        let seen = cancelled.clone();
        let fake = FakeMaster::start(move |request| match request {
            Request::Submit { .. } => vec![Response::Submitted { job: JobId(9) }],
            Request::Jobs(_) => {
                let state =
                    if seen.load(Ordering::SeqCst) > 0 { JobState::Cancelled } else { JobState::Running };
                let mut summary = status(JobId(9), "x", state).summary;
                summary.finished = (state == JobState::Cancelled).then_some(Timestamp(2_000));
                vec![Response::Jobs(JobsPage { jobs: vec![summary], next: None })]
            }
            Request::Nodes => vec![Response::Nodes(vec![])],
            Request::Cancel { job } => {
                seen.fetch_add(1, Ordering::SeqCst);
                vec![Response::Cancelled { job, state: JobState::Cancelled }]
            }
            _ => vec![],
        });
        let dir = tempfile::tempdir().unwrap();
        let workload = dir.path().join("w.toml");
        // One delay-sensitive job with a deadline, which it cannot meet unfinished.
        let text = file::tests::SMALL
            .replace("jobs = 8", "jobs = 1")
            .replace("share = 0.5\n        deadline_factor", "share = 1.0\n        deadline_factor")
            .replace(
                "[class.delay-tolerant]\n        share = 0.5",
                "[class.delay-tolerant]\n        share = 0.0",
            );
        std::fs::write(&workload, text).unwrap();
        let out = dir.path().join("out");
        let args =
            RunArgs { workload, out: Some(out.clone()), seed: None, timeout: 1, dry_run: false, alpha: None };
        let code = run_workload(&fake.conn_args("alice"), args, true).await.unwrap();
        assert_eq!(code, ExitCode::FAILURE);
        assert_eq!(cancelled.load(Ordering::SeqCst), 1);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(doc["run"]["ending"].as_str(), Some("timed-out"), "{doc}");
        let counts = (doc["completed"].as_u64(), doc["failed"].as_u64(), doc["unfinished"].as_u64());
        assert_eq!(counts, (Some(0), Some(0), Some(1)), "{doc}");
        let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
        let read = metrics::read_jobs_csv(&csv).unwrap();
        assert_eq!(read[0].outcome, metrics::Outcome::Unfinished);
        assert_eq!((read[0].finish_s, read[0].met()), (None, Some(false)), "{csv}");
    }

    #[tokio::test]
    async fn a_run_whose_task_times_miss_the_estimates_says_to_calibrate() {
        use slotmarket_common::protocol::{TaskList, TaskRow};
        // Every task of every job took 3 s; the file says 1 s (2 s for sort maps).
        let took = |stage: &str, index: u32| TaskRow {
            stage: stage.into(),
            index,
            attempts: 1,
            container: None,
            node: None,
            state: "completed".into(),
            started: Some(Timestamp(10_000)),
            finished: Some(Timestamp(13_000)),
            exit_code: Some(0),
            message: None,
        };
        let fake = FakeMaster::start(move |request| match request {
            Request::Tasks { .. } => {
                let tasks =
                    ["gen", "map", "reduce"].into_iter().flat_map(|s| (0..3).map(move |i| took(s, i)));
                vec![Response::Tasks(TaskList { tasks: tasks.collect(), truncated: false })]
            }
            _ => vec![],
        });
        let file = WorkloadFile::parse(file::tests::SMALL).unwrap();
        let plan = plan::generate(&file, 2).unwrap();
        let jobs = plan
            .jobs
            .iter()
            .map(|planned| {
                let mut job = run::Followed::new(planned.index, JobId(u64::from(planned.index) + 1));
                job.last = Some(status(job.id, "x", JobState::Completed).summary);
                job
            })
            .collect();
        let outcome = Outcome { jobs, usage: vec![], ending: Ending::AllEnded, refused: vec![] };
        let client = fake.options("alice").connect().await.unwrap();
        let text = estimate_warning(&client, &file, &plan, &outcome).await;
        assert!(text.starts_with("warning: the workload's [estimate] per-task times are off"), "{text}");
        assert!(text.contains("map_s: estimate 1.00s, measured 3.00s (+200%"), "{text}");
        assert!(text.contains("run the calibration first"), "{text}");
        // Estimates that match what was measured say nothing.
        let exact = file::tests::SMALL.replace(
            "sort = { gen_s = 0.5, map_s = 2.0, reduce_s = 1.0 }",
            &["wordcount", "grep", "sort", "pi"]
                .map(|p| format!("{p} = {{ gen_s = 3.0, map_s = 3.0, reduce_s = 3.0 }}"))
                .join("\n"),
        );
        let exact = WorkloadFile::parse(&exact).unwrap();
        assert_eq!(estimate_warning(&client, &exact, &plan, &outcome).await, "");
    }

    #[tokio::test]
    async fn an_invalid_workload_exits_two() {
        let dir = tempfile::tempdir().unwrap();
        let workload = dir.path().join("w.toml");
        std::fs::write(&workload, file::tests::SMALL.replace("jobs = 8", "jobs = 0")).unwrap();
        let args = RunArgs {
            workload,
            out: Some(dir.path().join("out")),
            seed: None,
            timeout: 1,
            dry_run: false,
            alpha: None,
        };
        let code = run_workload(&ConnectionArgs::default(), args, false).await.unwrap();
        assert_eq!(code, ExitCode::from(EXIT_INVALID_WORKLOAD));
    }
}
