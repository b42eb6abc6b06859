//! A job's wall-clock time limit (`time_limit = "10m"`, like Slurm's `--time`): how long
//! it may run, counted from its first task's start, before the master kills its tasks and
//! fails it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::deadline::{format_duration, parse_duration};

/// Longest time limit a spec may give: a year.
pub const MAX_TIME_LIMIT: Duration = Duration::from_secs(366 * 24 * 3600);

/// How long a job may run once started; written `10m`, `1h30m`, `90s`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TimeLimit(pub Duration);

impl TimeLimit {
    /// The limit in whole milliseconds, as the core's timestamps count.
    pub fn millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}

impl std::str::FromStr for TimeLimit {
    type Err = String;
    fn from_str(text: &str) -> Result<TimeLimit, String> {
        let limit =
            parse_duration(text.trim()).map_err(|e| format!("\"{text}\": {e} (write e.g. 10m or 1h30m)"))?;
        if limit.is_zero() || limit > MAX_TIME_LIMIT {
            return Err(format!(
                "\"{text}\" must be more than 0 and at most {}",
                format_duration(MAX_TIME_LIMIT)
            ));
        }
        Ok(TimeLimit(limit))
    }
}

impl TryFrom<String> for TimeLimit {
    type Error = String;
    fn try_from(text: String) -> Result<TimeLimit, String> {
        text.parse()
    }
}

impl From<TimeLimit> for String {
    fn from(limit: TimeLimit) -> String {
        limit.to_string()
    }
}

impl fmt::Display for TimeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_print_and_refuse_nonsense() {
        let limit: TimeLimit = "1h30m".parse().unwrap();
        assert_eq!((limit.millis(), limit.to_string()), (5_400_000, "1h30m".to_string()));
        assert!("0s".parse::<TimeLimit>().unwrap_err().contains("more than 0"));
        assert!("400d".parse::<TimeLimit>().is_err());
        assert!("ten".parse::<TimeLimit>().unwrap_err().contains("10m"));
    }
}
