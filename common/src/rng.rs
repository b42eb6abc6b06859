//! SplitMix64 (Steele, Lea, Flood 2014), the one seeded generator every tool builds its
//! randomness on: the simulator's keyed draws and xoshiro seeding, workload plans, the
//! task programs' data generators and pi. Written out rather than taken from `rand`, whose
//! value streams may change between versions: golden summaries, published traces, plans
//! and generated data depend on exact streams. Pure: no clock, no global state.

/// The SplitMix64 increment, 2^64 divided by the golden ratio.
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: a bijective mix of 64 bits, also a good stateless hash
/// of one word.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform value in [0, 1) from 64 random bits (the top 53).
pub fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A SplitMix64 stream: a 64-bit state advanced by [`GOLDEN_GAMMA`] and mixed.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The stream seeded with `seed` directly (the reference generator's seeding).
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The stream for the pair (`seed`, `stream`), e.g. one per generator task: both
    /// parts are mixed, so nearby seeds and stream numbers give unrelated streams.
    pub fn for_stream(seed: u64, stream: u64) -> SplitMix64 {
        SplitMix64::new(mix64(seed ^ mix64(stream.wrapping_add(GOLDEN_GAMMA))))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// Uniform in `0..n` (`n > 0`) by multiply-shift (Lemire, without rejection: the bias
    /// is below 2^-32 for the small ranges drawn here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`; `lo` when the range holds one value or none, without a draw.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        // `hi - lo + 1` overflows only for the full range, whose draw is the bits themselves.
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(),
        }
    }

    /// [`between`](SplitMix64::between) for `u32` bounds.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        // The result lies in lo..=hi, so it fits.
        self.between(u64::from(lo), u64::from(hi)) as u32
    }

    /// Exponential with mean `mean` (the gaps of a Poisson arrival process).
    pub fn exponential(&mut self, mean: f64) -> f64 {
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
        let mut stream = SplitMix64::new(0);
        assert_eq!(stream.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(stream.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn streams_repeat_for_a_seed_and_differ_between_streams() {
        let first: Vec<u64> = {
            let mut r = SplitMix64::for_stream(7, 1);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let mut again = SplitMix64::for_stream(7, 1);
        assert!(first.iter().all(|&x| x == again.next_u64()));
        assert_ne!(SplitMix64::for_stream(7, 2).next_u64(), first[0]);
        assert_ne!(SplitMix64::for_stream(8, 1).next_u64(), first[0]);
    }

    #[test]
    fn draws_have_the_right_ranges_and_means() {
        let mut r = SplitMix64::new(7);
        let n = 20_000;
        let (mut total, mut seen) = (0.0, [false; 10]);
        for _ in 0..n {
            assert!((3..=5).contains(&r.range(3, 5)));
            assert!((500..=3000).contains(&r.between(500, 3000)));
            assert!((0.0..1.0).contains(&r.unit()));
            seen[r.below(10) as usize] = true;
            total += r.exponential(10.0);
        }
        assert!(seen.iter().all(|&s| s));
        assert!((total / f64::from(n) - 10.0).abs() < 0.5, "{}", total / f64::from(n));
    }

    #[test]
    fn empty_ranges_give_their_low_end_without_a_draw() {
        let (mut a, mut b) = (SplitMix64::new(3), SplitMix64::new(3));
        assert_eq!((a.range(4, 4), a.range(5, 1), a.between(9, 9)), (4, 5, 9));
        assert_eq!(a.next_u64(), b.next_u64());
        assert_eq!(a.between(0, u64::MAX), b.next_u64());
    }
}
