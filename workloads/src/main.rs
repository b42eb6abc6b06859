//! `slotmarket-task`: the MapReduce task programs Slotmarket's built-in jobs run (see the
//! library for what each does). Errors go to stderr with context and exit 1; bad
//! arguments exit 2 (clap). A one-line summary of the work done goes to stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, CommandFactory, Parser, Subcommand, error::ErrorKind};
use slotmarket_common::protocol::FetchPart;
use slotmarket_workloads::generate::{self, GenTask};
use slotmarket_workloads::task::{MapTask, share};
use slotmarket_workloads::{DEFAULT_SPILL_BYTES, fetch, grep, pi, sort, wordcount};

#[derive(Parser, Debug)]
#[command(
    name = "slotmarket-task",
    version,
    about = "MapReduce task programs and data generators for Slotmarket"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Random text like Hadoop's RandomTextWriter into DIR/part-{task}.
    GenText {
        /// Directory to write part-{task} into.
        #[arg(long, value_name = "DIR")]
        output: PathBuf,
        /// Total bytes over all generator tasks (each writes about bytes/tasks).
        #[arg(long, value_name = "N")]
        bytes: u64,
        #[command(flatten)]
        gen_args: GenArgs,
    },
    /// TeraGen-style 100-byte records (10-byte key, payload, newline) into DIR/part-{task}.
    GenRecords {
        /// Directory to write part-{task} into.
        #[arg(long, value_name = "DIR")]
        output: PathBuf,
        /// Total records over all generator tasks.
        #[arg(long, value_name = "N")]
        records: u64,
        #[command(flatten)]
        gen_args: GenArgs,
    },
    /// Count words: map writes `word<TAB>count` per reducer, reduce sums them sorted by word.
    Wordcount {
        #[command(subcommand)]
        side: Side<MapArgs>,
    },
    /// Count the lines containing a substring.
    Grep {
        #[command(subcommand)]
        side: Side<GrepMapArgs>,
    },
    /// Sort lines by bytes, range-partitioned so the reducers' outputs concatenate sorted.
    Sort {
        #[command(subcommand)]
        side: Side<MapArgs>,
    },
    /// Estimate pi from the Halton sequence, like Hadoop's QuasiMonteCarlo.
    Pi {
        #[command(subcommand)]
        side: PiSide,
    },
    /// Copy files other tasks of this job wrote on other agents into the job directory,
    /// through the local agent (agents in local data mode only; run inside a task).
    Fetch {
        /// The stage whose tasks wrote the files.
        #[arg(long, value_name = "NAME", default_value = "map")]
        stage: String,
        /// The task that wrote the file; give one --task per --path, in the same order.
        #[arg(long = "task", value_name = "I", required = true)]
        tasks: Vec<u32>,
        /// The file, relative to the job directory (e.g. map-3/part-0).
        #[arg(long = "path", value_name = "P", required = true)]
        paths: Vec<String>,
    },
}

#[derive(Args, Debug)]
struct GenArgs {
    /// Seed of the random data.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// This generator's index.
    #[arg(long, value_name = "I", default_value_t = 0)]
    task: u32,
    /// The number of generator tasks sharing the work.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    tasks: u32,
}

#[derive(Subcommand, Debug)]
enum Side<M: Args> {
    /// Map task: read a split of the input, write map-{task}/part-{r} for every reducer.
    Map(M),
    /// Reduce task: merge every map-*/part-{task} into out/part-{task}.
    Reduce(ReduceArgs),
}

#[derive(Args, Debug)]
struct MapArgs {
    /// A file, or a directory whose visible regular files are read in name order.
    #[arg(long, value_name = "PATH")]
    input: PathBuf,
    /// Read exactly --input's part-0 .. part-{N-1} (what N generator tasks wrote) and fail
    /// naming any that is missing, instead of whatever the directory holds.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    parts: Option<u32>,
    /// This map task's index.
    #[arg(long, value_name = "I")]
    task: u32,
    /// The number of map tasks.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    tasks: u32,
    /// The number of reduce tasks.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u32).range(1..))]
    reducers: u32,
    /// The job's directory.
    #[arg(long, value_name = "DIR")]
    job_dir: PathBuf,
    /// Memory for the map's in-memory table or buffer before it spills sorted runs.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_SPILL_BYTES)]
    spill_bytes: usize,
    /// The stage whose tasks wrote --input's --parts, when --input is inside --job-dir:
    /// on agents without a shared data directory the missing parts are fetched from the
    /// agents that hold them.
    #[arg(long, value_name = "NAME", default_value = "gen")]
    input_stage: String,
}

#[derive(Args, Debug)]
struct GrepMapArgs {
    /// The substring a line must contain (bytes, case-sensitive).
    #[arg(long, value_name = "P")]
    pattern: String,
    #[command(flatten)]
    map: MapArgs,
}

