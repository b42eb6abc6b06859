//! The keyed streams a workload plan is drawn from, on the shared SplitMix64
//! ([`slotmarket_common::rng`]), so a plan depends on its seed alone and never on a
//! dependency's version. Every job draws each quantity from its own stream keyed by
//! (seed, job, [`Draw`]): changing one setting (say the class split) leaves the jobs'
//! other draws (bins, sizes, arrivals) as they were.

use slotmarket_common::rng::{GOLDEN_GAMMA, SplitMix64, mix64};

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

/// The stream for one job's `draw` under the run's `seed`.
pub(crate) fn keyed(seed: u64, job: u64, draw: Draw) -> SplitMix64 {
    // Mixing each part before combining keeps nearby seeds and job numbers unrelated.
    let key = mix64(mix64(seed.wrapping_add(GOLDEN_GAMMA)) ^ job.wrapping_mul(GOLDEN_GAMMA))
        ^ mix64(draw as u64 + 1);
    SplitMix64::new(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_streams_repeat_and_differ_by_every_part_of_the_key() {
        let first = |seed, job, draw| keyed(seed, job, draw).next_u64();
        assert_eq!(first(1, 2, Draw::Size), first(1, 2, Draw::Size));
        assert_ne!(first(1, 2, Draw::Size), first(2, 2, Draw::Size));
        assert_ne!(first(1, 2, Draw::Size), first(1, 3, Draw::Size));
        assert_ne!(first(1, 2, Draw::Size), first(1, 2, Draw::Class));
    }
}
