//! Fetching one part from another agent's shuffle service: one cached connection per
//! holder, one stream per file, written to a hidden temporary name beside the part and
//! renamed into place when complete. A broken transfer resumes from the bytes already
//! written, on a fresh connection, up to [`TRIES`] times.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use slotmarket_common::ids::JobId;
use slotmarket_common::pki::TlsFiles;
use slotmarket_common::protocol::{
    DEFAULT_MAX_FRAME, InputHolder, SHUFFLE_ALPN, ShuffleReply, ShuffleRequest,
};
use slotmarket_common::transport::{self, read_frame, write_frame};
use thiserror::Error;
use tokio::io::{AsyncWriteExt, BufWriter};
use tracing::debug;

use super::server::{CHUNK, IDLE_STREAM_TIMEOUT};

/// Attempts per part (the first and two resumptions).
pub const TRIES: u32 = 3;
/// Bytes gathered before a write to the file: the stream hands over about one packet at
/// a time, and a write per packet would cost more than the transfer itself.
const WRITE_BUFFER: usize = 1 << 20;
/// How long a handshake with a holder may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a part could not be fetched.
#[derive(Debug, Error)]
pub enum FetchError {
    /// No connection to the holder (unreachable, TLS refused, not the named node).
    #[error("cannot reach the shuffle service: {0}")]
    Connect(String),
    /// The holder refused the request (no such file, path not allowed).
    #[error("refused: {0}")]
    Refused(String),
    /// The transfer broke (connection lost, stream reset, stalled, ended early).
    #[error("transfer broke: {0}")]
    Broken(String),
    /// The part could not be written here.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The local path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl FetchError {
    /// Whether another try may succeed (a refusal or a local disk error will not).
    fn retryable(&self) -> bool {
        matches!(self, FetchError::Connect(_) | FetchError::Broken(_))
    }
}

/// Connections to other agents' shuffle services, made with this agent's certificate.
#[derive(Debug)]
pub struct ShuffleClient {
    tls: TlsFiles,
    /// One endpoint per (IPv4?, loopback?) kind of target address.
    endpoints: Mutex<BTreeMap<(bool, bool), quinn::Endpoint>>,
    /// The live connection to each holder, by node.
    connections: Mutex<BTreeMap<String, quinn::Connection>>,
}

impl ShuffleClient {
    /// A client presenting the certificate in `tls`.
    pub fn new(tls: TlsFiles) -> ShuffleClient {
        ShuffleClient { tls, endpoints: Mutex::default(), connections: Mutex::default() }
    }