#[derive(Args, Debug)]
struct ReduceArgs {
    /// This reduce task's index (the part it reads and writes).
    #[arg(long, value_name = "R")]
    task: u32,
    /// The number of map tasks: every map-{i}/part-{R} with i below N must be there.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    maps: u32,
    /// The job's directory.
    #[arg(long, value_name = "DIR")]
    job_dir: PathBuf,
    /// The name of the stage whose tasks wrote the map parts (to fetch them from the
    /// agents that hold them, when the agents share no data directory).
    #[arg(long, value_name = "NAME", default_value = "map")]
    map_stage: String,
}

#[derive(Subcommand, Debug)]
enum PiSide {
    /// Count Halton points inside the circle into map-{task}/part-0.
    Map {
        /// Points this map draws.
        #[arg(long, value_name = "N")]
        samples: u64,
        /// This map task's index: it takes points task*N .. (task+1)*N.
        #[arg(long, value_name = "I")]
        task: u32,
        /// The job's directory.
        #[arg(long, value_name = "DIR")]
        job_dir: PathBuf,
        /// Seed of the sequence's random rotation.
        #[arg(long, value_name = "S", default_value_t = 0)]
        seed: u64,
    },
    /// Sum the maps' counts, write the estimate to out/part-0 and print it.
    Reduce {
        /// The number of map tasks: every map-{i}/part-0 with i below N must be there.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        maps: u32,
        /// The job's directory.
        #[arg(long, value_name = "DIR")]
        job_dir: PathBuf,
        /// The name of the stage whose tasks wrote the map parts.
        #[arg(long, value_name = "NAME", default_value = "map")]
        map_stage: String,
    },
}

/// Refuses `--task` outside `0..--tasks` the way clap refuses other bad arguments (exit 2).
fn check_task(task: u32, tasks: u32) {
    if let Err(error) = share(0, task, tasks) {
        Cli::command().error(ErrorKind::ValueValidation, error).exit();
    }
}

impl GenArgs {
    /// The generator task writing into `output`; exits like clap on a bad `--task`.
    fn to_task(&self, output: PathBuf) -> GenTask {
        check_task(self.task, self.tasks);
        GenTask { output, seed: self.seed, task: self.task, tasks: self.tasks }
    }
}

impl MapArgs {
    /// Fetches generated input parts other agents hold (local data mode), then the task.
    fn fetch_and_task(&self) -> Result<MapTask> {
        if let Some(parts) = self.parts {
            fetch::fetch_input_parts(&self.job_dir, &self.input, parts, &self.input_stage)?;
        }
        Ok(self.to_task())
    }

    fn to_task(&self) -> MapTask {
        check_task(self.task, self.tasks);
        MapTask {
            input: self.input.clone(),
            task: self.task,
            tasks: self.tasks,
            input_parts: self.parts,
            reducers: self.reducers,
            job_dir: self.job_dir.clone(),
            spill_bytes: self.spill_bytes,
        }
    }
}

fn rate(bytes: u64, started: Instant) -> String {
    let seconds = started.elapsed().as_secs_f64();
    format!("{bytes} bytes in {seconds:.3} s ({:.1} MB/s)", bytes as f64 / 1e6 / seconds.max(1e-9))
}

