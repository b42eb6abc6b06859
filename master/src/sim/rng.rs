//! Seeded randomness for the simulator and the trace generators, written out rather than
//! taken from `rand`: `rand` and `rand_distr` may change their value streams between
//! versions, and golden summaries and published traces depend on exact streams. Two
//! well-known generators suffice: SplitMix64 (the shared [`slotmarket_common::rng`], also
//! a hash, for per-task draws that do not depend on scheduling order) and xoshiro256** for
//! sequential streams.

use slotmarket_common::rng::SplitMix64;
pub use slotmarket_common::rng::unit;

/// One SplitMix64 step: the first output of the stream seeded with `z`, a bijective mix
/// of 64 bits.
pub fn mix(z: u64) -> u64 {
    SplitMix64::new(z).next_u64()
}

/// A hash of several words, for keyed draws: the same key always gives the same value.
pub fn hash(parts: &[u64]) -> u64 {
    parts.iter().fold(0x5107_a3e7_ab1e_5eedu64, |h, &p| mix(h ^ mix(p)))
}

/// A standard normal value from two independent bit strings (Box–Muller).
pub fn normal(a: u64, b: u64) -> f64 {
    // 1 - u is in (0, 1], so the logarithm is finite.
    let u = 1.0 - unit(a);
    let v = unit(b);
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// xoshiro256** (Blackman, Vigna 2018): a fast sequential generator, seeded through
/// SplitMix64 so that nearby seeds give unrelated streams.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut seeder = SplitMix64::new(seed);
        Rng { s: [seeder.next_u64(), seeder.next_u64(), seeder.next_u64(), seeder.next_u64()] }
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// Uniform integer in `lo..=hi` (`lo` if the range is empty).
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        if hi <= lo {
            return lo;
        }
        let span = u64::from(hi - lo) + 1;
        // Multiply-shift: unbiased enough for spans this small relative to 2^64.
        lo + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u32
    }

    /// Exponential with the given mean (Poisson inter-arrival times).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_repeat_for_a_seed_and_differ_between_seeds() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(7);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        assert_ne!(Rng::new(8).next_u64(), a[0]);
    }

    #[test]
    fn mix_is_the_reference_splitmix_step() {
        // The reference SplitMix64 seeded with 0 starts with these two outputs.
        assert_eq!(mix(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(mix(0x9e37_79b9_7f4a_7c15), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn xoshiro_is_seeded_with_the_first_four_splitmix_outputs() {
        // The first output of xoshiro256** is rotl(s1 * 5, 7) * 9.
        let s1 = mix(0x9e37_79b9_7f4a_7c15_u64.wrapping_add(7));
        assert_eq!(Rng::new(7).next_u64(), s1.wrapping_mul(5).rotate_left(7).wrapping_mul(9));
    }

    #[test]
    fn draws_have_the_right_ranges_and_means() {
        let mut r = Rng::new(1);
        let n = 20_000;
        let mut sum_exp = 0.0;
        let mut sum_norm = 0.0;
        for _ in 0..n {
            let k = r.range(3, 5);
            assert!((3..=5).contains(&k));
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            sum_exp += r.exponential(10.0);
            sum_norm += normal(r.next_u64(), r.next_u64());
        }
        assert!((sum_exp / n as f64 - 10.0).abs() < 0.5, "{}", sum_exp / n as f64);
        assert!((sum_norm / n as f64).abs() < 0.05);
        assert_eq!(hash(&[1, 2, 3]), hash(&[1, 2, 3]));
        assert_ne!(hash(&[1, 2, 3]), hash(&[1, 3, 2]));
    }
}
