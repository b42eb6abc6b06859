//! `slotmarket fetch JOB [DIR] [--path out]`: copies a job's final outputs (the files
//! under `{job_dir}/{path}` that its last stage wrote) to this machine, through the
//! master, from every agent holding some of them (one per data directory). Files are
//! listed, then read in bounded chunks, and land at their path below `--path` inside
//! DIR (default `./{JOB}-out`), each written under a hidden name first and renamed when
//! complete. The same file on two nodes is an error naming both: outputs never merge
//! silently.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{
    DEFAULT_OUTPUT_DIR, MAX_OUTPUT_CHUNK, OutputData, OutputFile, OutputOp, OutputQuery, check_job_path,
};

use crate::connection::{self, ConnectionArgs};
use crate::output;

/// Arguments of `fetch`.
#[derive(Debug, Args)]
pub(crate) struct FetchArgs {
    /// The job: `j7` or `7`.
    #[arg(value_name = "JOB", value_parser = connection::parse_job_id)]
    pub(crate) job: JobId,
    /// Where the files go (created if needed); `./{JOB}-out` if left out.
    #[arg(value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// The directory inside the job directory to copy (the built-in workloads' last
    /// stage writes `out`).
    #[arg(long, default_value = DEFAULT_OUTPUT_DIR)]
    pub(crate) path: String,
}

/// One fetched file, in `--json` and for the summary.
#[derive(Debug, Serialize, PartialEq, Eq)]
struct FetchedFile {
    /// The node it came from.
    node: String,
    /// Its path relative to `--path` (and to DIR).
    path: String,
    /// Bytes written.
    bytes: u64,
}

/// The `--json` answer.
#[derive(Debug, Serialize)]
struct FetchJson {
    job: String,
    dir: String,
    files: Vec<FetchedFile>,
}

/// Runs `fetch`.
pub(crate) async fn run(conn: &ConnectionArgs, args: FetchArgs, json: bool) -> Result<ExitCode> {
    check_job_path(&args.path).map_err(|problem| anyhow::anyhow!("--path: {problem}"))?;
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(format!("{}-out", args.job)));
    let client = connection::connect_from_args(conn).await?;
    let result = fetch(&client, &args, &dir).await;
    connection::close(client).await;
    let files = result?;
    if json {
        let dir = dir.display().to_string();
        output::print_json(&FetchJson { job: args.job.to_string(), dir, files })?;
    } else {
        let bytes: u64 = files.iter().map(|f| f.bytes).sum();
        let nodes = files.iter().map(|f| f.node.as_str()).collect::<std::collections::BTreeSet<_>>().len();
        println!(
            "fetched {} files ({bytes} bytes) of {} from {nodes} nodes into {}",
            files.len(),
            args.job,
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Lists the outputs on every node serving them, checks the listing, then copies each file.
async fn fetch(client: &Client, args: &FetchArgs, dir: &Path) -> Result<Vec<FetchedFile>> {
    let job = args.job;
    let nodes = connection::bounded(client.output_nodes(job))
        .await
        .with_context(|| format!("finding {job}'s outputs"))?;
    let mut listings = Vec::with_capacity(nodes.len());
    for node in nodes {
        let query = OutputQuery { job, node: node.clone(), op: OutputOp::List { dir: args.path.clone() } };
        let answer = connection::bounded(client.output(query))
            .await
            .with_context(|| format!("listing {job}'s outputs on {node}"))?;
        let OutputData::Files(files) = answer else { bail!("node {node} answered a listing with bytes") };
        listings.push((node, files));
    }
    let plan = plan(&args.path, listings)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut fetched = Vec::with_capacity(plan.len());
    for (relative, (node, file)) in plan {
        let target = dir.join(&relative);
        let bytes = copy_file(client, job, &node, &file, &target).await?;
        fetched.push(FetchedFile { node, path: relative, bytes });
    }
    Ok(fetched)
}

/// The files to copy, by their path relative to `base`, with the node each comes from.
/// A path that does not lie under `base`, is not plain, or is listed by two nodes is an
/// error (naming both nodes for the last).
fn plan(
    base: &str,
    listings: Vec<(String, Vec<OutputFile>)>,
) -> Result<BTreeMap<String, (String, OutputFile)>> {
    let mut plan: BTreeMap<String, (String, OutputFile)> = BTreeMap::new();
    for (node, files) in listings {
        for file in files {
            let relative = file.path.strip_prefix(base).and_then(|rest| rest.strip_prefix('/'));
            let Some(relative) = relative.filter(|r| check_job_path(r).is_ok()) else {
                bail!(
                    "node {node} listed {:?}, which is not a plain path under {base}",
                    output::sanitize(&file.path)
                );
            };
            let relative = relative.to_string();
            if let Some((other, _)) = plan.get(&relative) {
                bail!(
                    "{} is on both {other} and {node}: the job's outputs overlap; fetch from one node by hand or rerun the job",
                    output::sanitize(&file.path)
                );
            }
            plan.insert(relative, (node.clone(), file));
        }
    }
    Ok(plan)
}

/// Copies one file chunk by chunk into `target` (a hidden name beside it first, renamed
/// once complete); returns the bytes written.
async fn copy_file(client: &Client, job: JobId, node: &str, file: &OutputFile, target: &Path) -> Result<u64> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let partial = target.with_file_name(format!(".{name}.partial"));
    let mut out =
        std::fs::File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let mut offset = 0u64;
    loop {
        let op = OutputOp::Read { path: file.path.clone(), offset, max: MAX_OUTPUT_CHUNK };
        let query = OutputQuery { job, node: node.to_string(), op };
        let answer = connection::bounded(client.output(query))
            .await
            .with_context(|| format!("reading {} of {job} on {node}", output::sanitize(&file.path)))?;
        let OutputData::Bytes(data) = answer else { bail!("node {node} answered a read with a listing") };
        if data.is_empty() {
            break;
        }
        out.write_all(&data).with_context(|| format!("writing {}", partial.display()))?;
        offset += data.len() as u64;
    }
    out.sync_all().with_context(|| format!("writing {}", partial.display()))?;
    if offset < file.len {
        bail!(
            "{} on {node} ended at {offset} bytes but was listed with {}; was it cleaned up?",
            output::sanitize(&file.path),
            file.len
        );
    }
    std::fs::rename(&partial, target)
        .with_context(|| format!("renaming {} to {}", partial.display(), target.display()))?;
    Ok(offset)
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
