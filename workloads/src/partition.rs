//! Which reducer a map output goes to: a stable FNV-1a hash mod R for counted keys
//! (wordcount, grep), and key ranges cut at deterministic samples of the input for sort.

use anyhow::Result;

use crate::split::Input;

const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

/// FNV-1a, 64-bit: stable across runs, processes and platforms (unlike std's hasher).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = FNV_OFFSET;
    for &b in bytes {
        hash = fnv1a_step(hash, b);
    }
    hash
}

/// The FNV-1a starting value, for hashing a key while scanning it byte by byte.
pub const fn fnv1a_start() -> u64 {
    FNV_OFFSET
}

/// Folds one byte into an FNV-1a hash.
#[inline(always)]
pub const fn fnv1a_step(hash: u64, byte: u8) -> u64 {
    (hash ^ byte as u64).wrapping_mul(FNV_PRIME)
}

/// The reducer for a key with FNV-1a hash `hash`, out of `reducers` (`> 0`).
#[inline]
pub fn hash_partition(hash: u64, reducers: u32) -> u32 {
    (hash % u64::from(reducers)) as u32
}

/// How many bytes of a line a sample keeps as a cut point. TeraSort keys are 10 bytes;
/// longer lines are still ordered correctly, a cut just compares on this prefix.
pub const SAMPLE_KEY_BYTES: usize = 16;
/// Lines sampled to place the cuts. A quantile of n samples is off by about
/// `sqrt(p(1-p)/n)` of the data, here under 0.5 %; each sample costs one small `pread`,
/// so 10 000 of them take milliseconds.
const SAMPLES: usize = 10_000;

/// Range partitioning for sort: reducer `r` gets the lines `cut[r-1] <= line < cut[r]`, so
/// the reducers' sorted outputs concatenate into one sorted whole.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RangePartitioner {
    cuts: Vec<Vec<u8>>,
}

impl RangePartitioner {
    /// A partitioner with the given cut points (sorted ascending).
    pub fn from_cuts(mut cuts: Vec<Vec<u8>>) -> RangePartitioner {
        cuts.sort();
        RangePartitioner { cuts }
    }

    /// Samples the line prefixes at evenly spaced offsets of `input` and cuts them into
    /// `reducers` equal ranges. Deterministic in the input alone, so every map task of a
    /// job computes the same cut points without talking to the others.
    pub fn sample(input: &Input, reducers: u32) -> Result<RangePartitioner> {
        let reducers = reducers.max(1) as usize;
        if reducers == 1 || input.total_bytes() == 0 {
            return Ok(RangePartitioner { cuts: Vec::new() });
        }
        let mut samples = input.sample_line_prefixes(SAMPLES, SAMPLE_KEY_BYTES)?;
        samples.sort_unstable();
        let cuts = if samples.is_empty() {
            Vec::new()
        } else {
            (1..reducers).map(|j| samples[j * samples.len() / reducers].clone()).collect()
        };
        Ok(RangePartitioner { cuts })
    }

    /// The cut points, ascending.
    pub fn cuts(&self) -> &[Vec<u8>] {
        &self.cuts
    }

    /// The reducer for `line`: the number of cut points at or below it.
    #[inline]
    pub fn partition(&self, line: &[u8]) -> u32 {
        self.cuts.partition_point(|cut| cut.as_slice() <= line) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xCBF2_9CE4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xAF63_DC4C_8601_EC8C);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_F739_67E8);
    }

    #[test]
    fn hash_partition_is_in_range() {
        assert!((0..1000u64).all(|k| hash_partition(fnv1a(&k.to_le_bytes()), 7) < 7));
    }

    #[test]
    fn ranges_are_monotonic_in_the_line() {
        let p = RangePartitioner::from_cuts(vec![b"g".to_vec(), b"m".to_vec(), b"mm".to_vec()]);
        assert_eq!(p.partition(b""), 0);
        assert_eq!(p.partition(b"fzz"), 0);
        assert_eq!(p.partition(b"g"), 1);
        assert_eq!(p.partition(b"gzz"), 1);
        assert_eq!(p.partition(b"m"), 2);
        assert_eq!(p.partition(b"ml"), 2);
        assert_eq!(p.partition(b"mm"), 3);
        assert_eq!(p.partition(b"\xff"), 3);
    }
}
