//! A job's own utility curve (`utility` in a job spec): what finishing late is worth to
//! the submitter, which the `jockey` policy maximises instead of its `[policy] utility`.
//! Points are `[minutes after the deadline, utility]`, the form of the policy setting.
//!
//! ```toml
//! deadline = "+30m"
//! utility = [[0, 1], [10, -1], [1000, -1000]]   # the policy's default curve
//! ```

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Most points a job's utility curve may have.
pub const MAX_UTILITY_POINTS: usize = 64;
/// Furthest from the deadline a point may be, in minutes either way (about 19 years):
/// far enough for any curve, near enough that milliseconds fit an `i64`.
pub const MAX_UTILITY_MINUTES: f64 = 1e7;
/// Largest utility a point may have, either way.
pub const MAX_UTILITY_VALUE: f64 = 1e12;

/// A piecewise-linear utility of the finish time: `(minutes after the deadline,
/// utility)` points, by time (negative: before the deadline). Flat before the first
/// point and after the last; two points at the same time make a step.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct UtilityCurve(pub Vec<(f64, f64)>);

impl<'de> Deserialize<'de> for UtilityCurve {
    /// As the `Vec<(f64, f64)>` it serializes as, but a point of more than two numbers
    /// is refused: TOML would otherwise drop what follows the second without a word.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<UtilityCurve, D::Error> {
        let points = Vec::<Point>::deserialize(deserializer)?;
        Ok(UtilityCurve(points.into_iter().map(|p| (p.0, p.1)).collect()))
    }
}

/// One `[minutes after the deadline, utility]` point, exactly two numbers.
struct Point(f64, f64);

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Point, D::Error> {
        deserializer.deserialize_tuple(2, PointVisitor)
    }
}

/// Reads a [`Point`] from a sequence, refusing a third element.
struct PointVisitor;

impl<'de> Visitor<'de> for PointVisitor {
    type Value = Point;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [minutes after the deadline, utility] pair of numbers")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Point, A::Error> {
        let minutes = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let utility = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &self));
        }
        Ok(Point(minutes, utility))
    }
}

impl PartialEq for UtilityCurve {
    /// Bit for bit, so that equality is an equivalence ([`JobSpec`](super::JobSpec) is
    /// `Eq`); checked curves hold no NaN, so this is numeric equality but for −0.
    fn eq(&self, other: &UtilityCurve) -> bool {
        let bits =
            |c: &UtilityCurve| c.0.iter().map(|&(t, u)| (t.to_bits(), u.to_bits())).collect::<Vec<_>>();
        bits(self) == bits(other)
    }
}

impl Eq for UtilityCurve {}

