//! The master refuses peers without a certificate from its CA, and rejects bad frames on
//! the stream they came on while it keeps serving everyone else.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use slotmarket_common::client::Client;
use slotmarket_common::identity::Role;
use slotmarket_common::pki::{self, TlsFiles};
use slotmarket_common::protocol::{
    ClientRequest, DEFAULT_MAX_FRAME, ErrorKind, MasterToAgent, NodeSummary, PROTOCOL_VERSION, Request,
    Response, decode_frame, encode_frame,
};
use slotmarket_common::transport::{self, ALPN};

use crate::support::{TestCluster, WAIT};

/// Connects and asks for the node list; any failure along the way is a refusal.
async fn try_request(
    connect: impl Future<Output = anyhow::Result<Client>>,
) -> anyhow::Result<Vec<NodeSummary>> {
    let client = tokio::time::timeout(Duration::from_secs(10), connect).await??;
    let answer = tokio::time::timeout(Duration::from_secs(10), client.nodes()).await??;
    Ok(answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_without_a_certificate_from_the_cluster_ca_are_refused() {
    let cluster = TestCluster::start(&[]).await;
    let addr = cluster.addr;

    // A certificate from another cluster's CA.
    let other = tempfile::tempdir().unwrap();
    pki::init(other.path(), &[]).unwrap();
    let foreign = TlsFiles { ca: cluster.tls("admin").ca, ..TlsFiles::in_dir(other.path(), "admin") };
    let refused = try_request(async { Ok(Client::connect(addr, "localhost", &foreign).await?) }).await;
    assert!(refused.is_err(), "a foreign certificate was accepted: {refused:?}");

    // No certificate at all.
    let refused = try_request(async { no_certificate_request(&cluster).await }).await;
    assert!(refused.is_err(), "a client without a certificate was accepted: {refused:?}");

    // The cluster's own admin still gets through.
    let answer = try_request(async { Ok(cluster.client("admin").await) }).await;
    assert!(answer.is_ok(), "{answer:?}");
}

async fn no_certificate_request(cluster: &TestCluster) -> anyhow::Result<Client> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(cluster.tls("admin").ca)?)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse()?)?;
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    let conn = endpoint.connect(cluster.addr, "localhost")?.await?;
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(&encode_frame(&ClientRequest::new(Request::Nodes), DEFAULT_MAX_FRAME)?).await?;
    send.finish()?;
    let bytes = recv.read_to_end(DEFAULT_MAX_FRAME).await?;
    let (answer, _): (Response, usize) = decode_frame(&bytes, DEFAULT_MAX_FRAME)?;
    anyhow::bail!("the master answered a client without a certificate: {answer:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_oversized_and_other_version_frames_are_rejected_while_others_are_served() {
    let cluster = TestCluster::start(&[]).await;
    pki::issue(&cluster.dir.path().join("pki"), Role::User, "mallory").unwrap();
    let tls = cluster.tls("mallory");
    let endpoint = transport::client_endpoint(&tls, cluster.addr).unwrap();
    let conn = transport::connect(&endpoint, cluster.addr, "localhost").await.unwrap();
    let good = cluster.client("alice").await;

    // A frame whose payload is not a request.
    let garbage = [0u8, 0, 0, 4, 0xff, 0xff, 0xff, 0xff];
    let answer = raw_exchange(&conn, &garbage).await;
    assert!(matches!(&answer, Response::Error(e) if e.kind == ErrorKind::BadRequest), "{answer:?}");

    // A length prefix over the limit: refused before the payload is read.
    let oversized = u32::try_from(DEFAULT_MAX_FRAME + 1).unwrap().to_be_bytes();
    let answer = raw_exchange(&conn, &oversized).await;
    match &answer {
        Response::Error(e) => {
            assert!(e.kind == ErrorKind::BadRequest && e.message.contains("exceeds"), "{e:?}")
        }
        other => panic!("oversized frame accepted: {other:?}"),
    }

    // A request from a client of another protocol version, whose body this build cannot
    // decode: told to use a matching build, not that its frame is malformed.
    let mut older = postcard::to_allocvec(&(PROTOCOL_VERSION - 1)).unwrap();
    older.extend_from_slice(&[0xff, 0xff, 0xff]);
    let mut framed = u32::try_from(older.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&older);
    match raw_exchange(&conn, &framed).await {
        Response::Error(e) => assert!(
            e.kind == ErrorKind::VersionMismatch
                && e.message.contains(&format!("client speaks protocol version {}", PROTOCOL_VERSION - 1)),
            "{e:?}"
        ),
        other => panic!("a request of another version accepted: {other:?}"),
    }

    // The same connection and another client still work.
    let valid = encode_frame(&ClientRequest::new(Request::Nodes), DEFAULT_MAX_FRAME).unwrap();
    assert!(matches!(raw_exchange(&conn, &valid).await, Response::Nodes(_)));
    assert!(good.nodes().await.is_ok());
    good.close().await;
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_of_another_protocol_version_is_refused_saying_so() {
    let cluster = TestCluster::start(&[]).await;
    pki::issue(&cluster.dir.path().join("pki"), Role::Agent, "older").unwrap();
    let tls = cluster.tls("older");
    let endpoint = transport::client_endpoint(&tls, cluster.addr).unwrap();
    let conn = transport::connect(&endpoint, cluster.addr, "localhost").await.unwrap();
    // `AgentToMaster::Register` (variant 0) of the previous version, its rest unreadable.
    let mut register = postcard::to_allocvec(&(0u32, PROTOCOL_VERSION - 1)).unwrap();
    register.extend_from_slice(&[0xff, 0xff, 0xff]);
    let mut framed = u32::try_from(register.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&register);
    let answer = tokio::time::timeout(WAIT, async {
        let (mut send, mut recv) = conn.open_bi().await.expect("open stream");
        send.write_all(&framed).await.expect("write");
        let reply = recv.read_to_end(DEFAULT_MAX_FRAME).await.expect("read answer");
        decode_frame::<MasterToAgent>(&reply, DEFAULT_MAX_FRAME).expect("framed answer").0
    })
    .await
    .expect("answer in time");
    match answer {
        MasterToAgent::Refused { reason } => assert!(
            reason.contains(&format!("protocol version {} is not supported", PROTOCOL_VERSION - 1)),
            "{reason}"
        ),
        other => panic!("an agent of another version was not refused: {other:?}"),
    }
    endpoint.wait_idle().await;
}

/// Writes `bytes` on a fresh stream and reads the master's one framed answer.
async fn raw_exchange(conn: &quinn::Connection, bytes: &[u8]) -> Response {
    tokio::time::timeout(WAIT, async {
        let (mut send, mut recv) = conn.open_bi().await.expect("open stream");
        send.write_all(bytes).await.expect("write");
        let _ = send.finish();
        let reply = recv.read_to_end(DEFAULT_MAX_FRAME).await.expect("read answer");
        decode_frame::<Response>(&reply, DEFAULT_MAX_FRAME).expect("framed answer").0
    })
    .await
    .expect("answer in time")
}
