//! `Timestamp`: milliseconds since the Unix epoch. The only notion of time the core
//! sees; drivers read the clock and pass it in.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since the Unix epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The epoch itself; handy as the start of a virtual clock.
    pub const ZERO: Timestamp = Timestamp(0);

    /// A timestamp `secs` seconds after the epoch.
    pub const fn from_secs(secs: u64) -> Timestamp {
        Timestamp(secs * 1000)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch, with a fractional part.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl From<SystemTime> for Timestamp {
    /// The time a driver read from the system clock (the core never reads it itself).
    /// Times before the epoch become the epoch.
    fn from(time: SystemTime) -> Timestamp {
        let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, rhs: Duration) -> Timestamp {
        let millis = u64::try_from(rhs.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, rhs: Duration) -> Timestamp {
        let millis = u64::try_from(rhs.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_sub(millis))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Timestamp::from_secs(2);
        assert_eq!(t + Duration::from_millis(1500), Timestamp(3500));
        assert_eq!(Timestamp(10) - Duration::from_secs(1), Timestamp::ZERO);
        assert_eq!(Timestamp(10).saturating_since(Timestamp(20)), Duration::ZERO);
        assert_eq!(Timestamp(3500).to_string(), "3.500s");
        assert_eq!(Timestamp::from(UNIX_EPOCH + Duration::from_millis(1234)), Timestamp(1234));
        assert_eq!(Timestamp::from(UNIX_EPOCH - Duration::from_secs(1)), Timestamp::ZERO);
    }
}