fn run(cli: Cli) -> Result<()> {
    let started = Instant::now();
    match cli.command {
        Command::GenText { output, bytes, gen_args } => {
            let task = gen_args.to_task(output);
            let stats = generate::text(&task, bytes)?;
            println!(
                "gen-text {}: {} lines, {}",
                task.part().display(),
                stats.lines,
                rate(stats.bytes, started)
            );
        }
        Command::GenRecords { output, records, gen_args } => {
            let task = gen_args.to_task(output);
            let stats = generate::records(&task, records)?;
            println!(
                "gen-records {}: {} records, {}",
                task.part().display(),
                stats.lines,
                rate(stats.bytes, started)
            );
        }
        Command::Wordcount { side: Side::Map(args) } => {
            let task = args.fetch_and_task()?;
            let stats = wordcount::map(&task)?;
            println!(
                "wordcount map {}/{}: {} words, {} distinct over {} reducers, {} spills, read {}",
                task.task,
                task.tasks,
                stats.counts.total,
                stats.counts.keys,
                task.reducers,
                stats.counts.spills,
                rate(stats.bytes, started)
            );
        }
        Command::Grep { side: Side::Map(args) } => {
            let task = args.map.fetch_and_task()?;
            let stats = grep::map(&task, args.pattern.as_bytes())?;
            println!(
                "grep map {}/{}: {} matching lines, {} distinct, {} spills, read {}",
                task.task,
                task.tasks,
                stats.counts.total,
                stats.counts.keys,
                stats.counts.spills,
                rate(stats.bytes, started)
            );
        }
        Command::Sort { side: Side::Map(args) } => {
            let task = args.fetch_and_task()?;
            let stats = sort::map(&task)?;
            println!(
                "sort map {}/{}: {} records over {} reducers, {} spills, read {}",
                task.task,
                task.tasks,
                stats.records,
                task.reducers,
                stats.spills,
                rate(stats.bytes, started)
            );
        }
        Command::Wordcount { side: Side::Reduce(args) } | Command::Grep { side: Side::Reduce(args) } => {
            fetch::fetch_map_parts(&args.job_dir, args.task, args.maps, &args.map_stage)?;
            let totals = wordcount::reduce(&args.job_dir, args.task, args.maps)?;
            println!(
                "reduce {}: {} keys, counts summing to {}, in {:.3} s",
                args.task,
                totals.keys,
                totals.total,
                started.elapsed().as_secs_f64()
            );
        }
        Command::Sort { side: Side::Reduce(args) } => {
            fetch::fetch_map_parts(&args.job_dir, args.task, args.maps, &args.map_stage)?;
            let lines = sort::reduce(&args.job_dir, args.task, args.maps)?;
            println!(
                "sort reduce {}: {lines} records in {:.3} s",
                args.task,
                started.elapsed().as_secs_f64()
            );
        }
        Command::Pi { side: PiSide::Map { samples, task, job_dir, seed } } => {
            let counts = pi::map(&job_dir, task, samples, seed)?;
            println!(
                "pi map {task}: {} of {} points inside in {:.3} s",
                counts.inside,
                counts.total,
                started.elapsed().as_secs_f64()
            );
        }
        Command::Pi { side: PiSide::Reduce { maps, job_dir, map_stage } } => {
            fetch::fetch_map_parts(&job_dir, 0, maps, &map_stage)?;
            let result = pi::reduce(&job_dir, maps)?;
            println!(
                "Estimated value of Pi is {:.15} ({} points from {} maps)",
                result.estimate, result.counts.total, result.maps
            );
        }
        Command::Fetch { stage, tasks, paths } => {
            let bytes = fetch_files(&stage, tasks, paths)?;
            println!("fetched {bytes} bytes in {:.3} s", started.elapsed().as_secs_f64());
        }
    }
    Ok(())
}

/// `slotmarket-task fetch`: one request for every (task, path) pair.
fn fetch_files(stage: &str, tasks: Vec<u32>, paths: Vec<String>) -> Result<u64> {
    if tasks.len() != paths.len() {
        Cli::command()
            .error(ErrorKind::WrongNumberOfValues, "give exactly one --task for every --path, in order")
            .exit();
    }
    let socket = fetch::FetchSocket::from_env()?.ok_or_else(|| {
        anyhow::anyhow!(
            "SLOTMARKET_FETCH_SOCKET is not set: run this inside a task of an agent in local data mode"
        )
    })?;
    let parts = tasks
        .into_iter()
        .zip(paths)
        .map(|(task, path)| FetchPart { stage: stage.to_string(), task, path })
        .collect();
    socket.fetch(parts)
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("slotmarket-task: error: {error:#}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_documented_commands_parse() {
        for line in [
            "gen-text --output d --bytes 10",
            "gen-text --output d --bytes 10 --seed 3 --task 1 --tasks 2",
            "gen-records --output d --records 10 --task 0 --tasks 1",
            "wordcount map --input i --task 0 --tasks 2 --reducers 3 --job-dir j",
            "wordcount map --input i --parts 4 --task 0 --tasks 2 --reducers 3 --job-dir j",
            "sort map --input j/input --parts 4 --input-stage g --task 0 --tasks 2 --reducers 3 --job-dir j",
            "wordcount reduce --task 1 --maps 2 --job-dir j",
            "grep map --input i --pattern p --task 0 --tasks 2 --reducers 3 --job-dir j",
            "grep reduce --task 1 --maps 2 --job-dir j",
            "sort map --input i --task 0 --tasks 2 --reducers 3 --job-dir j --spill-bytes 100",
            "sort reduce --task 1 --maps 2 --job-dir j",
            "pi map --samples 10 --task 0 --job-dir j --seed 1",
            "pi reduce --maps 3 --job-dir j",
            "pi reduce --maps 3 --job-dir j --map-stage count",
            "sort reduce --task 1 --maps 2 --job-dir j --map-stage m",
            "fetch --stage map --task 0 --path map-0/part-1 --task 2 --path map-2/part-1",
            "fetch --task 0 --path map-0/part-1",
        ] {
            let args = std::iter::once("slotmarket-task").chain(line.split(' '));
            if let Err(e) = Cli::try_parse_from(args) {
                panic!("{line}: {e}");
            }
        }
        let zero = ["slotmarket-task", "wordcount", "map", "--input", "i", "--task", "0"];
        let zero = zero.iter().chain(&["--tasks", "1", "--reducers", "0", "--job-dir", "j"]);
        assert!(Cli::try_parse_from(zero).is_err());
        // A reducer must be told how many maps there were.
        let no_maps = ["slotmarket-task", "wordcount", "reduce", "--task", "0", "--job-dir", "j"];
        assert!(Cli::try_parse_from(no_maps).is_err());
    }
}
