//! The agent's configuration: [`AgentFile`] is `agent.toml` (every field optional),
//! [`AgentConfig`] is the resolved whole, with defaults filled in from the machine
//! (hostname, CPU count) and paths made absolute.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use slotmarket_common::config::{
    ConfigFileError, DEFAULT_MASTER_ADDR, DEFAULT_SERVER_NAME, DaemonLayout, load_toml,
};
use slotmarket_common::pki::{PkiError, TlsFiles, check_name};
use slotmarket_common::protocol::{DEFAULT_MAX_FRAME, DataMode};
use thiserror::Error;
use tracing::warn;

use crate::containment::{Containment, ContainmentError, ContainmentMode};
use crate::process::{FetchEnv, ProcessConfig};
use crate::run_as::{RunAs, RunAsError};
use crate::session::{BackoffConfig, DataDirIdentity, SessionConfig};
use crate::set_up::SetUpSite;

/// The shared data directory when none is given.
pub const DEFAULT_DATA_DIR: &str = "./slotmarket-data/shared";
/// Time between SIGTERM and SIGKILL when none is given.
pub const DEFAULT_KILL_GRACE_MS: u64 = 3000;
/// Where the shuffle service listens when none is given (local data mode only).
pub const DEFAULT_SHUFFLE_LISTEN: &str = "0.0.0.0:7401";
/// Concurrent part transfers (served, and fetched) when none is given.
pub const DEFAULT_SHUFFLE_MAX_FETCHES: u32 = 8;

/// Where the agent keeps jobs' data (`data_mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataModeSetting {
    /// One data directory shared by every agent (NFS, or one machine's disk).
    #[default]
    Shared,
    /// The agent's own disk; other agents fetch its tasks' outputs from its shuffle service.
    Local,
}

impl std::str::FromStr for DataModeSetting {
    type Err = String;
    fn from_str(text: &str) -> Result<DataModeSetting, String> {
        match text {
            "shared" => Ok(DataModeSetting::Shared),
            "local" => Ok(DataModeSetting::Local),
            other => Err(format!("unknown data mode {other:?}; use shared or local")),
        }
    }
}

/// The shuffle service and fetcher of an agent in local data mode, resolved.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ShuffleConfig {
    /// Where the service listens (port 0: any free port, for tests).
    pub listen: SocketAddr,
    /// What other agents dial; `None`: the address actually bound (listen is specific).
    pub advertise: Option<SocketAddr>,
    /// Concurrent transfers served, and concurrent parts fetched for one request.
    pub max_fetches: usize,
}

/// `agent.toml`. Every field is optional; command-line flags override it.
///
/// ```toml
/// master = "master.example:7400"
/// server_name = "master.example"
/// cert_dir = "/etc/slotmarket/pki"
/// name = "node3"
/// map_slots = 8
/// reduce_slots = 4
/// work_dir = "/var/lib/slotmarket-agent"
/// data_dir = "/nfs/slotmarket"
/// kill_grace_ms = 3000
/// containment = "auto"          # "cgroup", "scan"
/// data_mode = "shared"          # "local": own disk, shuffle service
/// shuffle_listen = "0.0.0.0:7401"
/// shuffle_advertise = "node3.example:7401"
/// shuffle_max_fetches = 8
///
/// [run_as]                      # only for an agent running as root
/// alice = "alice"               # account = Unix user
/// "*" = "slotmarket-tasks"      # every other account
/// ```
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentFile {
    /// The master's `host:port` (default 127.0.0.1:7400).
    pub master: Option<String>,
    /// The TLS name of the master (default localhost).
    pub server_name: Option<String>,
    /// Directory with `ca.pem`, `{name}.pem` and `{name}.key` (default pki).
    pub cert_dir: Option<PathBuf>,
    /// The node name; must equal the certificate's principal (default: the hostname).
    pub name: Option<String>,
    /// Map slots (default: the number of CPUs).
    pub map_slots: Option<u32>,
    /// Reduce slots (default: half the CPUs, at least 1).
    pub reduce_slots: Option<u32>,
    /// The agent's own directory (default ./slotmarket-agent-{name}).
    pub work_dir: Option<PathBuf>,
    /// The data directory shared by the agents (default ./slotmarket-data/shared).
    pub data_dir: Option<PathBuf>,
    /// Milliseconds between SIGTERM and SIGKILL when killing a task (default 3000).
    pub kill_grace_ms: Option<u64>,
    /// How task processes are kept inside their container (default `auto`: cgroup v2
    /// where usable, else a process scan).
    pub containment: Option<ContainmentMode>,
    /// Accounts mapped to the Unix users their tasks run as (`"*"`: every other
    /// account); only for an agent running as root. Unset: tasks run as the agent's user.
    pub run_as: Option<BTreeMap<String, String>>,
    /// `shared` (default) or `local`: whether `data_dir` is shared by every agent or this
    /// agent's own, with a shuffle service for the others.
    pub data_mode: Option<DataModeSetting>,
    /// Where the shuffle service listens, `ip:port` (default 0.0.0.0:7401; local mode).
    pub shuffle_listen: Option<String>,
    /// What other agents dial for this agent's shuffle service, `host:port` (default: the
    /// listen address, which must then not be 0.0.0.0 or ::).
    pub shuffle_advertise: Option<String>,
    /// Concurrent part transfers served and fetched (default 8).
    pub shuffle_max_fetches: Option<u32>,
}

