//! `slotmarket wait JOB…`: attaches to submitted jobs and follows each until it ends; exit
//! 0 only if every one completed. Also the follow path of `submit --wait` and `run --wait`.
//!
//! Following survives a master restart: a watch stream that ends early or a master that
//! stops answering (a SIGKILLed master sends no close, so the connection would only time
//! out after 30 s) is noticed by a status probe, and the client reconnects with bounded
//! backoff and resumes watching where it was.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::{Client, ClientError, Watch};
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobState, JobStatus};

use crate::connection::{self, ClientOptions, ConnectionArgs};
use crate::output::{self, JobStatusJson};
use crate::progress::Display;
use crate::submit;

/// Arguments of `wait`.
#[derive(Debug, Args)]
pub(crate) struct WaitArgs {
    /// The jobs: `j7` or `7`, one or more.
    #[arg(value_name = "JOB", required = true, value_parser = connection::parse_job_id)]
    pub(crate) jobs: Vec<JobId>,
    /// How long to keep trying to reach the master after losing it, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub(crate) reconnect_for: u64,
}

/// How following reacts to silence and loss; the defaults suit people, tests shorten them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FollowTimes {
    /// Silence on the watch stream after which the master is asked for the status (a
    /// liveness probe, and progress for a job whose stream is quiet).
    pub(crate) probe_every: Duration,
    /// How long one probe may take before the master counts as lost.
    pub(crate) probe_timeout: Duration,
    /// How long to keep reconnecting before giving up.
    pub(crate) reconnect_for: Duration,
}

impl Default for FollowTimes {
    fn default() -> FollowTimes {
        FollowTimes {
            probe_every: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(5),
            reconnect_for: Duration::from_secs(300),
        }
    }
}

/// First and longest pause between two reconnection attempts.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(4));

/// The `--json` answer: every job's final status.
#[derive(Debug, Serialize)]
struct WaitJson {
    /// In the order asked.
    jobs: Vec<JobStatusJson>,
}

