//! Jockey's progress indicators (§4.2, §5.4): a job's progress as a number in [0, 1]
//! from its profile and the fraction `f_s` of each stage's tasks completed. The
//! completion model is indexed by the same indicator, so the builder and the control
//! loop must use one and the same.

use serde::{Deserialize, Serialize};

use super::profile::JobProfile;

/// Which progress indicator to use.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Indicator {
    /// `Σ f_s (Q_s + T_s) / Σ (Q_s + T_s)`: completed work counting its queueing (the
    /// paper's default and best).
    #[default]
    TotalWorkWithQ,
    /// `Σ f_s T_s / Σ T_s`: completed work without queueing.
    TotalWork,
    /// Completed tasks over all tasks.
    VertexFrac,
    /// `1 − S_t / S_0`: the share of the critical path behind the job, with
    /// `S_t = max_{s: f_s<1} (1 − f_s) l_s + L_s`.
    Cp,
    /// `min_{s: f_s<1} t_s^b + f_s (t_s^e − t_s^b)` over the job's length, with the typical
    /// stage times taken from the profile with unlimited slots (the paper's
    /// `minstage-inf`: history keeps no per-stage times).
    MinStage,
}

impl Indicator {
    /// Every indicator, for tables.
    pub const ALL: [Indicator; 5] = [
        Indicator::TotalWorkWithQ,
        Indicator::TotalWork,
        Indicator::VertexFrac,
        Indicator::Cp,
        Indicator::MinStage,
    ];

    /// The name used in settings and tables.
    pub fn name(self) -> &'static str {
        match self {
            Indicator::TotalWorkWithQ => "totalworkwithq",
            Indicator::TotalWork => "totalwork",
            Indicator::VertexFrac => "vertexfrac",
            Indicator::Cp => "cp",
            Indicator::MinStage => "minstage",
        }
    }

    /// Progress in [0, 1] given each stage's completed fraction (`done[s]` in [0, 1],
    /// one per profile stage).
    pub fn progress(self, profile: &JobProfile, done: &[f64]) -> f64 {
        let f = |s: usize| done.get(s).copied().unwrap_or(0.0).clamp(0.0, 1.0);
        let stages = &profile.stages;
        let p = match self {
            Indicator::TotalWorkWithQ => {
                weighted(stages.iter().enumerate().map(|(s, st)| (f(s), st.work_ms() + st.queue_ms)))
            }
            Indicator::TotalWork => weighted(stages.iter().enumerate().map(|(s, st)| (f(s), st.work_ms()))),
            Indicator::VertexFrac => {
                weighted(stages.iter().enumerate().map(|(s, st)| (f(s), f64::from(st.tasks))))
            }
            Indicator::Cp => {
                let after = profile.path_after_ms();
                let path = |s: usize, left: f64| left * stages[s].longest_ms() as f64 + after[s] as f64;
                let total = (0..stages.len()).map(|s| path(s, 1.0)).fold(0.0, f64::max);
                let behind = (0..stages.len())
                    .filter(|&s| f(s) < 1.0)
                    .map(|s| path(s, 1.0 - f(s)))
                    .fold(0.0, f64::max);
                if total > 0.0 { 1.0 - behind / total } else { 1.0 }
            }
            Indicator::MinStage => {
                let times = profile.unconstrained_times();
                let end = times.iter().map(|t| t.1).max().unwrap_or(0) as f64;
                let at = (0..stages.len())
                    .filter(|&s| f(s) < 1.0)
                    .map(|s| times[s].0 as f64 + f(s) * (times[s].1 - times[s].0) as f64)
                    .fold(f64::INFINITY, f64::min);
                if end > 0.0 && at.is_finite() { at / end } else { 1.0 }
            }
        };
        p.clamp(0.0, 1.0)
    }
}

/// `Σ f w / Σ w`; 1 when there is no weight at all.
fn weighted(parts: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (done, total) = parts.fold((0.0, 0.0), |(d, t), (f, w)| (d + f * w, t + w));
    if total > 0.0 { done / total } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::super::profile::tests::{run, spec};
    use super::*;

    /// Two parallel stages feeding a third: a (4 tasks of 1 s), b (1 task of 6 s), c
    /// (2 tasks of 2 s) after both; b's tasks wait 2 s in total.
    fn hand_made() -> JobProfile {
        let spec = spec("dag", &[("a", 4, &[]), ("b", 1, &[]), ("c", 2, &["a", "b"])]);
        let runs = [run(
            1,
            "dag",
            &[("a", &[1_000; 4], &[1; 4]), ("b", &[6_000], &[1]), ("c", &[2_000, 2_000], &[1, 1])],
        )];
        let mut profile = JobProfile::from_history(&spec, &runs).unwrap();
        profile.stages[1].queue_ms = 2_000.0;
        profile
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn work_indicators_weigh_stages_by_their_work() {
        let p = hand_made();
        // a done, b not started: 4 of 14 s of work, 4 of 16 s with b's queueing.
        let done = [1.0, 0.0, 0.0];
        close(Indicator::TotalWork.progress(&p, &done), 4.0 / 14.0);
        close(Indicator::TotalWorkWithQ.progress(&p, &done), 4.0 / 16.0);
        close(Indicator::VertexFrac.progress(&p, &done), 4.0 / 7.0);
        close(Indicator::TotalWork.progress(&p, &[1.0, 1.0, 1.0]), 1.0);
        close(Indicator::TotalWork.progress(&p, &[0.0; 3]), 0.0);
    }

    #[test]
    fn cp_and_minstage_follow_the_stage_furthest_behind() {
        let p = hand_made();
        // Critical path b (6 s) then c (2 s) = 8 s. With a done and b untouched the
        // path behind is still 8 s: no progress, although 4 tasks are done.
        close(Indicator::Cp.progress(&p, &[1.0, 0.0, 0.0]), 0.0);
        // b half done: 3 s of b plus 2 s of c remain of 8.
        close(Indicator::Cp.progress(&p, &[1.0, 0.5, 0.0]), 3.0 / 8.0);
        // minstage: a spans [0, 1], b [0, 6], c [6, 8]; b at half is at 3 s of 8.
        close(Indicator::MinStage.progress(&p, &[1.0, 0.5, 0.0]), 3.0 / 8.0);
        // Only c left, half done: at 7 s of 8.
        close(Indicator::MinStage.progress(&p, &[1.0, 1.0, 0.5]), 7.0 / 8.0);
        close(Indicator::Cp.progress(&p, &[1.0, 1.0, 1.0]), 1.0);
    }
}
