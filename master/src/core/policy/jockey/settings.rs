//! [`JockeySettings`]: the `jockey` policy's `[policy]` table as written (seconds), checked
//! and turned into the [`JockeyConfig`] the policy runs with (milliseconds, the control
//! law's parts in a [`Control`]).

use serde::{Deserialize, Serialize};
use slotmarket_common::spec::UtilityCurve;
use thiserror::Error;

use super::{Control, Indicator, JockeyConfig, Predictor, Utility};

/// Named starting points for a `jockey` `[policy]` table, as TOML: `preset = "NAME"` fills
/// in every key of the preset the table does not give itself.
///
/// `tuned` is the row the simulator's §5 runs found best, R + U in
/// `docs/experiments/jockey.md` with `all_in_unread`, a profile of the ten newest runs
/// and `slack_at_cap`: with ten earlier runs in the history it missed 0.71 % and
/// 0.86 % of deadlines (N = 20, N = 40) at +14.0 % and +19.8 % above the oracle over
/// 10,000 seeds (401–10400), and 0.70 % and 0.84 % at +14.0 % and +19.8 % on the 7,000
/// it was not tuned on (3401–10400). With one earlier run it missed 1.73 % and 2.05 %
/// (seeds 401–1400): for a job with a thin history, write `slack_at_cap = 1.2` and
/// `all_in_slack = 1.2` beside it.
/// Its utility drops to −1 three seconds past the deadline, not ten minutes: a job that
/// must finish on time is raised as soon as any lateness is predicted. It was tuned at
/// the paper's scale (a control step a minute, deadlines of half an hour and more):
/// `all_in_within_s` is in seconds, so a dev cluster's deadlines of a minute need it
/// and `dead_zone_s` written smaller beside the preset.
pub const PRESETS: &[(&str, &str)] = &[(
    "tuned",
    r#"
carry_rounding = true
raise_early = true
stage_reserve = 0.7
stage_reserve_below = 20
stage_reserve_chance = 0.005
ahead_steps = 1
ahead_slack = 0.7
all_in_within_s = 180.0
all_in_slowdown = 1.3
all_in_keep_smoothed = true
all_in_margin = 0.2
all_in_unread = 2.0
all_in_slack = 1.0
slack_at_cap = 0.8
profile_runs = 10
pace_floor = 0.85
utility = [[0, 1.0], [0.05, -1.0], [10, -2.0], [1000, -1000.0]]
"#,
)];

