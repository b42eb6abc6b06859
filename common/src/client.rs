//! The request client used by the CLI, the demo and tests: one QUIC connection to the
//! master, one bidirectional stream per request, typed calls for each request, and watch
//! streams for job progress.

mod socket;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use quinn::{RecvStream, VarInt};
use thiserror::Error;

use crate::identity::Identity;
use crate::ids::{AccountId, JobId};
use crate::money::Credits;
use crate::pki::{PkiError, TlsFiles};
use crate::protocol::{
    AccountSummary, ChoiceRefusal, ClientRequest, DEFAULT_MAX_FRAME, DeadlineChoice, ErrorReply,
    EstimateEvalQuery, EstimateEvalReport, HistoryPage, HistoryQuery, JobHistory, JobState, JobStatus,
    JobSummary, JobsPage, JobsQuery, LedgerEntry, LedgerPage, LogChunk, LogQuery, MarketInfo, NodeSummary,
    ProfileView, Purchase, QueueView, QuoteInfo, Request, ReservationView, Response, TaskList,
};
use crate::spec::JobSpec;
use crate::time::Timestamp;
use crate::transport::{self, StreamError, TransportError, read_frame, write_frame};

/// How long [`Client::connect`] waits for the QUIC handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Most [`Client::close`] waits for the close packet to leave (it usually takes
/// microseconds; the bound only matters when the runtime is starved).
pub const CLOSE_SEND_WAIT: Duration = Duration::from_millis(50);

/// Most submits [`Client::submit_many`] keeps unanswered at once: enough for the master
/// to commit many jobs per transaction, under quinn's default limit of 100 concurrent
/// streams per connection.
pub const SUBMIT_WINDOW: usize = 64;

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
    /// Held so the endpoint (its socket and driver) lives as long as the connection.
    _endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    identity: Identity,
    server: Identity,
}

