//! The task-facing side of the shuffle: the fetch tokens given to containers, and the
//! [`FetchService`] behind `{work_dir}/fetch.sock` that answers a task's [`LocalFetch`]:
//! it locates each producing stage once, then fetches every missing part concurrently
//! (bounded) from its holder into this agent's job directory.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{
    DEFAULT_MAX_FRAME, FetchPart, InputHolder, LocalFetch, LocalFetchReply, StageOutputs,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{debug, info};

use super::client::ShuffleClient;
use super::locate::Locator;
use super::paths::{plain_relative, prepare_destination};

/// The live containers' fetch tokens and the job each one may fetch for.
#[derive(Clone, Debug, Default)]
pub struct FetchTokens {
    jobs: Arc<Mutex<HashMap<String, JobId>>>,
}

impl FetchTokens {
    /// A fresh random 128-bit token (hex) bound to `job` until the guard is dropped.
    pub fn issue(&self, job: JobId) -> std::io::Result<TokenGuard> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.lock().insert(token.clone(), job);
        Ok(TokenGuard { token, tokens: self.clone() })
    }

    /// The job `token` belongs to, if its container is live.
    pub fn job_of(&self, token: &str) -> Option<JobId> {
        self.lock().get(token).copied()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, JobId>> {
        self.jobs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A container's token; it stops working when this is dropped (the container ended).
#[derive(Debug)]
pub struct TokenGuard {
    token: String,
    tokens: FetchTokens,
}

impl TokenGuard {
    /// The token, for the container's environment.
    pub fn token(&self) -> &str {
        &self.token
    }
}

impl Drop for TokenGuard {
    fn drop(&mut self) {
        self.tokens.lock().remove(&self.token);
    }
}

/// Answers tasks' fetch requests.
pub struct FetchService {
    /// Whose tokens are valid.
    pub tokens: FetchTokens,
    /// Asks the master where outputs are.
    pub locator: Arc<dyn Locator>,
    /// Fetches from other agents.
    pub client: Arc<ShuffleClient>,
    /// This agent's data directory; jobs are `{data_dir}/jobs/{job}`.
    pub data_dir: PathBuf,
    /// This agent's node name: a part it holds itself is already local.
    pub node: String,
    /// Parts fetched at once for one request.
    pub max_fetches: usize,
}

impl FetchService {
    /// Carries out one request; the reply names the first part that failed and its holder.
    pub async fn fetch(&self, request: LocalFetch) -> LocalFetchReply {
        match self.try_fetch(request).await {
            Ok(bytes) => LocalFetchReply::Fetched { bytes },
            Err(reason) => LocalFetchReply::Failed { reason },
        }
    }

    async fn try_fetch(&self, request: LocalFetch) -> Result<u64, String> {
        let job = self.tokens.job_of(&request.token).ok_or("unknown fetch token (not a live container's)")?;
        let job_dir = self.data_dir.join("jobs").join(job.to_string());
        let mut missing = Vec::new();
        for part in request.parts {
            plain_relative(&part.path).map_err(|err| format!("part {}: {err}", part.path))?;
            if !job_dir.join(&part.path).is_file() {
                missing.push(part);
            }
        }
        if missing.is_empty() {
            return Ok(0);
        }
        let stages: BTreeSet<String> = missing.iter().map(|p| p.stage.clone()).collect();
        let mut located = BTreeMap::new();
        for stage in stages {
            let outputs = self.locator.locate(job, stage.clone()).await;
            let outputs =
                outputs.map_err(|err| format!("cannot locate the outputs of stage {stage}: {err}"))?;
            located.insert(stage, outputs);
        }
        let mut plan = Vec::with_capacity(missing.len());
        for part in missing {
            let holder = self.holder_of(&part, &located[&part.stage])?;
            plan.push((part, holder));
        }
        debug!(%job, parts = plan.len(), "fetching parts");
        let bytes = self.fetch_all(job, job_dir, plan).await?;
        info!(%job, bytes, "parts fetched");
        Ok(bytes)
    }

    /// The agent holding `part`, or why it cannot be fetched.
    fn holder_of(&self, part: &FetchPart, outputs: &StageOutputs) -> Result<InputHolder, String> {
        let index = outputs.task_holder.get(part.task as usize).copied().flatten();
        let holder = index.and_then(|i| outputs.holders.get(i as usize)).ok_or_else(|| {
            format!(
                "part {} of task {} of stage {}: no agent holds it (the task has not completed, or its output is in a shared directory)",
                part.path, part.task, part.stage
            )
        })?;
        if holder.node == self.node {
            return Err(format!("part {} should be on this agent ({}) but is missing", part.path, self.node));
        }
        Ok(holder.clone())
    }

    async fn fetch_all(
        &self,
        job: JobId,
        job_dir: PathBuf,
        plan: Vec<(FetchPart, InputHolder)>,
    ) -> Result<u64, String> {
        let permits = Arc::new(Semaphore::new(self.max_fetches));
        let mut running = JoinSet::new();
        for (part, holder) in plan {
            let (client, permits, job_dir) =
                (Arc::clone(&self.client), Arc::clone(&permits), job_dir.clone());
            running.spawn(async move {
                let _permit = permits.acquire_owned().await.map_err(|e| e.to_string())?;
                let path = part.path.clone();
                let dest = tokio::task::spawn_blocking(move || prepare_destination(&job_dir, &path))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|err| format!("part {}: {err}", part.path))?;
                client.fetch(&holder, job, &part.path, &dest).await.map_err(|err| {
                    format!(
                        "part {} (task {} of stage {}) from {} at {}: {err}",
                        part.path, part.task, part.stage, holder.node, holder.shuffle
                    )
                })
            });
        }
        let mut total = 0;
        while let Some(done) = running.join_next().await {
            // The first failure answers; dropping the set cancels the other transfers.
            total += done.map_err(|e| e.to_string())??;
        }
        Ok(total)
    }
}

/// Serves `listener` (the fetch socket): one request and one reply per connection.
pub async fn serve_socket(listener: tokio::net::UnixListener, service: Arc<FetchService>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_task(stream, Arc::clone(&service)));
            }
            Err(err) => {
                info!(error = %err, "fetch socket accept failed; stopping it");
                return;
            }
        }
    }
}

