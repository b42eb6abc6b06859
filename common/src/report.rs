//! [`Report`]: what the daemons' and the simulator's `main` return, so that a failure is
//! printed with each cause once. Many errors here quote their source in their own
//! message ("cannot read F: No such file or directory"), which the standard report of a
//! `main` error would print again as its cause.

use std::fmt;

/// An error as `main` reports it: its message, then under "Caused by" each cause that
/// the message before it does not already quote.
pub struct Report(anyhow::Error);

impl<E: Into<anyhow::Error>> From<E> for Report {
    fn from(err: E) -> Report {
        Report(err.into())
    }
}

impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chain = self.0.chain().map(|err| err.to_string());
        let mut before = chain.next().unwrap_or_default();
        write!(f, "{before}")?;
        let mut heading = false;
        for cause in chain {
            if !before.contains(cause.trim_end()) {
                f.write_str(if heading { "\n" } else { "\n\nCaused by:" })?;
                heading = true;
                for line in cause.trim_end().lines() {
                    write!(f, "\n    {line}")?;
                }
            }
            before = cause;
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
    }

    #[test]
    fn a_cause_the_message_does_not_quote_is_printed_under_caused_by() {
        let report = Report::from(Terse { source: not_found() });
        assert_eq!(format!("{report:?}"), "the agent stopped\n\nCaused by:\n    no such file");
        let multi = Report::from(anyhow::anyhow!("line one\nline two\n").context("loading"));
        assert_eq!(format!("{multi:?}"), "loading\n\nCaused by:\n    line one\n    line two");
    }
}
