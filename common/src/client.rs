//! The request client used by the CLI, the demo and tests: one QUIC connection to the
//! master, one bidirectional stream per request, and watch streams for job progress.

use std::net::SocketAddr;

use quinn::{RecvStream, VarInt};
use thiserror::Error;

use crate::identity::{Identity, Role};
use crate::ids::JobId;
use crate::pki::{PkiError, TlsFiles};
use crate::protocol::{ClientRequest, DEFAULT_MAX_FRAME, ErrorReply, JobStatus, Request, Response};
use crate::transport::{self, StreamError, TransportError, read_frame, write_frame};

/// Why a request could not be made or was refused.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The certificate files could not be read.
    #[error(transparent)]
    Files(#[from] PkiError),
    /// The endpoint could not be built or the connection not made.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The server is not the master (its certificate names another role).
    #[error("the server presents a certificate for {0}, not the master")]
    NotMaster(Identity),
    /// The connection to the master was lost.
    #[error("connection to the master lost: {0}")]
    Connection(#[from] quinn::ConnectionError),
    /// A frame could not be sent or read.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// The master closed the stream without answering.
    #[error("the master closed the request stream without answering")]
    NoResponse,
    /// The master answered with an error.
    #[error("the master refused the request: {0}")]
    Server(ErrorReply),
    /// The master answered with a response that does not fit the request.
    #[error("unexpected response from the master: {got}")]
    Unexpected {
        /// The kind of response received.
        got: &'static str,
    },
}

/// A connection to the master on behalf of the identity in a certificate.
///
/// Cheap to share by reference: every [`Client::call`] opens its own stream, so calls may
/// run concurrently.
#[derive(Debug)]
pub struct Client {
    endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    identity: Identity,
    server: Identity,
    max_frame: usize,
}

impl Client {
    /// Connects to the master at `addr`, verifying its certificate against `files.ca` and
    /// `server_name`, and presenting `files.cert`. Refuses a server that is not the master.
    pub async fn connect(
        addr: SocketAddr,
        server_name: &str,
        files: &TlsFiles,
    ) -> Result<Client, ClientError> {
        let identity = files.identity()?;
        let endpoint = transport::client_endpoint(files, addr)?;
        let conn = transport::connect(&endpoint, addr, server_name).await?;
        let server = transport::peer_identity(&conn)?;
        if server.role != Role::Master {
            conn.close(VarInt::from_u32(0), b"not the master");
            return Err(ClientError::NotMaster(server));
        }
        Ok(Client { endpoint, conn, identity, server, max_frame: DEFAULT_MAX_FRAME })
    }

    /// Sends `request` on a new stream and reads the one response.
    /// [`Response::Error`] becomes [`ClientError::Server`].
    pub async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let mut recv = self.send(request).await?;
        match read_frame::<Response>(&mut recv, self.max_frame).await? {
            None => Err(ClientError::NoResponse),
            Some(Response::Error(reply)) => Err(ClientError::Server(reply)),
            Some(response) => Ok(response),
        }
    }

    /// Starts watching `job`: the returned [`Watch`] yields the job's status now and after
    /// every change until the master ends the stream. Errors from the master (no such job,
    /// forbidden) arrive on the first [`Watch::next`].
    pub async fn watch(&self, job: JobId) -> Result<Watch, ClientError> {
        let recv = self.send(Request::Watch { job }).await?;
        Ok(Watch { recv, max_frame: self.max_frame })
    }

    /// The identity this client presents (from its own certificate).
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The identity the server presented (always the master).
    pub fn server(&self) -> &Identity {
        &self.server
    }

    /// The master's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.conn.remote_address()
    }

    /// The underlying connection, for callers that need raw streams.
    pub fn connection(&self) -> &quinn::Connection {
        &self.conn
    }

    /// Changes the largest frame accepted or sent (default [`DEFAULT_MAX_FRAME`]).
    pub fn set_max_frame(&mut self, limit: usize) {
        self.max_frame = limit;
    }

    /// Closes the connection and waits until the master has been told.
    pub async fn close(self) {
        self.conn.close(VarInt::from_u32(0), b"done");
        self.endpoint.wait_idle().await;
    }

    /// Opens a stream, writes `request` and finishes the sending half.
    async fn send(&self, request: Request) -> Result<RecvStream, ClientError> {
        let (mut send, recv) = self.conn.open_bi().await?;
        write_frame(&mut send, &ClientRequest::new(request), self.max_frame).await?;
        send.finish().map_err(StreamError::from)?;
        Ok(recv)
    }
}

/// A job's status stream, from [`Client::watch`]. Dropping it stops the stream.
#[derive(Debug)]
pub struct Watch {
    recv: RecvStream,
    max_frame: usize,
}

impl Watch {
    /// The next status, or `None` once the master has ended the stream (the job ended).
    pub async fn next(&mut self) -> Result<Option<JobStatus>, ClientError> {
        match read_frame::<Response>(&mut self.recv, self.max_frame).await? {
            None => Ok(None),
            Some(Response::Job(status)) => Ok(Some(status)),
            Some(Response::Error(reply)) => Err(ClientError::Server(reply)),
            Some(other) => Err(ClientError::Unexpected { got: response_kind(&other) }),
        }
    }
}

/// The variant name of a response, for error messages.
pub fn response_kind(response: &Response) -> &'static str {
    match response {
        Response::Submitted { .. } => "Submitted",
        Response::Job(_) => "Job",
        Response::Jobs(_) => "Jobs",
        Response::Nodes(_) => "Nodes",
        Response::Cancelled { .. } => "Cancelled",
        Response::Error(_) => "Error",
    }
}
