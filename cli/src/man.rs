//! `slotmarket man DIR` (hidden; `scripts/man.sh` runs it): writes one man page per command
//! (`slotmarket.1`, `slotmarket-submit.1`, …) generated from the command-line definition.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

/// Arguments of `man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Directory to write the pages into (made if missing).
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,
}

/// Writes the pages and prints how many.
pub(crate) fn run(command: clap::Command, args: &ManArgs) -> Result<ExitCode> {
    let written = write_pages(command, &args.dir)?;
    println!("wrote {written} man pages to {}", args.dir.display());
    Ok(ExitCode::SUCCESS)
}

/// Writes the top page and one per subcommand (nested ones as `slotmarket-pki-init.1`).
fn write_pages(command: clap::Command, dir: &Path) -> Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("writing man pages to {}", dir.display()))?;
    let pages = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|e| e == "1"))
        .count();
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::Cli;

    #[test]
    fn every_command_gets_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let count = write_pages(Cli::command(), dir.path()).unwrap();
        assert!(count > 20, "{count}");
        let run = std::fs::read_to_string(dir.path().join("slotmarket-run.1")).unwrap();
        assert!(run.contains(".TH slotmarket-run 1") && run.contains("time\\-limit"), "{run}");
        assert!(dir.path().join("slotmarket-pki-init.1").is_file());
    }
}
