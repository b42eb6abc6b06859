//! Small, seeded, dependency-free randomness for the generators and pi: SplitMix64 and a
//! stateless 64-bit mixer. Same seed, same bytes, on every platform.

/// Mixes a 64-bit value into a well-distributed one (the SplitMix64 finaliser).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64: a fast generator with a 64-bit state, good enough for synthetic data.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl SplitMix64 {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// A generator for the pair (`seed`, `stream`), e.g. one stream per generator task.
    pub fn for_stream(seed: u64, stream: u64) -> SplitMix64 {
        SplitMix64::new(mix64(seed ^ mix64(stream.wrapping_add(GOLDEN_GAMMA))))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// A uniform value in `0..n` (`n > 0`), by multiply-high (Lemire, without rejection;
    /// the bias is below 2^-32 for the small ranges used here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform value in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// A uniform `f64` in `[0, 1)`.
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = SplitMix64::for_stream(7, 1);
                move |_| r.next_u64()
            })
            .collect();
        let mut b = SplitMix64::for_stream(7, 1);
        assert!(a.iter().all(|&x| x == b.next_u64()));
        assert_ne!(SplitMix64::for_stream(7, 2).next_u64(), a[0]);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.below(10) as usize;
            seen[v] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert!((0..1000).all(|_| (3..=5).contains(&r.between(3, 5))));
        assert!((0..1000).all(|_| (0.0..1.0).contains(&r.unit_f64())));
    }
}
