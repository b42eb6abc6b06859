//! `Credits`: the money of the market as an exact fixed-point integer (micro-credits), so
//! budgets, charges and balances add up exactly and a balance derived from the ledger is
//! the same number on every replay. Parsing and display use decimal text ("12.5").

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Micro-credits in one credit.
pub const MICROS_PER_CREDIT: i64 = 1_000_000;

/// Decimal places a credit amount may have.
const DECIMALS: usize = 6;

/// An amount of credits, signed, in micro-credits (10^-6). Arithmetic is checked: an
/// overflow is an error, never a wrapped value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Credits(pub i64);

/// Why a text is not an amount of credits.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum MoneyError {
    /// The text is not a decimal number such as `12`, `-5` or `0.25`.
    #[error("\"{text}\" is not an amount of credits; write it like 12, 12.5 or -0.25")]
    Malformed {
        /// The text given.
        text: String,
    },
    /// More than six decimal places (a micro-credit is the smallest unit).
    #[error(
        "\"{text}\" has more than {DECIMALS} decimal places; a micro-credit (0.000001) is the smallest unit"
    )]
    TooPrecise {
        /// The text given.
        text: String,
    },
    /// The amount does not fit in the fixed-point range (about ±9.2 trillion credits).
    #[error("\"{text}\" is too large an amount of credits")]
    OutOfRange {
        /// The text given.
        text: String,
    },
}

impl Credits {
    /// No credits.
    pub const ZERO: Credits = Credits(0);

    /// `whole` credits.
    pub const fn from_credits(whole: i64) -> Credits {
        Credits(whole * MICROS_PER_CREDIT)
    }

    /// The amount in micro-credits.
    pub const fn micros(self) -> i64 {
        self.0
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(self, other: Credits) -> Option<Credits> {
        self.0.checked_add(other.0).map(Credits)
    }

    /// `self - other`, or `None` on overflow.
    pub fn checked_sub(self, other: Credits) -> Option<Credits> {
        self.0.checked_sub(other.0).map(Credits)
    }

    /// `self × n` (e.g. a rate times slots used), or `None` on overflow.
    pub fn checked_mul(self, n: i64) -> Option<Credits> {
        self.0.checked_mul(n).map(Credits)
    }

    /// `-self`, or `None` for the one value without a negation.
    pub fn checked_neg(self) -> Option<Credits> {
        self.0.checked_neg().map(Credits)
    }

    /// Whether the amount is above zero.
    pub fn is_positive(self) -> bool {
        self.0 > 0
    }

    /// Whether the amount is below zero.
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// The amount as a float, for plots and JSON consumers that want a number; sums
    /// must use `Credits` itself.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / MICROS_PER_CREDIT as f64
    }
}

impl fmt::Display for Credits {
    /// At least two decimals, at most six, trailing zeros beyond the second trimmed:
    /// `12.00`, `12.50`, `-0.000001`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        // unsigned_abs: i64::MIN has no positive i64 counterpart.
        let abs = self.0.unsigned_abs();
        let per = MICROS_PER_CREDIT as u64;
        let fraction = format!("{:06}", abs % per);
        let trimmed = fraction.trim_end_matches('0');
        let shown = if trimmed.len() < 2 { &fraction[..2] } else { trimmed };
        write!(f, "{sign}{}.{shown}", abs / per)
    }
}

impl fmt::Debug for Credits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}cr")
    }
}

impl FromStr for Credits {
    type Err = MoneyError;

