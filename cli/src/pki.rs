//! `slotmarket pki init` and `slotmarket pki issue`: thin wrappers over the library's
//! certificate authority that say which files they wrote.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use slotmarket_common::identity::Role;
use slotmarket_common::pki;

use crate::output;

/// `pki` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum PkiCommand {
    /// Make a new cluster CA, the master's certificate and an admin certificate in DIR.
    Init(InitArgs),
    /// Issue a certificate signed by the CA in DIR.
    Issue(IssueArgs),
}

/// Arguments of `pki init`.
#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// Directory to write into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// A name or address clients use to reach the master, besides localhost, 127.0.0.1
    /// and ::1 (always included); repeat for several.
    #[arg(long = "host", value_name = "H")]
    pub(crate) hosts: Vec<String>,
}

/// Arguments of `pki issue`.
#[derive(Debug, Args)]
pub(crate) struct IssueArgs {
    /// Directory holding the CA (from `pki init`); the new files go there too.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// What the holder may do: agent, user or admin.
    #[arg(long, value_parser = parse_role)]
    pub(crate) role: Role,
    /// The principal: node name for agents, account name for users and admins.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: String,
}

/// The `--json` answer: which files were written.
#[derive(Debug, Serialize)]
struct WrittenJson {
    /// The directory.
    dir: PathBuf,
    /// Files written, as paths.
    files: Vec<PathBuf>,
}

/// Runs a `pki` subcommand.
pub(crate) fn run(command: PkiCommand, json: bool) -> Result<ExitCode> {
    let (dir, files) = match command {
        PkiCommand::Init(args) => {
            let files = init(&args.dir, &args.hosts)?;
            (args.dir, files)
        }
        PkiCommand::Issue(args) => {
            let written = pki::issue(&args.dir, args.role, &args.name).with_context(|| {
                format!("issuing a {} certificate for \"{}\" in {}", args.role, args.name, args.dir.display())
            })?;
            (args.dir, vec![written.cert, written.key])
        }
    };
    if json {
        output::print_json(&WrittenJson { dir, files })?;
    } else {
        for file in &files {
            println!("wrote {}", file.display());
        }
        if files.iter().any(|f| f.ends_with("ca.key")) {
            println!("keep ca.key private: whoever holds it can issue certificates for this cluster");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs [`pki::init`] and answers the files it created (it never overwrites any).
pub(crate) fn init(dir: &Path, hosts: &[String]) -> Result<Vec<PathBuf>> {
    let before = files_in(dir);
    pki::init(dir, hosts).with_context(|| format!("making a cluster CA in {}", dir.display()))?;
    Ok(files_in(dir).difference(&before).cloned().collect())
}

/// Regular files directly in `dir`, empty if `dir` does not exist yet.
fn files_in(dir: &Path) -> BTreeSet<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return BTreeSet::new() };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .map(|entry| entry.path())
        .collect()
}

/// Accepts the roles a certificate can be issued for; the master's own certificate is
/// made by `pki init`.
fn parse_role(text: &str) -> Result<Role, String> {
    match text.parse::<Role>()? {
        Role::Master => {
            Err("the master's certificate is made by `slotmarket pki init`; use agent, user or admin".into())
        }
        role => Ok(role),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_and_issue_report_the_files_they_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let written = init(dir.path(), &["master.lab".into()]).unwrap();
        let names: Vec<String> =
            written.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
        for expected in ["ca.pem", "ca.key", "master.pem", "master.key", "admin.pem", "admin.key"] {
            assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
        }
        // A second init refuses rather than replacing the CA.
        assert!(init(dir.path(), &[]).is_err());
    }

    #[test]
    fn only_client_roles_can_be_issued() {
        assert_eq!(parse_role("agent"), Ok(Role::Agent));
        assert_eq!(parse_role("admin"), Ok(Role::Admin));
        assert!(parse_role("master").unwrap_err().contains("pki init"));
        assert!(parse_role("boss").is_err());
    }
}
