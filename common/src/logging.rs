//! The log output every Slotmarket binary sets up: lines on stderr (coloured only on a
//! terminal; a journal, a pipe or a log file gets plain text), filtered by `RUST_LOG`.
//!
//! `RUST_LOG` takes tracing's `Targets` directives: a level (`debug`), `target=level`
//! pairs, or both, comma-separated (`warn,slotmarket_master=debug`). Not an `EnvFilter`:
//! its span and field filters were never used, and its regex engine was a large part of
//! a fresh release build.

use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the process's log subscriber: `RUST_LOG`'s directives, else `default` for
/// every target. A `RUST_LOG` that does not parse is reported on stderr and replaced by
/// the default, so a typo never silences a daemon.
pub fn init(default: Level) {
    let (filter, refused) = filter_from(std::env::var("RUST_LOG").ok().as_deref(), default);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi))
        .with(filter)
        .init();
    if let Some(reason) = refused {
        tracing::warn!(%reason, "RUST_LOG ignored; logging at {default}");
    }
}

/// The filter for `directives` (the value of `RUST_LOG`, if set), and why they were
/// refused if they were.
fn filter_from(directives: Option<&str>, default: Level) -> (Targets, Option<String>) {
    let fallback = || Targets::new().with_default(default);
    match directives.map(str::trim).filter(|d| !d.is_empty()) {
        None => (fallback(), None),
        Some(d) => match d.parse::<Targets>() {
            Ok(targets) => (targets, None),
            Err(err) => (fallback(), Some(err.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use tracing::level_filters::LevelFilter;

    use super::*;

    #[test]
    fn unset_or_blank_is_the_default_level_for_every_target() {
        for directives in [None, Some(""), Some("  ")] {
            let (filter, refused) = filter_from(directives, Level::WARN);
            assert_eq!(filter.default_level(), Some(LevelFilter::WARN));
            assert!(refused.is_none());
        }
    }

    #[test]
    fn a_level_and_target_pairs_are_read() {
        let (filter, refused) = filter_from(Some("error,slotmarket_master=debug"), Level::INFO);
        assert!(refused.is_none());
        assert_eq!(filter.default_level(), Some(LevelFilter::ERROR));
        assert!(filter.would_enable("slotmarket_master::server", &Level::DEBUG));
        assert!(!filter.would_enable("quinn", &Level::WARN));
    }

    #[test]
    fn directives_that_do_not_parse_fall_back_to_the_default_and_say_why() {
        let (filter, refused) = filter_from(Some("slotmarket_master=loud"), Level::INFO);
        assert_eq!(filter.default_level(), Some(LevelFilter::INFO));
        assert!(refused.is_some_and(|reason| !reason.is_empty()));
    }
}