/// Why the configuration is unusable.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The config file could not be read, or is not valid TOML for `agent.toml`.
    #[error(transparent)]
    File(#[from] ConfigFileError),
    /// No name was given and the hostname is unknown.
    #[error("cannot determine the hostname; set the node name with --name or `name`")]
    NoHostname,
    /// The node name cannot be a certificate principal.
    #[error("node name {name:?} is not usable: {source}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        source: PkiError,
    },
    /// The agent would offer no slot at all.
    #[error("map_slots and reduce_slots are both 0; the agent would never run anything")]
    NoSlots,
    /// The `[run_as]` mapping cannot be used.
    #[error(transparent)]
    RunAs(#[from] RunAsError),
    /// A service (`--service`) was given a relative directory.
    #[error("{field}: {problem}")]
    RelativeServicePath {
        /// The setting's name.
        field: &'static str,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A shuffle address is not `ip:port` / `host:port`, or resolves to nothing.
    #[error("{setting} = {value:?} is not a usable address: {reason}")]
    ShuffleAddress {
        /// The setting (`shuffle_listen` or `shuffle_advertise`).
        setting: &'static str,
        /// Its value.
        value: String,
        /// Why.
        reason: String,
    },
    /// The shuffle service listens on every interface and no address to advertise is set.
    #[error(
        "shuffle_listen = {listen} names no address other agents can dial; set shuffle_advertise \
         (--shuffle-advertise) to this node's host:port as the other agents reach it"
    )]
    NoShuffleAdvertise {
        /// The listen address.
        listen: SocketAddr,
    },
    /// `shuffle_max_fetches` is 0.
    #[error("shuffle_max_fetches = 0 would never transfer anything; use at least 1")]
    NoShuffleFetches,
    /// A directory path cannot be made absolute.
    #[error("cannot make {path} absolute: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl AgentFile {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<AgentFile, ConfigError> {
        Ok(load_toml(path)?)
    }

    /// Parses TOML text; the error names the offending field.
    pub fn parse(text: &str) -> Result<AgentFile, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// This file with every field that `overrides` sets replaced.
    pub fn merge(self, overrides: AgentFile) -> AgentFile {
        AgentFile {
            master: overrides.master.or(self.master),
            server_name: overrides.server_name.or(self.server_name),
            cert_dir: overrides.cert_dir.or(self.cert_dir),
            name: overrides.name.or(self.name),
            map_slots: overrides.map_slots.or(self.map_slots),
            reduce_slots: overrides.reduce_slots.or(self.reduce_slots),
            work_dir: overrides.work_dir.or(self.work_dir),
            data_dir: overrides.data_dir.or(self.data_dir),
            kill_grace_ms: overrides.kill_grace_ms.or(self.kill_grace_ms),
            containment: overrides.containment.or(self.containment),
            run_as: overrides.run_as.or(self.run_as),
            data_mode: overrides.data_mode.or(self.data_mode),
            shuffle_listen: overrides.shuffle_listen.or(self.shuffle_listen),
            shuffle_advertise: overrides.shuffle_advertise.or(self.shuffle_advertise),
            shuffle_max_fetches: overrides.shuffle_max_fetches.or(self.shuffle_max_fetches),
        }
    }

    /// [`AgentFile::resolve_in`] the development layout (paths relative to the working
    /// directory).
    pub fn resolve(self) -> Result<AgentConfig, ConfigError> {
        self.resolve_in(DaemonLayout::Dev)
    }

    /// Fills in the defaults (paths from `layout`), checks the result and makes
    /// directories absolute.
    pub fn resolve_in(self, layout: DaemonLayout) -> Result<AgentConfig, ConfigError> {
        let name = match self.name {
            Some(name) => name,
            None => sysinfo::System::host_name().ok_or(ConfigError::NoHostname)?,
        };
        check_name(&name).map_err(|source| ConfigError::BadName { name: name.clone(), source })?;
        let (default_map, default_reduce) = default_slots(cpu_count());
        let map_slots = self.map_slots.unwrap_or(default_map);
        let reduce_slots = self.reduce_slots.unwrap_or(default_reduce);
        if map_slots == 0 && reduce_slots == 0 {
            return Err(ConfigError::NoSlots);
        }
        let work_dir = self.work_dir.unwrap_or_else(|| layout.agent_work_dir(&name));
        let data_mode = self.data_mode.unwrap_or_default();
        let shuffle = match data_mode {
            DataModeSetting::Shared => None,
            DataModeSetting::Local => Some(resolve_shuffle(
                self.shuffle_listen.as_deref(),
                self.shuffle_advertise.as_deref(),
                self.shuffle_max_fetches,
            )?),
        };
        // A local agent must never default to the directory shared agents use.
        let data_dir = match (self.data_dir, data_mode) {
            (Some(dir), _) => dir,
            (None, DataModeSetting::Shared) => layout.shared_data_dir(),
            (None, DataModeSetting::Local) => work_dir.join("data"),
        };
        let cert_dir = self.cert_dir.unwrap_or_else(|| layout.cert_dir());
        for (field, path) in [("work_dir", &work_dir), ("data_dir", &data_dir), ("cert_dir", &cert_dir)] {
            layout.check_path(path).map_err(|problem| ConfigError::RelativeServicePath { field, problem })?;
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        let run_as = RunAs::resolve(&self.run_as.unwrap_or_default(), euid)?;
        Ok(AgentConfig {
            master: self.master.unwrap_or_else(|| DEFAULT_MASTER_ADDR.to_string()),
            server_name: self.server_name.unwrap_or_else(|| DEFAULT_SERVER_NAME.to_string()),
            cert_dir,
            map_slots,
            reduce_slots,
            work_dir: absolute(work_dir)?,
            data_dir: absolute(data_dir)?,
            kill_grace: Duration::from_millis(self.kill_grace_ms.unwrap_or(DEFAULT_KILL_GRACE_MS)),
            containment: self.containment.unwrap_or_default(),
            run_as,
            path_prefix: own_directory(),
            backoff: BackoffConfig::default(),
            max_frame: DEFAULT_MAX_FRAME,
            shuffle,
            name,
            adopt_orphans: true,
        })
    }
}

