//! Client sessions: one bidirectional stream per request. Decodes the request, checks
//! its protocol version, hands it to the actor and writes the answer back. A malformed
//! or oversized frame is answered with an error on that stream only; the connection
//! and every other stream keep working. Requests reach the actor in the order the client
//! opened their streams, whatever order their bytes arrive in: `submit A.toml B.toml`
//! pipelines its specs, and A must get the lower id and be admitted first.

use slotmarket_common::identity::Identity;
use slotmarket_common::protocol::frame::decode_payload;
use slotmarket_common::protocol::version::client_request_version;
use slotmarket_common::protocol::{
    ClientRequest, ErrorKind, FrameError, PROTOCOL_VERSION, Request, Response,
};
use slotmarket_common::transport::{FRAME_ERROR_CODE, StreamError, read_payload, write_frame};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{Instrument, debug, info_span, warn};

use super::Input;

/// How long a client may take to send its request once it opened a stream.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves one client connection: a task per request stream until the client leaves.
pub(super) async fn serve(
    conn: quinn::Connection,
    caller: Identity,
    inbox: mpsc::UnboundedSender<Input>,
    max_frame: usize,
) {
    let span = info_span!("client", peer = %caller, remote = %conn.remote_address());
    async move {
        let mut turns = Turns::new();
        loop {
            let (send, recv) = match conn.accept_bi().await {
                Ok(streams) => streams,
                Err(error) => {
                    debug!(%error, "client connection ended");
                    return;
                }
            };
            let (caller, inbox) = (caller.clone(), inbox.clone());
            let turn = turns.next();
            tokio::spawn(serve_stream(send, recv, caller, inbox, max_frame, turn).in_current_span());
        }
    }
    .instrument(span)
    .await
}

/// One request stream's place in its connection's order: it hands its request to the
/// actor once the stream opened before it has handed over its own or given up
/// (`handed_over` dropped), and then lets the next one go. quinn accepts a connection's
/// streams in the order the client opened them.
struct InOrder {
    after: oneshot::Receiver<()>,
    /// Dropped, never sent on: the next stream's `after` then completes.
    _handed_over: oneshot::Sender<()>,
}

impl InOrder {
    /// Waits for the stream before this one to hand over its request (or give up).
    async fn wait_turn(&mut self) {
        let _ = (&mut self.after).await;
    }
}

/// A connection's streams in the order accepted: what the next one waits for.
struct Turns(oneshot::Receiver<()>);

impl Turns {
    /// For a new connection: its first stream waits for nothing.
    fn new() -> Turns {
        let (done, after) = oneshot::channel();
        drop(done);
        Turns(after)
    }

    /// The place of the stream accepted now, after the one before it.
    fn next(&mut self) -> InOrder {
        let (handed_over, after) = oneshot::channel();
        InOrder { after: std::mem::replace(&mut self.0, after), _handed_over: handed_over }
    }
}

async fn serve_stream(
    send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    caller: Identity,
    inbox: mpsc::UnboundedSender<Input>,
    max_frame: usize,
    mut turn: InOrder,
) {
    let read = tokio::time::timeout(REQUEST_TIMEOUT, read_payload(&mut recv, max_frame)).await;
    let Ok(read) = read else {
        debug!("request not received in time; dropping the stream");
        let _ = recv.stop(FRAME_ERROR_CODE);
        return;
    };
    let payload = match read {
        Ok(Some(payload)) => payload,
        Ok(None) => return,
        Err(StreamError::Frame(error)) => return reject_frame(send, &mut recv, error, max_frame).await,
        Err(error) => {
            debug!(%error, "request stream failed");
            return;
        }
    };
    // The version first: a client of another version may send a body this build cannot
    // decode, and should hear that it needs a matching build, not that its frame is bad.
    if let Some(version) = client_request_version(&payload).filter(|&v| v != PROTOCOL_VERSION) {
        let message = format!(
            "client speaks protocol version {version}, this master speaks {PROTOCOL_VERSION}; use a matching slotmarket"
        );
        return finish(send, &Response::error(ErrorKind::VersionMismatch, message), max_frame).await;
    }
    let request = match decode_payload::<ClientRequest>(&payload) {
        Ok(request) => request,
        Err(error) => return reject_frame(send, &mut recv, error, max_frame).await,
    };
    // Every early return above drops `turn`, which lets the next stream go.
    turn.wait_turn().await;
    let request = match request.body {
        Request::Watch { job } => return stream_watch(send, caller, job, inbox, max_frame, turn).await,
        Request::SubmitWatch { spec } => {
            return stream_submit_watch(send, caller, spec, inbox, max_frame, turn).await;
        }
        request => request,
    };
    let (reply, answer) = oneshot::channel();
    let handed = inbox.send(Input::Request { caller, request, reply });
    drop(turn);
    let response = match handed {
        Ok(()) => answer.await.unwrap_or_else(|_| shutting_down()),
        Err(_) => shutting_down(),
    };
    finish(send, &response, max_frame).await;
}