/// Runs `wait`.
pub(crate) async fn run(conn: &ConnectionArgs, args: WaitArgs, json: bool) -> Result<ExitCode> {
    let options = ClientOptions::from_args(conn)?;
    let times =
        FollowTimes { reconnect_for: Duration::from_secs(args.reconnect_for), ..FollowTimes::default() };
    let mut client = options.connect().await?;
    let mut ctrl_c = CtrlC::listen()?;
    let mut ended = Vec::new();
    for &job in &args.jobs {
        let status = follow(&options, &mut client, job, times, &mut ctrl_c).await?;
        if !json {
            submit::report_end(&status, None, false)?;
        }
        ended.push(status);
    }
    connection::close(client).await;
    if json {
        output::print_json(&WaitJson { jobs: ended.iter().map(JobStatusJson::from).collect() })?;
    }
    let all_completed = ended.iter().all(|status| status.summary.state == JobState::Completed);
    Ok(if all_completed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What one watch over one connection came to.
enum WatchEnd {
    /// The job ended.
    Ended(Box<JobStatus>),
    /// The connection or the stream was lost before the job ended; why.
    Lost(String),
}

/// Follows `job` until it ends, showing its progress on stderr whenever it changes (a
/// live block on a terminal, plain lines otherwise: see [`Display`]);
/// reconnects `client` (with `options`) when the master is lost.
pub(crate) async fn follow(
    options: &ClientOptions,
    client: &mut Client,
    job: JobId,
    times: FollowTimes,
    ctrl_c: &mut CtrlC,
) -> Result<JobStatus> {
    follow_from(options, client, job, times, None, ctrl_c).await
}

/// [`follow`], reading the first watch from `opened` (a stream the caller already has,
/// as `submit --wait` does) instead of opening one.
pub(crate) async fn follow_from(
    options: &ClientOptions,
    client: &mut Client,
    job: JobId,
    times: FollowTimes,
    mut opened: Option<Watch>,
    ctrl_c: &mut CtrlC,
) -> Result<JobStatus> {
    let mut progress = Display::for_this_terminal();
    let followed = {
        let following = async {
            loop {
                match watch(client, job, opened.take(), times, &mut progress).await? {
                    WatchEnd::Ended(status) => return Ok(*status),
                    WatchEnd::Lost(why) => {
                        progress.detach();
                        eprintln!("{job}: lost the master ({why}); reconnecting");
                        *client = reconnect(options, times.reconnect_for).await?;
                        eprintln!("{job}: reconnected; following again");
                        progress.detach();
                    }
                }
            }
        };
        tokio::select! {
            followed = following => Some(followed),
            // Ctrl-C ends only the following, never the job: say so, and how to go on.
            _ = ctrl_c.0.recv() => None,
        }
    };
    followed.unwrap_or_else(|| {
        progress.detach();
        eprintln!("\n{job} keeps running: `slotmarket wait {job}` follows it again, `slotmarket cancel {job}` stops it");
        Err(Interrupted.into())
    })
}

/// Ctrl-C, listened for from the moment this is made. Make it before a job's id is
/// printed: a Ctrl-C right after the id (a quick user, a script that read it) then ends
/// the following with its message, instead of the CLI by the signal's default action.
pub(crate) struct CtrlC(tokio::signal::unix::Signal);

impl CtrlC {
    pub(crate) fn listen() -> Result<CtrlC> {
        let interrupt = tokio::signal::unix::SignalKind::interrupt();
        Ok(CtrlC(tokio::signal::unix::signal(interrupt).context("listening for Ctrl-C")?))
    }
}

/// Following was interrupted (Ctrl-C); `main` exits 130, as the shell's SIGINT would.
#[derive(Debug)]
pub(crate) struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Watches `job` over `client` (on `opened` if given, else on a new watch) until it ends
/// or the master is lost. Errors only for a refusal (no such job, not yours), which
/// reconnecting would not change.
async fn watch(
    client: &Client,
    job: JobId,
    opened: Option<Watch>,
    times: FollowTimes,
    progress: &mut Display,
) -> Result<WatchEnd> {
    let opened = match opened {
        Some(watch) => Ok(watch),
        None => client.watch(job).await,
    };
    let mut watch = match opened {
        Ok(watch) => watch,
        Err(err) => return lost_or_refused(err, job),
    };
    loop {
        let next = watch.next();
        tokio::pin!(next);
        let answer = loop {
            tokio::select! {
                answer = &mut next => break answer,
                () = tokio::time::sleep(times.probe_every) => {
                    match probe(client, job, times.probe_timeout).await? {
                        Probe::Alive(status) if status.summary.state.is_terminal() => {
                            progress.show(&status);
                            return Ok(WatchEnd::Ended(status));
                        }
                        Probe::Alive(status) => progress.show(&status),
                        Probe::Lost(why) => return Ok(WatchEnd::Lost(why)),
                    }
                }
            }
        };
        match answer {
            Ok(Some(status)) => {
                progress.show(&status);
                if status.summary.state.is_terminal() {
                    return Ok(WatchEnd::Ended(Box::new(status)));
                }
            }
            // The master ended the stream without a final state (it is shutting down).
            Ok(None) => {
                return Ok(match probe(client, job, times.probe_timeout).await? {
                    Probe::Alive(status) if status.summary.state.is_terminal() => WatchEnd::Ended(status),
                    Probe::Alive(status) => {
                        WatchEnd::Lost(format!("the watch stream ended while {}", status.summary.state))
                    }
                    Probe::Lost(why) => WatchEnd::Lost(why),
                });
            }
            Err(err) => return lost_or_refused(err, job),
        }
    }
}

/// What a status probe found.
enum Probe {
    /// The master answered.
    Alive(Box<JobStatus>),
    /// It did not, or the connection is gone; why.
    Lost(String),
}

/// Asks for `job`'s status within `timeout`.
async fn probe(client: &Client, job: JobId, timeout: Duration) -> Result<Probe> {
    match tokio::time::timeout(timeout, client.status(job)).await {
        Ok(Ok(status)) => Ok(Probe::Alive(Box::new(status))),
        Ok(Err(ClientError::Server(reply))) => {
            Err(anyhow!(ClientError::Server(reply))).context(format!("status of {job}"))
        }
        Ok(Err(err)) => Ok(Probe::Lost(err.to_string())),
        Err(_) => Ok(Probe::Lost(format!("no answer within {}s", timeout.as_secs()))),
    }
}

/// A refusal is final; anything else means the connection is gone.
fn lost_or_refused(err: ClientError, job: JobId) -> Result<WatchEnd> {
    match err {
        ClientError::Server(_) => Err(anyhow!(err)).context(format!("watching {job}")),
        err => Ok(WatchEnd::Lost(err.to_string())),
    }
}

/// Connects again with growing pauses until it works or `within` has passed.
async fn reconnect(options: &ClientOptions, within: Duration) -> Result<Client> {
    let started = Instant::now();
    let mut pause = BACKOFF.0;
    loop {
        match options.connect().await {
            Ok(client) => return Ok(client),
            Err(err) if started.elapsed() >= within => {
                bail!("gave up reconnecting after {}s: {err:#}", within.as_secs())
            }
            Err(err) => tracing::debug!(error = %format!("{err:#}"), "reconnect failed; retrying"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(BACKOFF.1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use slotmarket_common::protocol::{ErrorKind, ErrorReply, Request, Response};

    use super::*;
    use crate::fake_master::{FakeMaster, status};

    const QUICK: FollowTimes = FollowTimes {
        probe_every: Duration::from_millis(200),
        probe_timeout: Duration::from_secs(2),
        reconnect_for: Duration::from_secs(5),
    };

    #[tokio::test]
    async fn follow_ends_with_the_watch_streams_final_state() {
        let fake = FakeMaster::start(|request| match request {
            Request::Watch { job } => [JobState::Pending, JobState::Running, JobState::Completed]
                .map(|state| Response::Job(status(job, "x", state)))
                .into(),
            _ => vec![],
        });
        let options = fake.options("alice");
        let mut client = options.connect().await.unwrap();
        let end =
            follow(&options, &mut client, JobId(5), QUICK, &mut CtrlC::listen().unwrap()).await.unwrap();
        assert_eq!(end.summary.state, JobState::Completed);
        assert_eq!(fake.requests(), vec![Request::Watch { job: JobId(5) }]);
    }

    #[tokio::test]
    async fn a_watch_that_ends_early_is_resumed_until_the_job_ends() {
        // The first watch stream ends while the job runs (a master shutting down); the
        // status then says running, so follow reconnects and watches again.
        let watches = Arc::new(AtomicU32::new(0));
        let counted = watches.clone();
        let fake = FakeMaster::start(move |request| match request {
            Request::Watch { job } => {
                let state = if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                    JobState::Running
                } else {
                    JobState::Failed
                };
                vec![Response::Job(status(job, "x", state))]
            }
            Request::Status { job } => vec![Response::Job(status(job, "x", JobState::Running))],
            _ => vec![],
        });
        let options = fake.options("alice");
        let mut client = options.connect().await.unwrap();
        let end =
            follow(&options, &mut client, JobId(2), QUICK, &mut CtrlC::listen().unwrap()).await.unwrap();
        assert_eq!(end.summary.state, JobState::Failed);
        assert_eq!(watches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refusal_is_final() {
        let fake = FakeMaster::start(|_| {
            vec![Response::Error(ErrorReply { kind: ErrorKind::NotFound, message: "no job j9".into() })]
        });
        let options = fake.options("alice");
        let mut client = options.connect().await.unwrap();
        let err = format!(
            "{:#}",
            follow(&options, &mut client, JobId(9), QUICK, &mut CtrlC::listen().unwrap()).await.unwrap_err()
        );
        assert!(err.contains("watching j9") && err.contains("no job j9"), "{err}");
    }

    #[tokio::test]
    async fn wait_exits_non_zero_when_any_job_did_not_complete() {
        let fake = FakeMaster::start(|request| match request {
            Request::Watch { job } => {
                let state = if job == JobId(1) { JobState::Completed } else { JobState::Cancelled };
                vec![Response::Job(status(job, "x", state))]
            }
            _ => vec![],
        });
        let conn = fake.conn_args("alice");
        let one = WaitArgs { jobs: vec![JobId(1)], reconnect_for: 1 };
        assert_eq!(run(&conn, one, true).await.unwrap(), ExitCode::SUCCESS);
        let both = WaitArgs { jobs: vec![JobId(1), JobId(2)], reconnect_for: 1 };
        assert_eq!(run(&conn, both, true).await.unwrap(), ExitCode::FAILURE);
    }
}
