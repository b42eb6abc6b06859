//! `master.toml` and the settled configuration the binary runs with. Every key is
//! optional; command-line flags override the file, the file overrides the defaults.
//! Also [`PolicyTable`]: the `[policy]` table assembled from layers (a file, a policy name,
//! `KEY=VALUE` overrides), which is how the simulator reads the same settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use slotmarket_common::config::{ConfigFileError, DEFAULT_MASTER_ADDR, DaemonLayout};
use slotmarket_common::protocol::DEFAULT_MAX_FRAME;
use thiserror::Error;

use crate::core::AdmissionSettings;
use crate::core::policy::{PolicyName, PolicySettings, PolicySettingsError};
use crate::core::{CoreConfig, HistoryLimits, NodeHealth};

/// Address the master listens on when nothing else is said: where agents and clients look
/// for it by default.
pub const DEFAULT_LISTEN: &str = DEFAULT_MASTER_ADDR;

/// The contents of `master.toml`.
#[derive(Clone, Default, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MasterFile {
    /// `host:port` to listen on (UDP); port 0 picks a free one.
    pub listen: Option<String>,
    /// Where the database and `master.addr` live.
    pub data_dir: Option<PathBuf>,
    /// Directory holding `ca.pem`, `master.pem` and `master.key`.
    pub cert_dir: Option<PathBuf>,
    /// The `[policy]` table: which policy runs, with its settings (default `fifo`), its
    /// `preset` filled in and checked.
    #[serde(skip)]
    pub policy: Option<PolicySettings>,
    /// The `[policy]` table as written. [`load`](Self::load) reads it into `policy` and
    /// leaves this `None`: read there, an error in it names the line of its key.
    #[serde(default, rename = "policy")]
    pub policy_written: Option<toml::Table>,
    /// Silence after which an agent is declared lost, in milliseconds.
    pub agent_timeout_ms: Option<u64>,
    /// How often agents must send heartbeats, in milliseconds.
    pub heartbeat_interval_ms: Option<u64>,
    /// Largest accepted frame, in bytes.
    pub max_frame_bytes: Option<usize>,
    /// Seconds an ended job stays in memory before `status` and `jobs` read it from the
    /// database instead (default 600).
    pub ended_job_retention_s: Option<u64>,
    /// Runs of each job name kept in the job history (default 20; 0 keeps none).
    pub history_per_name: Option<usize>,
    /// Job names the history keeps, the first recorded forgotten first (default 10000).
    pub history_names: Option<usize>,
    /// Fast task failures in a row (of two or more jobs) that quarantine an agent
    /// (default 3; 0 turns quarantine off).
    pub quarantine_after_fast_failures: Option<u32>,
    /// A task failing this soon after starting counts as a fast failure, in
    /// milliseconds (default 2000).
    pub fast_failure_ms: Option<u64>,
    /// How long a quarantined agent gets no new work, in milliseconds (default 300000).
    pub quarantine_ms: Option<u64>,
    /// Most tasks one job may have (default 100,000).
    pub max_tasks_per_job: Option<u64>,
    /// Most tasks one account's unfinished jobs may hold together (default 1,000,000).
    pub max_queued_tasks_per_account: Option<u64>,
    /// The `[admission]` table: MRM deadline admission and pricing (default `none`).
    pub admission: Option<AdmissionSettings>,
    /// The `[cleanup]` table: when ended jobs' directories are removed from the agents.
    pub cleanup: Option<CleanupFile>,
}

/// `[cleanup]` in `master.toml`.
#[derive(Clone, Copy, Default, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CleanupFile {
    /// Seconds after a job ended before its directories (and its containers' logs) are
    /// removed from every agent that ran its tasks (default 3600).
    pub retain_s: Option<u64>,
}

