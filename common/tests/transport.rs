//! Loopback QUIC tests: mutual TLS with certificates made in a temporary directory, the
//! request client against a tiny in-test server, and frame errors on real streams.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicClientConfig;
use slotmarket_common::client::{Client, ClientError};
use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::pki::{self, TlsFiles};
use slotmarket_common::protocol::frame::FrameError;
use slotmarket_common::protocol::{
    ClientRequest, DEFAULT_MAX_FRAME, ErrorKind, ErrorReply, JobState, JobStatus, JobSummary, JobsPage,
    JobsQuery, Request, Response,
};
use slotmarket_common::time::Timestamp;
use slotmarket_common::transport::{self, FRAME_ERROR_CODE, StreamError, read_frame, write_frame};
use tokio::sync::mpsc;
use tokio::time::timeout;

/// Upper bound on every wait in these tests.
const WAIT: Duration = Duration::from_secs(10);

/// What the test server saw of one incoming connection.
#[derive(Debug)]
enum Seen {
    /// The handshake completed with this client identity.
    Connected(Identity),
    /// The handshake failed.
    Refused(String),
}

/// A cluster CA with `alice` (user) issued, in a temporary directory.
fn cluster() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    pki::init(dir.path(), &[]).unwrap();
    pki::issue(dir.path(), Role::User, "alice").unwrap();
    dir
}

/// Starts a server on 127.0.0.1 that answers requests (see [`answer`]) and reports every
/// handshake on the returned channel.
fn start_server(dir: &Path) -> (SocketAddr, mpsc::UnboundedReceiver<Seen>) {
    let bind: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let endpoint = transport::server_endpoint(bind, &TlsFiles::in_dir(dir, "master")).unwrap();
    let addr = endpoint.local_addr().unwrap();
    let (seen, seen_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let conn = match incoming.await {
                    Ok(conn) => conn,
                    Err(err) => return drop(seen.send(Seen::Refused(err.to_string()))),
                };
                let _ = seen.send(Seen::Connected(transport::peer_identity(&conn).unwrap()));
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    tokio::spawn(async move {
                        let Ok(Some(request)) =
                            read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME).await
                        else {
                            return;
                        };
                        for response in answer(request.body) {
                            if write_frame(&mut send, &response, DEFAULT_MAX_FRAME).await.is_err() {
                                return;
                            }
                        }
                        let _ = send.finish();
                        let _ = send.stopped().await;
                    });
                }
            });
        }
    });
    (addr, seen_rx)
}

/// The test server's answers: `Jobs` lists nothing, `Status` is not found, `Watch` sends
/// two statuses and ends.
fn answer(request: Request) -> Vec<Response> {
    match request {
        Request::Jobs(_) => vec![Response::Jobs(JobsPage { jobs: vec![], next: None })],
        Request::Watch { job } => {
            vec![
                Response::Job(status(job, JobState::Running)),
                Response::Job(status(job, JobState::Completed)),
            ]
        }
        _ => vec![Response::Error(ErrorReply { kind: ErrorKind::NotFound, message: "no such job".into() })],
    }
}