/// Parses the shuffle settings of a local-mode agent and fills in their defaults.
fn resolve_shuffle(
    listen: Option<&str>,
    advertise: Option<&str>,
    max_fetches: Option<u32>,
) -> Result<ShuffleConfig, ConfigError> {
    let listen_text = listen.unwrap_or(DEFAULT_SHUFFLE_LISTEN);
    let listen: SocketAddr =
        listen_text.parse().map_err(|err: std::net::AddrParseError| ConfigError::ShuffleAddress {
            setting: "shuffle_listen",
            value: listen_text.into(),
            reason: err.to_string(),
        })?;
    let advertise = match advertise {
        Some(text) => Some(resolve_address("shuffle_advertise", text)?),
        None if listen.ip().is_unspecified() => return Err(ConfigError::NoShuffleAdvertise { listen }),
        None => None,
    };
    let max_fetches = max_fetches.unwrap_or(DEFAULT_SHUFFLE_MAX_FETCHES);
    if max_fetches == 0 {
        return Err(ConfigError::NoShuffleFetches);
    }
    Ok(ShuffleConfig { listen, advertise, max_fetches: max_fetches as usize })
}

/// `host:port` resolved now (the agent tells the master an address, not a name); the
/// first IPv4 address if there is one.
fn resolve_address(setting: &'static str, text: &str) -> Result<SocketAddr, ConfigError> {
    let bad = |reason: String| ConfigError::ShuffleAddress { setting, value: text.into(), reason };
    let addrs: Vec<SocketAddr> = text.to_socket_addrs().map_err(|err| bad(err.to_string()))?.collect();
    let addr = addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).copied();
    let addr = addr.ok_or_else(|| bad("resolves to no address".into()))?;
    if addr.ip().is_unspecified() || addr.port() == 0 {
        return Err(bad("other agents cannot dial an unspecified address or port 0".into()));
    }
    Ok(addr)
}