/// A setting that cannot work.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read or parsed.
    #[error(transparent)]
    File(#[from] ConfigFileError),
    /// A setting that now lives in the `[policy]` table was written at the top level.
    #[error("{path}: `{key}` is no longer a top-level setting; it moved into the [policy] table: {hint}")]
    MovedToPolicy {
        /// The file.
        path: PathBuf,
        /// The old key.
        key: &'static str,
        /// How to write it now.
        hint: &'static str,
    },
    /// The `[policy]` table does not describe a policy (unknown name, a field the policy
    /// does not take, a value of the wrong type).
    #[error("[policy]: {message}")]
    PolicyTable {
        /// The key the message is about, when one is.
        key: Option<String>,
        /// What is wrong, led by that key.
        message: String,
    },
    /// The `[policy]` table parses but a value cannot work. The message carries the
    /// setting's own, so it is not also the error's source (a report would say it twice).
    #[error("[policy] {0}")]
    Policy(PolicySettingsError),
    /// A `KEY=VALUE` override of the `[policy]` table is malformed.
    #[error("{assignment:?}: {problem}")]
    PolicyOverride {
        /// The override as given.
        assignment: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A value is out of range or inconsistent with another.
    #[error("{field}: {problem}")]
    Invalid {
        /// The setting's name.
        field: &'static str,
        /// What is wrong and how to fix it.
        problem: String,
    },
}

impl From<PolicySettingsError> for ConfigError {
    fn from(err: PolicySettingsError) -> ConfigError {
        ConfigError::Policy(err)
    }
}

/// Top-level keys that moved into `[policy]`, with how to write them now.
const MOVED_TO_POLICY: [(&str, &str); 2] = [
    ("capacity_queues", "write the shares under [policy.queues], e.g. `research = 0.6`"),
    ("preemption", "write `preemption = true` under [policy]"),
];

impl MasterFile {
    /// Reads and parses a `master.toml`. Settings written the old way (top-level
    /// `capacity_queues` or `preemption`, `policy = "NAME"`) are refused with a message
    /// saying how to write them in `[policy]`.
    pub fn load(path: &Path) -> Result<MasterFile, ConfigError> {
        MasterFile::parse(path, &read(path)?)
    }

    /// Parses `text`, the contents of the `master.toml` at `path`, as [`load`](Self::load)
    /// does, and checks its `[policy]` table: an error there is placed at the key it is
    /// about.
    fn parse(path: &Path, text: &str) -> Result<MasterFile, ConfigError> {
        let mut file = MasterFile::parse_written(path, text)?;
        if let Some(table) = file.policy_written.take() {
            let at_key = |err| policy_error_at(path, text, err);
            let policy = PolicyTable(table).parse().map_err(at_key)?;
            policy.check().map_err(|err| at_key(err.into()))?;
            file.policy = Some(policy);
        }
        Ok(file)
    }

    /// `text` as written: its `[policy]` table left in `policy_written`, unread.
    fn parse_written(path: &Path, text: &str) -> Result<MasterFile, ConfigError> {
        toml::from_str(text).map_err(|err| match moved_to_policy(text) {
            Some((key, hint)) => ConfigError::MovedToPolicy { path: path.to_path_buf(), key, hint },
            None => ConfigError::File(ConfigFileError::parse(path, text, &err)),
        })
    }
}

/// `err`, about the `[policy]` table of `text` (the `master.toml` at `path`), placed at
/// the key it names.
fn policy_error_at(path: &Path, text: &str, err: ConfigError) -> ConfigError {
    let key = match &err {
        ConfigError::PolicyTable { key, .. } => key.clone(),
        ConfigError::Policy(err) => Some(err.key()),
        _ => None,
    };
    let mut key_path = vec!["policy"];
    key_path.extend(key.as_deref().into_iter().flat_map(|key| key.split('.')));
    ConfigError::File(ConfigFileError::at_key(path, text, &key_path, err.to_string()))
}

/// The text of the file at `path`.
fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|source| ConfigFileError::Read { path: path.to_path_buf(), source }.into())
}

/// The first old-style policy setting in `text`, if the file has one.
fn moved_to_policy(text: &str) -> Option<(&'static str, &'static str)> {
    let table: toml::Table = toml::from_str(text).ok()?;
    if table.get("policy").is_some_and(|p| !p.is_table()) {
        return Some(("policy = \"NAME\"", "write `[policy]` and under it `name = \"NAME\"`"));
    }
    MOVED_TO_POLICY.into_iter().find(|(key, _)| table.contains_key(*key))
}

/// Everything the master runs with, settled and checked.
#[derive(Clone, Debug)]
pub struct MasterConfig {
    /// `host:port` to listen on.
    pub listen: String,
    /// Data directory (database, `master.addr`, lock file).
    pub data_dir: PathBuf,
    /// Certificate directory.
    pub cert_dir: PathBuf,
    /// The core's settings.
    pub core: CoreConfig,
    /// How often agents must send heartbeats.
    pub heartbeat_interval: Duration,
    /// Largest accepted frame, in bytes.
    pub max_frame: usize,
    /// How long an ended job's directories stay on the agents.
    pub cleanup_retain: Duration,
}

impl TryFrom<MasterFile> for MasterConfig {
    type Error = ConfigError;

    /// [`MasterConfig::resolve`] with the development layout's relative paths.
    fn try_from(file: MasterFile) -> Result<MasterConfig, ConfigError> {
        MasterConfig::resolve(file, DaemonLayout::Dev)
    }
}