async fn serve_task(mut stream: tokio::net::UnixStream, service: Arc<FetchService>) {
    let request = match read_unix_frame::<LocalFetch>(&mut stream).await {
        Ok(request) => request,
        Err(err) => return debug!(error = %err, "bad fetch request"),
    };
    let reply = service.fetch(request).await;
    if let Err(err) = write_unix_frame(&mut stream, &reply).await {
        debug!(error = %err, "the task left before its fetch reply");
    }
}

/// Reads one length-prefixed postcard frame (the codec of `protocol::frame`).
pub async fn read_unix_frame<T: serde::de::DeserializeOwned>(
    stream: &mut tokio::net::UnixStream,
) -> std::io::Result<T> {
    use slotmarket_common::protocol::frame::{LENGTH_PREFIX, decode_payload, payload_len};
    use tokio::io::AsyncReadExt;
    let mut prefix = [0u8; LENGTH_PREFIX];
    stream.read_exact(&mut prefix).await?;
    let len = payload_len(prefix, DEFAULT_MAX_FRAME).map_err(std::io::Error::other)?;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await?;
    decode_payload(&payload).map_err(std::io::Error::other)
}

/// Writes one frame (see [`read_unix_frame`]).
pub async fn write_unix_frame<T: serde::Serialize>(
    stream: &mut tokio::net::UnixStream,
    msg: &T,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let bytes =
        slotmarket_common::protocol::encode_frame(msg, DEFAULT_MAX_FRAME).map_err(std::io::Error::other)?;
    stream.write_all(&bytes).await?;
    stream.flush().await
}
