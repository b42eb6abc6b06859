//! The QUIC transport: endpoints with mutual TLS against the cluster CA
//! ([`endpoint`]) and one length-prefixed frame at a time on quinn streams ([`stream`]).

pub mod endpoint;
pub mod stream;

pub use endpoint::{
    ALPN, CLIENT_KEEP_ALIVE, IDLE_TIMEOUT, SERVER_KEEP_ALIVE, TransportError, client_bind_addr,
    client_config_for, client_endpoint, client_endpoint_for, connect, connect_master, host_part,
    peer_identity, resolve, server_endpoint, server_endpoint_for, server_endpoint_with_secret,
};
pub use stream::{FRAME_ERROR_CODE, StreamError, abort_stream, read_frame, read_payload, write_frame};