/// Everything the agent runs with, resolved.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The master's `host:port`.
    pub master: String,
    /// The TLS name of the master.
    pub server_name: String,
    /// Directory with the CA and this node's certificate and key.
    pub cert_dir: PathBuf,
    /// The node name (the certificate's principal).
    pub name: String,
    /// Map slots offered.
    pub map_slots: u32,
    /// Reduce slots offered.
    pub reduce_slots: u32,
    /// The agent's own directory (absolute); containers live under it.
    pub work_dir: PathBuf,
    /// The shared data directory (absolute); job directories live under it.
    pub data_dir: PathBuf,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// How task processes are contained.
    pub containment: ContainmentMode,
    /// The Unix users tasks run as, by account (empty: the agent's user).
    pub run_as: RunAs,
    /// Put in front of tasks' `PATH`: the directory of the agent's executable.
    pub path_prefix: Option<PathBuf>,
    /// Reconnect delays.
    pub backoff: BackoffConfig,
    /// Largest frame sent or accepted.
    pub max_frame: usize,
    /// The shuffle service and fetcher: `Some` exactly in local data mode.
    pub shuffle: Option<ShuffleConfig>,
    /// Under the process scan, make this process the child subreaper of its tasks
    /// ([`crate::descendants`]): the agent's own process does; a test running the driver
    /// inside the test binary must not, since it changes the whole process.
    pub adopt_orphans: bool,
}

impl AgentConfig {
    /// This node's certificate files.
    pub fn tls_files(&self) -> TlsFiles {
        TlsFiles::in_dir(&self.cert_dir, &self.name)
    }

    /// What `process` needs, built once for every task: the directories as resolved
    /// (absolute), the tasks' `PATH` and the containment (which may create the agent's
    /// cgroup).
    /// `fetch` is given in local data mode.
    pub fn process_config(&self, fetch: Option<FetchEnv>) -> Result<Arc<ProcessConfig>, ContainmentError> {
        Ok(Arc::new(ProcessConfig {
            work_dir: self.work_dir.clone(),
            data_dir: self.data_dir.clone(),
            kill_grace: self.kill_grace,
            task_path: self.path_prefix.as_deref().and_then(task_path),
            containment: Containment::new(self.containment, &self.name, &self.work_dir)?,
            run_as: self.run_as.clone(),
            fetch,
            ready_dirs: Arc::default(),
            set_up: SetUpSite::for_dirs([self.work_dir.as_path(), self.data_dir.as_path()]),
        }))
    }

