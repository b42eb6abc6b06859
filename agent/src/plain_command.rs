//! A task whose command line is one plain command starts without a shell.
//!
//! A job spec's command is a `sh -c` line. Where `/bin/sh` is dash (Debian, Ubuntu), the
//! shell does not exec a lone external command: it forks it and waits, so such a task paid
//! for a shell's start, a second process and its reaping, about 2.4 ms of wall time on the
//! development machine (`docs/benchmarks.md`, launch path, "Eleventh round"). GNU make
//! starts recipe lines without shell syntax directly for the same reason. Where `/bin/sh`
//! is another shell (bash execs a lone command itself), every line still goes to it.
//!
//! A line is plain only where the shell would do nothing but split it at blanks, remove
//! quotes and look its first word up:
//! - outside quotes only letters, digits, blanks and `-_./=:,+@%`; inside `'...'` and
//!   `"..."` printable ASCII and blanks, but no `$`, backquote or backslash inside `"..."`
//!   (so no expansion, escape, redirection, globbing, comment or separator anywhere; the
//!   quoting the command templates put around paths, `"{job_dir}/input"`, stays plain);
//! - the first word neither empty, nor an assignment, nor a builtin or reserved word of
//!   dash.
//!
//! The agent looks nothing up itself (a `PATH` entry on a network file system could keep
//! it waiting): the task's child process tries the first word in each absolute `PATH`
//! entry in order, as dash would, up to the first entry dash would search differently (a
//! relative one, or one with dash's `%` suffix), or as written where it holds a `/`. As
//! dash does, it moves on past a candidate that fails to start (not there, not executable,
//! in a directory it may not search); at a file that is no program (`ENOEXEC`), or when
//! none started, it execs `/bin/sh -c LINE` after all, so what dash does then (a script
//! without `#!` run by the shell, `not found` and exit code 127, `Permission denied` and
//! 126) dash does itself. The task's environment is the shell's: the caller sets `PWD`,
//! the one variable dash adds. One difference shows: a program killed by a signal is
//! reported so, where the shell exited with 128 + its number.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// dash's builtins (`type NAME` in dash 0.5.12) and reserved words: a line starting with
/// one means what the shell makes of it, not a program.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "[", "alias", "bg", "break", "cd", "chdir", "command", "continue", "echo", "eval", "exec",
    "exit", "export", "false", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read",
    "readonly", "return", "set", "shift", "test", "times", "trap", "true", "type", "ulimit", "umask",
    "unalias", "unset", "wait", "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in",
    "then", "until", "while",
];

/// A program to exec directly, where it is found, and its whole argument vector.
#[derive(Debug, PartialEq, Eq)]
pub struct PlainCommand {
    /// Where the program may be, in the order to try them.
    pub candidates: Vec<PathBuf>,
    /// The words of the line, `argv[0]` as written (as the shell passes it).
    pub argv: Vec<OsString>,
}

/// `line` as a program and its arguments, if it is one plain command (see the module's
/// documentation); `path` is the task's `PATH`.
pub fn plain_command(line: &str, path: Option<&OsStr>) -> Option<PlainCommand> {
    if !shell_is_dash() {
        return None;
    }
    parse(line, path)
}

/// [`plain_command`] for a dash `/bin/sh`.
fn parse(line: &str, path: Option<&OsStr>) -> Option<PlainCommand> {
    let words = words(line)?;
    let first = words.first()?.as_str();
    if first.is_empty() || first.contains('=') || SHELL_WORDS.contains(&first) {
        return None;
    }
    let candidates =
        if first.contains('/') { vec![PathBuf::from(first)] } else { path_candidates(first, path?) };
    if candidates.is_empty() {
        return None;
    }
    Some(PlainCommand { candidates, argv: words.into_iter().map(OsString::from).collect() })
}

/// `name` in each entry of `path`, up to the first entry dash would search differently
/// (a relative one, the working directory for an empty one, or one with dash's `%`
/// suffix): the shell then searches the rest itself.
fn path_candidates(name: &str, path: &OsStr) -> Vec<PathBuf> {
    path.as_bytes()
        .split(|&byte| byte == b':')
        .take_while(|entry| entry.starts_with(b"/") && !entry.contains(&b'%'))
        .map(|entry| Path::new(OsStr::from_bytes(entry)).join(name))
        .collect()
}

/// The words the shell makes of `line`, if it only splits it at blanks and removes quotes
/// (see the module's documentation). A quoted part makes a word even where it is empty
/// (`''` is an empty argument). `None` for anything else, an unclosed quote included.
fn words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    // The word being read; `Some` from its first character or quote on.
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => words.extend(word.take()),
            '\'' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c if quotable(c) => word.push(c),
                        _ => return None,
                    }
                }
            }
            '"' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' | '\\' => return None,
                        c if quotable(c) => word.push(c),
                        _ => return None,
                    }
                }
            }
            c if c.is_ascii() && plain_byte(c as u8) => word.get_or_insert_with(String::new).push(c),
            _ => return None,
        }
    }
    words.extend(word);
    Some(words)
}

/// Whether `/bin/sh` is dash, the shell whose behaviour this module reproduces.
fn shell_is_dash() -> bool {
    static DASH: OnceLock<bool> = OnceLock::new();
    *DASH.get_or_init(|| {
        std::fs::canonicalize("/bin/sh")
            .is_ok_and(|shell| shell.file_name().is_some_and(|name| name.as_bytes().starts_with(b"dash")))
    })
}

/// Characters taken inside quotes (the shell would take any; the rest are left to it).
fn quotable(c: char) -> bool {
    c == ' ' || c == '\t' || c.is_ascii_graphic()
}

/// Bytes the shell passes through an unquoted word unchanged.
fn plain_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&byte)
}

#[cfg(test)]
#[path = "plain_command_tests.rs"]
mod tests;
