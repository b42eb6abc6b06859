//! The simulator's account events for DP runs (`--accounts FILE`): budgets to create
//! accounts with, and spending-rate changes at given times, in JSON lines:
//!
//! ```json
//! {"at_s":0,"user":"user01","budget":1000}
//! {"at_s":0,"user":"user01","rate":2}
//! {"at_s":600,"user":"user02","rate":3}
//! ```
//!
//! A line with `budget` creates the account (as an admin would, at `at_s`) with that
//! first grant; a line with `rate` sets the user's spending rate (as the user would, with
//! `slotmarket rate set`). Either or both may appear on one line. Accounts never created
//! are not metered: they compete at their rate and are never charged.

use std::io::BufRead;

use serde::Deserialize;
use slotmarket_common::money::Credits;
use slotmarket_common::time::Timestamp;

use super::workload::{TraceError, secs_to_ms};

/// One account event.
#[derive(Clone, PartialEq, Debug)]
pub struct AccountEvent {
    /// When it happens.
    pub at: Timestamp,
    /// The user (and account) it is about.
    pub user: String,
    /// Create the account with this first grant.
    pub budget: Option<Credits>,
    /// Set the spending rate, credits per slot-hour.
    pub rate: Option<Credits>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    at_s: f64,
    user: String,
    #[serde(default)]
    budget: Option<f64>,
    #[serde(default)]
    rate: Option<f64>,
}

/// Reads account events, sorted by time (file order among equal times).
pub fn read_account_events(input: impl BufRead) -> Result<Vec<AccountEvent>, TraceError> {
    let mut out = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let bad = |problem: String| TraceError::Line { line: n + 1, problem };
        let parsed: Line = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if !(parsed.at_s.is_finite() && parsed.at_s >= 0.0) {
            return Err(bad(format!("at_s must be a time in seconds from 0, got {}", parsed.at_s)));
        }
        let credits = |field: &str, v: Option<f64>| match v {
            None => Ok(None),
            Some(x) if x.is_finite() && (0.0..=1e12).contains(&x) => {
                Ok(Some(Credits((x * 1e6).round() as i64)))
            }
            Some(x) => Err(bad(format!("{field} must be a number of credits from 0 to 1e12, got {x}"))),
        };
        let budget = credits("budget", parsed.budget)?;
        let rate = credits("rate", parsed.rate)?;
        if budget.is_none() && rate.is_none() {
            return Err(bad("give a budget, a rate or both".into()));
        }
        out.push(AccountEvent { at: Timestamp(secs_to_ms(parsed.at_s)), user: parsed.user, budget, rate });
    }
    out.sort_by_key(|e| e.at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_sort_and_name_their_problems() {
        let text = "# rates\n{\"at_s\":600,\"user\":\"b\",\"rate\":3}\n{\"at_s\":0,\"user\":\"a\",\"budget\":10,\"rate\":2}\n";
        let events = read_account_events(text.as_bytes()).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(
            (events[0].user.as_str(), events[0].budget, events[0].rate),
            ("a", Some(Credits(10_000_000)), Some(Credits(2_000_000)))
        );
        assert_eq!((events[1].at, events[1].rate), (Timestamp(600_000), Some(Credits(3_000_000))));
        let err = read_account_events("{\"at_s\":1,\"user\":\"a\"}".as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), "line 1: give a budget, a rate or both");
        let err = read_account_events("\n{\"at_s\":1,\"user\":\"a\",\"rate\":-1}".as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("line 2: rate must be"), "{err}");
    }
}
