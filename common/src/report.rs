//! [`Report`]: what the daemons' and the simulator's `main` return, so that a failure is
//! printed with each cause once. Many errors here quote their source in their own
//! message ("cannot read F: No such file or directory"), which the standard report of a
//! `main` error would print again as its cause.

use std::fmt;

/// An error as `main` reports it: its message, then each cause that the message before
/// it does not already quote. `{:?}` (what a `main` returning it prints) puts the causes
/// under "Caused by"; `{}` joins them on one line with ": ", as anyhow's `{:#}` does.
pub struct Report(anyhow::Error);

impl Report {
    /// The messages worth printing: the error's own, then every cause not quoted by the
    /// message before it (trailing newlines trimmed).
    fn messages(&self) -> Vec<String> {
        let mut kept = Vec::new();
        let mut before = String::new();
        for (i, err) in self.0.chain().enumerate() {
            let text = err.to_string();
            let trimmed = text.trim_end();
            if i == 0 || !before.contains(trimmed) {
                kept.push(trimmed.to_string());
            }
            before = text;
        }
        kept
    }
}

impl<E: Into<anyhow::Error>> From<E> for Report {
    fn from(err: E) -> Report {
        Report(err.into())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.messages().join(": "))
    }
}

impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let messages = self.messages();
        let Some((first, causes)) = messages.split_first() else { return Ok(()) };
        f.write_str(first)?;
        if !causes.is_empty() {
            f.write_str("\n\nCaused by:")?;
        }
        for (i, cause) in causes.iter().enumerate() {
            f.write_str(if i == 0 { "" } else { "\n" })?;
            for line in cause.lines() {
                write!(f, "\n    {line}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use thiserror::Error;

    use super::*;

    #[derive(Debug, Error)]
    #[error("cannot read {path}: {source}")]
    struct Quoting {
        path: &'static str,
        source: io::Error,
    }

    #[derive(Debug, Error)]
    #[error("the agent stopped")]
    struct Terse {
        source: io::Error,
    }

    fn not_found() -> io::Error {
        io::Error::new(io::ErrorKind::NotFound, "no such file")
    }

    #[test]
    fn a_cause_the_message_quotes_is_not_printed_again() {
        let report = Report::from(Quoting { path: "a.toml", source: not_found() });
        assert_eq!(format!("{report:?}"), "cannot read a.toml: no such file");
        let wrapped = Report::from(
            anyhow::Error::new(Quoting { path: "a.toml", source: not_found() }).context("--config"),
        );
        assert_eq!(format!("{wrapped:?}"), "--config\n\nCaused by:\n    cannot read a.toml: no such file");
        assert_eq!(wrapped.to_string(), "--config: cannot read a.toml: no such file");
    }

    #[test]
    fn a_cause_the_message_does_not_quote_is_printed_under_caused_by() {
        let report = Report::from(Terse { source: not_found() });
        assert_eq!(format!("{report:?}"), "the agent stopped\n\nCaused by:\n    no such file");
        assert_eq!(report.to_string(), "the agent stopped: no such file");
        let multi = Report::from(anyhow::anyhow!("line one\nline two\n").context("loading"));
        assert_eq!(format!("{multi:?}"), "loading\n\nCaused by:\n    line one\n    line two");
    }
}