impl MasterConfig {
    /// Applies defaults to whatever the (merged) file leaves unset, its paths from
    /// `layout`, then checks.
    pub fn resolve(file: MasterFile, layout: DaemonLayout) -> Result<MasterConfig, ConfigError> {
        let defaults = CoreConfig::default();
        let node_health = node_health(&file, defaults.node_health)?;
        let policy = match (file.policy, file.policy_written) {
            (Some(policy), _) => policy,
            // A file deserialized without `load` still has its table as written.
            (None, Some(table)) => PolicyTable(table).settings()?,
            (None, None) => defaults.policy.clone(),
        };
        policy.check()?;
        let agent_timeout = file.agent_timeout_ms.map_or(defaults.agent_timeout, Duration::from_millis);
        let heartbeat_interval = file
            .heartbeat_interval_ms
            .map_or(crate::server::DEFAULT_HEARTBEAT_INTERVAL, Duration::from_millis);
        if heartbeat_interval.is_zero() || agent_timeout < heartbeat_interval * 2 {
            return Err(ConfigError::Invalid {
                field: "agent_timeout_ms",
                problem: format!(
                    "must be at least twice heartbeat_interval_ms (got {} ms and {} ms)",
                    agent_timeout.as_millis(),
                    heartbeat_interval.as_millis()
                ),
            });
        }
        let max_frame = file.max_frame_bytes.unwrap_or(DEFAULT_MAX_FRAME);
        if !(1024..=64 << 20).contains(&max_frame) {
            return Err(ConfigError::Invalid {
                field: "max_frame_bytes",
                problem: format!("must be between 1 KiB and 64 MiB, got {max_frame}"),
            });
        }
        let max_tasks_per_job = file.max_tasks_per_job.unwrap_or(defaults.max_tasks_per_job);
        let max_queued_tasks_per_account =
            file.max_queued_tasks_per_account.unwrap_or(defaults.max_queued_tasks_per_account);
        if max_tasks_per_job == 0 || max_queued_tasks_per_account < max_tasks_per_job {
            return Err(ConfigError::Invalid {
                field: "max_queued_tasks_per_account",
                problem: format!(
                    "must be at least max_tasks_per_job, which must be at least 1 (got {max_queued_tasks_per_account} and {max_tasks_per_job})"
                ),
            });
        }
        let admission = file.admission.unwrap_or_default();
        admission.check().map_err(|(field, problem)| ConfigError::Invalid { field, problem })?;
        let data_dir = file.data_dir.unwrap_or_else(|| layout.master_data_dir());
        layout
            .check_path(&data_dir)
            .map_err(|problem| ConfigError::Invalid { field: "data_dir", problem })?;
        let cert_dir = file.cert_dir.unwrap_or_else(|| layout.cert_dir());
        layout
            .check_path(&cert_dir)
            .map_err(|problem| ConfigError::Invalid { field: "cert_dir", problem })?;
        Ok(MasterConfig {
            listen: file.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
            data_dir,
            cert_dir,
            core: CoreConfig {
                policy,
                agent_timeout,
                ended_job_retention: file
                    .ended_job_retention_s
                    .map_or(defaults.ended_job_retention, Duration::from_secs),
                history: HistoryLimits {
                    per_name: file.history_per_name.unwrap_or(defaults.history.per_name),
                    names: file.history_names.unwrap_or(defaults.history.names),
                },
                node_health,
                max_tasks_per_job,
                max_queued_tasks_per_account,
                // The binary sets this lifetime's epoch when it starts.
                container_epoch: defaults.container_epoch,
                admission,
                predict_from_progress: true,
                // The store needs every write.
                persists: crate::core::Persists::All,
            },
            heartbeat_interval,
            max_frame,
            cleanup_retain: file
                .cleanup
                .and_then(|c| c.retain_s)
                .map_or(crate::server::DEFAULT_CLEANUP_RETAIN, Duration::from_secs),
        })
    }
}

/// The quarantine settings, over `defaults`; a quarantine must last a while.
fn node_health(file: &MasterFile, defaults: NodeHealth) -> Result<NodeHealth, ConfigError> {
    let health = NodeHealth {
        fast_failures: file.quarantine_after_fast_failures.unwrap_or(defaults.fast_failures),
        fast_failure_within: file.fast_failure_ms.map_or(defaults.fast_failure_within, Duration::from_millis),
        quarantine_for: file.quarantine_ms.map_or(defaults.quarantine_for, Duration::from_millis),
        ..defaults
    };
    if health.fast_failures > 0 && (health.quarantine_for.is_zero() || health.fast_failure_within.is_zero()) {
        return Err(ConfigError::Invalid {
            field: "quarantine_ms",
            problem: "quarantine_ms and fast_failure_ms must be above 0; \
                      set quarantine_after_fast_failures = 0 to turn quarantine off"
                .into(),
        });
    }
    Ok(health)
}

/// A `[policy]` table assembled from layers before it is parsed, once, into
/// [`PolicySettings`] by the same serde code that reads `master.toml`. The simulator
/// layers `--policy-config FILE`, `--policy NAME` and `--set KEY=VALUE` this way; the
/// master's `--policy NAME` is [`PolicyTable::named`].
#[derive(Clone, PartialEq, Debug, Default)]
pub struct PolicyTable(toml::Table);

impl PolicyTable {
    /// A table naming `name` only: that policy with its default settings.
    pub fn named(name: &str) -> PolicyTable {
        PolicyTable(toml::Table::from_iter([("name".to_string(), toml::Value::String(name.to_string()))]))
    }