/// The settings of `jockey`, as the `[policy]` table gives them: deadline jobs guaranteed
/// the slots a completion model says they need.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JockeySettings {
    /// Seconds between control steps (default 60, the paper's; a few on a dev cluster).
    #[serde(default = "defaults::interval_s")]
    pub interval_s: f64,
    /// Predictions are multiplied by this (default 1.2).
    #[serde(default = "defaults::slack")]
    pub slack: f64,
    /// Share of the gap to the raw allocation closed per step, in (0, 1] (default 0.5;
    /// the paper's 0.2 held more slots for as many misses here).
    #[serde(default = "defaults::hysteresis")]
    pub hysteresis: f64,
    /// Dead zone in seconds (default 180).
    #[serde(default = "defaults::dead_zone_s")]
    pub dead_zone_s: f64,
    /// Progress indicator: totalworkwithq (default), totalwork, vertexfrac, cp, minstage.
    #[serde(default)]
    pub indicator: Indicator,
    /// simulator (default), amdahl, or max (every deadline job gets the whole cluster).
    #[serde(default)]
    pub predictor: Predictor,
    /// Re-size allocations as jobs run (default true); false keeps the first one.
    #[serde(default = "defaults::yes")]
    pub adapt: bool,
    /// Simulated runs per allocation when a completion model is built (default 20).
    #[serde(default = "defaults::model_runs")]
    pub model_runs: u32,
    /// Quantile of the simulated remaining times the model keeps (default 0.9).
    #[serde(default = "defaults::quantile")]
    pub quantile: f64,
    /// Kill other jobs' tasks to hand deadline jobs their guaranteed slots (default true).
    #[serde(default = "defaults::yes")]
    pub preemption: bool,
    /// Utility curve as `[minutes after the deadline, utility]` points sorted by time,
    /// checked as a job spec's own curve is; empty (default): 1 until the deadline,
    /// −1 ten minutes late, −1000 at 1000.
    #[serde(default)]
    pub utility: UtilityCurve,
    /// Scale predictions by how much slower (or faster) than profiled the run's
    /// completed tasks were (default true); false trusts the profile as it is.
    #[serde(default = "defaults::yes")]
    pub rescale: bool,
    /// Spare tokens (default true): deadline jobs' ready tasks beyond their guarantee
    /// take the slots best-effort work leaves free, and are preempted first; false
    /// caps a deadline job at its guarantee.
    #[serde(default = "defaults::yes")]
    pub spare: bool,
    /// Model each stage's task times with the spread of all the job's stages (each
    /// time over its stage's mean), not its own samples only (default false).
    #[serde(default)]
    pub pooled_tail: bool,
    /// Count a running task that has run longer than any profiled in its stage in
    /// the slowdown, as a task of at least that time (default false).
    #[serde(default)]
    pub count_running: bool,
    /// Share of the gap closed per step when lowering the allocation, in (0, 1]
    /// (default: `hysteresis`, the same both ways).
    #[serde(default)]
    pub hysteresis_down: Option<f64>,
    /// Guarantee no more than the tasks a deadline job has running and ready
    /// (default true): it does not request slots it has no task for. What runs is
    /// the same either way (unused guaranteed slots are lent to other work).
    #[serde(default = "defaults::yes")]
    pub demand_cap: bool,
    /// Model the stages with fewer profiled task times than this with the spread of
    /// all the job's stages, as `pooled_tail` models every stage (default 0: none).
    #[serde(default)]
    pub pooled_below: u32,
    /// How many of the job name's kept runs, the newest, the profile pools (task
    /// times and failure rates of each stage from all of them; default 0: every
    /// kept run).
    #[serde(default)]
    pub profile_runs: u32,
    /// Keep time in hand for a straggler on the rest of the critical path: C(p, a)
    /// plus how much longer this quantile of the remaining time is than `quantile`'s
    /// under the whole cluster (default 0.97; 0: no reserve).
    #[serde(default = "defaults::tail_quantile")]
    pub tail_quantile: f64,
    /// Raise a deadline job's allocation as soon as it is predicted past the
    /// deadline less the dead zone, not only past the deadline; the dead zone still
    /// holds cuts (default false: the paper's band both ways).
    #[serde(default)]
    pub raise_early: bool,
    /// Keep time in hand for one straggler as much longer than its stage's mean as
    /// the job's worst profiled one, on the stages still to finish, this share of it
    /// (default 0: none); the larger of it and the `tail_quantile` reserve counts.
    #[serde(default)]
    pub stage_reserve: f64,
    /// How likely a stage's straggler stays within `stage_reserve`: the quantile of
    /// the longest of the stage's tasks left, drawn from the job's profiled task
    /// times over their stage's mean (default 1: the job's worst straggler).
    #[serde(default = "defaults::one")]
    pub stage_reserve_quantile: f64,
    /// Size the raw allocation by the expected utility over the completion model's
    /// spread of remaining times, the smallest allocation within this much utility
    /// of the best, not by the utility at the `quantile` (default unset: the point
    /// estimate).
    #[serde(default)]
    pub expected_utility: Option<f64>,
    /// Round the smoothed allocation to the nearest slot after carrying what the
    /// earlier control steps rounded away, so that the guarantee averages it
    /// (default false: round up at every step).
    #[serde(default)]
    pub carry_rounding: bool,
    /// Control steps in a row a deadline job must run ahead of its model (tasks
    /// faster than profiled, and its predicted remaining time falling faster than
    /// the clock) before its cuts skip the dead zone and close `ahead_hysteresis`
    /// of the gap, and its raw allocation is sized with `ahead_slack` (default 0:
    /// never).
    #[serde(default)]
    pub ahead_steps: u32,
    /// Share of the gap to a lower raw allocation closed per step by a job running
    /// ahead of its model, in (0, 1] (default 1: all of it).
    #[serde(default = "defaults::one")]
    pub ahead_hysteresis: f64,
    /// The slack a deadline job running ahead of its model (see `ahead_steps`) is
    /// sized with (default unset: `slack`).
    #[serde(default)]
    pub ahead_slack: Option<f64>,
    /// All in when late (§4.4): when a deadline job's predicted finish (with slack)
    /// even under the largest allocation it can use is later than this many seconds
    /// before its deadline, it is guaranteed that allocation at once, without
    /// hysteresis or dead zone, while it stays so (default unset: never).
    #[serde(default)]
    pub all_in_within_s: Option<f64>,
    /// With `all_in_within_s`: only a job whose observed slowdown against its
    /// profile is above this is taken all in (default 0: any job; 1: only a job
    /// heavier than profiled).
    #[serde(default)]
    pub all_in_slowdown: f64,
    /// While a deadline job is all in, keep the control law's smoothed allocation
    /// beside the guarantee, so that once it is no longer late at the cap it comes
    /// down to where the law would be at once (default false: from the cap).
    #[serde(default)]
    pub all_in_keep_smoothed: bool,
    /// With `all_in_within_s`: the slack the finish under the largest allocation is
    /// predicted with for that test (default unset: `slack`).
    #[serde(default)]
    pub all_in_slack: Option<f64>,
    /// The all-in test's margin is at least this share of the time left to the
    /// deadline, beside `all_in_within_s` (default 0: off).
    #[serde(default)]
    pub all_in_margin: f64,
    /// The share of the straggler reserves the all-in test's finish at the largest
    /// allocation keeps, in [0, 1] (default 1: all of them).
    #[serde(default = "defaults::one")]
    pub all_in_reserve: f64,
    /// Before the run's slowdown has a reading, the all-in test reads the job's finish
    /// at the largest allocation this many times slower than profiled, at least 1
    /// (default unset: no all-in test until a reading).
    #[serde(default)]
    pub all_in_unread: Option<f64>,
    /// The slack at progress 1: `slack` applies at progress 0 and the slack runs
    /// linearly between (default unset: `slack` throughout).
    #[serde(default)]
    pub slack_at_end: Option<f64>,
    /// A deadline job the control law sizes at the most it can use is sized again
    /// with this smaller slack (default unset: it keeps the cap).
    #[serde(default)]
    pub slack_at_cap: Option<f64>,
    /// With `stage_reserve`: stages whose profile holds at least this many task
    /// times are kept out of the reserve (default 0: every stage with tasks left).
    #[serde(default)]
    pub stage_reserve_below: u32,
    /// With `stage_reserve`: price the reserve by its chance, sizing the raw
    /// allocation by the expected utility over the job with and without a
    /// straggler on the stages left, the smallest allocation within this much
    /// utility of the best (default unset: the reserve added to every prediction).
    #[serde(default)]
    pub stage_reserve_chance: Option<f64>,
    /// With `stage_reserve`: a stage whose tasks have all started is kept out of
    /// the reserve (default false: every stage with tasks not completed).
    #[serde(default)]
    pub stage_reserve_until_started: bool,
    /// The pace check: the completion model's predictions are scaled by the time the run took to reach
    /// its progress over the time the model expected, at least this (default 0:
    /// off).
    #[serde(default)]
    pub pace_floor: f64,
    /// With `pace_floor`: the most the pace check scales predictions by (default
    /// 1: it only lowers them).
    #[serde(default = "defaults::one")]
    pub pace_ceiling: f64,
    /// With `pace_floor`: the pace scales the straggler reserves too (default
    /// false: the completion model's prediction only).
    #[serde(default)]
    pub pace_scales_reserves: bool,
    /// With `pace_floor`: the pace's earlier intervals are multiplied by this at
    /// every step, in (0, 1] (default 1: the whole run alike).
    #[serde(default = "defaults::one")]
    pub pace_decay: f64,
    /// What the observed slowdown is shrunk towards before the run's tasks have
    /// shown their own, in [0.5, 4] (default 1: the profile's).
    #[serde(default = "defaults::one")]
    pub slowdown_prior: f64,
}

