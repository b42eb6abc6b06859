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
use crate::core::{CoreConfig, PolicyName};

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
    /// Most tasks one job may have (default 100,000).
    pub max_tasks_per_job: Option<u64>,
    /// Most tasks one account's unfinished jobs may hold together (default 1,000,000).
    pub max_queued_tasks_per_account: Option<u64>,
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
        Ok(MasterConfig {
            listen: file.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
            data_dir: file.data_dir.unwrap_or_else(|| PathBuf::from("slotmarket-data/master")),
            cert_dir: file.cert_dir.unwrap_or_else(|| PathBuf::from(DEFAULT_CERT_DIR)),
            core: CoreConfig {
                policy,
                agent_timeout,
                capacity_queues,
                preemption: file.preemption.unwrap_or(defaults.preemption),
                max_tasks_per_job,
                max_queued_tasks_per_account,
                ..defaults
            },
            heartbeat_interval,
            max_frame,
        })
    }
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
        assert!(config.core.preemption && config.core.retain_finished_jobs);
        assert_eq!(config.core.capacity_queues.get("research"), Some(&0.6));
        let file: MasterFile = toml::from_str("[capacity_queues]\na = 0.7\nb = 0.7\n").unwrap();
        let err = MasterConfig::try_from(file).unwrap_err().to_string();
        assert!(err.starts_with("capacity_queues: queue shares add up to"), "{err}");
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
    fn unknown_keys_and_policies_are_refused() {
        assert!(toml::from_str::<MasterFile>("listn = \"x\"").is_err());
        let file = MasterFile { policy: Some("lottery".into()), ..MasterFile::default() };
        assert!(MasterConfig::try_from(file).unwrap_err().to_string().starts_with("policy:"));
    }
}
