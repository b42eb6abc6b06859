//! Pi, as Hadoop's `QuasiMonteCarlo` example: map task `i` takes points `i*N .. (i+1)*N`
//! of the 2-D Halton sequence (bases 2 and 3), counts those inside the circle inscribed in
//! the unit square, and writes `inside\ttotal` to `map-{i}/part-0`; the reduce sums them
//! and estimates pi as `4 * inside / total`.
//!
//! The seed rotates the whole sequence by a fixed random shift (Cranley–Patterson), which
//! keeps its low discrepancy, so the estimate error shrinks like `(log N)^2 / N` rather
//! than Monte Carlo's `1/sqrt(N)`. The union of maps with equal `N` is one contiguous
//! stretch of the sequence, so `k` maps of `N` points count exactly what one map of `k*N`
//! points counts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use slotmarket_common::rng::SplitMix64;

use crate::layout::{map_part, map_parts_for, out_part};
use crate::output::AtomicFile;

/// Base-3 digits kept: 3^40 < 2^64, so the reversed digits fit a `u64` exactly.
const BASE3_DIGITS: usize = 40;

/// The base-3 radical inverse of consecutive indices, kept as an exact integer over 3^40
/// and advanced digit by digit (amortised O(1) per point, no division).
struct RadicalInverse3 {
    digits: [u8; BASE3_DIGITS],
    /// `sum(digits[k] * 3^(39-k))`: the radical inverse times 3^40.
    reversed: u64,
}

/// `3^(39-k)` for each digit position `k`.
const POWERS3: [u64; BASE3_DIGITS] = {
    let mut powers = [0u64; BASE3_DIGITS];
    let mut k = BASE3_DIGITS;
    let mut p = 1u64;
    while k > 0 {
        k -= 1;
        powers[k] = p;
        p = p.wrapping_mul(3);
    }
    powers
};

/// 3^40 as a float, the denominator of the radical inverse.
const SCALE3: f64 = 12_157_665_459_056_928_801.0;

impl RadicalInverse3 {
    fn starting_at(mut index: u64) -> RadicalInverse3 {
        let mut digits = [0u8; BASE3_DIGITS];
        let mut reversed = 0u64;
        for (k, digit) in digits.iter_mut().enumerate() {
            *digit = (index % 3) as u8;
            reversed += u64::from(*digit) * POWERS3[k];
            index /= 3;
        }
        RadicalInverse3 { digits, reversed }
    }

    fn value(&self) -> f64 {
        self.reversed as f64 / SCALE3
    }

    fn advance(&mut self) {
        for (digit, power) in self.digits.iter_mut().zip(POWERS3) {
            if *digit < 2 {
                *digit += 1;
                self.reversed += power;
                return;
            }
            *digit = 0;
            self.reversed -= 2 * power;
        }
    }
}

/// The base-2 radical inverse of `index`: its bits mirrored about the binary point.
fn radical_inverse2(index: u64) -> f64 {
    (index.reverse_bits() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Counts the points `first .. first + samples` of the seed's rotated Halton sequence that
/// fall inside the circle of radius 1/2 centred in the unit square.
pub fn count_inside(first: u64, samples: u64, seed: u64) -> u64 {
    let mut rng = SplitMix64::for_stream(seed, 0x7069);
    let (shift_x, shift_y) = (rng.unit(), rng.unit());
    let mut y_inverse = RadicalInverse3::starting_at(first);
    let mut inside = 0u64;
    // Both terms are in [0, 1), so their sum wraps into [0, 1) with one subtraction
    // (cheaper than `fract`, which is a libm call on baseline x86-64).
    let wrap = |v: f64| if v >= 1.0 { v - 1.0 } else { v };
    for index in first..first.saturating_add(samples) {
        let x = wrap(radical_inverse2(index) + shift_x) - 0.5;
        let y = wrap(y_inverse.value() + shift_y) - 0.5;
        inside += u64::from(x * x + y * y <= 0.25);
        y_inverse.advance();
    }
    inside
}

/// What a pi map task counted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PiCounts {
    /// Points inside the circle.
    pub inside: u64,
    /// Points drawn.
    pub total: u64,
}

impl PiCounts {
    /// `4 * inside / total`, or NaN with no points.
    pub fn estimate(&self) -> f64 {
        4.0 * self.inside as f64 / self.total as f64
    }
}

/// Runs pi map task `task`: `samples` points, written as `inside\ttotal` to
/// `map-{task}/part-0`.
pub fn map(job_dir: &Path, task: u32, samples: u64, seed: u64) -> Result<PiCounts> {
    let first = u64::from(task).checked_mul(samples).context("--task times --samples overflows")?;
    let counts = PiCounts { inside: count_inside(first, samples, seed), total: samples };
    let mut out = AtomicFile::create(&map_part(job_dir, task, 0))?;
    writeln!(out, "{}\t{}", counts.inside, counts.total)?;
    out.commit()?;
    Ok(counts)
}

/// What the pi reduce found.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct PiResult {
    /// Summed counts.
    pub counts: PiCounts,
    /// Map outputs combined.
    pub maps: usize,
    /// The estimate of pi.
    pub estimate: f64,
}

/// Runs the pi reduce: sums `map-{i}/part-0` of every map `i < maps` and writes the
/// estimate to `out/part-0`.
pub fn reduce(job_dir: &Path, maps: u32) -> Result<PiResult> {
    let parts = map_parts_for(job_dir, 0, maps)?;
    let mut counts = PiCounts { inside: 0, total: 0 };
    for part in &parts {
        let text =
            std::fs::read_to_string(part).with_context(|| format!("cannot read {}", part.display()))?;
        let parsed = text
            .trim_end()
            .split_once('\t')
            .and_then(|(i, t)| Some((i.parse::<u64>().ok()?, t.parse::<u64>().ok()?)));
        let Some((inside, total)) = parsed else {
            bail!("{}: expected `inside<TAB>total`, found {:?}", part.display(), text);
        };
        if inside > total {
            bail!("{}: {inside} points inside of only {total}", part.display());
        }
        counts.inside += inside;
        counts.total += total;
    }
    if counts.total == 0 {
        bail!("the maps drew no points; give --samples above 0");
    }
    let result = PiResult { counts, maps: parts.len(), estimate: counts.estimate() };
    let mut out = AtomicFile::create(&out_part(job_dir, 0))?;
    writeln!(
        out,
        "pi\t{:.15}\ninside\t{}\ntotal\t{}\nmaps\t{}",
        result.estimate, counts.inside, counts.total, result.maps
    )?;
    out.commit()?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_incremental_radical_inverse_matches_the_direct_one() {
        let direct = |mut i: u64| {
            let (mut v, mut f) = (0.0, 1.0 / 3.0);
            while i > 0 {
                v += (i % 3) as f64 * f;
                i /= 3;
                f /= 3.0;
            }
            v
        };
        let mut r = RadicalInverse3::starting_at(1000);
        for i in 1000..2000 {
            assert!((r.value() - direct(i)).abs() < 1e-12, "index {i}");
            r.advance();
        }
        assert_eq!(radical_inverse2(1), 0.5);
        assert_eq!(radical_inverse2(6), 0.375);
    }

    #[test]
    fn split_maps_count_what_one_map_counts() {
        let whole = count_inside(0, 40_000, 3);
        let parts: u64 = (0..4).map(|i| count_inside(i * 10_000, 10_000, 3)).sum();
        assert_eq!(whole, parts);
    }
}