    /// The `[policy]` table of the `master.toml` at `path` as written, its `preset` not yet
    /// filled in (so that layers above it may name one); the whole file is parsed, the
    /// table checked only once the layers above it are applied.
    fn in_file(path: &Path) -> Result<PolicyTable, ConfigError> {
        let text = read(path)?;
        let Some(table) = MasterFile::parse_written(path, &text)?.policy_written else {
            return Ok(PolicyTable::default());
        };
        // Read once for its types, placed at their keys; its checks wait for the layers.
        let table = PolicyTable(table);
        table.clone().parse().map_err(|err| policy_error_at(path, &text, err))?;
        Ok(table)
    }

    /// Applies one `KEY=VALUE` override. KEY is a field of the table, dotted for a field
    /// of a nested table (`queues.small`); VALUE is a TOML value (`true`, `0.1`,
    /// `"x"`), and anything that does not parse as one is taken as a string, so
    /// `name=capacity` needs no quotes.
    pub fn set(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let refuse = |problem| ConfigError::PolicyOverride { assignment: assignment.to_string(), problem };
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(refuse("write KEY=VALUE, e.g. preemption=true or queues.small=0.1"));
        };
        let path: Vec<&str> = key.trim().split('.').collect();
        if path.iter().any(|part| part.is_empty()) {
            return Err(refuse("KEY is empty or has an empty part between dots"));
        }
        let (leaf, parents) = path.split_last().ok_or_else(|| refuse("KEY is empty"))?;
        let mut table = &mut self.0;
        for part in parents {
            let entry =
                table.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table =
                entry.as_table_mut().ok_or_else(|| refuse("a part of KEY before a dot is not a table"))?;
        }
        table.insert(leaf.to_string(), toml_value(value.trim()));
        Ok(())
    }

    /// Parses and checks the table. An empty one (nothing said) is the default policy.
    pub fn settings(self) -> Result<PolicySettings, ConfigError> {
        if self.0.is_empty() {
            return Ok(PolicySettings::default());
        }
        let settings = self.parse()?;
        settings.check()?;
        Ok(settings)
    }

    /// Parses the table, unchecked, after filling in its `preset`.
    fn parse(mut self) -> Result<PolicySettings, ConfigError> {
        self.fill_in_preset()?;
        PolicySettings::deserialize(toml::Value::Table(self.0.clone())).map_err(|e| {
            let (key, message) = self.naming_the_key(e.to_string());
            ConfigError::PolicyTable { key, message }
        })
    }

    /// The key `message` is about, and the message led by it. The policy's tagged enum
    /// buffers the table and a type error loses its key (`invalid type: string "x",
    /// expected f64`): the first key that fails alone beside `name` with the same message
    /// is the one.
    fn naming_the_key(&self, message: String) -> (Option<String>, String) {
        let name = self.0.get("name");
        let culprit = self.0.iter().filter(|(key, _)| *key != "name").find(|&(key, value)| {
            let alone = name
                .map(|n| ("name".to_string(), n.clone()))
                .into_iter()
                .chain([(key.clone(), value.clone())]);
            let alone = toml::Value::Table(alone.collect());
            PolicySettings::deserialize(alone).is_err_and(|e| e.to_string() == message)
        });
        match culprit {
            Some((key, _)) if !message.contains(&format!("`{key}`")) => {
                (Some(key.clone()), format!("{key}: {message}"))
            }
            Some((key, _)) => (Some(key.clone()), message),
            // No other key fails alone: the policy's name itself (or its absence).
            None => (Some("name".to_string()), message),
        }
    }

    /// Replaces `preset = "NAME"` by every key of that preset of the named policy the
    /// table does not give itself: keys written out win, wherever they are layered.
    fn fill_in_preset(&mut self) -> Result<(), ConfigError> {
        let Some(preset) = self.0.remove("preset") else {
            return Ok(());
        };
        let refuse = |problem: String| ConfigError::PolicyTable {
            key: Some("preset".to_string()),
            message: format!("preset: {problem}"),
        };
        let Some(preset) = preset.as_str() else {
            return Err(refuse(format!("must be a preset's name, got {preset}")));
        };
        let Some(name) = self.0.get("name").and_then(toml::Value::as_str) else {
            return Err(refuse("needs `name`, the policy the preset is for".to_string()));
        };
        let policy: PolicyName = name.parse().map_err(refuse)?;
        let presets = policy.presets();
        let Some((_, keys)) = presets.iter().find(|(known, _)| *known == preset) else {
            let known: Vec<&str> = presets.iter().map(|(known, _)| *known).collect();
            return Err(refuse(match known.as_slice() {
                [] => format!("{policy} has no presets"),
                known => format!("{policy} has no preset \"{preset}\"; its presets: {}", known.join(", ")),
            }));
        };
        let keys: toml::Table =
            toml::from_str(keys).map_err(|e| refuse(format!("{preset} does not parse: {e}")))?;
        for (key, value) in keys {
            self.0.entry(key).or_insert(value);
        }
        Ok(())
    }

    /// The settings from layers, later ones winning: the `[policy]` table of a
    /// `master.toml` (its other settings are read and checked but not used), then a
    /// policy name that replaces that table with the named policy's defaults, then
    /// `KEY=VALUE` overrides in order.
    pub fn layered(
        file: Option<&Path>,
        name: Option<&str>,
        overrides: &[String],
    ) -> Result<PolicySettings, ConfigError> {
        let from_file = match file {
            Some(path) => PolicyTable::in_file(path)?,
            None => PolicyTable::default(),
        };
        let mut table = match name {
            Some(name) => PolicyTable::named(name),
            None => from_file,
        };
        for assignment in overrides {
            table.set(assignment)?;
        }
        table.settings()
    }
}