    /// What `session` needs; `data_dir_id` is the data directory's id
    /// ([`crate::data_dir::shared_id`]).
    /// `data_mode` is what `Register` says (local mode: the shuffle address bound).
    pub fn session_config(&self, data_dir_id: String, data_mode: DataMode) -> SessionConfig {
        SessionConfig {
            data_dir: DataDirIdentity { path: self.data_dir.display().to_string(), id: data_dir_id },
            master: self.master.clone(),
            server_name: self.server_name.clone(),
            tls: self.tls_files(),
            node: self.name.clone(),
            map_slots: self.map_slots,
            reduce_slots: self.reduce_slots,
            backoff: self.backoff,
            max_frame: self.max_frame,
            containers_dir: self.work_dir.join("containers"),
            data_mode,
        }
    }
}

/// Map slots = CPUs, reduce slots = half of them but at least one.
pub fn default_slots(cpus: u32) -> (u32, u32) {
    let cpus = cpus.max(1);
    (cpus, (cpus / 2).max(1))
}

/// Logical CPUs according to sysinfo, falling back to the standard library.
fn cpu_count() -> u32 {
    use sysinfo::{CpuRefreshKind, RefreshKind, System};
    let system = System::new_with_specifics(RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing()));
    let count = match system.cpus().len() {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    };
    u32::try_from(count).unwrap_or(u32::MAX)
}

fn absolute(path: PathBuf) -> Result<PathBuf, ConfigError> {
    // Tasks run in their container directory, so relative paths would point elsewhere.
    std::path::absolute(&path).map_err(|source| ConfigError::Path { path, source })
}

/// The inherited `PATH` with `prefix` in front, or `None` (logged) if that cannot be a
/// `PATH`, which leaves the tasks' `PATH` alone.
pub(crate) fn task_path(prefix: &Path) -> Option<OsString> {
    let current = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(prefix.to_path_buf()).chain(std::env::split_paths(&current));
    match std::env::join_paths(dirs) {
        Ok(path) => Some(path),
        Err(err) => {
            warn!(prefix = %prefix.display(), error = %err, "cannot add the agent's directory to tasks' PATH");
            None
        }
    }
}