/// Serde defaults of the settings (the paper's values, §5, but hysteresis:
/// α = 0.5 missed no more and held less than the paper's 0.2 in the simulator's §5 runs;
/// and the straggler reserve, not the paper's: at 0.97 it missed fewer for a few points
/// of allocation there).
mod defaults {
    pub(super) fn interval_s() -> f64 {
        60.0
    }
    pub(super) fn slack() -> f64 {
        1.2
    }
    pub(super) fn hysteresis() -> f64 {
        0.5
    }
    pub(super) fn dead_zone_s() -> f64 {
        180.0
    }
    pub(super) fn yes() -> bool {
        true
    }
    pub(super) fn model_runs() -> u32 {
        20
    }
    pub(super) fn quantile() -> f64 {
        0.9
    }
    pub(super) fn tail_quantile() -> f64 {
        0.97
    }
    pub(super) fn one() -> f64 {
        1.0
    }
}

/// `jockey` settings that parse but cannot work.
#[derive(Clone, PartialEq, Debug, Error)]
pub enum JockeySettingsError {
    /// A setting is outside the values it can take.
    #[error("{field}: must be {range}, got {value}")]
    OutOfRange {
        /// The setting.
        field: &'static str,
        /// The values it takes.
        range: &'static str,
        /// The value given.
        value: f64,
    },
    /// The utility curve is not one a job spec could carry either.
    #[error("utility: {0}")]
    Utility(String),
    /// A setting moved from its default that does nothing without another.
    #[error("{field}: has no effect unless {needs}; set that as well or leave {field} out")]
    Needs {
        /// The setting.
        field: &'static str,
        /// What it acts with.
        needs: &'static str,
    },
}

impl JockeySettingsError {
    /// The `[policy]` key the error is about.
    pub fn key(&self) -> &'static str {
        match self {
            JockeySettingsError::OutOfRange { field, .. } | JockeySettingsError::Needs { field, .. } => field,
            JockeySettingsError::Utility(_) => "utility",
        }
    }
}

