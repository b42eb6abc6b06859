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

/// Where a daemon run as a service keeps its state (`master/`, `agent/`, `shared/`),
/// as systemd's `StateDirectory=slotmarket` makes it.
pub const SERVICE_STATE_DIR: &str = "/var/lib/slotmarket";
/// Where a daemon run as a service looks for certificates.
pub const SERVICE_CERT_DIR: &str = "/etc/slotmarket/pki";

/// Which defaults a daemon's paths take when neither a flag nor its config file sets
/// them. Chosen explicitly, by `--service`: a daemon never guesses from its environment
/// whether it is a service, so a developer's `slotmarket-master` in a checkout never
/// writes to `/var/lib`, and a unit never depends on its working directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DaemonLayout {
    /// Relative to the working directory (`slotmarket-data/…`, `pki`): a dev cluster.
    #[default]
    Dev,
    /// Absolute: state under [`SERVICE_STATE_DIR`], certificates in [`SERVICE_CERT_DIR`].
    Service,
}

impl DaemonLayout {
    /// [`DaemonLayout::Service`] when the daemon was started with `--service`.
    pub fn chosen(service: bool) -> DaemonLayout {
        if service { DaemonLayout::Service } else { DaemonLayout::Dev }
    }

    /// Refuses a relative `path` for a service: its working directory is `/`, so a
    /// relative path (say `cert_dir = "pki"` copied from the example file) would point
    /// somewhere nobody meant. The message says how to fix it.
    pub fn check_path(self, path: &Path) -> Result<(), String> {
        if self == DaemonLayout::Service && path.is_relative() {
            return Err(format!(
                "{} is relative, but --service needs absolute paths: make it absolute, or \
                 remove it to take the service default",
                path.display()
            ));
        }
        Ok(())
    }

    /// The certificate directory: `pki` or `/etc/slotmarket/pki`.
    pub fn cert_dir(self) -> PathBuf {
        match self {
            DaemonLayout::Dev => PathBuf::from(DEFAULT_CERT_DIR),
            DaemonLayout::Service => PathBuf::from(SERVICE_CERT_DIR),
        }
    }

    /// The master's data directory (database, lock, `master.addr`):
    /// `slotmarket-data/master` or `/var/lib/slotmarket/master`.
    pub fn master_data_dir(self) -> PathBuf {
        match self {
            DaemonLayout::Dev => PathBuf::from("slotmarket-data/master"),
            DaemonLayout::Service => Path::new(SERVICE_STATE_DIR).join("master"),
        }
    }

    /// An agent's own directory (task containers): `./slotmarket-agent-NODE` (several
    /// agents of a dev cluster share one working directory) or `/var/lib/slotmarket/agent`
    /// (one agent per host).
    pub fn agent_work_dir(self, node: &str) -> PathBuf {
        match self {
            DaemonLayout::Dev => PathBuf::from(format!("./slotmarket-agent-{node}")),
            DaemonLayout::Service => Path::new(SERVICE_STATE_DIR).join("agent"),
        }
    }

    /// The data directory the agents share (job directories):
    /// `./slotmarket-data/shared` or `/var/lib/slotmarket/shared` (on a cluster, mount
    /// the shared file system there or set `data_dir`).
    pub fn shared_data_dir(self) -> PathBuf {
        match self {
            DaemonLayout::Dev => PathBuf::from("./slotmarket-data/shared"),
            DaemonLayout::Service => Path::new(SERVICE_STATE_DIR).join("shared"),
        }
    }
}

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
    /// One line, where TOML's own message draws the line over several: the CLI prints
    /// errors on one line with line breaks escaped, which made that drawing unreadable.
    #[error("{}: {}{message}", .path.display(), place(.at))]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where in the file, as 1-based line and column, when TOML says.
        at: Option<(usize, usize)>,
        /// What is wrong, naming the field.
        message: String,
    },
}

