//! Seeded randomness for workload plans, written out (SplitMix64, Steele, Lea, Flood 2014)
//! rather than taken from a crate, so a plan depends on its seed alone and never on a
//! dependency's version. Every job draws each quantity from its own stream keyed by
//! (seed, job, [`Draw`]): changing one setting (say the class split) leaves the jobs'
//! other draws (bins, sizes, arrivals) as they were.

/// The SplitMix64 increment (2^64 / golden ratio).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// What a stream is drawn for; part of its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Draw {
    /// The gap before the job's arrival.
    Arrival,
    /// The job's size bin and task counts.
    Size,
    /// The job's service class.
    Class,
    /// The seed its data generator and pi maps get.
    DataSeed,
}

/// SplitMix64's output function: a bijective mix of 64 bits.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A SplitMix64 stream.
#[derive(Clone, Debug)]
pub(crate) struct Stream {
    state: u64,
}

impl Stream {
    /// A stream seeded with `seed` directly.
    pub(crate) fn new(seed: u64) -> Stream {
        Stream { state: seed }
    }

    /// The stream for one job's `draw` under the run's `seed`.
    pub(crate) fn keyed(seed: u64, job: u64, draw: Draw) -> Stream {
        // Mixing each part before combining keeps nearby seeds and job numbers unrelated.
        let key = mix(mix(seed.wrapping_add(GOLDEN)) ^ job.wrapping_mul(GOLDEN)) ^ mix(draw as u64 + 1);
        Stream::new(key)
    }

    /// 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `lo..=hi` (`lo` when the range is empty).
    pub(crate) fn range(&mut self, lo: u32, hi: u32) -> u32 {
        if hi <= lo {
            return lo;
        }
        let span = u64::from(hi - lo) + 1;
        // Multiply-shift maps 64 bits onto the span with a bias below 2^-32 for spans this small.
        lo + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u32
    }

    /// Exponential with mean `mean`: the gaps of a Poisson arrival process.
    pub(crate) fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - u is in (0, 1], so the logarithm is finite.
        -mean * (1.0 - self.unit()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_values() {
        // The reference SplitMix64 seeded with 0 starts with these two outputs.
        let mut stream = Stream::new(0);
        assert_eq!(stream.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(stream.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn keyed_streams_repeat_and_differ_by_every_part_of_the_key() {
        let first = |seed, job, draw| Stream::keyed(seed, job, draw).next_u64();
        assert_eq!(first(1, 2, Draw::Size), first(1, 2, Draw::Size));
        assert_ne!(first(1, 2, Draw::Size), first(2, 2, Draw::Size));
        assert_ne!(first(1, 2, Draw::Size), first(1, 3, Draw::Size));
        assert_ne!(first(1, 2, Draw::Size), first(1, 2, Draw::Class));
    }

    #[test]
    fn draws_have_the_right_ranges_and_means() {
        let mut stream = Stream::new(7);
        let n = 20_000;
        let mut total = 0.0;
        for _ in 0..n {
            assert!((3..=5).contains(&stream.range(3, 5)));
            assert!((0.0..1.0).contains(&stream.unit()));
            total += stream.exponential(10.0);
        }
        assert!((total / f64::from(n) - 10.0).abs() < 0.5, "{}", total / f64::from(n));
        assert_eq!(stream.range(4, 4), 4);
        assert_eq!(stream.range(5, 1), 5);
    }
}