async fn stream_watch(
    send: quinn::SendStream,
    caller: Identity,
    job: slotmarket_common::ids::JobId,
    inbox: mpsc::UnboundedSender<Input>,
    max_frame: usize,
    turn: InOrder,
) {
    let (updates, updates_rx) = watch::channel(None);
    let handed = inbox.send(Input::Watch { caller, job, updates });
    drop(turn);
    if handed.is_err() {
        return finish(send, &shutting_down(), max_frame).await;
    }
    forward_updates(send, updates_rx, max_frame).await;
}

/// A submit and a watch in one stream: the actor's answer to the submit first (held until
/// the admission is durable), then, if it was admitted, the job's updates as a watch
/// gives them. Nothing of the watch is written before the answer, so no update can tell
/// the client of a job whose admission is not durable yet.
async fn stream_submit_watch(
    mut send: quinn::SendStream,
    caller: Identity,
    spec: slotmarket_common::spec::JobSpec,
    inbox: mpsc::UnboundedSender<Input>,
    max_frame: usize,
    turn: InOrder,
) {
    let (reply, answer) = oneshot::channel();
    let (updates, updates_rx) = watch::channel(None);
    let handed = inbox.send(Input::SubmitWatch { caller, spec, reply, updates });
    drop(turn);
    if handed.is_err() {
        return finish(send, &shutting_down(), max_frame).await;
    }
    // A client that goes away while its job is admitted is noticed at once.
    let response = tokio::select! {
        answer = answer => answer.unwrap_or_else(|_| shutting_down()),
        _ = send.stopped() => return,
    };
    if !matches!(response, Response::Submitted { .. }) {
        return finish(send, &response, max_frame).await;
    }
    if let Err(error) = write_frame(&mut send, &response, max_frame).await {
        debug!(%error, "could not write the response");
        return;
    }
    forward_updates(send, updates_rx, max_frame).await;
}

/// Writes the watch's updates to `send` until the actor drops the sender after the last
/// one (the job ended) or the reader goes away.
async fn forward_updates(
    mut send: quinn::SendStream,
    mut updates_rx: watch::Receiver<Option<Response>>,
    max_frame: usize,
) {
    loop {
        // A watcher that goes away is noticed at once, not at the job's next change.
        let changed = tokio::select! {
            changed = updates_rx.changed() => changed,
            _ = send.stopped() => return,
        };
        // An error means the actor dropped the sender after the last update (the job
        // ended), and that update has been written already: `changed` reports an unseen
        // value before it reports the close.
        if changed.is_err() {
            break;
        }
        // Only the newest state is kept: while a write waits on a slow reader, the
        // updates in between are replaced, not queued.
        let Some(response) = updates_rx.borrow_and_update().clone() else { continue };
        if let Err(error) = write_frame(&mut send, &response, max_frame).await {
            debug!(%error, "watcher went away");
            return;
        }
    }
    let _ = send.finish();
}

/// Answers a frame that is oversized, truncated or not a request, on its stream only.
async fn reject_frame(
    send: quinn::SendStream,
    recv: &mut quinn::RecvStream,
    error: FrameError,
    max_frame: usize,
) {
    warn!(%error, "rejected a bad request frame");
    let _ = recv.stop(FRAME_ERROR_CODE);
    let message = format!("rejected request: {error}");
    finish(send, &Response::error(ErrorKind::BadRequest, message), max_frame).await
}

async fn finish(mut send: quinn::SendStream, response: &Response, max_frame: usize) {
    if let Err(error) = write_frame(&mut send, response, max_frame).await {
        debug!(%error, "could not write the response");
        return;
    }
    let _ = send.finish();
}

fn shutting_down() -> Response {
    Response::error(ErrorKind::Internal, "the master is shutting down")
}
