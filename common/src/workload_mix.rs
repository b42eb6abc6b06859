//! MRM's Table 1 job mix and the "job alone on the cluster" estimate, for the two tools
//! that generate MapReduce workloads: the simulator's trace generator (`slotmarket-sim gen
//! mrm`) and the live workload planner (`slotmarket workload run`). One table and one
//! estimate, so a simulated and a live run of the mix draw the same shapes and set their
//! deadlines alike. A module of its own rather than part of `metrics`: these describe the
//! work to submit, not what a run measured. Pure.

/// One size bin of MRM Table 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrmBin {
    /// Share of jobs in the bin, in percent (the bins add up to 100).
    pub percent: u32,
    /// Map tasks, drawn uniformly from `maps[0]..=maps[1]`.
    pub maps: [u32; 2],
    /// Reduce tasks (0: a map-only job).
    pub reduces: u32,
}

/// MRM Table 1 (§6): the share of jobs and the task counts of each of the nine size bins,
/// on the paper's 40-node cluster (80 map slots).
pub const MRM_TABLE_1: [MrmBin; 9] = [
    MrmBin { percent: 38, maps: [1, 1], reduces: 0 },
    MrmBin { percent: 16, maps: [2, 6], reduces: 0 },
    MrmBin { percent: 14, maps: [7, 30], reduces: 0 },
    MrmBin { percent: 8, maps: [31, 60], reduces: 6 },
    MrmBin { percent: 6, maps: [61, 120], reduces: 12 },
    MrmBin { percent: 6, maps: [121, 180], reduces: 15 },
    MrmBin { percent: 4, maps: [181, 240], reduces: 18 },
    MrmBin { percent: 4, maps: [241, 360], reduces: 24 },
    MrmBin { percent: 4, maps: [361, 480], reduces: 30 },
];

/// How long a job takes with the cluster to itself, in seconds: its stages one after
/// another (they are chained by barriers), each in waves of as many tasks as there are
/// slots of its kind, a wave as long as one task. `stages` gives each stage's (tasks,
/// slots of its kind, seconds per task); no slots counts as one.
pub fn alone_s(stages: impl IntoIterator<Item = (u32, u32, f64)>) -> f64 {
    stages.into_iter().map(|(tasks, slots, task_s)| f64::from(tasks.div_ceil(slots.max(1))) * task_s).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_1_covers_every_job_once() {
        assert_eq!(MRM_TABLE_1.iter().map(|b| b.percent).sum::<u32>(), 100);
        assert!(MRM_TABLE_1.iter().all(|b| b.maps[0] <= b.maps[1]));
        assert!(MRM_TABLE_1.windows(2).all(|w| w[0].maps[1] < w[1].maps[0]));
    }

    #[test]
    fn a_job_alone_runs_its_stages_in_waves() {
        // 7 tasks on 6 slots: 2 waves; 6 on 6: 1; 4 on 3: 2; no slots counts as one.
        assert_eq!(alone_s([(7, 6, 1.0), (6, 6, 2.0), (4, 3, 3.0)]), 2.0 + 2.0 + 6.0);
        assert_eq!(alone_s([(3, 0, 1.5)]), 4.5);
        assert_eq!(alone_s([]), 0.0);
    }
}