impl ConfigFileError {
    /// The error for `text`, read from `path`, that TOML refused with `err`.
    pub fn parse(path: &Path, text: &str, err: &toml::de::Error) -> ConfigFileError {
        let at = err.span().map(|span| line_and_column(text, span.start));
        ConfigFileError::Parse { path: path.to_path_buf(), at, message: err.message().trim_end().to_owned() }
    }

    /// The error `message` about the key `key_path` leads to (`["policy", "queues",
    /// "small"]`) in `text`, read from `path`: placed at that key, or at the deepest key
    /// along the path that the file writes (a key a preset filled in is not in the file).
    pub fn at_key(path: &Path, text: &str, key_path: &[&str], message: String) -> ConfigFileError {
        let at = key_offset(text, key_path).map(|offset| line_and_column(text, offset));
        let message = message.lines().map(str::trim).filter(|line| !line.is_empty()).collect::<Vec<_>>();
        ConfigFileError::Parse { path: path.to_path_buf(), at, message: message.join(" ") }
    }
}

/// The byte offset in `text` of the deepest key along `key_path` that it writes.
fn key_offset(text: &str, key_path: &[&str]) -> Option<usize> {
    let document = toml::de::DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let mut offset = None;
    for part in key_path {
        let Some((key, value)) = table.iter().find(|(key, _)| key.get_ref().as_ref() == *part) else {
            break;
        };
        offset = Some(key.span().start);
        match value.get_ref() {
            toml::de::DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    offset
}

/// `line L, column C: `, or nothing where TOML named no place.
fn place(at: &Option<(usize, usize)>) -> String {
    at.map(|(line, column)| format!("line {line}, column {column}: ")).unwrap_or_default()
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (before.matches('\n').count() + 1, before[line_start..].chars().count() + 1)
}

/// Reads `path` and parses it as TOML into `T`.
pub fn load_toml<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigFileError::Read { path: path.to_path_buf(), source })?;
    toml::from_str(&text).map_err(|err| ConfigFileError::parse(path, &text, &err))
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
    fn dev_defaults_are_relative_and_service_defaults_absolute() {
        let dev = DaemonLayout::chosen(false);
        assert_eq!(dev, DaemonLayout::Dev);
        for path in [dev.cert_dir(), dev.master_data_dir(), dev.agent_work_dir("n1"), dev.shared_data_dir()] {
            assert!(path.is_relative(), "{}", path.display());
        }
        assert_eq!(dev.agent_work_dir("n1"), PathBuf::from("./slotmarket-agent-n1"));
        let service = DaemonLayout::chosen(true);
        assert_eq!(service.cert_dir(), PathBuf::from("/etc/slotmarket/pki"));
        assert_eq!(service.master_data_dir(), PathBuf::from("/var/lib/slotmarket/master"));
        assert_eq!(service.agent_work_dir("n1"), PathBuf::from("/var/lib/slotmarket/agent"));
        assert_eq!(service.shared_data_dir(), PathBuf::from("/var/lib/slotmarket/shared"));
        assert!(dev.check_path(Path::new("pki")).is_ok());
        assert!(service.check_path(Path::new("/srv/pki")).is_ok());
        let err = service.check_path(Path::new("pki")).unwrap_err();
        assert!(err.contains("pki is relative") && err.contains("--service"), "{err}");
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

    #[test]
    fn a_parse_error_is_one_line_naming_where_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.toml");
        std::fs::write(&path, "# a comment\nmaster = 5\n").unwrap();
        let err = load_toml::<Sample>(&path).unwrap_err().to_string();
        let shown = path.display();
        assert_eq!(err, format!("{shown}: line 2, column 10: invalid type: integer `5`, expected a string"));
        // Columns count characters, not bytes.
        std::fs::write(&path, "master = \"üü\" x\n").unwrap();
        let err = load_toml::<Sample>(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{shown}: line 1, column 15: ")) && !err.contains('\n'), "{err}");
    }
}