fn status(job: JobId, state: JobState) -> JobStatus {
    JobStatus {
        summary: JobSummary {
            id: job,
            name: "wc".into(),
            account: AccountId("alice".into()),
            state,
            submitted: Timestamp(1),
            started: None,
            finished: None,
            tasks_total: 1,
            tasks_completed: 0,
            tasks_running: 0,
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

async fn next_seen(seen: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    timeout(WAIT, seen.recv()).await.expect("server saw no handshake in time").expect("server stopped")
}

#[tokio::test]
async fn a_client_with_a_cluster_certificate_gets_answers() {
    let dir = cluster();
    let (addr, mut seen) = start_server(dir.path());
    let client = timeout(WAIT, Client::connect(addr, "localhost", &TlsFiles::in_dir(dir.path(), "alice")))
        .await
        .unwrap();
    let client = client.unwrap();
    let alice = Identity { role: Role::User, principal: "alice".into() };
    assert!(matches!(next_seen(&mut seen).await, Seen::Connected(id) if id == alice));
    assert_eq!(client.identity(), &alice);
    assert_eq!(client.server(), &Identity { role: Role::Master, principal: "master".into() });

    let jobs = timeout(WAIT, client.call(Request::Jobs(JobsQuery::default()))).await.unwrap().unwrap();
    assert_eq!(jobs, Response::Jobs(JobsPage { jobs: vec![], next: None }));
    let missing = timeout(WAIT, client.call(Request::Status { job: JobId(7) })).await.unwrap();
    assert!(matches!(missing, Err(ClientError::Server(ErrorReply { kind: ErrorKind::NotFound, .. }))));

    let mut watch = timeout(WAIT, client.watch(JobId(3))).await.unwrap().unwrap();
    let mut states = vec![];
    while let Some(status) = timeout(WAIT, watch.next()).await.unwrap().unwrap() {
        states.push(status.summary.state);
    }
    assert_eq!(states, [JobState::Running, JobState::Completed]);
    timeout(WAIT, client.close()).await.unwrap();
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused_at_the_handshake() {
    let dir = cluster();
    let (addr, mut seen) = start_server(dir.path());

    // Built by hand: trusts the cluster CA but presents no certificate.
    let ca = TlsFiles::in_dir(dir.path(), "alice").load().unwrap().ca;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca[0].clone()).unwrap();
    let mut crypto =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    crypto.alpn_protocols = vec![transport::ALPN.to_vec()];
    let config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto).unwrap()));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(config);

    // TLS 1.3 lets the client finish its side before the server judges its certificate,
    // so the refusal may surface at connect or at the first request.
    let attempt = timeout(WAIT, async {
        let conn = transport::connect(&endpoint, addr, "localhost").await.map_err(|e| e.to_string())?;
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
        write_frame(&mut send, &ClientRequest::new(Request::Nodes), DEFAULT_MAX_FRAME)
            .await
            .map_err(|e| e.to_string())?;
        read_frame::<Response>(&mut recv, DEFAULT_MAX_FRAME).await.map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    assert!(attempt.is_err(), "{attempt:?}");
    match next_seen(&mut seen).await {
        Seen::Refused(reason) => assert!(reason.to_lowercase().contains("certificate"), "{reason}"),
        other => panic!("server accepted a client without a certificate: {other:?}"),
    }
}

#[tokio::test]
async fn a_client_certificate_from_another_ca_is_refused() {
    let dir = cluster();
    let other = cluster();
    let (addr, mut seen) = start_server(dir.path());
    // Trusts the real CA (so it accepts the server) but presents a foreign certificate.
    let files = TlsFiles { ca: dir.path().join("ca.pem"), ..TlsFiles::in_dir(other.path(), "alice") };
    let attempt = timeout(WAIT, async {
        let client = Client::connect(addr, "localhost", &files).await?;
        client.call(Request::Nodes).await
    })
    .await
    .unwrap();
    assert!(attempt.is_err(), "{attempt:?}");
    match next_seen(&mut seen).await {
        Seen::Refused(reason) => assert!(reason.to_lowercase().contains("certificate"), "{reason}"),
        other => panic!("server accepted a foreign certificate: {other:?}"),
    }
}

#[tokio::test]
async fn a_client_refuses_a_server_from_another_ca() {
    let dir = cluster();
    let other = cluster();
    let (addr, _seen) = start_server(dir.path());
    let attempt = timeout(WAIT, Client::connect(addr, "localhost", &TlsFiles::in_dir(other.path(), "alice")))
        .await
        .unwrap();
    let err = attempt.unwrap_err();
    assert!(matches!(err, ClientError::Transport(transport::TransportError::Handshake { .. })), "{err}");
}

/// A raw connection pair on loopback: (client side, server side).
async fn pair(dir: &Path) -> (quinn::Endpoint, quinn::Connection, quinn::Endpoint, quinn::Connection) {
    let server =
        transport::server_endpoint("127.0.0.1:0".parse().unwrap(), &TlsFiles::in_dir(dir, "master")).unwrap();
    let addr = server.local_addr().unwrap();
    let client = transport::client_endpoint(&TlsFiles::in_dir(dir, "alice"), addr).unwrap();
    let (client_conn, server_conn) = timeout(WAIT, async {
        let accepting = async { server.accept().await.unwrap().await.unwrap() };
        tokio::join!(transport::connect(&client, addr, "127.0.0.1"), accepting)
    })
    .await
    .unwrap();
    (client, client_conn.unwrap(), server, server_conn)
}

/// Opens a stream from the client, writes `bytes` (finishing if asked) and returns the
/// server's halves.
async fn send_raw(
    client: &quinn::Connection,
    server: &quinn::Connection,
    bytes: &[u8],
    finish: bool,
) -> (quinn::SendStream, quinn::RecvStream, quinn::SendStream, quinn::RecvStream) {
    let (mut send, recv) = timeout(WAIT, client.open_bi()).await.unwrap().unwrap();
    send.write_all(bytes).await.unwrap();
    if finish {
        send.finish().unwrap();
    }
    let (server_send, server_recv) = timeout(WAIT, server.accept_bi()).await.unwrap().unwrap();
    (send, recv, server_send, server_recv)
}

#[tokio::test]
async fn an_oversized_prefix_is_refused_without_waiting_for_the_payload() {
    let dir = cluster();
    let (_ce, client, _se, server) = pair(dir.path()).await;
    let prefix = u32::try_from(DEFAULT_MAX_FRAME + 1).unwrap().to_be_bytes();
    // The stream stays open and no payload follows: reading it would hang.
    let (_send, _recv, _ss, mut recv) = send_raw(&client, &server, &prefix, false).await;
    let result = timeout(WAIT, read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME)).await.unwrap();
    let err = result.unwrap_err();
    assert!(
        matches!(err.frame(), Some(FrameError::TooLarge { len, limit })
            if *len == DEFAULT_MAX_FRAME + 1 && *limit == DEFAULT_MAX_FRAME),
        "{err}"
    );
}

#[tokio::test]
async fn a_malformed_payload_closes_only_its_stream() {
    let dir = cluster();
    let (_ce, client, _se, server) = pair(dir.path()).await;
    let (_send, mut client_recv, mut server_send, mut recv) =
        send_raw(&client, &server, &[0, 0, 0, 3, 0xff, 0xff, 0xff], true).await;
    let err =
        timeout(WAIT, read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME)).await.unwrap().unwrap_err();
    assert!(matches!(err, StreamError::Frame(FrameError::Malformed(_))), "{err}");

    transport::abort_stream(&mut server_send, &mut recv, FRAME_ERROR_CODE);
    let reset = timeout(WAIT, read_frame::<Response>(&mut client_recv, DEFAULT_MAX_FRAME)).await.unwrap();
    assert!(
        matches!(reset, Err(StreamError::Read(quinn::ReadError::Reset(code))) if code == FRAME_ERROR_CODE),
        "{reset:?}"
    );

    // The connection is unharmed: a good frame on a new stream still goes through.
    let good =
        slotmarket_common::protocol::encode_frame(&ClientRequest::new(Request::Nodes), DEFAULT_MAX_FRAME)
            .unwrap();
    let (_send, _recv, _ss, mut recv) = send_raw(&client, &server, &good, true).await;
    let request = timeout(WAIT, read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME)).await.unwrap();
    assert_eq!(request.unwrap(), Some(ClientRequest::new(Request::Nodes)));
}

