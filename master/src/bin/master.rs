//! `slotmarket-master`: parses flags and `master.toml`, opens the store and serves agents
//! and clients (after the server replays the stored jobs) until Ctrl-C or SIGTERM.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Parser;
use slotmarket_common::config::DaemonLayout;
use slotmarket_common::dir_lock;
use slotmarket_common::pki::TlsFiles;
use slotmarket_common::report::Report;
use slotmarket_common::transport;
use slotmarket_master::config::{MasterConfig, MasterFile, PolicyTable};
use slotmarket_master::core::{Core, CoreConfig};
use slotmarket_master::server::{self, ServerOptions};
use slotmarket_master::store::{DATABASE_FILE, Store};
use tracing::{info, warn};

/// The Slotmarket master: admission, scheduling and accounting for a cluster of agents.
///
/// Flags override `--config`, which overrides the defaults. Paths default relative to the
/// working directory, or with `--service` to /var/lib/slotmarket and /etc/slotmarket/pki.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// `host:port` to listen on (UDP/QUIC); port 0 picks a free port, written to
    /// DATA_DIR/master.addr once listening.
    #[arg(long, env = "SLOTMARKET_LISTEN")]
    listen: Option<String>,
    /// Directory for the database, the lock file and master.addr [default:
    /// slotmarket-data/master; with --service: /var/lib/slotmarket/master].
    #[arg(long, env = "SLOTMARKET_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Directory with ca.pem, master.pem and master.key (made by `slotmarket pki init`)
    /// [default: pki; with --service: /etc/slotmarket/pki].
    #[arg(long, env = "SLOTMARKET_CERT_DIR")]
    cert_dir: Option<PathBuf>,
    /// Scheduling policy: fifo, fair, priority, capacity, gang-fifo, dress, edf, proportional or jockey [default: fifo]. Replaces the
    /// file's whole `[policy]` table: the named policy runs with its default settings.
    #[arg(long)]
    policy: Option<String>,
    /// Silence after which an agent is declared lost, in milliseconds [default: 10000].
    #[arg(long)]
    agent_timeout_ms: Option<u64>,
    /// Heartbeat interval asked of agents, in milliseconds [default: 1000].
    #[arg(long)]
    heartbeat_interval_ms: Option<u64>,
    /// A master.toml with any of the settings above (same names, underscores) and the
    /// `[policy]` table (see configs/master.toml).
    #[arg(long, env = "SLOTMARKET_MASTER_CONFIG")]
    config: Option<PathBuf>,
    /// Start with an empty database in a data directory an earlier master used, whose
    /// database is missing or empty. Without it the master refuses, rather than silently
    /// forget every job it had acknowledged.
    #[arg(long)]
    reinitialize: bool,
    /// Run as a system service: paths left unset by flags and --config take absolute
    /// defaults (/var/lib/slotmarket/master, /etc/slotmarket/pki) instead of ones
    /// relative to the working directory. The systemd unit passes it.
    #[arg(long)]
    service: bool,
}

impl TryFrom<Args> for MasterConfig {
    type Error = anyhow::Error;

    fn try_from(args: Args) -> Result<MasterConfig> {
        let file = match &args.config {
            Some(path) => MasterFile::load(path)?,
            None => MasterFile::default(),
        };
        let policy = match &args.policy {
            Some(name) => Some(PolicyTable::named(name).settings().context("--policy")?),
            None => file.policy,
        };
        let merged = MasterFile {
            listen: args.listen.or(file.listen),
            data_dir: args.data_dir.or(file.data_dir),
            cert_dir: args.cert_dir.or(file.cert_dir),
            policy,
            agent_timeout_ms: args.agent_timeout_ms.or(file.agent_timeout_ms),
            heartbeat_interval_ms: args.heartbeat_interval_ms.or(file.heartbeat_interval_ms),
            max_frame_bytes: file.max_frame_bytes,
            ..file
        };
        Ok(MasterConfig::resolve(merged, DaemonLayout::chosen(args.service))?)
    }
}

#[tokio::main]
async fn main() -> Result<(), Report> {
    slotmarket_common::logging::init(tracing::Level::INFO);
    let args = Args::parse();
    let reinitialize = args.reinitialize;
    let config = MasterConfig::try_from(args)?;
    Ok(run(config, reinitialize).await?)
}