/// Asks for pages with `page(limit, from)`, from `first` on, until `wanted` items (each
/// page asks for the rest as its limit) or, without `wanted`, the last page (`limit`
/// `None`: the query's own). A page that brings nothing ends the walk, whatever it says
/// comes next, and a master answering more than asked does not make the list longer.
async fn follow_pages<T, C>(
    wanted: Option<usize>,
    first: Option<C>,
    mut page: impl AsyncFnMut(Option<u32>, Option<C>) -> Result<(Vec<T>, Option<C>), ClientError>,
) -> Result<Vec<T>, ClientError> {
    let (mut items, mut from) = (Vec::new(), first);
    loop {
        let rest = wanted.map(|w| u32::try_from(w.saturating_sub(items.len())).unwrap_or(u32::MAX));
        let (got, next) = page(rest, from.take()).await?;
        let progressed = !got.is_empty();
        items.extend(got);
        match next {
            Some(next) if progressed && wanted.is_none_or(|w| items.len() < w) => from = Some(next),
            _ => {
                items.truncate(wanted.unwrap_or(usize::MAX));
                return Ok(items);
            }
        }
    }
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
        Client::connect_as(addr, server_name, files, identity).await
    }

    /// Like [`Client::connect`], for a caller that has already read the identity
    /// `files.cert` names ([`TlsFiles::identity`]; the CLI does, to refuse agent
    /// certificates before connecting), so the certificate is not read and parsed twice.
    /// `identity` is only what [`Client::identity`] answers: the master still learns who
    /// this is from the certificate presented in the handshake.
    pub async fn connect_as(
        addr: SocketAddr,
        server_name: &str,
        files: &TlsFiles,
        identity: Identity,
    ) -> Result<Client, ClientError> {
        let endpoint = socket::client_endpoint(files, addr)?;
        let (conn, server) = transport::connect_master(&endpoint, addr, server_name, CONNECT_TIMEOUT).await?;
        Ok(Client { _endpoint: endpoint, conn, identity, server })
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

    /// Submits every spec over this one connection, keeping up to [`SUBMIT_WINDOW`]
    /// requests in flight so the master decides and commits them in shared batches (one
    /// store transaction for many jobs) rather than one round trip and one commit each.
    /// Answers each spec's outcome in the order given; a refused spec does not stop the
    /// others. Each id is, as with [`Client::submit`], sent only once the job is durable.
    pub async fn submit_many(&self, specs: Vec<JobSpec>) -> Vec<Result<JobId, ClientError>> {
        let mut outcomes = Vec::with_capacity(specs.len());
        let mut in_flight: VecDeque<Result<RecvStream, ClientError>> = VecDeque::new();
        for spec in specs {
            if in_flight.len() == SUBMIT_WINDOW {
                if let Some(oldest) = in_flight.pop_front() {
                    outcomes.push(submitted(oldest).await);
                }
            }
            in_flight.push_back(self.send(Request::Submit { spec }).await);
        }
        for pending in in_flight {
            outcomes.push(submitted(pending).await);
        }
        outcomes
    }

    /// One job's status.
    pub async fn status(&self, job: JobId) -> Result<JobStatus, ClientError> {
        self.expect(Request::Status { job }, |response| match response {
            Response::Job(status) => Some(status),
            _ => None,
        })
        .await
    }

    /// Every task of one job, with where and how its latest attempt ran.
    pub async fn tasks(&self, job: JobId) -> Result<TaskList, ClientError> {
        self.expect(Request::Tasks { job }, |response| match response {
            Response::Tasks(list) => Some(list),
            _ => None,
        })
        .await
    }

    /// A chunk of a task's stdout or stderr, read from the agent that ran it.
    pub async fn log(&self, query: LogQuery) -> Result<LogChunk, ClientError> {
        self.expect(Request::Logs(query), |response| match response {
            Response::Log(chunk) => Some(chunk),
            _ => None,
        })
        .await
    }

    /// The nodes holding `job`'s final outputs, one per data directory.
    pub async fn output_nodes(&self, job: JobId) -> Result<Vec<String>, ClientError> {
        self.expect(Request::OutputNodes { job }, |response| match response {
            Response::OutputNodes(nodes) => Some(nodes),
            _ => None,
        })
        .await
    }

    /// A listing or a chunk of a job's outputs on one node, relayed by the master.
    pub async fn output(
        &self,
        query: crate::protocol::OutputQuery,
    ) -> Result<crate::protocol::OutputData, ClientError> {
        self.expect(Request::Output(query), |response| match response {
            Response::Output(data) => Some(data),
            _ => None,
        })
        .await
    }

    /// Removes ended jobs' directories from the agents now.
    pub async fn cleanup(&self, jobs: Vec<JobId>) -> Result<Vec<crate::protocol::JobCleanup>, ClientError> {
        self.expect(Request::Cleanup { jobs }, |response| match response {
            Response::CleanedUp(done) => Some(done),
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
        self.walk_jobs(query, None).await
    }

    /// The first `query.limit` jobs `query` selects, in its order: the master may cut a
    /// page short to fit a frame, so this follows its pages until there are that many or
    /// no more.
    pub async fn first_jobs(&self, query: JobsQuery) -> Result<Vec<JobSummary>, ClientError> {
        let wanted = query.limit as usize;
        self.walk_jobs(query, Some(wanted)).await
    }

    /// The jobs `query` selects, page by page from its start, until `wanted` of them (each
    /// page asks for the rest) or, without `wanted`, the last page (pages of `query.limit`).
    async fn walk_jobs(
        &self,
        query: JobsQuery,
        wanted: Option<usize>,
    ) -> Result<Vec<JobSummary>, ClientError> {
        let first = query.after;
        follow_pages(wanted, first, async |limit, after| {
            let query = JobsQuery { limit: limit.unwrap_or(query.limit), after, ..query.clone() };
            let page = self.jobs_page(query).await?;
            Ok((page.jobs, page.next))
        })
        .await
    }

    /// One page of recorded runs of ended jobs, newest first.
    pub async fn history_page(&self, query: HistoryQuery) -> Result<HistoryPage, ClientError> {
        self.expect(Request::History(query), |response| match response {
            Response::History(page) => Some(page),
            _ => None,
        })
        .await
    }

    /// The newest `query.limit` recorded runs `query` selects, newest first: the master
    /// cuts a page at its own limit or to fit a frame, so this follows its pages until
    /// there are that many or no more.
    pub async fn history(&self, query: HistoryQuery) -> Result<Vec<JobHistory>, ClientError> {
        let wanted = Some(query.limit as usize);
        follow_pages(wanted, query.before, async |limit, before| {
            let query = HistoryQuery { limit: limit.unwrap_or(query.limit), before, ..query.clone() };
            let page = self.history_page(query).await?;
            Ok((page.runs, page.next))
        })
        .await
    }

    /// The Jockey profile of job name `name`.
    pub async fn profile(&self, name: String) -> Result<ProfileView, ClientError> {
        self.expect(Request::Profile { name }, |response| match response {
            Response::Profile(view) => Some(view),
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

    /// The estimator's R² and PI coverage on held-out runs the caller may see.
    pub async fn estimate_eval(&self, query: EstimateEvalQuery) -> Result<EstimateEvalReport, ClientError> {
        self.expect(Request::EstimateEval(query), |response| match response {
            Response::EstimateEval(report) => Some(report),
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

    /// MRM: the quote for `spec` (estimate, earliest feasible finish, price–deadline curve).
    pub async fn quote(&self, spec: JobSpec) -> Result<QuoteInfo, ClientError> {
        self.expect(Request::Quote { spec }, |response| match response {
            Response::Quote(info) => Some(info),
            _ => None,
        })
        .await
    }

    /// MRM: submits `spec` buying the deadline `choice` names. `Ok(Err(refusal))` when the
    /// choice cannot be had (nothing was admitted or charged); the refusal names the best
    /// alternative now.
    pub async fn submit_choosing(
        &self,
        spec: JobSpec,
        choice: DeadlineChoice,
    ) -> Result<Result<Purchase, ChoiceRefusal>, ClientError> {
        self.expect(Request::SubmitChoosing { spec, choice }, |response| match response {
            Response::Purchased(purchase) => Some(Ok(purchase)),
            Response::ChoiceRefused(refusal) => Some(Err(refusal)),
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

    /// The jobs with pending tasks in the policy's order, with why each waits.
    pub async fn queue(&self) -> Result<QueueView, ClientError> {
        self.expect(Request::Queue, |response| match response {
            Response::Queue(view) => Some(view),
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

    /// Submits a job and follows it over one stream ([`Request::SubmitWatch`]): answers
    /// its id, sent once the admission is durable, and a [`Watch`] of its status until it
    /// ends. The master makes the admission durable together with what comes next (for a
    /// short job, its end), so this costs one sync where [`Client::submit`] and then
    /// [`Client::watch`] cost two in series.
    pub async fn submit_watch(&self, spec: JobSpec) -> Result<(JobId, Watch), ClientError> {
        let mut recv = self.send(Request::SubmitWatch { spec }).await?;
        let job = read_submitted(&mut recv).await?;
        Ok((job, Watch { recv }))
    }

    /// The identity this client presents (from its own certificate).
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The identity the server presented (always the master).
    pub fn server(&self) -> &Identity {
        &self.server
    }

    /// Closes the connection and returns as soon as the packet telling the master has
    /// left (at most [`CLOSE_SEND_WAIT`] later), without waiting out the draining period.
    ///
    /// Every answer this client waited for has already arrived, so nothing is lost by not
    /// draining: [`quinn::Endpoint::wait_idle`] would hold the caller for three probe
    /// timeouts (about 85 ms on loopback) only to absorb late packets from the master.
    pub async fn close(self) {
        if self.conn.close_reason().is_some() {
            // Already closed (the master went away): there is nobody left to tell.
            return;
        }
        // Once closed, the connection sends nothing but its CONNECTION_CLOSE, so the next
        // datagram counted after `close` is that packet.
        let sent_before = self.conn.stats().udp_tx.datagrams;
        self.conn.close(VarInt::from_u32(0), b"done");
        let close_sent = async {
            // The connection's driver task sends it on its next turn: let it run, and back
            // off to the timer only if it does not get one soon (a starved runtime).
            let mut turns = 0u32;
            while self.conn.stats().udp_tx.datagrams == sent_before {
                if turns < 16 {
                    tokio::task::yield_now().await;
                    turns += 1;
                } else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_SEND_WAIT, close_sent).await;
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

/// Reads the answer to a submit sent by [`Client::submit_many`].
async fn submitted(sent: Result<RecvStream, ClientError>) -> Result<JobId, ClientError> {
    read_submitted(&mut sent?).await
}

/// Reads a `Submitted` answer from `recv`.
async fn read_submitted(recv: &mut RecvStream) -> Result<JobId, ClientError> {
    match read_frame::<Response>(recv, DEFAULT_MAX_FRAME).await? {
        None => Err(ClientError::NoResponse),
        Some(Response::Submitted { job }) => Ok(job),
        Some(Response::Error(reply)) => Err(ClientError::Server(reply)),
        Some(other) => Err(ClientError::Unexpected { got: response_kind(&other) }),
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
        Response::Quote(_) => "Quote",
        Response::Purchased(_) => "Purchased",
        Response::ChoiceRefused(_) => "ChoiceRefused",
        Response::Queue(_) => "Queue",
        Response::EstimateEval(_) => "EstimateEval",
        Response::Profile(_) => "Profile",
        Response::IncomeSet(_) => "IncomeSet",
        Response::Tasks(_) => "Tasks",
        Response::Log(_) => "Log",
        Response::OutputNodes(_) => "OutputNodes",
        Response::Output(_) => "Output",
        Response::CleanedUp(_) => "CleanedUp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Role;
    use crate::pki;

    /// `close` returns without draining, yet the master still learns of it at once: its
    /// side of the connection ends with our code and reason, not by idle timeout.
    #[tokio::test]
    async fn close_returns_early_and_the_master_still_sees_the_close() {
        let certs = tempfile::tempdir().unwrap();
        pki::init(certs.path(), &[]).unwrap();
        let user = pki::issue(certs.path(), Role::User, "alice").unwrap();
        let files = TlsFiles::in_dir(certs.path(), pki::MASTER_NAME);
        let server = transport::server_endpoint("127.0.0.1:0".parse().unwrap(), &files).unwrap();
        let addr = server.local_addr().unwrap();
        let accepted = tokio::spawn(async move {
            let conn = server.accept().await.unwrap().await.unwrap();
            conn.closed().await
        });
        let client = Client::connect(addr, "localhost", &user).await.unwrap();
        client.close().await;
        let ended = tokio::time::timeout(Duration::from_secs(5), accepted).await.unwrap().unwrap();
        match ended {
            quinn::ConnectionError::ApplicationClosed(close) => {
                assert_eq!(close.error_code, VarInt::from_u32(0));
                assert_eq!(&close.reason[..], b"done");
            }
            other => panic!("the master saw {other:?}, not our close"),
        }
    }
}
