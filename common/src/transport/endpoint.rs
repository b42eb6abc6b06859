//! quinn endpoint construction: TLS 1.3 only, ALPN `slotmarket/1`, and mutual TLS in which
//! both sides present a certificate from the cluster CA and verify the other's against it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{NoInitialCipherSuite, QuicClientConfig, QuicServerConfig};
use quinn::{IdleTimeout, TransportConfig, VarInt};
use quinn_proto::HashedConnectionIdGenerator;
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls_pki_types::CertificateDer;
use thiserror::Error;

use crate::identity::{Identity, Role};
use crate::pki::{PkiError, TlsFiles, TlsMaterial, identity_from_der};

/// The one application protocol both sides speak.
pub const ALPN: &[u8] = b"slotmarket/1";

/// A connection with no traffic for this long is closed (the smaller of both sides' values).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a client pings an otherwise idle connection.
pub const CLIENT_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// How often the server pings an otherwise idle connection.
pub const SERVER_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Ack-eliciting packets a peer may receive before it must acknowledge (QUIC's ACK
/// frequency extension; the default, 1, acknowledges every second one). An agent's
/// reports and the master's launches are many small packets each way.
const ACKS_AFTER: u32 = 8;

/// Why an endpoint could not be built, a connection made, or a peer identified.
#[derive(Debug, Error)]
pub enum TransportError {
    /// The certificate files could not be read.
    #[error(transparent)]
    Files(#[from] PkiError),
    /// The CA file holds a certificate rustls refuses as a trust anchor.
    #[error("{path} cannot be used as a trust anchor: {source}")]
    BadCa {
        /// The CA file.
        path: std::path::PathBuf,
        /// Why rustls refused it.
        source: rustls::Error,
    },
    /// rustls refused the configuration (for example a key that does not match the certificate).
    #[error("TLS configuration refused: {0}; check that the .pem and .key files belong together")]
    Tls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built.
    #[error("cannot build the client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// The crypto provider lacks the cipher suite QUIC needs for its initial packets.
    #[error("TLS provider unusable for QUIC: {0}")]
    Quic(#[from] NoInitialCipherSuite),
    /// The UDP socket could not be bound (or no tokio runtime is running).
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The connection attempt could not be started (bad server name, endpoint closed...).
    #[error("cannot connect to {addr} as {server_name:?}: {source}")]
    Connect {
        /// The server address.
        addr: SocketAddr,
        /// The TLS server name.
        server_name: String,
        /// quinn's reason.
        source: quinn::ConnectError,
    },
    /// The handshake failed: the peer is unreachable, or refused our certificate, or
    /// presented one not signed by our CA.
    #[error("connection to {addr} failed: {source}")]
    Handshake {
        /// The server address.
        addr: SocketAddr,
        /// quinn's reason.
        source: quinn::ConnectionError,
    },
    /// The handshake did not complete in time (the master is down or unreachable: QUIC
    /// runs over UDP, so nobody answering often looks like silence, not a refusal).
    #[error("no answer from {addr} within {}s", timeout.as_secs_f64())]
    ConnectTimeout {
        /// The server address.
        addr: SocketAddr,
        /// How long was waited.
        timeout: Duration,
    },
    /// The server's certificate is valid but not the master's.
    #[error("the server presents a certificate for {0}, not the master")]
    NotMaster(Identity),
    /// The peer presented no certificate (never the case once the handshake succeeded).
    #[error("peer presented no certificate")]
    NoPeerCertificate,
    /// The peer's certificate does not name a Slotmarket identity.
    #[error("peer certificate names no Slotmarket identity: {0}")]
    PeerIdentity(#[source] PkiError),
    /// A `host:port` address could not be resolved.
    #[error("cannot resolve {addr:?} (expected host:port): {source}")]
    Resolve {
        /// The address given.
        addr: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// A `host:port` address resolved to nothing.
    #[error("{addr:?} resolves to no address")]
    NoAddress {
        /// The address given.
        addr: String,
    },
}

/// A server endpoint on `bind` presenting `files.cert` and requiring every client to
/// present a certificate signed by `files.ca`. Must be called inside a tokio runtime.
pub fn server_endpoint(bind: SocketAddr, files: &TlsFiles) -> Result<quinn::Endpoint, TransportError> {
    server_endpoint_for(bind, files, ALPN)
}

/// Like [`server_endpoint`], speaking `alpn` instead of the master's protocol (an agent's
/// shuffle service uses [`crate::protocol::SHUFFLE_ALPN`]).
pub fn server_endpoint_for(
    bind: SocketAddr,
    files: &TlsFiles,
    alpn: &[u8],
) -> Result<quinn::Endpoint, TransportError> {
    let config = server_config(files, alpn)?;
    quinn::Endpoint::server(config, bind).map_err(|source| TransportError::Bind { addr: bind, source })
}

/// Like [`server_endpoint`], with connection ids and stateless-reset tokens derived from
/// `restart_secret`. A master that keeps the secret across restarts answers packets
/// for its predecessor's connections with a valid stateless reset, so agents notice the
/// restart at once and reconnect, instead of waiting out the idle timeout.
pub fn server_endpoint_with_secret(
    bind: SocketAddr,
    files: &TlsFiles,
    restart_secret: &[u8; 32],
) -> Result<quinn::Endpoint, TransportError> {
    let config = server_config(files, ALPN)?;
    let reset_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, restart_secret);
    // The id generator's key must be stable too: the new endpoint only resets packets whose
    // connection id it recognises as one it could have issued.
    let tag = ring::hmac::sign(&reset_key, b"slotmarket connection ids");
    let mut cid_key = [0u8; 8];
    cid_key.copy_from_slice(&tag.as_ref()[..8]);
    let cid_key = u64::from_le_bytes(cid_key);
    let mut endpoint_config = quinn::EndpointConfig::new(Arc::new(reset_key));
    endpoint_config.cid_generator(move || Box::new(HashedConnectionIdGenerator::from_key(cid_key)));
    let bind_error = |source| TransportError::Bind { addr: bind, source };
    let socket = std::net::UdpSocket::bind(bind).map_err(bind_error)?;
    let runtime = quinn::default_runtime()
        .ok_or_else(|| bind_error(std::io::Error::other("no async runtime: call inside tokio")))?;
    quinn::Endpoint::new(endpoint_config, Some(config), socket, runtime).map_err(bind_error)
}

fn server_config(files: &TlsFiles, alpn: &[u8]) -> Result<quinn::ServerConfig, TransportError> {
    let crypto = server_tls_config(files, alpn)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(crypto)?));
    config.transport_config(transport_config(alpn, SERVER_KEEP_ALIVE));
    Ok(config)
}

/// The server's TLS: its certificate, every client's certificate verified against the CA.
fn server_tls_config(files: &TlsFiles, alpn: &[u8]) -> Result<rustls::ServerConfig, TransportError> {
    let TlsMaterial { ca, chain, key } = files.load()?;
    let provider = server_provider();
    let roots = Arc::new(root_store(files, ca)?);
    let verifier: Arc<dyn ClientCertVerifier> =
        WebPkiClientVerifier::builder_with_provider(roots, provider.clone()).build()?;
    let mut crypto = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    crypto.alpn_protocols = vec![alpn.to_vec()];
    // The suite is the server's choice, in `server_provider`'s order, whatever the
    // client lists first.
    crypto.ignore_client_order = true;
    // No client resumes: a CLI run is a new process with no ticket store, and an agent
    // reconnects to a restarted master that no longer holds the session. Each ticket
    // cost a random id, the session (client chain included) encoded into a shared cache,
    // and a NewSessionTicket message sent after every handshake.
    crypto.send_tls13_tickets = 0;
    crypto.session_storage = Arc::new(NoServerSessionStorage {});
    Ok(crypto)
}

/// The ring provider with TLS 1.3's AES-128-GCM-SHA256 first. QUIC encrypts its initial
/// packets with that suite anyway; after the handshake it keeps the key schedule on
/// SHA-256 (hardware-assisted here) instead of SHA-384, whose SHA-512 blocks are computed
/// in software and were 2 % of the master's CPU in a profile of one-spec submits.
fn server_provider() -> Arc<CryptoProvider> {
    use rustls::CipherSuite::{TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384};
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|suite| match suite.suite() {
        TLS13_AES_128_GCM_SHA256 => 0,
        TLS13_AES_256_GCM_SHA384 => 1,
        _ => 2,
    });
    Arc::new(provider)
}

/// A client endpoint for connecting to `target`: presents `files.cert` and accepts only a
/// server certificate signed by `files.ca`. Binds an ephemeral port on the wildcard
/// address of `target`'s family (on loopback if `target` is loopback). Must be called
/// inside a tokio runtime.
pub fn client_endpoint(files: &TlsFiles, target: SocketAddr) -> Result<quinn::Endpoint, TransportError> {
    client_endpoint_for(files, target, ALPN)
}

/// Like [`client_endpoint`], speaking `alpn` instead of the master's protocol.
pub fn client_endpoint_for(
    files: &TlsFiles,
    target: SocketAddr,
    alpn: &[u8],
) -> Result<quinn::Endpoint, TransportError> {
    let config = client_config_for(files, alpn)?;
    let bind = client_bind_addr(target);
    let mut endpoint =
        quinn::Endpoint::client(bind).map_err(|source| TransportError::Bind { addr: bind, source })?;
    endpoint.set_default_client_config(config);
    Ok(endpoint)
}

/// The client side of [`client_endpoint_for`] without its socket: TLS 1.3, `alpn`,
/// `files.cert` presented and only a server certificate signed by `files.ca` accepted.
/// For a caller that binds its own socket (the request client does).
pub fn client_config_for(files: &TlsFiles, alpn: &[u8]) -> Result<quinn::ClientConfig, TransportError> {
    let TlsMaterial { ca, chain, key } = files.load()?;
    let provider = provider();
    let roots = root_store(files, ca)?;
    let mut crypto = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)?;
    crypto.alpn_protocols = vec![alpn.to_vec()];
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto)?));
    config.transport_config(transport_config(alpn, CLIENT_KEEP_ALIVE));
    Ok(config)
}

