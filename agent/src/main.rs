//! `slotmarket-agent`: the command line of the agent. Parses flags (merged over an
//! optional `agent.toml`), checks the certificate, sets up logging and runs the driver
//! until SIGTERM or Ctrl-C.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;
use slotmarket_agent::config::{AgentConfig, AgentFile, DataModeSetting};
use slotmarket_agent::driver;
use slotmarket_common::config::DaemonLayout;
use slotmarket_common::identity::Role;
use slotmarket_common::report::Report;
use tracing::info;

/// Runs task processes in map and reduce slots for a Slotmarket master.
///
/// Flags override the values in `--config FILE`; anything left unset gets its default.
/// Paths default relative to the working directory, or with `--service` to
/// /var/lib/slotmarket and /etc/slotmarket/pki.
#[derive(Parser, Debug)]
#[command(name = "slotmarket-agent", version)]
struct Args {
    /// The master's address as host:port [default: 127.0.0.1:7400]
    #[arg(long, value_name = "ADDR", env = "SLOTMARKET_MASTER")]
    master: Option<String>,

    /// The TLS name the master's certificate must carry [default: localhost]
    #[arg(long, value_name = "NAME", env = "SLOTMARKET_SERVER_NAME")]
    server_name: Option<String>,

    /// Directory holding ca.pem, NODE.pem and NODE.key [default: pki; with --service:
    /// /etc/slotmarket/pki]
    #[arg(long, value_name = "DIR", env = "SLOTMARKET_CERT_DIR")]
    cert_dir: Option<PathBuf>,

    /// This node's name; must equal the principal in its certificate [default: the hostname]
    #[arg(long, value_name = "NODE")]
    name: Option<String>,

    /// Map slots offered [default: the number of CPUs]
    #[arg(long, value_name = "N")]
    map_slots: Option<u32>,

    /// Reduce slots offered [default: half the CPUs, at least 1]
    #[arg(long, value_name = "N")]
    reduce_slots: Option<u32>,

    /// The agent's own directory; task working directories go under DIR/containers
    /// [default: ./slotmarket-agent-NODE; with --service: /var/lib/slotmarket/agent]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,

    /// The data directory (shared by all agents, or this agent's own in local mode); job
    /// directories are DIR/jobs/JOB [default: ./slotmarket-data/shared; with --service:
    /// /var/lib/slotmarket/shared; local mode: WORK_DIR/data]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// Milliseconds a killed task gets between SIGTERM and SIGKILL [default: 3000]
    #[arg(long, value_name = "MS")]
    kill_grace_ms: Option<u64>,

    /// shared: DATA_DIR is shared by every agent; local: it is this agent's own disk and
    /// other agents fetch its tasks' outputs from its shuffle service [default: shared]
    #[arg(long, value_name = "MODE")]
    data_mode: Option<DataModeSetting>,

    /// Where the shuffle service listens in local mode, ip:port [default: 0.0.0.0:7401]
    #[arg(long, value_name = "ADDR")]
    shuffle_listen: Option<String>,

    /// The host:port other agents dial for this agent's shuffle service [default: the
    /// listen address, unless that is 0.0.0.0 or ::]
    #[arg(long, value_name = "ADDR")]
    shuffle_advertise: Option<String>,

    /// Concurrent part transfers served and fetched [default: 8]
    #[arg(long, value_name = "N")]
    shuffle_max_fetches: Option<u32>,

    /// An agent.toml whose values the flags above override
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Run as a system service: paths left unset by flags and --config take absolute
    /// defaults under /var/lib/slotmarket and /etc/slotmarket/pki instead of ones
    /// relative to the working directory. The systemd unit passes it.
    #[arg(long)]
    service: bool,
}

impl TryFrom<Args> for AgentConfig {
    type Error = anyhow::Error;

    fn try_from(args: Args) -> anyhow::Result<AgentConfig> {
        let file = match &args.config {
            Some(path) => AgentFile::load(path)?,
            None => AgentFile::default(),
        };
        let flags = AgentFile {
            master: args.master,
            server_name: args.server_name,
            cert_dir: args.cert_dir,
            name: args.name,
            map_slots: args.map_slots,
            reduce_slots: args.reduce_slots,
            work_dir: args.work_dir,
            data_dir: args.data_dir,
            kill_grace_ms: args.kill_grace_ms,
            data_mode: args.data_mode,
            shuffle_listen: args.shuffle_listen,
            shuffle_advertise: args.shuffle_advertise,
            shuffle_max_fetches: args.shuffle_max_fetches,
            ..AgentFile::default()
        };
        Ok(file.merge(flags).resolve_in(DaemonLayout::chosen(args.service))?)
    }
}

/// Refuses to start with a certificate the master would refuse, so the mistake shows at
/// once instead of as an endless reconnect loop.
fn check_certificate(config: &AgentConfig) -> anyhow::Result<()> {
    let files = config.tls_files();
    let identity = files.identity().with_context(|| {
        format!(
            "cannot read this node's certificate {}; issue one with \
             `slotmarket pki issue --dir {} --role agent --name {}`",
            files.cert.display(),
            config.cert_dir.display(),
            config.name
        )
    })?;
    if identity.role != Role::Agent || identity.principal != config.name {
        bail!(
            "{} is a certificate for {identity}, but this agent is agent:{}; pass --name {} or use the right --cert-dir",
            files.cert.display(),
            config.name,
            identity.principal
        );
    }
    Ok(())
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => info!("SIGTERM received"),
                    _ = tokio::signal::ctrl_c() => info!("interrupt received"),
                }
                return;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM; only Ctrl-C stops the agent")
            }
        }
    }
    // If even Ctrl-C cannot be watched, run until killed rather than stop at once.
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
    info!("interrupt received");
}

#[tokio::main]
async fn main() -> Result<(), Report> {
    slotmarket_common::logging::init(tracing::Level::INFO);
    let config = AgentConfig::try_from(Args::parse())?;
    check_certificate(&config)?;
    if let Err(err) = slotmarket_agent::open_files::raise() {
        tracing::warn!(error = %err, "cannot raise the limit on open files; many slots may exhaust it");
    }
    // On a worker, not on this thread: see `run_on_worker`.
    driver::run_on_worker(config, shutdown_signal()).await?;
    Ok(())
}