    /// Parses `12`, `+12.5`, `-0.25`, `.5`; at most six decimals; no exponent, no
    /// separators.
    fn from_str(text: &str) -> Result<Credits, MoneyError> {
        let malformed = || MoneyError::Malformed { text: text.to_string() };
        let (negative, digits) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (whole.is_empty() && fraction.is_empty()) || !all_digits(whole) || !all_digits(fraction) {
            return Err(malformed());
        }
        if fraction.len() > DECIMALS {
            return Err(MoneyError::TooPrecise { text: text.to_string() });
        }
        let out_of_range = || MoneyError::OutOfRange { text: text.to_string() };
        let whole: i64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| out_of_range())? };
        // Right-pad the fraction to six digits: "5" is 500000 micro-credits.
        let fraction: i64 = format!("{fraction:0<DECIMALS$}").parse().map_err(|_| malformed())?;
        let micros = whole
            .checked_mul(MICROS_PER_CREDIT)
            .and_then(|w| w.checked_add(fraction))
            .ok_or_else(out_of_range)?;
        Ok(Credits(if negative { -micros } else { micros }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Credits {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn amounts_parse_to_exact_micro_credits() {
        assert_eq!(parse("12"), Credits(12_000_000));
        assert_eq!(parse("12.5"), Credits(12_500_000));
        assert_eq!(parse("+12.5"), Credits(12_500_000));
        assert_eq!(parse("-0.25"), Credits(-250_000));
        assert_eq!(parse(".5"), Credits(500_000));
        assert_eq!(parse("3."), Credits(3_000_000));
        assert_eq!(parse("0.000001"), Credits(1));
        assert_eq!(parse("-0"), Credits::ZERO);
    }

    #[test]
    fn bad_amounts_name_the_text_and_the_problem() {
        for bad in ["", "-", ".", "1,5", "1e3", "12.5.1", " 1", "abc", "--1", "+-1"] {
            let err = bad.parse::<Credits>().unwrap_err();
            assert_eq!(err, MoneyError::Malformed { text: bad.into() }, "{bad}");
        }
        let err = "0.0000001".parse::<Credits>().unwrap_err();
        assert!(matches!(err, MoneyError::TooPrecise { .. }), "{err:?}");
        assert!(err.to_string().contains("\"0.0000001\""), "{err}");
        let err = "9223372036854.775808".parse::<Credits>().unwrap_err();
        assert!(matches!(err, MoneyError::OutOfRange { .. }), "{err:?}");
        assert_eq!(parse("9223372036854.775807"), Credits(i64::MAX));
    }

    #[test]
    fn display_keeps_two_decimals_and_trims_the_rest() {
        assert_eq!(Credits(12_000_000).to_string(), "12.00");
        assert_eq!(Credits(12_500_000).to_string(), "12.50");
        assert_eq!(Credits(12_345_600).to_string(), "12.3456");
        assert_eq!(Credits(-1).to_string(), "-0.000001");
        assert_eq!(Credits(-250_000).to_string(), "-0.25");
        assert_eq!(Credits::ZERO.to_string(), "0.00");
        assert_eq!(Credits(i64::MIN).to_string(), "-9223372036854.775808");
        assert_eq!(format!("{:?}", Credits(1_500_000)), "1.50cr");
    }

    #[test]
    fn display_parses_back_to_the_same_amount() {
        for micros in [0, 1, -1, 999_999, 1_000_000, -123_456_789, i64::MAX, i64::MIN + 1] {
            let credits = Credits(micros);
            assert_eq!(parse(&credits.to_string()), credits, "{micros}");
        }
    }

    #[test]
    fn arithmetic_is_exact_and_checked() {
        // 0.1 + 0.2 is exactly 0.3 here, unlike in f64.
        assert_eq!(parse("0.1").checked_add(parse("0.2")), Some(parse("0.3")));
        assert_eq!(parse("10").checked_sub(parse("12.5")), Some(parse("-2.5")));
        assert_eq!(parse("0.25").checked_mul(3), Some(parse("0.75")));
        assert_eq!(Credits(i64::MAX).checked_add(Credits(1)), None);
        assert_eq!(Credits(i64::MIN).checked_sub(Credits(1)), None);
        assert_eq!(Credits(i64::MIN).checked_neg(), None);
        assert_eq!(Credits::from_credits(3), parse("3"));
        assert!(parse("0.000001").is_positive() && parse("-1").is_negative());
        assert_eq!(parse("2.5").as_f64(), 2.5);
    }

    #[test]
    fn credits_round_trip_through_postcard() {
        let bytes = postcard::to_allocvec(&Credits(-42)).unwrap();
        assert_eq!(postcard::from_bytes::<Credits>(&bytes).unwrap(), Credits(-42));
    }
}
