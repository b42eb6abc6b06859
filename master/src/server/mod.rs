//! The master server: one actor task owns the [`Core`] and the [`Store`]; agent and
//! client sessions decode what they receive into `Input`s for it and carry its
//! commands out. No locks around scheduling state: only the actor touches it.
//!
//! ```text
//! quinn connections ──> agents.rs / clients.rs ──Input──> Actor ──> Core::handle/tick
//!                                ▲                          │
//!                                └──── outbound queues ◀────┴──> Store ──> syncer thread
//!                                       (replies wait for the syncer; launches do not)
//! ```

mod actor;
mod agents;
mod clients;
mod launches;
mod reads;
mod syncer;
mod task_reads;

use std::future::Future;
use std::time::Duration;

use slotmarket_common::identity::Role;
use slotmarket_common::transport;
use thiserror::Error;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::core::Core;
use crate::store::{Store, StoreError};

pub use actor::DEFAULT_CLEANUP_RETAIN;
pub(crate) use actor::Input;

/// Why the server stopped with an error.
#[derive(Debug, Error)]
pub enum ServerError {
    /// The stored accounts, ledger or jobs could not be read back at start.
    #[error("recovering stored state: {0}")]
    Recover(#[source] StoreError),
    /// The store failed; the master stops rather than acknowledge what it cannot keep.
    #[error("store failed, stopping: {0}")]
    Store(#[from] StoreError),
}

/// How often agents are asked to send a heartbeat when nothing else is said.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// Limits and timings of the server (the core's own settings live in its config).
#[derive(Clone, Copy, Debug)]
pub struct ServerOptions {
    /// Largest frame accepted from any peer, in bytes.
    pub max_frame: usize,
    /// How often agents are told to send a heartbeat (in `Registered`). It should be
    /// well below the core's `agent_timeout`; the master's config checks it is at most half.
    pub heartbeat_interval: Duration,
    /// How long an ended job's directories stay on the agents before they are removed.
    pub cleanup_retain: Duration,
}

/// Serves agents and clients on `endpoint` until `shutdown` completes or the store fails.
///
/// First replays every job stored in `store` into `core` (which should be fresh), at the
/// time of the clock the server then runs on, before any agent can join.
pub async fn run(
    endpoint: quinn::Endpoint,
    core: Core,
    store: Store,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let budget = launches::launch_budget(options.max_frame);
    let mut actor = actor::Actor::new(core, store, options.heartbeat_interval, budget)?;
    actor.set_cleanup_retain(options.cleanup_retain);
    let recovered = actor.recover().map_err(ServerError::Recover)?;
    info!(recovered, "recovered {recovered} jobs");
    let (inbox, inbox_rx) = mpsc::unbounded_channel();
    let actor = tokio::spawn(actor.run(inbox_rx));
    let accept = accept_loop(endpoint.clone(), inbox, options);
    let result = tokio::select! {
        () = shutdown => {
            info!("shutting down");
            Ok(())
        }
        () = accept => Ok(()),
        joined = actor => match joined {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic.into_panic()),
        },
    };
    endpoint.close(0u32.into(), b"master shutting down");
    result
}

async fn accept_loop(endpoint: quinn::Endpoint, inbox: mpsc::UnboundedSender<Input>, options: ServerOptions) {
    let data_dirs = agents::DataDirs::default();
    while let Some(incoming) = endpoint.accept().await {
        let inbox = inbox.clone();
        let data_dirs = data_dirs.clone();
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            let conn = match incoming.await {
                Ok(conn) => conn,
                Err(error) => {
                    // Missing or foreign certificates end here, at the handshake.
                    info!(%remote, %error, "refused connection");
                    return;
                }
            };
            let identity = match transport::peer_identity(&conn) {
                Ok(identity) => identity,
                Err(error) => {
                    warn!(%remote, %error, "refused connection: unreadable peer identity");
                    conn.close(1u32.into(), b"unreadable certificate identity");
                    return;
                }
            };
            debug!(%remote, peer = %identity, "connected");
            match identity.role {
                Role::Agent => agents::serve(conn, identity, inbox, options.max_frame, data_dirs).await,
                Role::User | Role::Admin => clients::serve(conn, identity, inbox, options.max_frame).await,
                Role::Master => {
                    warn!(%remote, "refused connection from a master certificate");
                    conn.close(1u32.into(), b"master certificates cannot act as peers");
                }
            }
        });
    }
}