/// The directory of the running executable, so tools installed beside the agent
/// (`slotmarket-task`) are on tasks' `PATH`.
fn own_directory() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.parent().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use slotmarket_common::config::DEFAULT_CERT_DIR;

    use super::*;

    #[test]
    fn slot_defaults_follow_the_cpu_count() {
        assert_eq!(default_slots(8), (8, 4));
        assert_eq!(default_slots(1), (1, 1));
        assert_eq!(default_slots(0), (1, 1));
        assert_eq!(default_slots(3), (3, 1));
    }

    #[test]
    fn a_full_file_parses_and_unknown_fields_are_named() {
        let file = AgentFile::parse(
            "master = \"m:7400\"\nname = \"node3\"\nmap_slots = 8\nreduce_slots = 0\nkill_grace_ms = 500\ncontainment = \"scan\"\n",
        )
        .unwrap();
        assert_eq!(file.containment, Some(ContainmentMode::Scan));
        assert!(AgentFile::parse("containment = \"jail\"").unwrap_err().contains("containment"));
        assert_eq!(file.master.as_deref(), Some("m:7400"));
        assert_eq!(file.reduce_slots, Some(0));
        let err = AgentFile::parse("map_slot = 3").unwrap_err();
        assert!(err.contains("map_slot"), "{err}");
    }

    #[test]
    fn overrides_win_and_defaults_fill_the_rest() {
        let file = AgentFile { name: Some("node3".into()), map_slots: Some(8), ..AgentFile::default() };
        let flags = AgentFile { map_slots: Some(2), kill_grace_ms: Some(100), ..AgentFile::default() };
        let config = file.merge(flags).resolve().unwrap();
        assert_eq!((config.name.as_str(), config.map_slots), ("node3", 2));
        assert_eq!(config.kill_grace, Duration::from_millis(100));
        assert_eq!(config.master, DEFAULT_MASTER_ADDR);
        assert_eq!(config.server_name, DEFAULT_SERVER_NAME);
        assert!(config.work_dir.is_absolute() && config.work_dir.ends_with("slotmarket-agent-node3"));
        assert!(config.data_dir.is_absolute() && config.data_dir.ends_with("slotmarket-data/shared"));
        assert!(config.reduce_slots >= 1);
        assert_eq!(config.tls_files(), TlsFiles::in_dir(Path::new(DEFAULT_CERT_DIR), "node3"));
    }

    #[test]
    fn service_paths_are_absolute_defaults_that_the_file_still_overrides() {
        let file = AgentFile { name: Some("node3".into()), ..AgentFile::default() };
        let service = file.clone().resolve_in(DaemonLayout::Service).unwrap();
        assert_eq!(service.work_dir, PathBuf::from("/var/lib/slotmarket/agent"));
        assert_eq!(service.data_dir, PathBuf::from("/var/lib/slotmarket/shared"));
        assert_eq!(service.cert_dir, PathBuf::from("/etc/slotmarket/pki"));
        let nfs = AgentFile { data_dir: Some("/nfs/slotmarket".into()), ..file };
        let service = nfs.resolve_in(DaemonLayout::Service).unwrap();
        assert_eq!(service.data_dir, PathBuf::from("/nfs/slotmarket"));
        assert_eq!(service.work_dir, PathBuf::from("/var/lib/slotmarket/agent"));
        assert_eq!(DaemonLayout::Dev.shared_data_dir(), PathBuf::from(DEFAULT_DATA_DIR));
        // The example file's relative paths are refused for a service, naming the field.
        let example =
            AgentFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/agent.toml")).unwrap();
        let copied = AgentFile { name: Some("node3".into()), ..example };
        let err = copied.resolve_in(DaemonLayout::Service).unwrap_err().to_string();
        assert!(err.starts_with("data_dir: ./slotmarket-data/shared is relative"), "{err}");
    }

    #[test]
    fn the_systemd_unit_runs_the_agent_as_a_service() {
        let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/systemd/slotmarket-agent.service");
        let unit = std::fs::read_to_string(unit).unwrap();
        let exec = unit.lines().find(|line| line.starts_with("ExecStart=")).unwrap();
        assert!(exec.contains(" --service"), "{exec}");
    }

    #[test]
    fn a_run_as_table_parses_and_resolves_as_root_only() {
        let file =
            AgentFile::parse("name = \"n\"\n[run_as]\nalice = \"nobody\"\n\"*\" = \"nobody\"\n").unwrap();
        let mapping = file.run_as.clone().unwrap();
        assert_eq!(mapping.get("alice").map(String::as_str), Some("nobody"));
        assert_eq!(mapping.get("*").map(String::as_str), Some("nobody"));
        // SAFETY: geteuid has no preconditions.
        match (file.resolve(), unsafe { libc::geteuid() }) {
            (Ok(config), 0) => {
                let alice = slotmarket_common::ids::AccountId("alice".into());
                assert_eq!(config.run_as.user_for(&alice).unwrap().map(|u| u.uid), Some(65534));
            }
            (Err(err), euid) if euid != 0 => {
                assert!(matches!(err, ConfigError::RunAs(RunAsError::NotRoot(_))))
            }
            (other, euid) => panic!("euid {euid}: {other:?}"),
        }
    }

    #[test]
    fn unusable_settings_are_refused() {
        let bad_name = AgentFile { name: Some("no spaces".into()), ..AgentFile::default() };
        assert!(matches!(bad_name.resolve(), Err(ConfigError::BadName { .. })));
        let no_slots = AgentFile {
            name: Some("n".into()),
            map_slots: Some(0),
            reduce_slots: Some(0),
            ..AgentFile::default()
        };
        assert!(matches!(no_slots.resolve(), Err(ConfigError::NoSlots)));
    }

    #[test]
    fn local_mode_has_its_own_data_dir_and_needs_an_address_to_advertise() {
        let local = |listen: Option<&str>, advertise: Option<&str>| AgentFile {
            name: Some("n1".into()),
            work_dir: Some("/tmp/agent-n1".into()),
            data_mode: Some(DataModeSetting::Local),
            shuffle_listen: listen.map(str::to_string),
            shuffle_advertise: advertise.map(str::to_string),
            ..AgentFile::default()
        };
        let err = local(None, None).resolve().unwrap_err();
        assert!(matches!(err, ConfigError::NoShuffleAdvertise { .. }));
        assert!(err.to_string().contains("shuffle_advertise"), "{err}");
        let config = local(None, Some("127.0.0.1:7500")).resolve().unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/tmp/agent-n1/data"));
        let shuffle = config.shuffle.unwrap();
        assert_eq!(shuffle.listen, SocketAddr::from(([0, 0, 0, 0], 7401)));
        assert_eq!(shuffle.advertise, Some(SocketAddr::from(([127, 0, 0, 1], 7500))));
        assert_eq!(shuffle.max_fetches, DEFAULT_SHUFFLE_MAX_FETCHES as usize);
        // A specific listen address is advertised as bound (port 0 is chosen at bind time).
        let any_port = local(Some("127.0.0.1:0"), None).resolve().unwrap().shuffle.unwrap();
        assert_eq!(any_port.advertise, None);
        let bad = local(Some("nowhere"), None).resolve().unwrap_err();
        assert!(bad.to_string().contains("shuffle_listen"), "{bad}");
        let zero = AgentFile { shuffle_max_fetches: Some(0), ..local(Some("127.0.0.1:0"), None) };
        assert!(matches!(zero.resolve(), Err(ConfigError::NoShuffleFetches)));
        // Shared mode keeps the shared default and runs no shuffle service.
        let shared = AgentFile { data_mode: None, ..local(None, None) }.resolve().unwrap();
        assert!(shared.shuffle.is_none() && shared.data_dir.ends_with("slotmarket-data/shared"));
        assert!(AgentFile::parse("data_mode = \"nfs\"").unwrap_err().contains("data_mode"));
    }

    #[test]
    fn the_example_agent_toml_shows_every_setting_with_its_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/agent.toml");
        let example = AgentFile::load(&path).unwrap();
        assert_eq!(example.master.as_deref(), Some(DEFAULT_MASTER_ADDR));
        assert_eq!(example.server_name.as_deref(), Some(DEFAULT_SERVER_NAME));
        assert_eq!(example.cert_dir, Some(PathBuf::from(DEFAULT_CERT_DIR)));
        assert_eq!(example.data_dir, Some(PathBuf::from(DEFAULT_DATA_DIR)));
        assert_eq!(example.kill_grace_ms, Some(DEFAULT_KILL_GRACE_MS));
        // Machine-dependent defaults are commented out; restored, every field is set.
        let text = std::fs::read_to_string(&path).unwrap();
        let restored: Vec<&str> = text
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest) if rest.split_once(" = ").is_some_and(|(k, _)| !k.contains(' ')) => rest,
                _ => line,
            })
            .collect();
        let full = AgentFile::parse(&restored.join("\n")).unwrap();
        let AgentFile {
            master,
            server_name,
            cert_dir,
            name,
            map_slots,
            reduce_slots,
            work_dir,
            data_dir,
            kill_grace_ms,
            containment,
            // Shown but left commented out: an agent not running as root refuses it.
            run_as: _,
            data_mode,
            shuffle_listen,
            shuffle_advertise,
            shuffle_max_fetches,
        } = full;
        assert_eq!(data_mode, Some(DataModeSetting::Shared));
        assert_eq!(shuffle_listen.as_deref(), Some(DEFAULT_SHUFFLE_LISTEN));
        assert!(shuffle_advertise.is_some());
        assert_eq!(shuffle_max_fetches, Some(DEFAULT_SHUFFLE_MAX_FETCHES));
        assert!(master.is_some() && server_name.is_some() && cert_dir.is_some() && name.is_some());
        assert!(map_slots.is_some() && reduce_slots.is_some() && work_dir.is_some());
        assert!(data_dir.is_some() && kill_grace_ms.is_some());
        assert_eq!(containment, Some(ContainmentMode::default()));
    }
}