impl JockeySettings {
    /// The settings as the policy takes them, checked.
    pub fn config(&self) -> Result<JockeyConfig, JockeySettingsError> {
        let JockeySettings {
            interval_s,
            slack,
            hysteresis,
            dead_zone_s,
            indicator,
            predictor,
            adapt,
            model_runs,
            quantile,
            preemption,
            utility,
            rescale,
            spare,
            pooled_tail,
            count_running,
            hysteresis_down,
            demand_cap,
            pooled_below,
            profile_runs,
            tail_quantile,
            raise_early,
            stage_reserve,
            stage_reserve_quantile,
            expected_utility,
            carry_rounding,
            ahead_steps,
            ahead_hysteresis,
            ahead_slack,
            all_in_within_s,
            all_in_slowdown,
            all_in_keep_smoothed,
            all_in_slack,
            all_in_margin,
            all_in_reserve,
            all_in_unread,
            slack_at_end,
            slack_at_cap,
            stage_reserve_below,
            stage_reserve_chance,
            stage_reserve_until_started,
            pace_floor,
            pace_ceiling,
            pace_scales_reserves,
            pace_decay,
            slowdown_prior,
        } = self;
        // Every number is finite: `slack = inf` or `dead_zone_s = inf` parse as TOML but
        // would leave a job all in or never cut, which no one writes on purpose.
        let within = |field, range, value: f64, ok: bool| match (value.is_finite(), ok) {
            (true, true) => Ok(()),
            (false, _) => Err(JockeySettingsError::OutOfRange { field, range: "a finite number", value }),
            (true, false) => Err(JockeySettingsError::OutOfRange { field, range, value }),
        };
        within("interval_s", "above 0", *interval_s, *interval_s > 0.0)?;
        within("slack", "at least 0.1", *slack, *slack >= 0.1)?;
        within("hysteresis", "in (0, 1]", *hysteresis, *hysteresis > 0.0 && *hysteresis <= 1.0)?;
        if let Some(down) = hysteresis_down {
            within("hysteresis_down", "in (0, 1]", *down, *down > 0.0 && *down <= 1.0)?;
        }
        let ahead = *ahead_hysteresis;
        within("ahead_hysteresis", "in (0, 1]", ahead, ahead > 0.0 && ahead <= 1.0)?;
        if let Some(slack) = ahead_slack {
            within("ahead_slack", "at least 0.1", *slack, *slack >= 0.1)?;
        }
        if let Some(within_s) = all_in_within_s {
            within("all_in_within_s", "a finite number", *within_s, true)?;
        }
        within("all_in_slowdown", "at least 0", *all_in_slowdown, *all_in_slowdown >= 0.0)?;
        if let Some(slack) = all_in_slack {
            within("all_in_slack", "at least 0.1", *slack, *slack >= 0.1)?;
        }
        within("all_in_margin", "in [0, 1)", *all_in_margin, (0.0..1.0).contains(all_in_margin))?;
        within("all_in_reserve", "in [0, 1]", *all_in_reserve, (0.0..=1.0).contains(all_in_reserve))?;
        if let Some(slowdown) = all_in_unread {
            within("all_in_unread", "at least 1", *slowdown, *slowdown >= 1.0)?;
        }
        if let Some(slack) = slack_at_end {
            within("slack_at_end", "at least 0.1", *slack, *slack >= 0.1)?;
        }
        if let Some(slack) = slack_at_cap {
            within("slack_at_cap", "at least 0.1", *slack, *slack >= 0.1)?;
        }
        within("dead_zone_s", "at least 0", *dead_zone_s, *dead_zone_s >= 0.0)?;
        within("model_runs", "at least 1", f64::from(*model_runs), *model_runs >= 1)?;
        within("quantile", "in [0, 1]", *quantile, (0.0..=1.0).contains(quantile))?;
        within("tail_quantile", "in [0, 1]", *tail_quantile, (0.0..=1.0).contains(tail_quantile))?;
        within("stage_reserve", "at least 0", *stage_reserve, *stage_reserve >= 0.0)?;
        let q = *stage_reserve_quantile;
        within("stage_reserve_quantile", "in [0, 1]", q, (0.0..=1.0).contains(&q))?;
        within("pace_floor", "in [0, 1]", *pace_floor, (0.0..=1.0).contains(pace_floor))?;
        let prior = *slowdown_prior;
        within("slowdown_prior", "in [0.5, 4]", prior, (0.5..=4.0).contains(&prior))?;
        within("pace_decay", "in (0, 1]", *pace_decay, *pace_decay > 0.0 && *pace_decay <= 1.0)?;
        within("pace_ceiling", "at least 1", *pace_ceiling, *pace_ceiling >= 1.0)?;
        if let Some(tolerance) = stage_reserve_chance {
            within("stage_reserve_chance", "at least 0", *tolerance, *tolerance >= 0.0)?;
        }
        if let Some(tolerance) = expected_utility {
            within("expected_utility", "at least 0", *tolerance, *tolerance >= 0.0)?;
        }
        // A setting that only refines another is refused alone: whoever sets it expects
        // a change the policy would not make.
        let needs = |field, needs, changed: bool, partner_on: bool| {
            if changed && !partner_on { Err(JockeySettingsError::Needs { field, needs }) } else { Ok(()) }
        };
        const RESERVE: &str = "stage_reserve is above 0";
        let reserve_on = *stage_reserve > 0.0;
        needs("stage_reserve_quantile", RESERVE, *stage_reserve_quantile != 1.0, reserve_on)?;
        needs("stage_reserve_below", RESERVE, *stage_reserve_below > 0, reserve_on)?;
        needs("stage_reserve_chance", RESERVE, stage_reserve_chance.is_some(), reserve_on)?;
        needs("stage_reserve_until_started", RESERVE, *stage_reserve_until_started, reserve_on)?;
        const PACE: &str = "pace_floor is above 0";
        let pace_on = *pace_floor > 0.0;
        needs("pace_ceiling", PACE, *pace_ceiling != 1.0, pace_on)?;
        needs("pace_scales_reserves", PACE, *pace_scales_reserves, pace_on)?;
        needs("pace_decay", PACE, *pace_decay != 1.0, pace_on)?;
        const AHEAD: &str = "ahead_steps is above 0";
        let ahead_on = *ahead_steps > 0;
        needs("ahead_hysteresis", AHEAD, *ahead_hysteresis != 1.0, ahead_on)?;
        needs("ahead_slack", AHEAD, ahead_slack.is_some(), ahead_on)?;
        const ALL_IN: &str = "all_in_within_s or all_in_margin is set";
        let all_in_on = all_in_within_s.is_some() || *all_in_margin > 0.0;
        needs("all_in_slowdown", ALL_IN, *all_in_slowdown != 0.0, all_in_on)?;
        needs("all_in_keep_smoothed", ALL_IN, *all_in_keep_smoothed, all_in_on)?;
        needs("all_in_slack", ALL_IN, all_in_slack.is_some(), all_in_on)?;
        needs("all_in_reserve", ALL_IN, *all_in_reserve != 1.0, all_in_on)?;
        needs("all_in_unread", ALL_IN, all_in_unread.is_some(), all_in_on)?;
        needs("slowdown_prior", "count_running is false", *slowdown_prior != 1.0, !*count_running)?;
        // The policy's curve applies to deadline jobs only, so it always has a deadline.
        let utility = if utility.0.is_empty() {
            Utility::default()
        } else if let Some(problem) = utility.problem(true) {
            return Err(JockeySettingsError::Utility(problem));
        } else {
            Utility::from(utility)
        };
        Ok(JockeyConfig {
            interval_ms: (interval_s * 1000.0).round() as u64,
            control: Control {
                slack: *slack,
                hysteresis: *hysteresis,
                dead_zone_ms: (dead_zone_s * 1000.0).round() as i64,
                utility,
                hysteresis_down: *hysteresis_down,
                raise_early: *raise_early,
            },
            indicator: *indicator,
            predictor: *predictor,
            adapt: *adapt,
            model_runs: *model_runs,
            quantile: *quantile,
            preemption: *preemption,
            rescale: *rescale,
            spare: *spare,
            pooled_tail: *pooled_tail,
            count_running: *count_running,
            demand_cap: *demand_cap,
            pooled_below: *pooled_below,
            profile_runs: *profile_runs,
            tail_quantile: *tail_quantile,
            stage_reserve: *stage_reserve,
            stage_reserve_quantile: *stage_reserve_quantile,
            expected_utility: *expected_utility,
            carry_rounding: *carry_rounding,
            ahead_steps: *ahead_steps,
            ahead_hysteresis: *ahead_hysteresis,
            ahead_slack: *ahead_slack,
            all_in_within_ms: all_in_within_s.map(|w| (w * 1000.0).round() as i64),
            all_in_slowdown: *all_in_slowdown,
            all_in_keep_smoothed: *all_in_keep_smoothed,
            all_in_slack: *all_in_slack,
            all_in_margin: *all_in_margin,
            all_in_reserve: *all_in_reserve,
            all_in_unread: *all_in_unread,
            slack_at_end: *slack_at_end,
            slack_at_cap: *slack_at_cap,
            stage_reserve_below: *stage_reserve_below,
            stage_reserve_chance: *stage_reserve_chance,
            stage_reserve_until_started: *stage_reserve_until_started,
            pace_floor: *pace_floor,
            pace_ceiling: *pace_ceiling,
            pace_scales_reserves: *pace_scales_reserves,
            pace_decay: *pace_decay,
            slowdown_prior: *slowdown_prior,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_a_table_of_settings_that_work() {
        for (name, keys) in PRESETS {
            let settings = toml::from_str::<JockeySettings>(keys).unwrap_or_else(|e| panic!("{name}: {e}"));
            settings.config().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn jockey_settings_default_to_the_papers_and_refuse_what_cannot_work() {
        let parse = |text: &str| toml::from_str::<JockeySettings>(text).unwrap();
        let config = parse("").config().unwrap();
        assert_eq!(config, JockeyConfig::default());
        assert_eq!(config.interval_ms, 60_000);
        assert_eq!(
            (config.control.slack, config.control.hysteresis, config.control.dead_zone_ms),
            (1.2, 0.5, 180_000)
        );
        let custom = parse(
            "interval_s = 5\nslack = 1.5\npredictor = \"amdahl\"\nindicator = \"cp\"\nadapt = false\nutility = [[0, 2.0], [1, -1.0]]",
        );
        let config = custom.config().unwrap();
        assert_eq!((config.interval_ms, config.control.slack), (5_000, 1.5));
        assert_eq!(
            (config.predictor, config.indicator, config.adapt),
            (Predictor::Amdahl, Indicator::Cp, false)
        );
        assert_eq!(config.control.utility.points, vec![(0, 2.0), (60_000, -1.0)]);
        let both = parse("spare = true\npooled_tail = true\ncount_running = true").config().unwrap();
        assert_eq!((both.spare, both.pooled_tail, both.count_running), (true, true, true));
        let later = parse("hysteresis_down = 0.6\ndemand_cap = true\npooled_below = 30").config().unwrap();
        assert_eq!(
            (later.control.hysteresis_down, later.demand_cap, later.pooled_below),
            (Some(0.6), true, 30)
        );
        assert_eq!((config.control.hysteresis_down, config.demand_cap), (None, true));
        let newer = parse("profile_runs = 3\ntail_quantile = 0.99").config().unwrap();
        assert_eq!((newer.profile_runs, newer.tail_quantile), (3, 0.99));
        assert_eq!((config.profile_runs, config.tail_quantile), (0, 0.97));
        let split = parse("raise_early = true\nstage_reserve = 0.5").config().unwrap();
        assert_eq!((split.control.raise_early, split.stage_reserve), (true, 0.5));
        assert_eq!((config.control.raise_early, config.stage_reserve), (false, 0.0));
        assert_eq!(parse("expected_utility = 0.05").config().unwrap().expected_utility, Some(0.05));
        assert_eq!(config.expected_utility, None);
        assert!(!config.carry_rounding);
        assert!(parse("carry_rounding = true").config().unwrap().carry_rounding);
        let quantile = parse("stage_reserve = 1\nstage_reserve_quantile = 0.95").config().unwrap();
        assert_eq!((quantile.stage_reserve_quantile, config.stage_reserve_quantile), (0.95, 1.0));
        let ahead = parse("ahead_steps = 2\nahead_hysteresis = 0.8\nahead_slack = 1.0").config().unwrap();
        assert_eq!((ahead.ahead_steps, ahead.ahead_hysteresis, ahead.ahead_slack), (2, 0.8, Some(1.0)));
        assert_eq!((config.ahead_steps, config.ahead_hysteresis, config.ahead_slack), (0, 1.0, None));
        let err = parse("ahead_hysteresis = 0").config().unwrap_err();
        assert_eq!(err.to_string(), "ahead_hysteresis: must be in (0, 1], got 0");
        assert_eq!(parse("all_in_within_s = 180").config().unwrap().all_in_within_ms, Some(180_000));
        assert_eq!(parse("all_in_within_s = -30").config().unwrap().all_in_within_ms, Some(-30_000));
        assert_eq!(config.all_in_within_ms, None);
        assert_eq!(
            parse("all_in_within_s = 0\nall_in_slowdown = 1.0").config().unwrap().all_in_slowdown,
            1.0
        );
        assert_eq!(config.all_in_slowdown, 0.0);
        assert!(
            parse("all_in_margin = 0.1\nall_in_keep_smoothed = true").config().unwrap().all_in_keep_smoothed
        );
        assert!(!config.all_in_keep_smoothed);
        assert_eq!(
            parse("all_in_within_s = 0\nall_in_slack = 1.0").config().unwrap().all_in_slack,
            Some(1.0)
        );
        assert_eq!(config.all_in_slack, None);
        assert_eq!(parse("slack_at_end = 1.05").config().unwrap().slack_at_end, Some(1.05));
        assert_eq!(config.slack_at_end, None);
        assert_eq!(parse("slack_at_cap = 1.0").config().unwrap().slack_at_cap, Some(1.0));
        assert_eq!(config.slack_at_cap, None);
        assert_eq!(
            parse("stage_reserve = 1\nstage_reserve_below = 20").config().unwrap().stage_reserve_below,
            20
        );
        assert_eq!(config.stage_reserve_below, 0);
        assert_eq!(
            parse("stage_reserve = 1\nstage_reserve_chance = 0.02").config().unwrap().stage_reserve_chance,
            Some(0.02)
        );
        assert_eq!(config.stage_reserve_chance, None);
        assert!(
            parse("stage_reserve = 1\nstage_reserve_until_started = true")
                .config()
                .unwrap()
                .stage_reserve_until_started
        );
        assert!(!config.stage_reserve_until_started);
        let pace = parse("pace_floor = 0.5\npace_ceiling = 1.2").config().unwrap();
        assert_eq!((pace.pace_floor, pace.pace_ceiling), (0.5, 1.2));
        assert_eq!((config.pace_floor, config.pace_ceiling), (0.0, 1.0));
        assert!(
            parse("pace_floor = 0.5\npace_scales_reserves = true").config().unwrap().pace_scales_reserves
        );
        assert!(!config.pace_scales_reserves);
        let err = parse("stage_reserve_chance = -0.1").config().unwrap_err();
        assert_eq!(err.to_string(), "stage_reserve_chance: must be at least 0, got -0.1");
        let err = parse("pace_floor = 1.5").config().unwrap_err();
        assert_eq!(err.to_string(), "pace_floor: must be in [0, 1], got 1.5");
        assert_eq!(parse("pace_floor = 0.5\npace_decay = 0.5").config().unwrap().pace_decay, 0.5);
        assert_eq!(config.pace_decay, 1.0);
        assert_eq!(parse("slowdown_prior = 1.4").config().unwrap().slowdown_prior, 1.4);
        assert_eq!(config.slowdown_prior, 1.0);
        let err = parse("slowdown_prior = 5").config().unwrap_err();
        assert_eq!(err.to_string(), "slowdown_prior: must be in [0.5, 4], got 5");
        let err = parse("pace_decay = 0").config().unwrap_err();
        assert_eq!(err.to_string(), "pace_decay: must be in (0, 1], got 0");
        let err = parse("pace_ceiling = 0.9").config().unwrap_err();
        assert_eq!(err.to_string(), "pace_ceiling: must be at least 1, got 0.9");
        let err = parse("slack_at_end = 0").config().unwrap_err();
        assert_eq!(err.to_string(), "slack_at_end: must be at least 0.1, got 0");
        let err = parse("slack_at_cap = 0").config().unwrap_err();
        assert_eq!(err.to_string(), "slack_at_cap: must be at least 0.1, got 0");
        let err = parse("all_in_slack = 0.05").config().unwrap_err();
        assert_eq!(err.to_string(), "all_in_slack: must be at least 0.1, got 0.05");
        let all_in = parse("all_in_margin = 0.1\nall_in_reserve = 0.5").config().unwrap();
        assert_eq!((all_in.all_in_margin, all_in.all_in_reserve), (0.1, 0.5));
        assert_eq!((config.all_in_margin, config.all_in_reserve), (0.0, 1.0));
        let err = parse("all_in_margin = 1").config().unwrap_err();
        assert_eq!(err.to_string(), "all_in_margin: must be in [0, 1), got 1");
        let err = parse("all_in_reserve = 1.5").config().unwrap_err();
        assert_eq!(err.to_string(), "all_in_reserve: must be in [0, 1], got 1.5");
        let unread = parse("all_in_margin = 0.1\nall_in_unread = 2").config().unwrap();
        assert_eq!((unread.all_in_unread, config.all_in_unread), (Some(2.0), None));
        let err = parse("all_in_margin = 0.1\nall_in_unread = 0.9").config().unwrap_err();
        assert_eq!(err.to_string(), "all_in_unread: must be at least 1, got 0.9");
        let err = parse("all_in_slowdown = -1").config().unwrap_err();
        assert_eq!(err.to_string(), "all_in_slowdown: must be at least 0, got -1");
        let err = parse("ahead_slack = 0").config().unwrap_err();
        assert_eq!(err.to_string(), "ahead_slack: must be at least 0.1, got 0");
        let err = parse("stage_reserve = -1").config().unwrap_err();
        assert_eq!(err.to_string(), "stage_reserve: must be at least 0, got -1");
        let err = parse("tail_quantile = 1.5").config().unwrap_err();
        assert_eq!(err.to_string(), "tail_quantile: must be in [0, 1], got 1.5");
        let err = parse("hysteresis_down = 1.5").config().unwrap_err();
        assert_eq!(err.to_string(), "hysteresis_down: must be in (0, 1], got 1.5");
        let err = parse("hysteresis = 0").config().unwrap_err();
        assert_eq!(err.to_string(), "hysteresis: must be in (0, 1], got 0");
        let err = parse("utility = [[5, 1.0], [1, 0.0]]").config().unwrap_err();
        assert!(err.to_string().starts_with("utility: point 1: times must not go back"), "{err}");
        let three = toml::from_str::<JockeySettings>("utility = [[0, 1.0, 7]]");
        assert!(three.unwrap_err().to_string().contains("pair of numbers"), "a third number is refused");
        assert!(toml::from_str::<JockeySettings>("predictor = \"psychic\"").is_err());
    }

    #[test]
    fn every_jockey_number_must_be_finite() {
        // Those bounded on one side only would take `inf` but for the finite check; the
        // partners make each one count.
        let keys = [
            "interval_s",
            "slack",
            "dead_zone_s",
            "stage_reserve",
            "stage_reserve_chance",
            "expected_utility",
            "ahead_slack",
            "all_in_within_s",
            "all_in_slowdown",
            "all_in_slack",
            "all_in_unread",
            "slack_at_end",
            "slack_at_cap",
            "pace_ceiling",
            "hysteresis",
            "quantile",
            "slowdown_prior",
        ];
        let partners = ["stage_reserve = 0.7", "ahead_steps = 1", "all_in_margin = 0.2", "pace_floor = 0.85"];
        for key in keys {
            let others: Vec<&str> =
                partners.into_iter().filter(|p| !p.starts_with(&format!("{key} "))).collect();
            for value in ["inf", "-inf", "nan"] {
                let text = format!("{}\n{key} = {value}", others.join("\n"));
                let err = toml::from_str::<JockeySettings>(&text).unwrap().config().unwrap_err();
                let shown = value.trim_start_matches('-').replace("nan", "NaN");
                assert!(
                    err.to_string().starts_with(&format!("{key}: must be a finite number, got ")),
                    "{key} = {value}: {err}"
                );
                assert!(err.to_string().ends_with(&shown), "{key} = {value}: {err}");
            }
        }
    }

    #[test]
    fn a_jockey_setting_that_refines_another_is_refused_without_it() {
        let check = |text: &str| toml::from_str::<JockeySettings>(text).unwrap().config().map(|_| ());
        let refused = [
            ("stage_reserve_quantile = 0.9", "stage_reserve is above 0"),
            ("stage_reserve_below = 20", "stage_reserve is above 0"),
            ("stage_reserve_chance = 0.005", "stage_reserve is above 0"),
            ("stage_reserve_until_started = true", "stage_reserve is above 0"),
            ("pace_ceiling = 1.2", "pace_floor is above 0"),
            ("pace_scales_reserves = true", "pace_floor is above 0"),
            ("pace_decay = 0.5", "pace_floor is above 0"),
            ("ahead_hysteresis = 0.5", "ahead_steps is above 0"),
            ("ahead_slack = 0.7", "ahead_steps is above 0"),
            ("all_in_slowdown = 1.3", "all_in_within_s or all_in_margin is set"),
            ("all_in_keep_smoothed = true", "all_in_within_s or all_in_margin is set"),
            ("all_in_slack = 1.0", "all_in_within_s or all_in_margin is set"),
            ("all_in_reserve = 0.5", "all_in_within_s or all_in_margin is set"),
            ("all_in_unread = 2", "all_in_within_s or all_in_margin is set"),
            ("count_running = true\nslowdown_prior = 1.35", "count_running is false"),
        ];
        for (text, needs) in refused {
            let err = check(text).unwrap_err();
            let field = text.lines().last().unwrap().split(' ').next().unwrap();
            assert_eq!(
                err.to_string(),
                format!("{field}: has no effect unless {needs}; set that as well or leave {field} out")
            );
        }
        // With their partner, and at their defaults alone, they are accepted.
        let accepted = [
            "stage_reserve = 0.7\nstage_reserve_quantile = 0.9\nstage_reserve_below = 20\nstage_reserve_chance = 0.005\nstage_reserve_until_started = true",
            "pace_floor = 0.85\npace_ceiling = 1.2\npace_scales_reserves = true\npace_decay = 0.5",
            "ahead_steps = 1\nahead_hysteresis = 0.5\nahead_slack = 0.7",
            "all_in_within_s = 180\nall_in_slowdown = 1.3\nall_in_keep_smoothed = true\nall_in_slack = 1.0\nall_in_reserve = 0.5\nall_in_unread = 2",
            "all_in_margin = 0.2\nall_in_slowdown = 1.3",
            "slowdown_prior = 1.35",
            "stage_reserve_quantile = 1\npace_decay = 1\nahead_hysteresis = 1\nall_in_slowdown = 0\nall_in_reserve = 1\ncount_running = true\nslowdown_prior = 1",
        ];
        for text in accepted {
            assert_eq!(check(text), Ok(()), "{text}");
        }
    }
}