async fn run(config: MasterConfig, reinitialize: bool) -> Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data directory {}", config.data_dir.display()))?;
    // Two masters never share a database.
    let _lock = dir_lock::lock_dir(&config.data_dir, "master.lock", "master")?;
    check_previous_life(&config.data_dir, reinitialize)?;
    let store = Store::open(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let core = Core::new(CoreConfig { container_epoch: container_epoch()?, ..config.core.clone() });

    let tls = TlsFiles::in_dir(&config.cert_dir, "master");
    let listen =
        transport::resolve(&config.listen).await.with_context(|| format!("resolving {}", config.listen))?;
    let secret = restart_secret(&config.data_dir)?;
    let endpoint = transport::server_endpoint_with_secret(listen, &tls, &secret).with_context(|| {
        format!("listening on {listen} with certificates from {}", config.cert_dir.display())
    })?;
    let bound = endpoint.local_addr().context("reading the bound address")?;
    write_addr_file(&config.data_dir, &bound.to_string())?;
    info!(
        address = %bound,
        policy = %config.core.policy.name(),
        policy_settings = ?config.core.policy,
        database = %store.path().display(),
        "master listening"
    );
    let options = ServerOptions {
        max_frame: config.max_frame,
        heartbeat_interval: config.heartbeat_interval,
        cleanup_retain: config.cleanup_retain,
    };
    server::run(endpoint, core, store, options, shutdown_signal()).await?;
    Ok(())
}

/// Files a master writes into its data directory only once it has started there.
const LIFE_MARKERS: [&str; 2] = ["restart.secret", "master.addr"];

/// Refuses to start on a data directory that an earlier master used (it left its
/// `LIFE_MARKERS`) but whose database is missing or empty, unless `reinitialize`: the
/// jobs it acknowledged would be forgotten without a word.
fn check_previous_life(data_dir: &Path, reinitialize: bool) -> Result<()> {
    let holds_data = Store::holds_data(data_dir)
        .with_context(|| format!("reading the database in {}", data_dir.display()))?;
    let markers: Vec<&str> = LIFE_MARKERS.into_iter().filter(|name| data_dir.join(name).exists()).collect();
    if holds_data || markers.is_empty() {
        return Ok(());
    }
    let database = data_dir.join(DATABASE_FILE);
    if reinitialize {
        warn!(
            database = %database.display(),
            "reinitializing: starting with an empty database; jobs of the earlier master are lost, \
             and job ids start again from j1 (move the agents' shared jobs directory aside)"
        );
        return Ok(());
    }
    bail!(
        "{dir} was used by an earlier master ({found} exist), but its database {db} is missing or empty. \
         Starting would lose every job it acknowledged (specs, states, task results and history), and \
         tasks agents still run for them would be killed as unknown. Restore {db} from a backup, or start \
         with --reinitialize to begin again with an empty database.",
        dir = data_dir.display(),
        found = markers.join(" and "),
        db = database.display(),
    )
}

/// This lifetime's container-id epoch: the start time in milliseconds. A later start has
/// a larger one, so even a master that lost its database issues ids no earlier master used.
fn container_epoch() -> Result<u64> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?;
    u64::try_from(since_epoch.as_millis()).context("the system clock is out of range")
}

/// The secret that lets this master reset its predecessor's connections after a restart
/// (see `server_endpoint_with_secret`); made once, kept in the data directory.
fn restart_secret(data_dir: &Path) -> Result<[u8; 32]> {
    let path = data_dir.join("restart.secret");
    match std::fs::read(&path) {
        Ok(bytes) => {
            return bytes
                .try_into()
                .map_err(|_| anyhow::anyhow!("{} is not 32 bytes; delete it", path.display()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let mut secret = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
        .map_err(|_| anyhow::anyhow!("the system random number generator failed"))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(&secret).with_context(|| format!("writing {}", path.display()))?;
    Ok(secret)
}

/// Publishes the bound address for scripts that started us with port 0.
fn write_addr_file(data_dir: &Path, addr: &str) -> Result<()> {
    let path = data_dir.join("master.addr");
    let tmp = data_dir.join("master.addr.tmp");
    std::fs::write(&tmp, format!("{addr}\n")).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
