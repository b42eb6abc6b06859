//! A job's deadline as its spec states it: relative to admission (`"+30m"`, `"+1h30m"`,
//! `"+90s"`) or absolute (RFC 3339, `"2026-11-22T18:00:00Z"` or with a `+01:00` offset).
//! The master resolves a relative deadline against its clock when it admits the job.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The deadline a spec asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DeadlineSpec {
    /// This long after the master admits the job.
    In(Duration),
    /// At this time.
    At(Timestamp),
}

impl DeadlineSpec {
    /// The absolute deadline of a job admitted at `admitted`.
    pub fn resolve(self, admitted: Timestamp) -> Timestamp {
        match self {
            DeadlineSpec::In(after) => admitted + after,
            DeadlineSpec::At(at) => at,
        }
    }
}

impl TryFrom<String> for DeadlineSpec {
    type Error = String;
    fn try_from(text: String) -> Result<DeadlineSpec, String> {
        text.parse()
    }
}

impl From<DeadlineSpec> for String {
    fn from(deadline: DeadlineSpec) -> String {
        deadline.to_string()
    }
}

impl std::str::FromStr for DeadlineSpec {
    type Err = String;
    fn from_str(text: &str) -> Result<DeadlineSpec, String> {
        let text = text.trim();
        match text.strip_prefix('+') {
            Some(relative) => parse_duration(relative).map(DeadlineSpec::In),
            None => parse_rfc3339(text).map(DeadlineSpec::At),
        }
        .map_err(|why| {
            format!(
                "\"{text}\" is not a deadline ({why}); write \"+30m\", \"+1h30m\" or \"2026-11-22T18:00:00Z\""
            )
        })
    }
}

impl fmt::Display for DeadlineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadlineSpec::In(after) => write!(f, "+{}", format_duration(*after)),
            DeadlineSpec::At(at) => f.write_str(&format_rfc3339(*at)),
        }
    }
}

/// `1h30m`, `45s`, `2d`, `1500ms`: one or more number–unit pairs, largest first or not,
/// each unit at most once (`20m20m` is more likely a slip than a way to write `40m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut total = Duration::ZERO;
    let mut units_seen: Vec<&str> = Vec::new();
    let mut rest = text;
    if rest.is_empty() {
        return Err("no duration after '+'".into());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("expected a number at \"{rest}\""));
        }
        let number: u64 = rest[..digits].parse().map_err(|_| format!("{} is too large", &rest[..digits]))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let millis_per = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(format!("{number} has no unit (ms, s, m, h or d)")),
            other => return Err(format!("unknown unit \"{other}\" (ms, s, m, h or d)")),
        };
        let unit = &rest[..unit_len];
        if units_seen.contains(&unit) {
            return Err(format!("the unit \"{unit}\" is given twice; give each unit once, as in 1h30m"));
        }
        units_seen.push(unit);
        let millis = number.checked_mul(millis_per).ok_or("the duration is too long")?;
        total = total.checked_add(Duration::from_millis(millis)).ok_or("the duration is too long")?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// The shortest `1h30m`-style form of `duration` (whole milliseconds).
pub fn format_duration(duration: Duration) -> String {
    let mut millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    if millis == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, per) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        if millis >= per {
            out.push_str(&format!("{}{unit}", millis / per));
            millis %= per;
        }
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`; a space may stand for the `T`.
fn parse_rfc3339(text: &str) -> Result<Timestamp, String> {
    let bytes = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Result<u64, String> {
        let part = text.get(range).ok_or("too short")?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("\"{part}\" is not a number"));
        }
        part.parse().map_err(|_| format!("\"{part}\" is not a number"))
    };
    let sep = |at: usize, want: &[u8]| bytes.get(at).is_some_and(|b| want.contains(b));
    if bytes.len() < 20
        || !sep(4, b"-")
        || !sep(7, b"-")
        || !sep(10, b"Tt ")
        || !sep(13, b":")
        || !sep(16, b":")
    {
        return Err("not an RFC 3339 time".into());
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err("no such date".into());
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("no such time of day".into());
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.find(|c: char| !c.is_ascii_digit()).unwrap_or(fraction.len());
        if digits == 0 {
            return Err("empty fraction of a second".into());
        }
        let padded = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = padded.parse::<u64>().map_err(|_| "bad fraction")?;
        rest = &fraction[digits..];
    }
    let offset_secs: i64 = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) && &rest[3..4] == ":" => {
            let (h, m) = (num_of(&rest[1..3])?, num_of(&rest[4..6])?);
            if h > 23 || m > 59 {
                return Err(format!("no such zone offset {rest}: offsets run from -23:59 to +23:59"));
            }
            let secs = (h * 3600 + m * 60) as i64;
            if rest.starts_with('-') { -secs } else { secs }
        }
        _ => return Err("the time needs a zone: Z or ±HH:MM".into()),
    };
    let days = days_from_civil(year as i64, month, day);
    let secs = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset_secs;
    let millis = secs.checked_mul(1000).and_then(|s| s.checked_add(millis as i64)).ok_or("out of range")?;
    u64::try_from(millis).map(Timestamp).map_err(|_| "before 1970".into())
}

fn num_of(part: &str) -> Result<u64, String> {
    part.parse().map_err(|_| format!("\"{part}\" is not a number"))
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` in UTC.
pub fn format_rfc3339(at: Timestamp) -> String {
    let secs = at.0 / 1000;
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    let base = format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    match at.0 % 1000 {
        0 => format!("{base}Z"),
        ms => format!("{base}.{ms:03}Z"),
    }
}

