//! The shuffle service: serves files under this agent's job directories to other agents
//! over QUIC ([`SHUFFLE_ALPN`]) with mutual TLS against the cluster CA. Only agent
//! certificates are served (a user's is refused at once); one bidirectional stream per
//! file: a [`ShuffleRequest`], then [`ShuffleReply::Sending`] and the raw bytes from the
//! requested offset, in bounded chunks. A semaphore bounds the transfers in flight.

use std::io::SeekFrom;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quinn::{RecvStream, SendStream, VarInt};
use slotmarket_common::identity::Role;
use slotmarket_common::pki::TlsFiles;
use slotmarket_common::protocol::{DEFAULT_MAX_FRAME, SHUFFLE_ALPN, ShuffleReply, ShuffleRequest};
use slotmarket_common::transport::{self, TransportError, read_frame, write_frame};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use super::paths::resolve_confined;

/// How long a peer has to send its request once it opened a stream.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A chunk that cannot be written (or, on the fetching side, read) for this long means
/// the stream is dead.
pub const IDLE_STREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes read from disk and written to the stream at a time.
pub const CHUNK: usize = 256 * 1024;
/// Application error code closing a connection whose peer is not an agent.
pub const NOT_AN_AGENT: VarInt = VarInt::from_u32(2);

/// Binds the shuffle service's endpoint on `listen`, presenting this agent's certificate
/// and requiring a client certificate of the cluster CA. Must be called inside tokio.
pub fn bind(listen: SocketAddr, tls: &TlsFiles) -> Result<quinn::Endpoint, TransportError> {
    transport::server_endpoint_for(listen, tls, SHUFFLE_ALPN)
}

/// Serves `endpoint` until it is closed: the files under `{data_dir}/jobs/{job}`, at most
/// `max_transfers` at a time.
pub async fn serve(endpoint: quinn::Endpoint, data_dir: PathBuf, max_transfers: usize) {
    let shared =
        Arc::new(Served { jobs_dir: data_dir.join("jobs"), transfers: Semaphore::new(max_transfers) });
    while let Some(incoming) = endpoint.accept().await {
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            match incoming.await {
                Ok(conn) => serve_connection(conn, shared).await,
                Err(err) => debug!(error = %err, "shuffle handshake failed"),
            }
        });
    }
}

/// What every connection shares: where job directories are, and the transfer permits.
struct Served {
    jobs_dir: PathBuf,
    transfers: Semaphore,
}

async fn serve_connection(conn: quinn::Connection, shared: Arc<Served>) {
    let peer = match transport::peer_identity(&conn) {
        Ok(peer) if peer.role == Role::Agent => peer,
        Ok(peer) => {
            warn!(%peer, "shuffle connection refused: not an agent");
            conn.close(NOT_AN_AGENT, b"the shuffle service serves agents only");
            return;
        }
        Err(err) => {
            conn.close(NOT_AN_AGENT, b"no identity");
            warn!(error = %err, "shuffle connection refused");
            return;
        }
    };
    debug!(%peer, "shuffle connection");
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::spawn(serve_stream(send, recv, Arc::clone(&shared)));
    }
}

async fn serve_stream(mut send: SendStream, mut recv: RecvStream, shared: Arc<Served>) {
    let request = match tokio::time::timeout(
        REQUEST_TIMEOUT,
        read_frame::<ShuffleRequest>(&mut recv, DEFAULT_MAX_FRAME),
    )
    .await
    {
        Ok(Ok(Some(request))) => request,
        Ok(Ok(None)) => return,
        Ok(Err(err)) => return debug!(error = %err, "bad shuffle request"),
        Err(_) => return debug!("no shuffle request in time"),
    };
    // Held for the whole transfer: the bound is on files in flight, not on connections.
    let Ok(_permit) = shared.transfers.acquire().await else { return };
    let opened = open_part(&shared, &request).await;
    let (mut file, len) = match opened {
        Ok(opened) => opened,
        Err(reason) => {
            debug!(job = %request.job, path = %request.path, %reason, "shuffle request refused");
            let _ = write_frame(&mut send, &ShuffleReply::Refused { reason }, DEFAULT_MAX_FRAME).await;
            let _ = send.finish();
            return;
        }
    };
    match send_file(&mut send, &mut file, len, request.offset).await {
        Ok(sent) => debug!(job = %request.job, path = %request.path, sent, "part served"),
        Err(err) => info!(job = %request.job, path = %request.path, error = %err, "part transfer broke"),
    }
}

/// Opens the requested file, refusing (with the reason for the peer) paths outside the
/// job directory, non-files and offsets past the end.
async fn open_part(shared: &Served, request: &ShuffleRequest) -> Result<(tokio::fs::File, u64), String> {
    let job_dir = shared.jobs_dir.join(request.job.to_string());
    let path = request.path.clone();
    let real = tokio::task::spawn_blocking(move || resolve_confined(&job_dir, &path))
        .await
        .map_err(|err| err.to_string())?
        .map_err(|err| err.to_string())?;
    let file = tokio::fs::File::open(&real).await.map_err(|err| format!("{}: {err}", request.path))?;
    let meta = file.metadata().await.map_err(|err| format!("{}: {err}", request.path))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", request.path));
    }
    if request.offset > meta.len() {
        return Err(format!(
            "offset {} is past the end of {} ({} bytes)",
            request.offset,
            request.path,
            meta.len()
        ));
    }
    Ok((file, meta.len()))
}

/// Writes `Sending { len }` and the bytes from `offset` to `len`, then finishes the stream.
async fn send_file(
    send: &mut SendStream,
    file: &mut tokio::fs::File,
    len: u64,
    offset: u64,
) -> Result<u64, std::io::Error> {
    let broken = |what: String| std::io::Error::other(what);
    write_frame(send, &ShuffleReply::Sending { len }, DEFAULT_MAX_FRAME)
        .await
        .map_err(|e| broken(e.to_string()))?;
    file.seek(SeekFrom::Start(offset)).await?;
    let mut left = len - offset;
    let mut buf = vec![0u8; CHUNK];
    while left > 0 {
        let want = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
        let got = file.read(&mut buf[..want]).await?;
        if got == 0 {
            return Err(broken(format!("the file shrank: {left} bytes short")));
        }
        tokio::time::timeout(IDLE_STREAM_TIMEOUT, send.write_all(&buf[..got]))
            .await
            .map_err(|_| broken("the fetching agent stopped reading".into()))?
            .map_err(|e| broken(e.to_string()))?;
        left -= got as u64;
    }
    send.finish().map_err(|e| broken(e.to_string()))?;
    Ok(len - offset)
}