/// Where a client socket for `target` binds: an ephemeral port on the wildcard address of
/// `target`'s family, or on loopback if `target` is loopback.
pub fn client_bind_addr(target: SocketAddr) -> SocketAddr {
    let ip = match (target.ip(), target.ip().is_loopback()) {
        (IpAddr::V4(_), false) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        (IpAddr::V4(_), true) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        (IpAddr::V6(_), false) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        (IpAddr::V6(_), true) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, 0)
}

/// Connects to `addr`, checking the server certificate against `server_name` (a DNS name
/// or IP address in the master's certificate), and waits for the handshake.
pub async fn connect(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    server_name: &str,
) -> Result<quinn::Connection, TransportError> {
    let connecting = endpoint.connect(addr, server_name).map_err(|source| TransportError::Connect {
        addr,
        server_name: server_name.to_string(),
        source,
    })?;
    connecting.await.map_err(|source| TransportError::Handshake { addr, source })
}

/// Connects to the master at `addr` like [`connect`], waiting at most `timeout` for the
/// handshake, and checks that the server's certificate is the master's. Answers the
/// connection and the identity the server presented; a server with another role is
/// disconnected and refused with [`TransportError::NotMaster`].
pub async fn connect_master(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    server_name: &str,
    timeout: Duration,
) -> Result<(quinn::Connection, Identity), TransportError> {
    // Without a bound, a master that is down costs a whole idle timeout per attempt.
    let conn = tokio::time::timeout(timeout, connect(endpoint, addr, server_name))
        .await
        .map_err(|_| TransportError::ConnectTimeout { addr, timeout })??;
    let server = peer_identity(&conn)?;
    if server.role != Role::Master {
        conn.close(VarInt::from_u32(0), b"not the master");
        return Err(TransportError::NotMaster(server));
    }
    Ok((conn, server))
}

