//! What the `jockey` policy is configured with: the paper's settings (§4.3's control, the
//! progress indicator, the predictor, adaptation) and this implementation's own, each off
//! by default, with where it departs from the paper.

use super::{Control, Indicator};

/// How a job's remaining time is predicted.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Predictor {
    /// C(p, a) from simulating the profile (the paper's Jockey).
    #[default]
    Simulator,
    /// Amdahl's law over the profile (Jockey w/o simulator).
    Amdahl,
    /// No prediction: every SLO job is guaranteed the whole cluster (max allocation).
    Max,
}

/// Everything the `jockey` policy is configured with.
#[derive(Clone, PartialEq, Debug)]
pub struct JockeyConfig {
    /// Milliseconds between control steps.
    pub interval_ms: u64,
    /// Slack, hysteresis, dead zone and utility.
    pub control: Control,
    /// The progress indicator.
    pub indicator: Indicator,
    /// How remaining time is predicted.
    pub predictor: Predictor,
    /// Re-size allocations at run time; `false` keeps the first model-based one.
    pub adapt: bool,
    /// Simulated runs per allocation when a model is built.
    pub model_runs: u32,
    /// The quantile of simulated remaining times a model keeps.
    pub quantile: f64,
    /// Kill other jobs' tasks to hand a job its guaranteed slots at once.
    pub preemption: bool,
    /// Scale predictions by the run's observed slowdown against its profile.
    pub rescale: bool,
    /// Spare tokens (§2.1): SLO jobs' ready tasks beyond their guarantee take the slots
    /// best-effort work leaves free, as the lowest priority (the first preempted).
    pub spare: bool,
    /// Model task times with the job's pooled spread ([`ModelRequest::pooled_tail`](super::ModelRequest::pooled_tail)).
    pub pooled_tail: bool,
    /// Count running tasks longer than any profiled in their stage in the slowdown
    /// ([`JobProfile::observed_slowdown_with_running`](super::JobProfile::observed_slowdown_with_running)).
    pub count_running: bool,
    /// Request no more than the job can run: the guarantee is the control step's target
    /// capped at the tasks running and ready, recomputed whenever the scheduler runs
    /// (the target itself, and the smoothing, are the control step's).
    pub demand_cap: bool,
    /// Stages with fewer profiled task times than this are modelled with the job's
    /// pooled spread ([`ModelRequest::pooled_below`](super::ModelRequest::pooled_below)); 0: none.
    pub pooled_below: u32,
    /// How many of the name's kept runs, the newest, the profile pools; 0: all of them.
    pub profile_runs: u32,
    /// Keep the model's straggler reserve at this quantile ([`ModelRequest::tail_quantile`](super::ModelRequest::tail_quantile));
    /// 0 (or at most `quantile`): none.
    pub tail_quantile: f64,
    /// Keep time in hand for one straggler as bad as the job's worst on the stages still
    /// to finish, this share of it ([`JobProfile::straggler_reserve_ms`](super::JobProfile::straggler_reserve_ms)); the larger of
    /// it and the tail reserve is added to C(p, a). 0: none.
    pub stage_reserve: f64,
    /// How likely a stage's straggler stays within the stage reserve
    /// ([`JobProfile::straggler_reserve_ms`](super::JobProfile::straggler_reserve_ms)); 1: the job's worst.
    pub stage_reserve_quantile: f64,
    /// Size the raw allocation by the expected utility over C(p, a)'s spread
    /// ([`Control::expected_allocation`]) with this tolerance, not by U at the kept
    /// quantile; `None`: the point estimate (§4.3).
    pub expected_utility: Option<f64>,
    /// Carry the rounding of the smoothed allocation from step to step, so that the
    /// guarantee averages the smoothed allocation; `false`: round it up at every step.
    pub carry_rounding: bool,
    /// Consecutive control steps a job must be found running ahead of its model
    /// (`Prediction::ran_ahead`: lighter than profiled, and its remaining time fell
    /// faster than the clock) before its cuts skip the dead zone and close
    /// `ahead_hysteresis` of the gap, and its raw allocation takes `ahead_slack`; 0:
    /// never, every step is the control law's.
    pub ahead_steps: u32,
    /// Share of the gap to a lower raw allocation closed per step once a job has run
    /// ahead of its model for `ahead_steps` steps (1: the whole gap at once).
    pub ahead_hysteresis: f64,
    /// The slack the raw allocation of a job running ahead of its model (as
    /// `ahead_steps` counts) is sized with; `None`: the control's.
    pub ahead_slack: Option<f64>,
    /// All in when late (§4.4): when the predicted finish (with slack) even under the
    /// largest allocation the job can use is later than this many milliseconds before
    /// the deadline, the raw allocation is that largest one and the guarantee jumps to
    /// it at once (no hysteresis, no dead zone), for as long as it stays so
    /// ([`Control::late_even_at_most`]); `None`: never, every step is the control law's.
    pub all_in_within_ms: Option<i64>,
    /// With `all_in_within_ms`: only a job whose observed slowdown is above this is
    /// taken all in (1: only a job heavier than profiled, whose lateness its own tasks
    /// have shown, not the model's margins alone); 0: any job.
    pub all_in_slowdown: f64,
    /// While a job is all in, the smoothed allocation the next step smooths from is the
    /// control law's (as if it were not all in), not the cap; `false`: the cap.
    pub all_in_keep_smoothed: bool,
    /// With `all_in_within_ms`: the slack the finish under the largest allocation is
    /// predicted with for that test; `None`: the control's. §4.3 applies S to every
    /// prediction; the all-in test is not the paper's (it makes §4.4's raise at once),
    /// and the model's own margins (its quantile, the straggler reserves) are in
    /// C(p, a) already: at 1 a job is taken all in only when the model itself, not
    /// its slack on top, finds it late at the cap.
    pub all_in_slack: Option<f64>,
    /// The all-in test's margin is at least this share of the time left to the
    /// deadline as well as `all_in_within_ms` (either alone when the other is unset):
    /// a job whose finish at the cap leaves less than that share is taken all in, so the
    /// tighter a deadline is against what the job can do at most, the sooner. Not the
    /// paper's: §4.4 raises the allocation step by step until the model finds the
    /// deadline met; a fixed margin waits until the job is late at the cap by a few
    /// minutes, which for a run the largest allocation only just meets is too late. 0:
    /// off.
    pub all_in_margin: f64,
    /// The share of the reserves added to C(p, a) (the larger of the model's tail
    /// reserve and the stage reserve) that the all-in test's finish at the cap keeps
    /// (1: all, as every other reading). Not the paper's (nor are the reserves): a
    /// straggler still to come is no shorter on more slots, and at the cap C(p, a) is
    /// small, so a large reserve alone can find a job late there and take it all in
    /// while its tasks run well ahead of the deadline.
    pub all_in_reserve: f64,
    /// Before [`SLOWDOWN_PRIOR_TASKS`](super::SLOWDOWN_PRIOR_TASKS) tasks of profiled
    /// stages have completed (the slowdown is unread), a job whose finish at the cap,
    /// this many times slower than profiled, is past the deadline is taken all in, held
    /// until a quarter of the interval later and then tested again. Not the paper's: a
    /// run can need up to twice its profiled work (Table 3), and a job whose critical
    /// path is most of its deadline cannot win back a first wave run narrow while that
    /// was unknown; a job with room to spare is left to the control law. `None`: no
    /// such test.
    pub all_in_unread: Option<f64>,
    /// The slack at progress 1: the control's `slack` applies at progress 0 and the
    /// slack runs linearly between; `None`: the control's throughout, as §4.3 has it.
    /// The slack stands for what the model gets wrong, and the more of the run is done,
    /// the more of it has been measured (the slowdown is read from more tasks) and the
    /// less is left to get wrong; the straggler reserves, not the slack, keep time for
    /// a long task in the tail.
    pub slack_at_end: Option<f64>,
    /// The slack a job is sized with again when the control law, at its own slack,
    /// sizes it at the most it can use; `None`: it keeps that cap. Not the paper's: the
    /// law gives the cap to a job no allocation meets the deadline for with the slack
    /// on top, and at the cap the slack mostly stretches the critical path, which more
    /// slots do not shorten; sized again without (most of) it, such a job takes the
    /// fewest slots that meet the deadline by the model's own quantile and reserves.
    pub slack_at_cap: Option<f64>,
    /// With `stage_reserve` (not the paper's: §4.1's model is the only margin there
    /// besides S): stages whose profile holds at least this many task times are kept
    /// out of the reserve, since their own tail is in C(p, a)
    /// (`Jockey::exposed_to_stragglers`); 0: every stage with tasks left counts.
    pub stage_reserve_below: u32,
    /// Price the stage reserve by its chance, not its worst case (not the paper's, nor
    /// is the reserve): the raw allocation is the smallest whose expected utility over
    /// the job with and without a straggler on the stages left
    /// ([`JobProfile::straggler_outcomes`](super::JobProfile::straggler_outcomes), `stage_reserve` of each) is within this
    /// tolerance of the best ([`Control::weighted_allocation`]); §4.3 reads U at one
    /// point, which with the reserve is the worst straggler's. A job with time to spare
    /// for the straggler holds nothing for it; one a straggler would make late pays
    /// for it by U's penalty times its chance. The other readings of the prediction
    /// (smoothing, the all-in test) keep the reserve as `stage_reserve_quantile`
    /// prices it. `None`: the reserve added to every prediction.
    pub stage_reserve_chance: Option<f64>,
    /// With `stage_reserve`: a stage whose tasks have all started (none waits for a
    /// slot) is kept out of the reserve (`Jockey::exposed_to_stragglers`). No
    /// allocation shortens a straggler already running, and held, the reserve only
    /// keeps the job predicted late; a running task longer than its stage's profile is
    /// read as the straggler itself by the slowdown with `count_running`. `false`:
    /// every stage with tasks not completed counts.
    pub stage_reserve_until_started: bool,
    /// The pace check (not the paper's): C(p, a) (and with `pace_scales_reserves` the
    /// reserves added to it) is scaled by the time the run
    /// took to reach its progress over the time the model expected it to take (at the
    /// slots it ran on, scaled by its slowdown), kept within `pace_floor..=pace_ceiling`
    /// (`Jockey::pace`). The slowdown sees tasks longer or shorter than profiled; the
    /// pace sees a model wrong about the rest (the DAG's shape, its queueing), which
    /// §4.1's C(p, a) cannot learn during a run. 0: off, every pace 1.
    pub pace_floor: f64,
    /// With `pace_floor`: the most the pace check scales predictions by (1: it only
    /// ever lowers them).
    pub pace_ceiling: f64,
    /// With `pace_floor`: the pace scales the reserves (the model's tail reserve, the
    /// stage reserve) as well as C(p, a); `false`: C(p, a) only, since the pace reads
    /// how the model's run went, and a straggler still to come is no part of that.
    pub pace_scales_reserves: bool,
    /// With `pace_floor`: at every step the run time and the model's expectation summed
    /// so far are multiplied by this before the new interval is added, so the pace reads
    /// the recent steps (about `1 / (1 − decay)` of them) rather than the whole run, and
    /// a run that slows after running ahead is trimmed less soon after (the two
    /// intervals at pace 1 still weigh in). Not the paper's (nor is the pace). 1: the
    /// whole run alike.
    pub pace_decay: f64,
    /// What the observed slowdown is shrunk towards before the run's tasks have shown
    /// their own (its prior of [`SLOWDOWN_PRIOR_TASKS`](super::SLOWDOWN_PRIOR_TASKS)
    /// tasks weighs this rather than 1; `shrunk_toward`): the first control steps, which
    /// see few or no completed tasks, size the job for a run this much heavier than
    /// profiled, so a run that is heavy is not held low while its slowdown is still
    /// unread. Without `count_running` only. Not the paper's (nor is the rescaling): 1,
    /// the profile's.
    pub slowdown_prior: f64,
}

