//! `slotmarket-sim report`: SVG plots from the CSVs of `run --out` directories, one
//! series per run: `completion_cdf.svg`, `wait_by_class.svg`, `slot_use.svg`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use slotmarket_common::metrics::read_jobs_csv;
use slotmarket_master::sim::plot::{self, RunData};

/// Flags of `report`.
#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// `run --out` directories to compare, as DIR or LABEL=DIR (label: the directory name).
    #[arg(required = true)]
    runs: Vec<String>,
    /// Where to write the SVGs.
    #[arg(short = 'o', long)]
    out: PathBuf,
}

pub(crate) fn run(args: ReportArgs) -> Result<()> {
    let runs = args.runs.iter().map(|r| load(r)).collect::<Result<Vec<_>>>()?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let plots = [
        ("completion_cdf.svg", plot::completion_cdf(&runs)),
        ("wait_by_class.svg", plot::wait_by_class(&runs)),
        ("slot_use.svg", plot::slot_use(&runs)),
    ];
    for (name, svg) in plots {
        let path = args.out.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

/// Reads `jobs.csv` and `slots.csv` of one run directory given as DIR or LABEL=DIR.
fn load(spec: &str) -> Result<RunData> {
    let (label, dir) = match spec.split_once('=') {
        Some((label, dir)) => (label.to_string(), PathBuf::from(dir)),
        None => {
            let dir = PathBuf::from(spec);
            let label =
                dir.file_name().map_or_else(|| spec.to_string(), |n| n.to_string_lossy().into_owned());
            (label, dir)
        }
    };
    let read = |name: &str| -> Result<String> {
        let path: PathBuf = Path::new(&dir).join(name);
        std::fs::read_to_string(&path).with_context(|| {
            format!("reading {} (write it with `slotmarket-sim run --out DIR`)", path.display())
        })
    };
    let jobs = read_jobs_csv(&read("jobs.csv")?).with_context(|| format!("{}/jobs.csv", dir.display()))?;
    let slots =
        plot::read_slots_csv(&read("slots.csv")?).with_context(|| format!("{}/slots.csv", dir.display()))?;
    Ok(RunData { label, jobs, slots })
}
