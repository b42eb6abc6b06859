//! The request client used by the CLI, the demo and tests: one QUIC connection to the
//! master, one bidirectional stream per request, typed calls for each request, and watch
//! streams for job progress.

use std::net::SocketAddr;
use std::time::Duration;

use quinn::{RecvStream, VarInt};
use thiserror::Error;

use crate::identity::Identity;
use crate::ids::{AccountId, JobId};
use crate::money::Credits;
use crate::pki::{PkiError, TlsFiles};
use crate::protocol::{
    AccountSummary, ClientRequest, DEFAULT_MAX_FRAME, ErrorReply, HistoryQuery, JobHistory, JobState,
    JobStatus, JobSummary, JobsPage, JobsQuery, LedgerEntry, LedgerPage, MarketInfo, NodeSummary, Request,
    ReservationView, Response,
};
use crate::spec::JobSpec;
use crate::time::Timestamp;
use crate::transport::{self, StreamError, TransportError, read_frame, write_frame};

/// How long [`Client::connect`] waits for the QUIC handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request could not be made or was refused.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The certificate files could not be read.
    #[error(transparent)]
    Files(#[from] PkiError),
    /// The endpoint could not be built, the connection not made in time, or the server
    /// is not the master.
    #[error(transparent)]
    Transport(#[from] TransportError),
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
/// Cheap to share by reference: every call opens its own stream, so calls may run
/// concurrently.
#[derive(Debug)]
pub struct Client {
    endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    identity: Identity,
    server: Identity,
}

impl Client {
    /// Connects to the master at `addr`, verifying its certificate against `files.ca` and
    /// `server_name`, and presenting `files.cert`. Refuses a server that is not the master
    /// and gives up after [`CONNECT_TIMEOUT`].
    pub async fn connect(
        addr: SocketAddr,
        server_name: &str,
        files: &TlsFiles,
    ) -> Result<Client, ClientError> {
        let identity = files.identity()?;
        let endpoint = transport::client_endpoint(files, addr)?;
        let (conn, server) = transport::connect_master(&endpoint, addr, server_name, CONNECT_TIMEOUT).await?;
        Ok(Client { endpoint, conn, identity, server })
    }

    /// Sends `request` on a new stream and reads the one response.
    /// [`Response::Error`] becomes [`ClientError::Server`].
    pub async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let mut recv = self.send(request).await?;
        match read_frame::<Response>(&mut recv, DEFAULT_MAX_FRAME).await? {
            None => Err(ClientError::NoResponse),
            Some(Response::Error(reply)) => Err(ClientError::Server(reply)),
            Some(response) => Ok(response),
        }
    }

    /// Submits a job; answers its id.
    pub async fn submit(&self, spec: JobSpec) -> Result<JobId, ClientError> {
        self.expect(Request::Submit { spec }, |response| match response {
            Response::Submitted { job } => Some(job),
            _ => None,
        })
        .await
    }

    /// One job's status.
    pub async fn status(&self, job: JobId) -> Result<JobStatus, ClientError> {
        self.expect(Request::Status { job }, |response| match response {
            Response::Job(status) => Some(status),
            _ => None,
        })
        .await
    }

    /// One page of the caller's jobs (every job for an admin).
    pub async fn jobs_page(&self, query: JobsQuery) -> Result<JobsPage, ClientError> {
        self.expect(Request::Jobs(query), |response| match response {
            Response::Jobs(page) => Some(page),
            _ => None,
        })
        .await
    }

    /// Every job `query` selects, oldest first, fetched page by page from its start.
    pub async fn all_jobs(&self, mut query: JobsQuery) -> Result<Vec<JobSummary>, ClientError> {
        query.newest_first = false;
        let mut jobs = Vec::new();
        loop {
            let page = self.jobs_page(query.clone()).await?;
            jobs.extend(page.jobs);
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(jobs),
            }
        }
    }

    /// Recorded runs of ended jobs, newest first.
    pub async fn history(&self, query: HistoryQuery) -> Result<Vec<JobHistory>, ClientError> {
        self.expect(Request::History(query), |response| match response {
            Response::History(runs) => Some(runs),
            _ => None,
        })
        .await
    }

    /// The agents the master knows.
    pub async fn nodes(&self) -> Result<Vec<NodeSummary>, ClientError> {
        self.expect(Request::Nodes, |response| match response {
            Response::Nodes(nodes) => Some(nodes),
            _ => None,
        })
        .await
    }

    /// The policy's slot reservations, reserve ratio and predicted releases.
    pub async fn reservation(&self) -> Result<ReservationView, ClientError> {
        self.expect(Request::Reservation, |response| match response {
            Response::Reservation(view) => Some(view),
            _ => None,
        })
        .await
    }

    /// Cancels a job; answers its state afterwards: `Cancelled`, or how it had already
    /// ended.
    pub async fn cancel(&self, job: JobId) -> Result<JobState, ClientError> {
        self.expect(Request::Cancel { job }, |response| match response {
            Response::Cancelled { state, .. } => Some(state),
            _ => None,
        })
        .await
    }

    /// Moves a job's deadline (`None` drops it); returns the deadline now in force.
    pub async fn set_deadline(
        &self,
        job: JobId,
        deadline: Option<Timestamp>,
    ) -> Result<Option<Timestamp>, ClientError> {
        self.expect(Request::SetDeadline { job, deadline }, |response| match response {
            Response::DeadlineSet { deadline, .. } => Some(deadline),
            _ => None,
        })
        .await
    }

    /// Admins: creates `account` with an optional first grant and members.
    pub async fn account_add(
        &self,
        account: AccountId,
        budget: Option<Credits>,
        members: Vec<String>,
    ) -> Result<AccountSummary, ClientError> {
        self.expect(Request::AccountAdd { account, budget, members }, |response| match response {
            Response::AccountAdded(summary) => Some(summary),
            _ => None,
        })
        .await
    }

    /// Admins: grants `amount` to `account` (negative: takes budget back); answers the
    /// ledger entry written and the account after it.
    pub async fn budget_add(
        &self,
        account: AccountId,
        amount: Credits,
        memo: Option<String>,
    ) -> Result<(LedgerEntry, AccountSummary), ClientError> {
        self.expect(Request::BudgetAdd { account, amount, memo }, |response| match response {
            Response::BudgetAdded { entry, account } => Some((entry, account)),
            _ => None,
        })
        .await
    }

    /// Sets the DP spending rate (credits per slot-hour) of `account`, or (`None`) of the
    /// caller's own; answers the account and the rate now in force.
    pub async fn rate_set(
        &self,
        account: Option<AccountId>,
        rate: Credits,
    ) -> Result<(AccountId, Credits), ClientError> {
        self.expect(Request::RateSet { account, rate }, |response| match response {
            Response::RateSet { account, rate } => Some((account, rate)),
            _ => None,
        })
        .await
    }

    /// Admins: sets the DP income (credits per hour) of a created `account`; answers the
    /// account after it.
    pub async fn income_set(
        &self,
        account: AccountId,
        income: Credits,
    ) -> Result<AccountSummary, ClientError> {
        self.expect(Request::IncomeSet { account, income }, |response| match response {
            Response::IncomeSet(summary) => Some(summary),
            _ => None,
        })
        .await
    }

    /// The DP price and the shares of the accounts the caller may read.
    pub async fn price(&self) -> Result<MarketInfo, ClientError> {
        self.expect(Request::Price, |response| match response {
            Response::Price(market) => Some(market),
            _ => None,
        })
        .await
    }

    /// One account, or (`None`) every account the caller may read.
    pub async fn accounts(&self, account: Option<AccountId>) -> Result<Vec<AccountSummary>, ClientError> {
        self.expect(Request::Account { account }, |response| match response {
            Response::Accounts(accounts) => Some(accounts),
            _ => None,
        })
        .await
    }

    /// One page of `account`'s ledger: entries after `after_seq`, at most `limit` (the
    /// master caps it at [`MAX_LEDGER_PAGE`](crate::protocol::MAX_LEDGER_PAGE)).
    pub async fn ledger_page(
        &self,
        account: AccountId,
        after_seq: u64,
        limit: u32,
    ) -> Result<LedgerPage, ClientError> {
        self.expect(Request::Ledger { account, after_seq, limit }, |response| match response {
            Response::Ledger(page) => Some(page),
            _ => None,
        })
        .await
    }

    /// Admin only: stops giving `node` new work (`drain`) or gives it work again
    /// (`undrain`, which also lifts a quarantine); answers the node's state afterwards.
    pub async fn drain(&self, node: &str, drain: bool) -> Result<NodeSummary, ClientError> {
        let node = node.to_string();
        let request = if drain { Request::Drain { node } } else { Request::Undrain { node } };
        self.expect(request, |response| match response {
            Response::Node(summary) => Some(summary),
            _ => None,
        })
        .await
    }

    /// Starts watching `job`: the returned [`Watch`] yields the job's status now and after
    /// every change until the master ends the stream. Errors from the master (no such job,
    /// forbidden) arrive on the first [`Watch::next`].
    pub async fn watch(&self, job: JobId) -> Result<Watch, ClientError> {
        let recv = self.send(Request::Watch { job }).await?;
        Ok(Watch { recv })
    }

    /// The identity this client presents (from its own certificate).
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The identity the server presented (always the master).
    pub fn server(&self) -> &Identity {
        &self.server
    }

    /// Closes the connection and waits until the master has been told.
    pub async fn close(self) {
        self.conn.close(VarInt::from_u32(0), b"done");
        self.endpoint.wait_idle().await;
    }

    /// Makes `request` and takes the payload out of its answer with `pick`, which answers
    /// `None` for a response of the wrong kind.
    async fn expect<T>(
        &self,
        request: Request,
        pick: impl FnOnce(Response) -> Option<T>,
    ) -> Result<T, ClientError> {
        let response = self.call(request).await?;
        let got = response_kind(&response);
        pick(response).ok_or(ClientError::Unexpected { got })
    }

    /// Opens a stream, writes `request` and finishes the sending half.
    async fn send(&self, request: Request) -> Result<RecvStream, ClientError> {
        let (mut send, recv) = self.conn.open_bi().await?;
        write_frame(&mut send, &ClientRequest::new(request), DEFAULT_MAX_FRAME).await?;
        send.finish().map_err(StreamError::from)?;
        Ok(recv)
    }
}

/// A job's status stream, from [`Client::watch`]. Dropping it stops the stream.
#[derive(Debug)]
pub struct Watch {
    recv: RecvStream,
}

impl Watch {
    /// The next status, or `None` once the master has ended the stream (the job ended).
    pub async fn next(&mut self) -> Result<Option<JobStatus>, ClientError> {
        match read_frame::<Response>(&mut self.recv, DEFAULT_MAX_FRAME).await? {
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
        Response::History(_) => "History",
        Response::AccountAdded(_) => "AccountAdded",
        Response::BudgetAdded { .. } => "BudgetAdded",
        Response::Accounts(_) => "Accounts",
        Response::Ledger(_) => "Ledger",
        Response::Node(_) => "Node",
        Response::Reservation(_) => "Reservation",
        Response::RateSet { .. } => "RateSet",
        Response::Price(_) => "Price",
        Response::DeadlineSet { .. } => "DeadlineSet",
        Response::IncomeSet(_) => "IncomeSet",
    }
}