impl Default for JockeyConfig {
    fn default() -> JockeyConfig {
        JockeyConfig {
            interval_ms: 60_000,
            control: Control::default(),
            indicator: Indicator::default(),
            predictor: Predictor::default(),
            adapt: true,
            model_runs: 20,
            quantile: 0.9,
            preemption: true,
            rescale: true,
            spare: true,
            pooled_tail: false,
            count_running: false,
            demand_cap: true,
            pooled_below: 0,
            profile_runs: 0,
            tail_quantile: 0.97,
            stage_reserve: 0.0,
            stage_reserve_quantile: 1.0,
            expected_utility: None,
            carry_rounding: false,
            ahead_steps: 0,
            ahead_hysteresis: 1.0,
            ahead_slack: None,
            all_in_within_ms: None,
            all_in_slowdown: 0.0,
            all_in_keep_smoothed: false,
            all_in_slack: None,
            all_in_margin: 0.0,
            all_in_reserve: 1.0,
            all_in_unread: None,
            slack_at_end: None,
            slack_at_cap: None,
            stage_reserve_below: 0,
            stage_reserve_chance: None,
            stage_reserve_until_started: false,
            pace_floor: 0.0,
            pace_ceiling: 1.0,
            pace_scales_reserves: false,
            pace_decay: 1.0,
            slowdown_prior: 1.0,
        }
    }
}
