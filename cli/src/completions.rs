//! `slotmarket completions SHELL`: prints a completion script for bash, zsh, fish, elvish
//! or PowerShell, generated from the command-line definition itself, so it never lags
//! behind the commands.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use clap_complete::Shell;

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub(crate) shell: Shell,
}

/// Writes the script for `args.shell` on stdout. Install it, e.g. for bash:
/// `slotmarket completions bash > ~/.local/share/bash-completion/completions/slotmarket`.
pub(crate) fn run(mut command: clap::Command, args: &CompletionsArgs) -> Result<ExitCode> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut command, "slotmarket", &mut out);
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &out) {
        // `slotmarket completions bash | head` is not an error.
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use crate::Cli;

    fn script(shell: clap_complete::Shell) -> String {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "slotmarket", &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn scripts_name_the_subcommands_and_their_flags() {
        let bash = script(clap_complete::Shell::Bash);
        for word in ["submit", "run", "wait", "queue", "--time-limit", "--after"] {
            assert!(bash.contains(word), "bash completion lacks {word}");
        }
        let zsh = script(clap_complete::Shell::Zsh);
        assert!(zsh.starts_with("#compdef slotmarket"), "{}", &zsh[..40]);
    }
}