impl UtilityCurve {
    /// The points as `(milliseconds after the deadline, utility)`.
    pub fn points_ms(&self) -> impl Iterator<Item = (i64, f64)> + '_ {
        self.0.iter().map(|&(minutes, u)| ((minutes * 60_000.0).round() as i64, u))
    }

    /// What is wrong with the curve, said so that the submitter can fix it: no points,
    /// too many, a number that is not finite or out of range, times that go back, or
    /// no deadline to measure them from (`has_deadline`).
    pub fn problem(&self, has_deadline: bool) -> Option<String> {
        let points = &self.0;
        if points.is_empty() {
            return Some("needs at least one [minutes after the deadline, utility] point".into());
        }
        if points.len() > MAX_UTILITY_POINTS {
            return Some(format!("at most {MAX_UTILITY_POINTS} points, got {}", points.len()));
        }
        for (i, &(minutes, utility)) in points.iter().enumerate() {
            if !(minutes.is_finite() && minutes.abs() <= MAX_UTILITY_MINUTES) {
                return Some(format!(
                    "point {i}: minutes after the deadline must be a number within ±{MAX_UTILITY_MINUTES:e}, got {minutes}"
                ));
            }
            if !(utility.is_finite() && utility.abs() <= MAX_UTILITY_VALUE) {
                return Some(format!(
                    "point {i}: utility must be a number within ±{MAX_UTILITY_VALUE:e}, got {utility}"
                ));
            }
        }
        if let Some(i) = points.windows(2).position(|w| w[1].0 < w[0].0) {
            return Some(format!(
                "point {}: times must not go back ({} after {}); sort the points by minutes after the deadline",
                i + 1,
                points[i + 1].0,
                points[i].0
            ));
        }
        if !has_deadline {
            return Some(
                "is measured from the deadline, and the job has none: add a deadline (e.g. deadline = \"+30m\") or remove utility"
                    .into(),
            );
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    const ONE_STAGE: &str = "[[stage]]\nname = \"a\"\nslot = \"map\"\ntasks = 1\ncommand = \"true\"\n";

    /// A spec named `j` with the top-level lines `head`.
    fn spec(head: &str) -> Result<JobSpec, String> {
        JobSpec::from_toml(&format!("name = \"j\"\n{head}\n{ONE_STAGE}")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_spec_carries_its_own_curve_in_minutes_after_the_deadline() {
        let job = spec("deadline = \"+30m\"\nutility = [[0, 1], [10, -1], [1000, -1000.5]]").unwrap();
        let curve = job.utility.clone().expect("the curve");
        assert_eq!(curve, UtilityCurve(vec![(0.0, 1.0), (10.0, -1.0), (1000.0, -1000.5)]));
        assert_eq!(spec("deadline = \"+30m\"").unwrap().utility, None);
        // The wire's postcard gives it back (the store's JSON: the master's store tests).
        assert_eq!(postcard::from_bytes::<JobSpec>(&postcard::to_allocvec(&job).unwrap()).unwrap(), job);
    }

    #[test]
    fn a_curve_that_cannot_work_is_refused_saying_why() {
        let refused = |head: &str| spec(&format!("deadline = \"+30m\"\n{head}")).unwrap_err();
        assert_eq!(
            refused("utility = []"),
            "utility: needs at least one [minutes after the deadline, utility] point"
        );
        let many = vec!["[0, 1]"; MAX_UTILITY_POINTS + 1].join(", ");
        assert_eq!(refused(&format!("utility = [{many}]")), "utility: at most 64 points, got 65");
        assert_eq!(
            refused("utility = [[0, 1], [nan, 0]]"),
            "utility: point 1: minutes after the deadline must be a number within ±1e7, got NaN"
        );
        assert_eq!(
            refused("utility = [[0, inf]]"),
            "utility: point 0: utility must be a number within ±1e12, got inf"
        );
        assert!(refused("utility = [[1e8, 1]]").starts_with("utility: point 0: minutes"));
        assert_eq!(
            refused("utility = [[10, 1], [5, 0]]"),
            "utility: point 1: times must not go back (5 after 10); sort the points by minutes after the deadline"
        );
        let undated = spec("utility = [[0, 1]]").unwrap_err();
        assert!(
            undated.starts_with("utility: is measured from the deadline, and the job has none"),
            "{undated}"
        );
        let three = refused("utility = [[0, 1, 2]]");
        assert!(
            three.starts_with("invalid job spec")
                && three.contains("[minutes after the deadline, utility] pair"),
            "{three}"
        );
        let one = refused("utility = [[0]]");
        assert!(one.starts_with("invalid job spec") && one.contains("invalid length 1"), "{one}");
        assert!(spec("utility = [[\"0\", 1]]").unwrap_err().starts_with("invalid job spec"));
    }

    #[test]
    fn points_convert_to_milliseconds_after_the_deadline() {
        let curve = UtilityCurve(vec![(-0.5, 2.0), (0.0, 1.0), (10.0, -1.0)]);
        assert_eq!(curve.points_ms().collect::<Vec<_>>(), vec![(-30_000, 2.0), (0, 1.0), (600_000, -1.0)]);
        assert_eq!(curve.problem(true), None);
    }

    #[test]
    fn equality_is_bit_for_bit() {
        let a = UtilityCurve(vec![(0.0, 1.0)]);
        assert_eq!(a, UtilityCurve(vec![(0.0, 1.0)]));
        assert_ne!(a, UtilityCurve(vec![(0.0, 1.5)]));
        assert_ne!(a, UtilityCurve(vec![(0.0, 1.0), (1.0, 0.0)]));
        let nan = UtilityCurve(vec![(0.0, f64::NAN)]);
        assert_eq!(nan, nan.clone(), "reflexive, as Eq requires");
    }

    #[test]
    fn a_step_is_two_points_at_one_time() {
        assert_eq!(UtilityCurve(vec![(0.0, 1.0), (0.0, 0.0)]).problem(true), None);
    }
}