/// The role and principal in the certificate the peer presented during the handshake.
pub fn peer_identity(conn: &quinn::Connection) -> Result<Identity, TransportError> {
    let chain = conn
        .peer_identity()
        .and_then(|any| any.downcast::<Vec<CertificateDer<'static>>>().ok())
        .ok_or(TransportError::NoPeerCertificate)?;
    let leaf = chain.first().ok_or(TransportError::NoPeerCertificate)?;
    identity_from_der(leaf).map_err(TransportError::PeerIdentity)
}

/// Resolves `host:port` (`[v6]:port` for IPv6 literals). When the name has both IPv4 and
/// IPv6 addresses the first IPv4 one is used, since masters usually bind `0.0.0.0`.
pub async fn resolve(addr: &str) -> Result<SocketAddr, TransportError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|source| TransportError::Resolve { addr: addr.to_string(), source })?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| TransportError::NoAddress { addr: addr.to_string() })
}

/// The host of a `host:port` address, as the TLS server name: `"[::1]:7000"` gives `"::1"`,
/// `"master.example:7000"` gives `"master.example"`. Without a port, `addr` itself.
pub fn host_part(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        if let Some((host, _)) = rest.split_once(']') {
            return host;
        }
    }
    match addr.rsplit_once(':') {
        // More than one colon without brackets: a bare IPv6 address, not host:port.
        Some((host, _)) if !host.contains(':') => host,
        _ => addr,
    }
}