fn is_leap(year: u64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u64, day: u64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (inverse of `days_from_civil`).
fn civil_from_days(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_deadlines_parse_in_any_unit_mix() {
        assert_eq!("+30m".parse(), Ok(DeadlineSpec::In(Duration::from_secs(1800))));
        assert_eq!("+1h30m".parse(), Ok(DeadlineSpec::In(Duration::from_secs(5400))));
        assert_eq!("+90s".parse(), Ok(DeadlineSpec::In(Duration::from_secs(90))));
        assert_eq!("+2d1500ms".parse(), Ok(DeadlineSpec::In(Duration::from_millis(172_801_500))));
        for bad in ["+", "+30", "+m", "+3x", "+1h-5m", "+99999999999999999999d", "+20m20m", "+1s1h1s"] {
            let err = bad.parse::<DeadlineSpec>().unwrap_err();
            assert!(err.contains(&format!("\"{bad}\"")) && err.contains("+30m"), "{bad}: {err}");
        }
    }

    #[test]
    fn absolute_deadlines_parse_rfc3339_with_zones() {
        let at = |text: &str| match text.parse::<DeadlineSpec>() {
            Ok(DeadlineSpec::At(t)) => t,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(at("1970-01-01T00:00:00Z"), Timestamp(0));
        assert_eq!(at("2026-11-22T18:00:00Z"), Timestamp(1_795_370_400_000));
        assert_eq!(at("2026-11-22T19:00:00+01:00"), Timestamp(1_795_370_400_000));
        assert_eq!(at("2026-11-22 17:30:00.25-00:30"), Timestamp(1_795_370_400_250));
        assert_eq!(at("2024-02-29T00:00:00Z"), Timestamp(1_709_164_800_000));
        for bad in [
            "2026-11-22T18:00:00",
            "2026-02-30T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "tomorrow",
            "1969-12-31T23:59:59Z",
            "2030-01-01T00:00:00+25:00",
            "2030-01-01T00:00:00-24:00",
            "2030-01-01T00:00:00+01:60",
        ] {
            let err = bad.parse::<DeadlineSpec>().unwrap_err();
            assert!(err.contains("2026-11-22T18:00:00Z"), "{bad}: {err}");
        }
        assert_eq!(at("2030-01-01T23:59:00+23:59"), at("2030-01-01T00:00:00Z"));
        assert_eq!(at("2030-01-01T00:00:00-23:59"), at("2030-01-01T23:59:00Z"));
    }

    #[test]
    fn deadlines_print_as_they_parse() {
        for text in ["+1h30m", "+45s", "+1d2h3m4s5ms", "2026-11-22T18:00:00Z", "2000-02-29T12:34:56.789Z"] {
            let deadline: DeadlineSpec = text.parse().unwrap();
            assert_eq!(deadline.to_string(), text);
        }
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn a_repeated_unit_or_an_impossible_offset_says_what_is_wrong() {
        let repeated = "+20m20m".parse::<DeadlineSpec>().unwrap_err();
        assert!(repeated.contains("\"m\" is given twice"), "{repeated}");
        let offset = "2030-01-01T00:00:00+25:00".parse::<DeadlineSpec>().unwrap_err();
        assert!(offset.contains("-23:59 to +23:59"), "{offset}");
    }

    #[test]
    fn relative_deadlines_resolve_against_admission() {
        let admitted = Timestamp::from_secs(1000);
        assert_eq!(DeadlineSpec::In(Duration::from_secs(60)).resolve(admitted), Timestamp::from_secs(1060));
        assert_eq!(DeadlineSpec::At(Timestamp(5)).resolve(admitted), Timestamp(5));
    }

    #[test]
    fn deadlines_round_trip_through_toml_and_postcard() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Holder {
            deadline: DeadlineSpec,
        }
        let holder: Holder = toml::from_str("deadline = \"+30m\"").unwrap();
        assert_eq!(holder.deadline, DeadlineSpec::In(Duration::from_secs(1800)));
        let bytes = postcard::to_allocvec(&holder).unwrap();
        assert_eq!(postcard::from_bytes::<Holder>(&bytes).unwrap(), holder);
        let err = toml::from_str::<Holder>("deadline = \"soon\"").unwrap_err().to_string();
        assert!(err.contains("is not a deadline"), "{err}");
    }
}
