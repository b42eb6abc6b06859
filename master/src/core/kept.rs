//! MRM's admission schedule kept between quotes: the admitted deadline jobs in EDF order
//! with their remaining demand and PI-upper work. A quote against 10,000 admitted jobs
//! spent most of its time rebuilding this from every job (a walk over the job table and
//! each job's stages, then a sort); now only the jobs that changed since the last quote
//! (admitted, progressed, re-queued, deadline moved, ended) are taken out and put back in
//! place, and a quote lays its prefix sums over the flat arrays kept here.

use std::collections::BTreeMap;

use slotmarket_common::ids::JobId;
use slotmarket_common::time::Timestamp;

use super::admission::Admitted;

/// The admitted jobs by deadline (ties by job id), as [`super::admission::Schedule`]
/// wants them, with each job's PI-upper remaining work beside it.
#[derive(Clone, Debug, Default)]
pub(super) struct KeptSchedule {
    /// The slot counts, map then reduce, every demand here was computed for.
    pub(super) slots: [u32; 2],
    /// Admitted jobs in EDF order.
    jobs: Vec<Admitted>,
    /// `works[k]`: the PI-upper remaining work of `jobs[k]`, slot-ms.
    works: Vec<f64>,
    /// Each kept job's deadline, to find its place in `jobs`.
    deadlines: BTreeMap<JobId, Timestamp>,
}

impl KeptSchedule {
    /// The kept jobs in EDF order.
    pub(super) fn jobs(&self) -> &[Admitted] {
        &self.jobs
    }

    /// Their works, in the same order.
    pub(super) fn works(&self) -> &[f64] {
        &self.works
    }

    /// Whether `job` is kept.
    pub(super) fn contains(&self, job: JobId) -> bool {
        self.deadlines.contains_key(&job)
    }

    /// Where a job due at `deadline` goes (or is) in EDF order.
    fn position(&self, deadline: Timestamp, job: JobId) -> usize {
        self.jobs.partition_point(|a| (a.deadline, a.job) < (deadline, job))
    }

    /// Takes `job` out, if it is kept.
    pub(super) fn remove(&mut self, job: JobId) {
        let Some(deadline) = self.deadlines.remove(&job) else { return };
        let at = self.position(deadline, job);
        if self.jobs.get(at).is_some_and(|a| a.job == job) {
            self.jobs.remove(at);
            self.works.remove(at);
        }
    }

    /// Puts `admitted` in its place (replacing what was kept for the same job).
    pub(super) fn insert(&mut self, admitted: Admitted, work: f64) {
        self.remove(admitted.job);
        let at = self.position(admitted.deadline, admitted.job);
        self.jobs.insert(at, admitted);
        self.works.insert(at, work);
        self.deadlines.insert(admitted.job, admitted.deadline);
    }

    /// Builds the whole schedule at once from jobs in any order.
    pub(super) fn from_unsorted(slots: [u32; 2], mut all: Vec<(Admitted, f64)>) -> KeptSchedule {
        all.sort_unstable_by_key(|(a, _)| (a.deadline, a.job));
        let deadlines = all.iter().map(|(a, _)| (a.job, a.deadline)).collect();
        let works = all.iter().map(|(_, w)| *w).collect();
        let jobs = all.into_iter().map(|(a, _)| a).collect();
        KeptSchedule { slots, jobs, works, deadlines }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::admission::Demand;

    fn admitted(job: u64, deadline: u64, fluid: f64) -> Admitted {
        Admitted {
            job: JobId(job),
            deadline: Timestamp(deadline),
            demand: Demand { fluid_ms: fluid, tail_ms: 0.0 },
        }
    }

    #[test]
    fn inserts_replacements_and_removals_keep_edf_order_with_works_beside() {
        let mut kept = KeptSchedule::from_unsorted([4, 2], Vec::new());
        kept.insert(admitted(3, 500, 3.0), 30.0);
        kept.insert(admitted(1, 900, 1.0), 10.0);
        kept.insert(admitted(2, 500, 2.0), 20.0);
        // Job 3 progresses and its deadline moves before every other.
        kept.insert(admitted(3, 100, 1.5), 15.0);
        let order: Vec<u64> = kept.jobs().iter().map(|a| a.job.0).collect();
        assert_eq!(order, [3, 2, 1]);
        assert_eq!(kept.works(), [15.0, 20.0, 10.0]);
        kept.remove(JobId(2));
        kept.remove(JobId(7));
        assert!(!kept.contains(JobId(2)) && kept.contains(JobId(1)));
        let order: Vec<u64> = kept.jobs().iter().map(|a| a.job.0).collect();
        assert_eq!(order, [3, 1]);
        assert_eq!(kept.works(), [15.0, 10.0]);
    }

    #[test]
    fn equal_deadlines_order_by_job_like_a_fresh_build() {
        let all =
            vec![(admitted(5, 100, 1.0), 1.0), (admitted(2, 100, 2.0), 2.0), (admitted(9, 50, 3.0), 3.0)];
        let built = KeptSchedule::from_unsorted([1, 1], all.clone());
        let mut grown = KeptSchedule::from_unsorted([1, 1], Vec::new());
        for (a, w) in all.into_iter().rev() {
            grown.insert(a, w);
        }
        assert_eq!(built.jobs(), grown.jobs());
        assert_eq!(built.works(), grown.works());
        let order: Vec<u64> = built.jobs().iter().map(|a| a.job.0).collect();
        assert_eq!(order, [9, 2, 5]);
    }
}