    /// Fetches `path` of `job` from `holder` into `dest`, resuming from what an earlier
    /// broken try wrote; answers the bytes transferred.
    pub async fn fetch(
        &self,
        holder: &InputHolder,
        job: JobId,
        path: &str,
        dest: &Path,
    ) -> Result<u64, FetchError> {
        let temp = temp_name(dest, TEMP_COUNTER.fetch_add(1, Ordering::Relaxed));
        let write_error = |source| FetchError::Write { path: temp.clone(), source };
        if let Some(dir) = dest.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(write_error)?;
        }
        // A new file (never an existing one, nor a symlink a task placed under its name).
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .await
            .map_err(write_error)?;
        let mut file = BufWriter::with_capacity(WRITE_BUFFER, file);
        let mut tries = 0;
        loop {
            tries += 1;
            match self.fetch_once(holder, job, path, &mut file, &temp).await {
                Ok(_) => break,
                Err(err) if err.retryable() && tries < TRIES => {
                    debug!(node = %holder.node, path, tries, error = %err, "resuming a broken fetch");
                    self.forget(&holder.node);
                }
                Err(err) => {
                    let _ = tokio::fs::remove_file(&temp).await;
                    return Err(err);
                }
            }
        }
        file.flush().await.map_err(write_error)?;
        // The file was new: every byte in it came over the network, broken tries included.
        let transferred = file.get_ref().metadata().await.map_err(write_error)?.len();
        drop(file);
        tokio::fs::rename(&temp, dest)
            .await
            .map_err(|source| FetchError::Write { path: dest.to_path_buf(), source })?;
        Ok(transferred)
    }

    /// One try: asks for the bytes after what `file` already holds and appends them.
    pub(crate) async fn fetch_once(
        &self,
        holder: &InputHolder,
        job: JobId,
        path: &str,
        file: &mut BufWriter<tokio::fs::File>,
        temp: &Path,
    ) -> Result<u64, FetchError> {
        let write_error = |source| FetchError::Write { path: temp.to_path_buf(), source };
        file.flush().await.map_err(write_error)?;
        let offset = file.get_ref().metadata().await.map_err(write_error)?.len();
        let conn = self.connection(holder).await?;
        let broken = |err: &dyn std::fmt::Display| FetchError::Broken(err.to_string());
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| broken(&e))?;
        let request = ShuffleRequest { job, path: path.to_string(), offset };
        write_frame(&mut send, &request, DEFAULT_MAX_FRAME).await.map_err(|e| broken(&e))?;
        let _ = send.finish();
        let reply = tokio::time::timeout(
            IDLE_STREAM_TIMEOUT,
            read_frame::<ShuffleReply>(&mut recv, DEFAULT_MAX_FRAME),
        )
        .await
        .map_err(|_| broken(&"no reply in time"))?
        .map_err(|e| broken(&e))?;
        let len = match reply {
            Some(ShuffleReply::Sending { len }) => len,
            Some(ShuffleReply::Refused { reason }) => return Err(FetchError::Refused(reason)),
            None => return Err(broken(&"the stream ended without a reply")),
        };
        let mut received = offset;
        while received < len {
            let chunk = tokio::time::timeout(IDLE_STREAM_TIMEOUT, recv.read_chunk(CHUNK, true))
                .await
                .map_err(|_| broken(&"the stream stalled"))?
                .map_err(|e| broken(&e))?;
            let Some(chunk) = chunk else {
                return Err(broken(&format!("the stream ended at byte {received} of {len}")));
            };
            if received + chunk.bytes.len() as u64 > len {
                return Err(broken(&"more bytes than announced"));
            }
            file.write_all(&chunk.bytes).await.map_err(write_error)?;
            received += chunk.bytes.len() as u64;
        }
        Ok(len - offset)
    }

    /// The cached connection to `holder`, or a new one checked against its node name.
    async fn connection(&self, holder: &InputHolder) -> Result<quinn::Connection, FetchError> {
        if let Some(conn) = lock(&self.connections).get(&holder.node) {
            if conn.close_reason().is_none() {
                return Ok(conn.clone());
            }
        }
        let endpoint = self.endpoint(holder.shuffle)?;
        let connecting = transport::connect(&endpoint, holder.shuffle, &holder.node);
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| FetchError::Connect(format!("no answer within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| FetchError::Connect(e.to_string()))?;
        lock(&self.connections).insert(holder.node.clone(), conn.clone());
        Ok(conn)
    }

    /// Drops the cached connection to `node` (after a broken transfer).
    fn forget(&self, node: &str) {
        lock(&self.connections).remove(node);
    }

    fn endpoint(&self, target: SocketAddr) -> Result<quinn::Endpoint, FetchError> {
        let kind = (target.is_ipv4(), target.ip().is_loopback());
        let mut endpoints = lock(&self.endpoints);
        if let Some(endpoint) = endpoints.get(&kind) {
            return Ok(endpoint.clone());
        }
        let endpoint = transport::client_endpoint_for(&self.tls, target, SHUFFLE_ALPN)
            .map_err(|e| FetchError::Connect(e.to_string()))?;
        endpoints.insert(kind, endpoint.clone());
        Ok(endpoint)
    }
}

/// Tells apart the temporary files of fetches of the same part running at once (two
/// attempts of one reduce).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The hidden name a part is written under until complete, `.{name}.fetching.{unique}`
/// beside it (readers open exact part names; the shuffle service never serves hidden
/// names).
pub fn temp_name(dest: &Path, unique: u64) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dest.with_file_name(format!(".{name}.fetching.{}.{unique}", std::process::id()))
}

/// Locks a map whose holder cannot have panicked mid-update (plain inserts and removes).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
