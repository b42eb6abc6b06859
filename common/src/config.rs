//! Configuration shared by the binaries: the defaults every one of them falls back to
//! (master address, TLS server name, certificate directory) and reading a TOML config
//! file with an error that names the file.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use thiserror::Error;

/// The master's address when none is configured: the port `slotmarket-master` listens
/// on by default, on this machine.
pub const DEFAULT_MASTER_ADDR: &str = "127.0.0.1:7400";
/// The TLS name expected in the master's certificate when none is configured;
/// `slotmarket pki init` always puts it there.
pub const DEFAULT_SERVER_NAME: &str = "localhost";
/// Where certificates are looked for when no directory is configured (relative to the
/// working directory).
pub const DEFAULT_CERT_DIR: &str = "pki";

/// Why a config file could not be loaded.
#[derive(Debug, Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for what it configures; the message names the field.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the field.
        source: toml::de::Error,
    },
}

/// Reads `path` and parses it as TOML into `T`.
pub fn load_toml<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigFileError::Read { path: path.to_path_buf(), source })?;
    toml::from_str(&text).map_err(|source| ConfigFileError::Parse { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        master: String,
    }

    #[test]
    fn files_load_and_errors_name_the_file_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.toml");
        let missing = load_toml::<Sample>(&path).unwrap_err();
        assert!(matches!(missing, ConfigFileError::Read { .. }));
        assert!(missing.to_string().contains("x.toml"), "{missing}");

        std::fs::write(&path, "master = \"m:1\"\n").unwrap();
        assert_eq!(load_toml::<Sample>(&path).unwrap(), Sample { master: "m:1".into() });

        std::fs::write(&path, "mastr = \"m:1\"\n").unwrap();
        let err = load_toml::<Sample>(&path).unwrap_err().to_string();
        assert!(err.contains("x.toml") && err.contains("mastr"), "{err}");
    }
}
