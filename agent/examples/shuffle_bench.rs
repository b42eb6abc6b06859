//! Shuffle throughput between two agents on loopback, for `scripts/bench/shuffle.sh`:
//! agent A's shuffle service serves the files of a directory; agent B's fetch service
//! (the one behind a task's `LocalFetch`, with the master's answer given) copies them all
//! into B's data directory over QUIC with mutual TLS, up to `max_fetches` at a time.
//!
//! `shuffle_bench SRC_DIR WORK_DIR [MAX_FETCHES]` prints `RESULT shuffle_bytes N` and
//! `RESULT shuffle_s S` (wall seconds of the fetch request).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use slotmarket_agent::shuffle::client::ShuffleClient;
use slotmarket_agent::shuffle::fetch::{FetchService, FetchTokens};
use slotmarket_agent::shuffle::locate::{LocateFuture, Locator};
use slotmarket_agent::shuffle::server;
use slotmarket_common::identity::Role;
use slotmarket_common::ids::JobId;
use slotmarket_common::pki;
use slotmarket_common::protocol::{FetchPart, InputHolder, LocalFetch, LocalFetchReply, StageOutputs};

/// The master's answer: every task's output is on agent A.
struct AllOnA(InputHolder, usize);

impl Locator for AllOnA {
    fn locate(&self, _job: JobId, _stage: String) -> LocateFuture<'_> {
        let outputs = StageOutputs { holders: vec![self.0.clone()], task_holder: vec![Some(0); self.1] };
        Box::pin(async move { Ok(outputs) })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(src), Some(work)) = (args.get(1), args.get(2)) else {
        bail!("usage: shuffle_bench SRC_DIR WORK_DIR [MAX_FETCHES]");
    };
    let max_fetches = args.get(3).map(|n| n.parse()).transpose()?.unwrap_or(8);
    let (src, work) = (PathBuf::from(src), PathBuf::from(work));
    let job = JobId(1);
    let files = list_files(&src)?;

    let pki_dir = work.join("pki");
    pki::init(&pki_dir, &[])?;
    let (a_tls, b_tls) =
        (pki::issue(&pki_dir, Role::Agent, "agent-a")?, pki::issue(&pki_dir, Role::Agent, "agent-b")?);
    // Agent A's job directory holds the files (a symlink to SRC_DIR as the job directory:
    // the files inside are served, since they are within it once resolved).
    let a_data = work.join("a");
    std::fs::create_dir_all(a_data.join("jobs"))?;
    std::os::unix::fs::symlink(std::path::absolute(&src)?, a_data.join("jobs").join(job.to_string()))?;
    let endpoint = server::bind("127.0.0.1:0".parse()?, &a_tls)?;
    let holder = InputHolder { node: "agent-a".into(), shuffle: endpoint.local_addr()? };
    tokio::spawn(server::serve(endpoint, a_data, max_fetches));

    let tokens = FetchTokens::default();
    let b_data = work.join("b");
    let service = FetchService {
        tokens: tokens.clone(),
        locator: Arc::new(AllOnA(holder, files.len())),
        client: Arc::new(ShuffleClient::new(b_tls)),
        data_dir: b_data.clone(),
        node: "agent-b".into(),
        max_fetches,
    };
    let token = tokens.issue(job)?;
    let parts = files
        .iter()
        .enumerate()
        .map(|(task, name)| FetchPart { stage: "map".into(), task: task as u32, path: name.clone() })
        .collect();
    let started = Instant::now();
    let reply = service.fetch(LocalFetch { token: token.token().into(), parts }).await;
    let seconds = started.elapsed().as_secs_f64();
    let bytes = match reply {
        LocalFetchReply::Fetched { bytes } => bytes,
        LocalFetchReply::Failed { reason } => bail!("fetch failed: {reason}"),
    };
    check_copies(&src, &b_data.join("jobs").join(job.to_string()), &files)?;
    println!("RESULT shuffle_bytes {bytes}");
    println!("RESULT shuffle_s {seconds:.3}");
    Ok(())
}

/// The regular files directly in `dir`, by name.
fn list_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Every fetched file has its source's length (the bytes are checked by the tests).
fn check_copies(src: &Path, dest: &Path, files: &[String]) -> anyhow::Result<()> {
    for name in files {
        let (a, b) = (std::fs::metadata(src.join(name))?.len(), std::fs::metadata(dest.join(name))?.len());
        if a != b {
            bail!("{name}: fetched {b} bytes of {a}");
        }
    }
    Ok(())
}