#[tokio::test]
async fn streams_end_cleanly_or_truncated() {
    let dir = cluster();
    let (_ce, client, _se, server) = pair(dir.path()).await;

    let (_send, _recv, _ss, mut recv) = send_raw(&client, &server, &[], true).await;
    let clean = timeout(WAIT, read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME)).await.unwrap();
    assert!(matches!(clean, Ok(None)), "{clean:?}");

    for (bytes, expected, got) in [(&[0u8, 0][..], 4, 2), (&[0, 0, 0, 5, 1][..], 9, 5)] {
        let (_send, _recv, _ss, mut recv) = send_raw(&client, &server, bytes, true).await;
        let cut = timeout(WAIT, read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME)).await.unwrap();
        assert!(
            matches!(cut, Err(StreamError::Frame(FrameError::Truncated { expected: e, got: g }))
                if e == expected && g == got),
            "{cut:?}"
        );
    }

    // Two frames back to back are read one at a time, then the clean end.
    let (mut send, _recv) = timeout(WAIT, client.open_bi()).await.unwrap().unwrap();
    let jobs = Request::Jobs(JobsQuery::default());
    write_frame(&mut send, &ClientRequest::new(jobs.clone()), DEFAULT_MAX_FRAME).await.unwrap();
    write_frame(&mut send, &ClientRequest::new(Request::Nodes), DEFAULT_MAX_FRAME).await.unwrap();
    send.finish().unwrap();
    let (_ss, mut recv) = timeout(WAIT, server.accept_bi()).await.unwrap().unwrap();
    for expected in [Some(jobs), Some(Request::Nodes), None] {
        let got = timeout(WAIT, read_frame::<ClientRequest>(&mut recv, DEFAULT_MAX_FRAME)).await.unwrap();
        assert_eq!(got.unwrap().map(|r| r.body), expected);
    }
}

#[tokio::test]
async fn peers_see_each_others_identity() {
    let dir = cluster();
    let (_ce, client, _se, server) = pair(dir.path()).await;
    assert_eq!(
        transport::peer_identity(&server).unwrap(),
        Identity { role: Role::User, principal: "alice".into() }
    );
    assert_eq!(
        transport::peer_identity(&client).unwrap(),
        Identity { role: Role::Master, principal: "master".into() }
    );
}
