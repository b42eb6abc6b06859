//! DRESS's reserve ratio δ (paper §IV-C, Algorithm 3): every interval, from the slots
//! each class has free now (A_c1, A_c2), the releases predicted for it over the next
//! interval (F1, F2) and its pending demand (P1, P2, one r_i per pending job), δ gives
//! SD's surplus back to LD, takes LD's surplus for SD, or, when both are short, serves
//! each class's smallest demands first and moves LD's leftover to SD jobs that fit it.
//!
//! Where the pseudo-code slips, the evident intent is implemented:
//! - line 14 adds F1 to both classes: LD's supply is A_c2 + F2;
//! - line 20 subtracts r_2 for every LD job: it subtracts that job's r_j;
//! - lines 15 and 18 start at i = 1 with `<`, skipping a job: every job is tried;
//! - lines 16 and 19 test `A − r > 0`: a demand equal to the supply is served (`>=`);
//! - lines 21–24 grow δ by all of r_i though SD's own leftover A_c1 may cover part of
//!   it: δ grows by the part taken from LD, which is what moves between the classes.
//!
//! δ is kept within [0, 1]: line 8 can take more than δ away when SD's supply is large.

/// What Algorithm 3 reads in one interval; slot counts over every kind.
#[derive(Clone, PartialEq, Debug, Default)]
pub(crate) struct RatioInputs {
    /// TotR: slots offered.
    pub(crate) total: f64,
    /// A_c1: slots reserved for SD and idle now.
    pub(crate) free_sd: f64,
    /// A_c2: the other free slots.
    pub(crate) free_ld: f64,
    /// F1(t+1): SD containers predicted to be released over the next interval.
    pub(crate) release_sd: f64,
    /// F2(t+1): LD containers predicted to be released over the next interval.
    pub(crate) release_ld: f64,
    /// r_i of each SD job with pending tasks.
    pub(crate) demands_sd: Vec<f64>,
    /// r_j of each LD job with pending tasks.
    pub(crate) demands_ld: Vec<f64>,
}

/// The next δ from the current one (Algorithm 3).
pub(crate) fn next_ratio(delta: f64, inputs: &RatioInputs) -> f64 {
    let RatioInputs { total, free_sd, free_ld, release_sd, release_ld, demands_sd, demands_ld } = inputs;
    if *total <= 0.0 {
        return delta;
    }
    let pending_sd: f64 = demands_sd.iter().sum();
    let pending_ld: f64 = demands_ld.iter().sum();
    let supply_sd = free_sd + release_sd;
    let supply_ld = free_ld + release_ld;
    let next = if supply_sd >= pending_sd {
        delta - (supply_sd - pending_sd) / total
    } else if supply_ld >= pending_ld {
        delta + (supply_ld - pending_ld) / total
    } else {
        delta + leftover_to_sd(supply_sd, supply_ld, demands_sd, demands_ld) / total
    };
    next.clamp(0.0, 1.0)
}

/// Lines 13–24: each class serves its smallest demands while they fit; SD jobs left
/// unserved then take LD's leftover (after SD's own) while they fit. Returns the slots
/// that move from LD to SD.
fn leftover_to_sd(mut left_sd: f64, mut left_ld: f64, demands_sd: &[f64], demands_ld: &[f64]) -> f64 {
    let mut sd = demands_sd.to_vec();
    let mut ld = demands_ld.to_vec();
    sd.sort_by(f64::total_cmp);
    ld.sort_by(f64::total_cmp);
    let mut unserved = Vec::new();
    for r in sd {
        if left_sd - r >= 0.0 {
            left_sd -= r;
        } else {
            unserved.push(r);
        }
    }
    for r in ld {
        if left_ld - r >= 0.0 {
            left_ld -= r;
        }
    }
    let mut moved = 0.0;
    for r in unserved {
        if r <= left_sd + left_ld {
            let from_ld = (r - left_sd).max(0.0);
            left_sd = (left_sd - r).max(0.0);
            left_ld -= from_ld;
            moved += from_ld;
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(free_sd: f64, free_ld: f64, release: (f64, f64), sd: &[f64], ld: &[f64]) -> RatioInputs {
        RatioInputs {
            total: 100.0,
            free_sd,
            free_ld,
            release_sd: release.0,
            release_ld: release.1,
            demands_sd: sd.to_vec(),
            demands_ld: ld.to_vec(),
        }
    }

    #[test]
    fn delta_falls_by_the_surplus_when_sd_demand_is_covered() {
        // SD has 10 idle reserved slots and 2 releases coming for 4 pending: 8 go back.
        let next = next_ratio(0.10, &inputs(10.0, 0.0, (2.0, 0.0), &[4.0], &[50.0]));
        assert!((next - 0.02).abs() < 1e-9, "{next}");
        // With no SD demand at all the whole idle reservation goes back.
        assert_eq!(next_ratio(0.10, &inputs(10.0, 0.0, (0.0, 0.0), &[], &[50.0])), 0.0);
    }

    #[test]
    fn delta_rises_by_ld_surplus_when_sd_demand_exceeds_its_supply() {
        // SD: 2 + 1 for 9 pending; LD: 5 free + 10 releasing for 12 pending: 3 spare.
        let next = next_ratio(0.10, &inputs(2.0, 5.0, (1.0, 10.0), &[4.0, 5.0], &[12.0]));
        assert!((next - 0.13).abs() < 1e-9, "{next}");
    }

    #[test]
    fn when_both_are_short_ld_leftover_moves_to_sd_jobs_that_fit() {
        // SD supply 3 serves the 3-slot job, not the 4-slot one; LD supply 10 cannot
        // serve its 40-slot job, so the 4-slot SD job takes 4 of LD's 10.
        let next = next_ratio(0.10, &inputs(3.0, 6.0, (0.0, 4.0), &[3.0, 4.0], &[40.0]));
        assert!((next - 0.14).abs() < 1e-9, "{next}");
        // LD serves what fits first: its 8-slot job leaves 2, too few for the SD job.
        let next = next_ratio(0.10, &inputs(3.0, 6.0, (0.0, 4.0), &[3.0, 4.0], &[8.0, 40.0]));
        assert!((next - 0.10).abs() < 1e-9, "{next}");
    }

    #[test]
    fn delta_stays_a_fraction() {
        assert_eq!(next_ratio(0.05, &inputs(60.0, 0.0, (0.0, 0.0), &[], &[])), 0.0);
        assert_eq!(next_ratio(0.95, &inputs(0.0, 90.0, (0.0, 0.0), &[50.0], &[])), 1.0);
    }
}