/// The ring provider, always passed explicitly so no process-wide default is needed.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn root_store(files: &TlsFiles, ca: Vec<CertificateDer<'static>>) -> Result<RootCertStore, TransportError> {
    let mut roots = RootCertStore::empty();
    for cert in ca {
        roots.add(cert).map_err(|source| TransportError::BadCa { path: files.ca.clone(), source })?;
    }
    Ok(roots)
}

/// The transport settings of either side of a connection speaking `alpn`.
fn transport_config(alpn: &[u8], keep_alive: Duration) -> Arc<TransportConfig> {
    let mut config = TransportConfig::default();
    // IDLE_TIMEOUT is 30 s, far below VarInt's bound.
    let idle_ms = u32::try_from(IDLE_TIMEOUT.as_millis()).unwrap_or(u32::MAX);
    config.max_idle_timeout(Some(IdleTimeout::from(VarInt::from_u32(idle_ms))));
    config.keep_alive_interval(Some(keep_alive));
    if alpn == ALPN {
        // The master's messages are small (requests, answers, reports, launches), and most
        // of its connections are a CLI's one request: path MTU discovery's probes, sent by
        // both sides right after every handshake and each acknowledged by the other, were
        // about a third of the datagrams such a connection sent. The shuffle service,
        // which streams map outputs, keeps them.
        config.mtu_discovery_config(None);
        let mut acks = quinn::AckFrequencyConfig::default();
        acks.ack_eliciting_threshold(VarInt::from_u32(ACKS_AFTER));
        config.ack_frequency_config(Some(acks));
    }
    Arc::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_part_strips_ports_and_brackets() {
        assert_eq!(host_part("[::1]:7000"), "::1");
        assert_eq!(host_part("127.0.0.1:7000"), "127.0.0.1");
        assert_eq!(host_part("master.example:7000"), "master.example");
        assert_eq!(host_part("localhost"), "localhost");
        assert_eq!(host_part("::1"), "::1");
    }

    /// A cluster CA with `alice` (user) issued, in a temporary directory.
    fn cluster() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        crate::pki::init(dir.path(), &[]).unwrap();
        crate::pki::issue(dir.path(), Role::User, "alice").unwrap();
        dir
    }

    /// Moves every TLS record `from` has queued to `to`.
    fn pump(from: &mut rustls::Connection, to: &mut rustls::Connection) {
        let mut records = Vec::new();
        while from.wants_write() {
            from.write_tls(&mut records).unwrap();
        }
        let mut rest = &records[..];
        while !rest.is_empty() {
            to.read_tls(&mut rest).unwrap();
            to.process_new_packets().unwrap();
        }
    }

    /// Runs alice's handshake (with ring's default suite order, AES-256 first, as every
    /// client has it) against `server` until the server has read her Finished; answers
    /// the server's side.
    fn handshake(dir: &std::path::Path, server: rustls::ServerConfig) -> rustls::Connection {
        let TlsMaterial { ca, chain, key } = TlsFiles::in_dir(dir, "alice").load().unwrap();
        let mut roots = RootCertStore::empty();
        for cert in ca {
            roots.add(cert).unwrap();
        }
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![ALPN.to_vec()];
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(config), name).unwrap().into();
        let mut server = rustls::ServerConnection::new(Arc::new(server)).unwrap().into();
        pump(&mut client, &mut server);
        while server.is_handshaking() {
            pump(&mut server, &mut client);
            pump(&mut client, &mut server);
        }
        server
    }

    #[test]
    fn the_server_picks_aes_128_and_queues_no_session_ticket() {
        let dir = cluster();
        let config = server_tls_config(&TlsFiles::in_dir(dir.path(), "master"), ALPN).unwrap();
        let server = handshake(dir.path(), config.clone());
        let suite = server.negotiated_cipher_suite().map(|suite| suite.suite());
        assert_eq!(suite, Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256));
        // Tickets are queued as soon as the client's Finished is read.
        assert!(!server.wants_write(), "the server queued records after the handshake");

        // The same check sees rustls's default tickets.
        let mut with_tickets = config;
        with_tickets.send_tls13_tickets = 2;
        with_tickets.session_storage = rustls::server::ServerSessionMemoryCache::new(8);
        assert!(handshake(dir.path(), with_tickets).wants_write());
    }

    /// Path MTU probes sent so far by (the server, the client) of one connection.
    fn probes(server: &quinn::Connection, client: &quinn::Connection) -> (u64, u64) {
        (server.stats().path.sent_plpmtud_probes, client.stats().path.sent_plpmtud_probes)
    }

    /// Connects alice to a server endpoint speaking `alpn`; answers both sides.
    async fn connected_pair(dir: &std::path::Path, alpn: &[u8]) -> (quinn::Connection, quinn::Connection) {
        let bind = SocketAddr::from(([127, 0, 0, 1], 0));
        let server = server_endpoint_for(bind, &TlsFiles::in_dir(dir, "master"), alpn).unwrap();
        let addr = server.local_addr().unwrap();
        let client = client_endpoint_for(&TlsFiles::in_dir(dir, "alice"), addr, alpn).unwrap();
        let accept = async { server.accept().await.unwrap().await.unwrap() };
        let (accepted, connected) = tokio::join!(accept, connect(&client, addr, "localhost"));
        (accepted, connected.unwrap())
    }

    #[tokio::test]
    async fn the_masters_connections_send_no_mtu_probes_and_the_shuffles_do() {
        let dir = cluster();
        // Both sides of a shuffle connection probe, right after the handshake.
        let started = tokio::time::Instant::now();
        let (server, client) = connected_pair(dir.path(), crate::protocol::SHUFFLE_ALPN).await;
        let deadline = started + Duration::from_secs(10);
        while probes(&server, &client).0 == 0 || probes(&server, &client).1 == 0 {
            assert!(tokio::time::Instant::now() < deadline, "the shuffle's sides never probed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Neither side of a master connection does, in many times that long.
        let waited = started.elapsed() * 10;
        let (server, client) = connected_pair(dir.path(), ALPN).await;
        tokio::time::sleep(waited.max(Duration::from_millis(200))).await;
        assert_eq!(probes(&server, &client), (0, 0));
    }

    #[tokio::test]
    async fn resolve_reads_literals_and_refuses_missing_ports() {
        assert_eq!(resolve("127.0.0.1:7000").await.ok(), Some(SocketAddr::from(([127, 0, 0, 1], 7000))));
        assert!(matches!(resolve("127.0.0.1").await, Err(TransportError::Resolve { .. })));
    }
}
