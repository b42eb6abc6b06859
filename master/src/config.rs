//! `master.toml` and the settled configuration the binary runs with. Every key is
//! optional; command-line flags override the file, the file overrides the defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use slotmarket_common::config::{ConfigFileError, DEFAULT_CERT_DIR, DEFAULT_MASTER_ADDR, load_toml};
use slotmarket_common::protocol::DEFAULT_MAX_FRAME;
use thiserror::Error;

use crate::core::policy::check_queue_shares;
use crate::core::{CoreConfig, HistoryLimits, NodeHealth, PolicyName};

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
    /// Scheduling policy name.
    pub policy: Option<String>,
    /// Silence after which an agent is declared lost, in milliseconds.
    pub agent_timeout_ms: Option<u64>,
    /// How often agents must send heartbeats, in milliseconds.
    pub heartbeat_interval_ms: Option<u64>,
    /// Largest accepted frame, in bytes.
    pub max_frame_bytes: Option<usize>,
    /// Guaranteed share of each queue under the `capacity` policy, e.g.
    /// `[capacity_queues]` / `research = 0.6`.
    pub capacity_queues: Option<BTreeMap<String, f64>>,
    /// Whether `fair` and `capacity` may kill tasks to restore shares (default false).
    pub preemption: Option<bool>,
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
}

/// A setting that cannot work.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read or parsed.
    #[error(transparent)]
    File(#[from] ConfigFileError),
    /// A value is out of range or inconsistent with another.
    #[error("{field}: {problem}")]
    Invalid {
        /// The setting's name.
        field: &'static str,
        /// What is wrong and how to fix it.
        problem: String,
    },
}

impl MasterFile {
    /// Reads and parses a `master.toml`.
    pub fn load(path: &std::path::Path) -> Result<MasterFile, ConfigError> {
        Ok(load_toml(path)?)
    }
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
}

impl TryFrom<MasterFile> for MasterConfig {
    type Error = ConfigError;

    /// Applies defaults to whatever the (merged) file leaves unset, then checks.
    fn try_from(file: MasterFile) -> Result<MasterConfig, ConfigError> {
        let defaults = CoreConfig::default();
        let node_health = node_health(&file, defaults.node_health)?;
        let policy = match file.policy {
            Some(name) => name
                .parse::<PolicyName>()
                .map_err(|problem| ConfigError::Invalid { field: "policy", problem })?,
            None => defaults.policy,
        };
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
        let capacity_queues = file.capacity_queues.unwrap_or_default();
        check_queue_shares(&capacity_queues)
            .map_err(|problem| ConfigError::Invalid { field: "capacity_queues", problem })?;
        let max_frame = file.max_frame_bytes.unwrap_or(DEFAULT_MAX_FRAME);
        if !(1024..=64 << 20).contains(&max_frame) {
            return Err(ConfigError::Invalid {
                field: "max_frame_bytes",
                problem: format!("must be between 1 KiB and 64 MiB, got {max_frame}"),
            });
        }
        Ok(MasterConfig {
            listen: file.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
            data_dir: file.data_dir.unwrap_or_else(|| PathBuf::from("slotmarket-data/master")),
            cert_dir: file.cert_dir.unwrap_or_else(|| PathBuf::from(DEFAULT_CERT_DIR)),
            core: CoreConfig {
                policy,
                agent_timeout,
                capacity_queues,
                preemption: file.preemption.unwrap_or(defaults.preemption),
                ended_job_retention: file
                    .ended_job_retention_s
                    .map_or(defaults.ended_job_retention, Duration::from_secs),
                history: HistoryLimits {
                    per_name: file.history_per_name.unwrap_or(defaults.history.per_name),
                    names: file.history_names.unwrap_or(defaults.history.names),
                },
                node_health,
            },
            heartbeat_interval,
            max_frame,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_an_empty_file() {
        let config = MasterConfig::try_from(MasterFile::default()).unwrap();
        assert_eq!(config.listen, DEFAULT_LISTEN);
        assert_eq!(config.max_frame, DEFAULT_MAX_FRAME);
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
    fn capacity_queues_and_preemption_come_from_the_file() {
        let file: MasterFile = toml::from_str(
            "policy = \"capacity\"\npreemption = true\n[capacity_queues]\nresearch = 0.6\nprod = 0.4\n",
        )
        .unwrap();
        let config = MasterConfig::try_from(file).unwrap();
        assert_eq!(config.core.policy, PolicyName::Capacity);
        assert!(config.core.preemption);
        assert_eq!(config.core.capacity_queues.get("research"), Some(&0.6));
        let file: MasterFile = toml::from_str("[capacity_queues]\na = 0.7\nb = 0.7\n").unwrap();
        let err = MasterConfig::try_from(file).unwrap_err().to_string();
        assert!(err.starts_with("capacity_queues: queue shares add up to"), "{err}");
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
    fn unknown_keys_and_policies_are_refused() {
        assert!(toml::from_str::<MasterFile>("listn = \"x\"").is_err());
        let file = MasterFile { policy: Some("lottery".into()), ..MasterFile::default() };
        assert!(MasterConfig::try_from(file).unwrap_err().to_string().starts_with("policy:"));
    }
}