/// `text` as a TOML value if it is one, else as a string.
fn toml_value(text: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("value = {text}")) {
        Ok(mut table) if table.len() == 1 => {
            table.remove("value").unwrap_or_else(|| toml::Value::String(text.to_string()))
        }
        _ => toml::Value::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const CAPACITY_TOML: &str =
        "[policy]\nname = \"capacity\"\npreemption = true\n[policy.queues]\nresearch = 0.6\nprod = 0.4\n";

    fn capacity(preemption: bool, queues: &[(&str, f64)]) -> PolicySettings {
        let queues: BTreeMap<String, f64> = queues.iter().map(|&(q, s)| (q.to_string(), s)).collect();
        PolicySettings::Capacity { queues, preemption }
    }

    /// Writes `text` as a master.toml in `dir` and loads it.
    fn load(dir: &tempfile::TempDir, text: &str) -> Result<MasterFile, ConfigError> {
        let path = dir.path().join("master.toml");
        std::fs::write(&path, text).unwrap();
        MasterFile::load(&path)
    }

    /// `text` with its commented-out settings (`# key = value`, `# [table]`) restored.
    fn uncommented(text: &str) -> String {
        let setting = |rest: &str| {
            rest.starts_with('[')
                || rest
                    .split_once(" = ")
                    .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        };
        text.lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest) if setting(rest) => rest,
                _ => line,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn defaults_fill_an_empty_file() {
        let config = MasterConfig::try_from(MasterFile::default()).unwrap();
        assert_eq!(config.listen, DEFAULT_LISTEN);
        assert_eq!(config.max_frame, DEFAULT_MAX_FRAME);
        assert_eq!(config.core.policy, PolicySettings::Fifo {});
    }

    #[test]
    fn paths_default_by_layout_and_the_file_wins_over_both() {
        let dev = MasterConfig::resolve(MasterFile::default(), DaemonLayout::Dev).unwrap();
        assert_eq!(
            (dev.data_dir, dev.cert_dir),
            (PathBuf::from("slotmarket-data/master"), PathBuf::from("pki"))
        );
        let service = MasterConfig::resolve(MasterFile::default(), DaemonLayout::Service).unwrap();
        assert_eq!(service.data_dir, PathBuf::from("/var/lib/slotmarket/master"));
        assert_eq!(service.cert_dir, PathBuf::from("/etc/slotmarket/pki"));
        let set = MasterFile { data_dir: Some("/srv/sm".into()), ..MasterFile::default() };
        let service = MasterConfig::resolve(set, DaemonLayout::Service).unwrap();
        assert_eq!(service.data_dir, PathBuf::from("/srv/sm"));
        assert_eq!(service.cert_dir, PathBuf::from("/etc/slotmarket/pki"));
        // The example file's relative paths are fine for a dev master, refused for a service.
        let relative = MasterFile { cert_dir: Some("pki".into()), ..MasterFile::default() };
        assert!(MasterConfig::resolve(relative.clone(), DaemonLayout::Dev).is_ok());
        let err = MasterConfig::resolve(relative, DaemonLayout::Service).unwrap_err().to_string();
        assert!(err.starts_with("cert_dir: pki is relative"), "{err}");
    }

    #[test]
    fn the_systemd_unit_runs_the_master_as_a_service() {
        let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/systemd/slotmarket-master.service");
        let unit = std::fs::read_to_string(unit).unwrap();
        let exec = unit.lines().find(|line| line.starts_with("ExecStart=")).unwrap();
        assert!(exec.contains(" --service"), "{exec}");
    }

    #[test]
    fn inconsistent_timeouts_are_refused_with_the_field() {
        let file = MasterFile {
            agent_timeout_ms: Some(1000),
            heartbeat_interval_ms: Some(800),
            ..MasterFile::default()
        };
        let err = MasterConfig::try_from(file).unwrap_err().to_string();
        assert!(err.starts_with("agent_timeout_ms: must be at least twice"), "{err}");
    }

    #[test]
    fn the_policy_table_comes_from_the_file_and_is_checked() {
        let file: MasterFile = toml::from_str(CAPACITY_TOML).unwrap();
        let config = MasterConfig::try_from(file).unwrap();
        assert_eq!(config.core.policy, capacity(true, &[("research", 0.6), ("prod", 0.4)]));
        let file: MasterFile =
            toml::from_str("[policy]\nname = \"capacity\"\n[policy.queues]\na = 0.7\nb = 0.7\n").unwrap();
        let err = MasterConfig::try_from(file).unwrap_err();
        assert!(err.to_string().starts_with("[policy] queues: shares add up to"), "{err}");
        // The message already carries the setting's own; as a source too, an error report
        // would print it twice.
        assert!(std::error::Error::source(&err).is_none(), "{err:?}");
    }

    #[test]
    fn quarantine_settings_come_from_the_file_and_must_be_positive() {
        let file: MasterFile = toml::from_str(
            "quarantine_after_fast_failures = 5
fast_failure_ms = 500
quarantine_ms = 60000
",
        )
        .unwrap();
        let health = MasterConfig::try_from(file).unwrap().core.node_health;
        assert_eq!(
            (health.fast_failures, health.fast_failure_within, health.quarantine_for, health.retry_elsewhere),
            (5, Duration::from_millis(500), Duration::from_secs(60), true)
        );
        let file: MasterFile = toml::from_str(
            "quarantine_ms = 0
",
        )
        .unwrap();
        let err = MasterConfig::try_from(file).unwrap_err().to_string();
        assert!(err.starts_with("quarantine_ms: "), "{err}");
        let file: MasterFile = toml::from_str(
            "quarantine_after_fast_failures = 0
quarantine_ms = 0
",
        )
        .unwrap();
        assert_eq!(MasterConfig::try_from(file).unwrap().core.node_health.fast_failures, 0);
    }

    #[test]
    fn task_limits_come_from_the_file_and_must_be_consistent() {
        let defaults = MasterConfig::try_from(MasterFile::default()).unwrap();
        assert_eq!(defaults.core.max_tasks_per_job, crate::core::DEFAULT_MAX_TASKS_PER_JOB);
        let file: MasterFile = toml::from_str(
            "max_tasks_per_job = 500
max_queued_tasks_per_account = 2000
",
        )
        .unwrap();
        let config = MasterConfig::try_from(file).unwrap();
        assert_eq!((config.core.max_tasks_per_job, config.core.max_queued_tasks_per_account), (500, 2000));
        let file: MasterFile = toml::from_str(
            "max_tasks_per_job = 500
max_queued_tasks_per_account = 100
",
        )
        .unwrap();
        let err = MasterConfig::try_from(file).unwrap_err().to_string();
        assert!(err.starts_with("max_queued_tasks_per_account: must be at least max_tasks_per_job"), "{err}");
    }

    #[test]
    fn old_top_level_policy_settings_are_refused_pointing_at_the_policy_table() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("preemption = true\n", "preemption"),
            ("[capacity_queues]\nresearch = 0.6\n", "capacity_queues"),
            ("policy = \"fair\"\n", "policy = \"NAME\""),
        ];
        for (text, key) in cases {
            let err = load(&dir, text).unwrap_err();
            assert!(matches!(err, ConfigError::MovedToPolicy { key: k, .. } if k == key), "{err}");
            let message = err.to_string();
            assert!(message.contains("master.toml") && message.contains("[policy]"), "{message}");
        }
    }

    #[test]
    fn unknown_keys_policies_and_fields_are_refused_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        for (text, named) in [
            ("listn = \"x\"\n", "listn"),
            ("[policy]\nname = \"lottery\"\n", "lottery"),
            ("[policy]\nname = \"fifo\"\npreemption = true\n", "preemption"),
            ("[policy]\nname = \"fair\"\n[policy.queues]\na = 0.5\n", "queues"),
            ("[policy]\npreemption = true\n", "name"),
        ] {
            let err = load(&dir, text).unwrap_err();
            assert!(matches!(err, ConfigError::File(ConfigFileError::Parse { .. })), "{text}: {err}");
            assert!(err.to_string().contains(named), "{text}: {err}");
        }
    }

    #[test]
    fn a_policy_error_in_a_file_names_the_line_of_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let jockey = "# a comment\n\n[policy]\nname = \"jockey\"\npreset = \"tuned\"\n";
        for (text, line, says) in [
            // A value serde refuses, a key the policy does not take, one that cannot work.
            (format!("{jockey}slack = \"fast\"\n"), 6, "[policy]: slack: invalid type"),
            (format!("{jockey}slak = 1.0\n"), 6, "unknown field `slak`"),
            (format!("{jockey}\nslack_at_cap = inf\n"), 7, "[policy] slack_at_cap: must be a finite number"),
            // The preset itself, and the name (its message on one line).
            ("[policy]\nname = \"jockey\"\npreset = \"fast\"\n".to_string(), 3, "no preset \"fast\""),
            ("\n[policy]\nname = \"jokey\"\n".to_string(), 3, "unknown variant `jokey`"),
            // A key of a nested table, as a header or dotted.
            (
                "[policy]\nname = \"capacity\"\n[policy.queues]\nsmall = 0.7\nbig = 1.5\n".to_string(),
                5,
                "queues.big",
            ),
            (
                "[policy]\nname = \"capacity\"\nqueues.small = 0.7\nqueues.big = 0.5\n".to_string(),
                3,
                "add up to 1.2",
            ),
        ] {
            let err = load(&dir, &text).unwrap_err();
            let message = err.to_string();
            assert!(message.contains(&format!("master.toml: line {line}, column 1: ")), "{text}: {message}");
            assert!(message.contains(says) && !message.contains('\n'), "{text}: {message}");
        }
        // A preset's key that cannot work is not in the file: the error is placed at the
        // table's header.
        let err = load(&dir, "\n[policy]\nname = \"jockey\"\npreset = \"tuned\"\nstage_reserve = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("master.toml: line 2, column 2: ") && err.contains("stage_reserve"), "{err}");
        // The simulator checks a file's table once its overrides are applied: a value
        // out of range in the file may be replaced by `--set`.
        load(&dir, "[policy]\nname = \"jockey\"\nslack = 0.05\n").unwrap_err();
        let path = dir.path().join("master.toml");
        let fixed = PolicyTable::layered(Some(&path), None, &["slack=1.2".to_string()]).unwrap();
        assert!(matches!(fixed, PolicySettings::Jockey(jockey) if jockey.slack == 1.2));
        let err = PolicyTable::layered(Some(&path), None, &[]).unwrap_err().to_string();
        assert_eq!(err, "[policy] slack: must be at least 0.1, got 0.05");
    }

    #[test]
    fn master_toml_and_simulator_layers_give_the_same_settings() {
        let dir = tempfile::tempdir().unwrap();
        let from_master = MasterConfig::try_from(load(&dir, CAPACITY_TOML).unwrap()).unwrap().core.policy;
        let path = dir.path().join("master.toml");
        let from_file = PolicyTable::layered(Some(&path), None, &[]).unwrap();
        let sets: Vec<String> =
            ["preemption=true", "queues.research=0.6", "queues.prod = 0.4"].map(String::from).into();
        let from_sets = PolicyTable::layered(None, Some("capacity"), &sets).unwrap();
        let named = vec!["name=capacity".to_string()];
        let from_name_set = PolicyTable::layered(None, None, &[named, sets].concat()).unwrap();
        assert_eq!(from_master, capacity(true, &[("research", 0.6), ("prod", 0.4)]));
        assert_eq!((&from_file, &from_sets, &from_name_set), (&from_master, &from_master, &from_master));
        // Overrides apply on top of the file; a name replaces the file's table.
        let over = ["preemption=false".to_string(), "queues.prod=0.2".to_string()];
        let changed = PolicyTable::layered(Some(&path), None, &over).unwrap();
        assert_eq!(changed, capacity(false, &[("research", 0.6), ("prod", 0.2)]));
        let fair = PolicyTable::layered(Some(&path), Some("fair"), &[]).unwrap();
        assert_eq!(fair, PolicySettings::Fair { preemption: false });
        assert_eq!(PolicyTable::layered(None, None, &[]).unwrap(), PolicySettings::Fifo {});
    }

    #[test]
    fn a_preset_fills_in_the_keys_its_table_leaves_out_from_every_layer() {
        let dir = tempfile::tempdir().unwrap();
        let jockey = |settings: PolicySettings| match settings {
            PolicySettings::Jockey(jockey) => *jockey,
            other => panic!("not jockey: {other:?}"),
        };
        let file = load(&dir, "[policy]\nname = \"jockey\"\npreset = \"tuned\"\nslack = 1.3\n").unwrap();
        let from_master = jockey(MasterConfig::try_from(file).unwrap().core.policy);
        assert_eq!((from_master.stage_reserve, from_master.slack), (0.7, 1.3));
        assert_eq!((from_master.all_in_within_s, from_master.all_in_unread), (Some(180.0), Some(2.0)));
        // The simulator's layers: the file's preset, then a key over it; a preset named
        // by `--set` over a file that names none.
        let path = dir.path().join("master.toml");
        let layered = |path: Option<&Path>, name, sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            PolicyTable::layered(path, name, &sets).map(jockey)
        };
        assert_eq!(layered(Some(&path), None, &[]).unwrap(), from_master);
        assert_eq!(layered(Some(&path), None, &["stage_reserve=0.5"]).unwrap().stage_reserve, 0.5);
        let plain = layered(None, Some("jockey"), &[]).unwrap();
        assert_eq!(plain.stage_reserve, 0.0);
        let named = layered(None, Some("jockey"), &["slack=1.3", "preset=tuned"]).unwrap();
        assert_eq!(named, from_master);
        // A key written out wins even when it equals the plain default.
        let kept = layered(None, Some("jockey"), &["preset=tuned", "raise_early=false"]).unwrap();
        assert!(!kept.raise_early && plain.raise_early == kept.raise_early);
    }

    #[test]
    fn a_preset_that_does_not_exist_is_refused_with_the_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let layered = |name, sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            PolicyTable::layered(None, name, &sets).map_err(|e| e.to_string())
        };
        let err = layered(Some("jockey"), &["preset=fast"]).unwrap_err();
        assert!(err.contains("no preset \"fast\"") && err.contains("tuned"), "{err}");
        let err = layered(Some("fifo"), &["preset=tuned"]).unwrap_err();
        assert!(err.contains("fifo has no presets"), "{err}");
        assert!(layered(None, &["preset=tuned"]).unwrap_err().contains("needs `name`"));
        assert!(layered(Some("jockey"), &["preset=3"]).unwrap_err().contains("preset's name"));
        // In master.toml too, where it is a parse error of the file.
        let err = load(&dir, "[policy]\nname = \"jockey\"\npreset = \"fast\"\n").unwrap_err();
        assert!(err.to_string().contains("no preset \"fast\""), "{err}");
        let err = load(&dir, "[policy]\nname = \"jockey\"\npreset = \"tuned\"\nslack = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("[policy]: slack: invalid type: string \"x\""), "{err}");
    }

    #[test]
    fn malformed_or_invalid_overrides_are_refused() {
        let layered = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            PolicyTable::layered(None, Some("capacity"), &sets).map_err(|e| e.to_string())
        };
        assert!(layered(&["preemption"]).unwrap_err().contains("write KEY=VALUE"));
        assert!(layered(&["queues..a=0.1"]).unwrap_err().contains("empty part"));
        assert!(layered(&["preemption=true", "preemption.x=1"]).unwrap_err().contains("not a table"));
        // A value of the wrong type is named by its key, which serde's tagged enum loses.
        let err = layered(&["preemption=yes"]).unwrap_err();
        assert!(err.starts_with("[policy]: preemption: invalid type") && err.contains("yes"), "{err}");
        assert!(layered(&["queues.a=1.5"]).unwrap_err().starts_with("[policy] queues.a: share"));
        assert!(layered(&["quues.a=0.5"]).unwrap_err().contains("quues"));
        // A value with a line break stays one string value.
        assert!(layered(&["preemption=true\nname = \"fifo\""]).is_err());
    }

    #[test]
    fn the_example_master_toml_shows_every_setting_at_its_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/master.toml");
        let example = MasterConfig::try_from(MasterFile::load(&path).unwrap()).unwrap();
        let defaults = MasterConfig::try_from(MasterFile::default()).unwrap();
        assert_eq!(
            (&example.listen, &example.data_dir, &example.cert_dir, &example.core),
            (&defaults.listen, &defaults.data_dir, &defaults.cert_dir, &defaults.core)
        );
        assert_eq!(
            (example.heartbeat_interval, example.max_frame, example.cleanup_retain),
            (defaults.heartbeat_interval, defaults.max_frame, defaults.cleanup_retain)
        );
        // The commented-out policy settings are valid as written, for the policy that
        // takes them all.
        let text = std::fs::read_to_string(&path).unwrap();
        let restored = uncommented(&text).replace("name = \"fifo\"", "name = \"capacity\"");
        let file = MasterFile::parse(&path, &restored).unwrap();
        let MasterFile {
            listen,
            data_dir,
            cert_dir,
            policy,
            policy_written,
            agent_timeout_ms,
            heartbeat_interval_ms,
            max_frame_bytes,
            ended_job_retention_s,
            history_per_name,
            history_names,
            quarantine_after_fast_failures,
            fast_failure_ms,
            quarantine_ms,
            max_tasks_per_job,
            max_queued_tasks_per_account,
            admission,
            cleanup,
        } = file;
        assert!(admission.is_some());
        assert_eq!(cleanup.and_then(|c| c.retain_s), Some(crate::server::DEFAULT_CLEANUP_RETAIN.as_secs()));
        assert!(max_tasks_per_job.is_some() && max_queued_tasks_per_account.is_some());
        assert!(ended_job_retention_s.is_some() && history_per_name.is_some() && history_names.is_some());
        assert!(
            quarantine_after_fast_failures.is_some() && fast_failure_ms.is_some() && quarantine_ms.is_some()
        );
        assert!(listen.is_some() && data_dir.is_some() && cert_dir.is_some() && agent_timeout_ms.is_some());
        assert!(heartbeat_interval_ms.is_some() && max_frame_bytes.is_some());
        assert_eq!(policy, Some(capacity(false, &[("research", 0.6), ("default", 0.4)])));
        assert_eq!(policy_written, None);
    }
}
