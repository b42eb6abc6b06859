//! Tests only: an in-process stand-in for the master that answers each request from a
//! function, over real QUIC with the cluster's mutual TLS, so the commands' request paths
//! are tested without the master binary.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use slotmarket_common::identity::Role;
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::pki::{self, TlsFiles};
use slotmarket_common::protocol::{
    ClientRequest, DEFAULT_MAX_FRAME, JobState, JobStatus, JobSummary, Request, Response,
};
use slotmarket_common::time::Timestamp;
use slotmarket_common::transport::{self, read_frame, write_frame};

use crate::connection::{ClientOptions, ConnectionArgs};

/// How the fake answers a request: every response in order, then the stream ends.
type Answer = dyn Fn(Request) -> Vec<Response> + Send + Sync;

/// A running fake master with its certificate directory (`admin` and user `alice`).
pub(crate) struct FakeMaster {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// The cluster's certificates; removed when the fake is dropped.
    pub(crate) certs: tempfile::TempDir,
    /// Every request received, in arrival order.
    pub(crate) seen: Arc<Mutex<Vec<Request>>>,
}

impl FakeMaster {
    /// Makes a CA and starts answering on a free loopback port.
    pub(crate) fn start(answer: impl Fn(Request) -> Vec<Response> + Send + Sync + 'static) -> FakeMaster {
        let certs = tempfile::tempdir().unwrap();
        pki::init(certs.path(), &[]).unwrap();
        pki::issue(certs.path(), Role::User, "alice").unwrap();
        let files = TlsFiles::in_dir(certs.path(), pki::MASTER_NAME);
        let endpoint = transport::server_endpoint("127.0.0.1:0".parse().unwrap(), &files).unwrap();
        let addr = endpoint.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(answer);
        let recorded = seen.clone();
        tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let Ok(conn) = incoming.await else { continue };
                let (answer, recorded) = (answer.clone(), recorded.clone());
                tokio::spawn(async move {
                    while let Ok((send, recv)) = conn.accept_bi().await {
                        tokio::spawn(serve_stream(send, recv, answer.clone(), recorded.clone()));
                    }
                });
            }
        });
        FakeMaster { addr, certs, seen }
    }

    /// Client options for `identity` against this fake.
    pub(crate) fn options(&self, identity: &str) -> ClientOptions {
        ClientOptions {
            master: self.addr.to_string(),
            server_name: "localhost".into(),
            cert_dir: self.certs.path().to_path_buf(),
            identity: identity.into(),
        }
    }

    /// Command-line connection flags for `identity` against this fake, as a user would
    /// pass them (`--master`, `--cert-dir`, `--identity`).
    pub(crate) fn conn_args(&self, identity: &str) -> ConnectionArgs {
        ConnectionArgs {
            master: Some(self.addr.to_string()),
            cert_dir: Some(self.certs.path().to_path_buf()),
            identity: Some(identity.into()),
            ..ConnectionArgs::default()
        }
    }

    /// The requests received so far.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads one request, records it and writes the answers.
async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    answer: Arc<Answer>,
    recorded: Arc<Mutex<Vec<Request>>>,
) {
    let Ok(Some(request)) = read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME).await else { return };
    recorded.lock().unwrap().push(request.body.clone());
    for response in answer(request.body) {
        if write_frame(&mut send, &response, DEFAULT_MAX_FRAME).await.is_err() {
            return;
        }
    }
    let _ = send.finish();
    let _ = send.stopped().await;
}

/// A job status as the fake reports it.
pub(crate) fn status(job: JobId, name: &str, state: JobState) -> JobStatus {
    let ended = state.is_terminal();
    JobStatus {
        summary: JobSummary {
            id: job,
            name: name.into(),
            account: AccountId("alice".into()),
            state,
            submitted: Timestamp(1_000),
            started: (state != JobState::Pending).then_some(Timestamp(1_500)),
            finished: ended.then_some(Timestamp(4_000)),
            tasks_total: 2,
            tasks_completed: if ended { 2 } else { 0 },
            tasks_running: if ended { 0 } else { 1 },
            owner: AccountId("alice".into()),
            deadline: None,
            predicted_finish: None,
            price: None,
            paid: None,
            demand_class: None,
        },
        stages: vec![],
        message: None,
        slo: None,
    }
}
