//! [`PolicySettings`]: the one settings type per policy, read from the `[policy]` table of
//! `master.toml` by the master and from `--policy-config` / `--set` by the simulator,
//! checked here and turned into a running [`Policy`] here. Adding a policy means adding a
//! variant (with its fields and their serde defaults) and one arm in each `match` below;
//! the tests at the end fail until [`PolicyName::ALL`] lists it too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use slotmarket_common::spec::UtilityCurve;
use thiserror::Error;

use super::jockey::{Control, Indicator, Jockey, JockeyConfig, Predictor, Utility};
use super::{
    Capacity, Dress, DressSettings, Edf, Fair, Fifo, GangFifo, Policy, PolicyName, Priority, Proportional,
    ProportionalSettings,
};

/// Which policy runs and its settings, as written in the `[policy]` table:
///
/// ```toml
/// [policy]
/// name = "capacity"        # fifo | fair | priority | capacity | gang-fifo | dress | edf | proportional
/// preemption = true        # fair, capacity
/// [policy.queues]          # capacity
/// research = 0.6
/// ```
///
/// Every field but `name` is optional; a field the named policy does not take is refused.
// Read once per policy from a config file, so its size does not matter; boxing the
// `jockey` variant's settings would only complicate its many readers.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "lowercase", deny_unknown_fields)]
pub enum PolicySettings {
    /// Jobs in submission order. Takes no settings. (A struct variant, like every
    /// variant: serde lets a unit variant of a tagged enum ignore unknown fields.)
    Fifo {},
    /// An equal share of each slot kind per active job.
    Fair {
        /// Kill the newest tasks of jobs over their max-min share so that starved jobs
        /// get theirs at once, rather than as tasks finish (default false).
        #[serde(default)]
        preemption: bool,
    },
    /// Non-preemptive service classes, FIFO within a class. Takes no settings.
    Priority {},
    /// Static queue shares, FIFO within a queue, idle shares lent out.
    Capacity {
        /// Guaranteed share (0 < share <= 1, summing to at most 1) of each queue, by
        /// queue name. Empty (the default): every queue with active jobs gets an equal
        /// share. Jobs in a queue not listed get no guarantee and run on lent slots only.
        #[serde(default)]
        queues: BTreeMap<String, f64>,
        /// Kill lent tasks so that queues below their guarantee get it back at once
        /// (default false).
        #[serde(default)]
        preemption: bool,
    },
    /// Gang-start first-come-first-served (DRESS's Figure 1 baseline). Takes no settings.
    #[serde(rename = "gang-fifo")]
    GangFifo {},
    /// DRESS: a reserved share for small-demand jobs, moved every interval.
    Dress {
        /// θ: a job with a stage wider than this share of its slot kind is large-demand
        /// (default 0.1, the paper's).
        #[serde(default = "dress_theta")]
        theta: f64,
        /// δ, the reserved share, before the first update (default 0.1, the paper's).
        #[serde(default = "dress_delta")]
        initial_delta: f64,
        /// Seconds between updates of δ (default 2; the paper gives none). Reserved slots
        /// small jobs no longer need stay idle until the next update, which is what
        /// delays large jobs most (`docs/experiments/dress.md`).
        #[serde(default = "dress_interval")]
        interval_secs: f64,
        /// The phase window pw of the release estimation, in seconds (default 10, the
        /// paper's).
        #[serde(default = "dress_window")]
        window_secs: f64,
        /// t_e: finishes within the window that start a phase's release; lone earlier
        /// finishes are heading tasks (default 2).
        #[serde(default = "dress_heading")]
        heading: u32,
        /// Start a stage's ready tasks together or not at all (default false).
        #[serde(default)]
        gang: bool,
    },
    /// Earliest deadline first for jobs with a deadline, best effort after (MRM). Takes
    /// no settings; MRM's admission is configured in `[admission]`.
    Edf {},
    /// DP: shares by spending rate every allocation interval, charged to budgets
    /// (`interval_s`, `preemption`, `grace_s`, `default_rate`, `[policy.rates]`,
    /// `[policy.income]`).
    Proportional(ProportionalSettings),
    /// Jockey: deadline jobs guaranteed the slots a completion model says they need.
    Jockey {
        /// Seconds between control steps (default 60, the paper's; a few on a dev cluster).
        #[serde(default = "jockey_defaults::interval_s")]
        interval_s: f64,
        /// Predictions are multiplied by this (default 1.2).
        #[serde(default = "jockey_defaults::slack")]
        slack: f64,
        /// Share of the gap to the raw allocation closed per step, in (0, 1] (default 0.5;
        /// the paper's 0.2 held more slots for as many misses here).
        #[serde(default = "jockey_defaults::hysteresis")]
        hysteresis: f64,
        /// Dead zone in seconds (default 180).
        #[serde(default = "jockey_defaults::dead_zone_s")]
        dead_zone_s: f64,
        /// Progress indicator: totalworkwithq (default), totalwork, vertexfrac, cp, minstage.
        #[serde(default)]
        indicator: Indicator,
        /// simulator (default), amdahl, or max (every deadline job gets the whole cluster).
        #[serde(default)]
        predictor: Predictor,
        /// Re-size allocations as jobs run (default true); false keeps the first one.
        #[serde(default = "jockey_defaults::yes")]
        adapt: bool,
        /// Simulated runs per allocation when a completion model is built (default 20).
        #[serde(default = "jockey_defaults::model_runs")]
        model_runs: u32,
        /// Quantile of the simulated remaining times the model keeps (default 0.9).
        #[serde(default = "jockey_defaults::quantile")]
        quantile: f64,
        /// Kill other jobs' tasks to hand deadline jobs their guaranteed slots (default true).
        #[serde(default = "jockey_defaults::yes")]
        preemption: bool,
        /// Utility curve as `[minutes after the deadline, utility]` points sorted by time,
        /// checked as a job spec's own curve is; empty (default): 1 until the deadline,
        /// −1 ten minutes late, −1000 at 1000.
        #[serde(default)]
        utility: UtilityCurve,
        /// Scale predictions by how much slower (or faster) than profiled the run's
        /// completed tasks were (default true); false trusts the profile as it is.
        #[serde(default = "jockey_defaults::yes")]
        rescale: bool,
        /// Spare tokens (default true): deadline jobs' ready tasks beyond their guarantee
        /// take the slots best-effort work leaves free, and are preempted first; false
        /// caps a deadline job at its guarantee.
        #[serde(default = "jockey_defaults::yes")]
        spare: bool,
        /// Model each stage's task times with the spread of all the job's stages (each
        /// time over its stage's mean), not its own samples only (default false).
        #[serde(default)]
        pooled_tail: bool,
        /// Count a running task that has run longer than any profiled in its stage in
        /// the slowdown, as a task of at least that time (default false).
        #[serde(default)]
        count_running: bool,
        /// Share of the gap closed per step when lowering the allocation, in (0, 1]
        /// (default: `hysteresis`, the same both ways).
        #[serde(default)]
        hysteresis_down: Option<f64>,
        /// Guarantee no more than the tasks a deadline job has running and ready
        /// (default true): it does not request slots it has no task for. What runs is
        /// the same either way (unused guaranteed slots are lent to other work).
        #[serde(default = "jockey_defaults::yes")]
        demand_cap: bool,
        /// Model the stages with fewer profiled task times than this with the spread of
        /// all the job's stages, as `pooled_tail` models every stage (default 0: none).
        #[serde(default)]
        pooled_below: u32,
        /// How many of the job name's kept runs, the newest, the profile pools (task
        /// times and failure rates of each stage from all of them; default 0: every
        /// kept run).
        #[serde(default)]
        profile_runs: u32,
        /// Keep time in hand for a straggler on the rest of the critical path: C(p, a)
        /// plus how much longer this quantile of the remaining time is than `quantile`'s
        /// under the whole cluster (default 0.97; 0: no reserve).
        #[serde(default = "jockey_defaults::tail_quantile")]
        tail_quantile: f64,
        /// Raise a deadline job's allocation as soon as it is predicted past the
        /// deadline less the dead zone, not only past the deadline; the dead zone still
        /// holds cuts (default false: the paper's band both ways).
        #[serde(default)]
        raise_early: bool,
        /// Keep time in hand for one straggler as much longer than its stage's mean as
        /// the job's worst profiled one, on the stages still to finish, this share of it
        /// (default 0: none); the larger of it and the `tail_quantile` reserve counts.
        #[serde(default)]
        stage_reserve: f64,
        /// How likely a stage's straggler stays within `stage_reserve`: the quantile of
        /// the longest of the stage's tasks left, drawn from the job's profiled task
        /// times over their stage's mean (default 1: the job's worst straggler).
        #[serde(default = "jockey_defaults::one")]
        stage_reserve_quantile: f64,
        /// Size the raw allocation by the expected utility over the completion model's
        /// spread of remaining times, the smallest allocation within this much utility
        /// of the best, not by the utility at the `quantile` (default unset: the point
        /// estimate).
        #[serde(default)]
        expected_utility: Option<f64>,
        /// Round the smoothed allocation to the nearest slot after carrying what the
        /// earlier control steps rounded away, so that the guarantee averages it
        /// (default false: round up at every step).
        #[serde(default)]
        carry_rounding: bool,
        /// Control steps in a row a deadline job must run ahead of its model (tasks
        /// faster than profiled, and its predicted remaining time falling faster than
        /// the clock) before its cuts skip the dead zone and close `ahead_hysteresis`
        /// of the gap, and its raw allocation is sized with `ahead_slack` (default 0:
        /// never).
        #[serde(default)]
        ahead_steps: u32,
        /// Share of the gap to a lower raw allocation closed per step by a job running
        /// ahead of its model, in (0, 1] (default 1: all of it).
        #[serde(default = "jockey_defaults::one")]
        ahead_hysteresis: f64,
        /// The slack a deadline job running ahead of its model (see `ahead_steps`) is
        /// sized with (default unset: `slack`).
        #[serde(default)]
        ahead_slack: Option<f64>,
        /// All in when late (§4.4): when a deadline job's predicted finish (with slack)
        /// even under the largest allocation it can use is later than this many seconds
        /// before its deadline, it is guaranteed that allocation at once, without
        /// hysteresis or dead zone, while it stays so (default unset: never).
        #[serde(default)]
        all_in_within_s: Option<f64>,
        /// With `all_in_within_s`: only a job whose observed slowdown against its
        /// profile is above this is taken all in (default 0: any job; 1: only a job
        /// heavier than profiled).
        #[serde(default)]
        all_in_slowdown: f64,
        /// While a deadline job is all in, keep the control law's smoothed allocation
        /// beside the guarantee, so that once it is no longer late at the cap it comes
        /// down to where the law would be at once (default false: from the cap).
        #[serde(default)]
        all_in_keep_smoothed: bool,
        /// With `all_in_within_s`: the slack the finish under the largest allocation is
        /// predicted with for that test (default unset: `slack`).
        #[serde(default)]
        all_in_slack: Option<f64>,
        /// The all-in test's margin is at least this share of the time left to the
        /// deadline, beside `all_in_within_s` (default 0: off).
        #[serde(default)]
        all_in_margin: f64,
        /// The share of the straggler reserves the all-in test's finish at the largest
        /// allocation keeps, in [0, 1] (default 1: all of them).
        #[serde(default = "jockey_defaults::one")]
        all_in_reserve: f64,
        /// The slack at progress 1: `slack` applies at progress 0 and the slack runs
        /// linearly between (default unset: `slack` throughout).
        #[serde(default)]
        slack_at_end: Option<f64>,
        /// With `stage_reserve`: stages whose profile holds at least this many task
        /// times are kept out of the reserve (default 0: every stage with tasks left).
        #[serde(default)]
        stage_reserve_below: u32,
        /// With `stage_reserve`: price the reserve by its chance, sizing the raw
        /// allocation by the expected utility over the job with and without a
        /// straggler on the stages left, the smallest allocation within this much
        /// utility of the best (default unset: the reserve added to every prediction).
        #[serde(default)]
        stage_reserve_chance: Option<f64>,
        /// With `stage_reserve`: a stage whose tasks have all started is kept out of
        /// the reserve (default false: every stage with tasks not completed).
        #[serde(default)]
        stage_reserve_until_started: bool,
        /// The pace check: the completion model's predictions are scaled by the time the run took to reach
        /// its progress over the time the model expected, at least this (default 0:
        /// off).
        #[serde(default)]
        pace_floor: f64,
        /// With `pace_floor`: the most the pace check scales predictions by (default
        /// 1: it only lowers them).
        #[serde(default = "jockey_defaults::one")]
        pace_ceiling: f64,
        /// With `pace_floor`: the pace scales the straggler reserves too (default
        /// false: the completion model's prediction only).
        #[serde(default)]
        pace_scales_reserves: bool,
        /// With `pace_floor`: the pace's earlier intervals are multiplied by this at
        /// every step, in (0, 1] (default 1: the whole run alike).
        #[serde(default = "jockey_defaults::one")]
        pace_decay: f64,
        /// What the observed slowdown is shrunk towards before the run's tasks have
        /// shown their own, in [0.5, 4] (default 1: the profile's).
        #[serde(default = "jockey_defaults::one")]
        slowdown_prior: f64,
    },
}

fn dress_theta() -> f64 {
    0.1
}
fn dress_delta() -> f64 {
    0.1
}
fn dress_interval() -> f64 {
    2.0
}
fn dress_window() -> f64 {
    10.0
}
fn dress_heading() -> u32 {
    2
}

/// Serde defaults of the `jockey` settings (the paper's values, §5, but hysteresis:
/// α = 0.5 missed no more and held less than the paper's 0.2 in the simulator's §5 runs;
/// and the straggler reserve, not the paper's: at 0.97 it missed fewer for a few points
/// of allocation there).
mod jockey_defaults {
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

impl Default for PolicySettings {
    /// `fifo`, what a master runs when `[policy]` is left out.
    fn default() -> PolicySettings {
        PolicySettings::Fifo {}
    }
}

/// Settings that parse but cannot work.
#[derive(Clone, PartialEq, Debug, Error)]
pub enum PolicySettingsError {
    /// A `capacity` queue's share is not a fraction in (0, 1].
    #[error("queues.{queue}: share must be in (0, 1], got {share}")]
    ShareOutOfRange {
        /// The queue.
        queue: String,
        /// The share given.
        share: f64,
    },
    /// A `dress` setting is outside its range.
    #[error("{field}: must be in {range}, got {value}")]
    OutOfRange {
        /// The setting.
        field: &'static str,
        /// Its allowed range.
        range: &'static str,
        /// The value given.
        value: f64,
    },
    /// The `capacity` queue shares add up to more than the whole cluster.
    #[error("queues: shares add up to {sum}; they must add up to at most 1")]
    SharesOverOne {
        /// Their sum.
        sum: f64,
    },
    /// A `proportional` setting out of range.
    #[error("{field}: {problem}")]
    Proportional {
        /// The field, e.g. `rates.alice`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A `jockey` setting is outside the values it can take.
    #[error("{field}: must be {range}, got {value}")]
    JockeyOutOfRange {
        /// The setting.
        field: &'static str,
        /// The values it takes.
        range: &'static str,
        /// The value given.
        value: f64,
    },
    /// The `jockey` utility curve is not one a job spec could carry either.
    #[error("utility: {0}")]
    Utility(String),
    /// A `jockey` setting moved from its default that does nothing without another.
    #[error("{field}: has no effect unless {needs}; set that as well or leave {field} out")]
    JockeyNeeds {
        /// The setting.
        field: &'static str,
        /// What it acts with.
        needs: &'static str,
    },
}

impl PolicySettings {
    /// Which policy these settings are for.
    pub fn name(&self) -> PolicyName {
        match self {
            PolicySettings::Fifo {} => PolicyName::Fifo,
            PolicySettings::Fair { .. } => PolicyName::Fair,
            PolicySettings::Priority {} => PolicyName::Priority,
            PolicySettings::Capacity { .. } => PolicyName::Capacity,
            PolicySettings::GangFifo {} => PolicyName::GangFifo,
            PolicySettings::Dress { .. } => PolicyName::Dress,
            PolicySettings::Edf {} => PolicyName::Edf,
            PolicySettings::Proportional(_) => PolicyName::Proportional,
            PolicySettings::Jockey { .. } => PolicyName::Jockey,
        }
    }

    /// Checks values serde cannot: the capacity queue shares.
    pub fn check(&self) -> Result<(), PolicySettingsError> {
        match self {
            PolicySettings::Capacity { queues, .. } => check_queue_shares(queues),
            PolicySettings::Proportional(dp) => match dp.problem() {
                Some((field, problem)) => Err(PolicySettingsError::Proportional { field, problem }),
                None => Ok(()),
            },
            PolicySettings::Dress { theta, initial_delta, interval_secs, window_secs, .. } => {
                check_range("theta", *theta, "(0, 1)", |v| v > 0.0 && v < 1.0)?;
                check_range("initial_delta", *initial_delta, "[0, 1]", |v| (0.0..=1.0).contains(&v))?;
                check_range("interval_secs", *interval_secs, "(0, 86400]", |v| v > 0.0 && v <= 86_400.0)?;
                check_range("window_secs", *window_secs, "(0, 86400]", |v| v > 0.0 && v <= 86_400.0)
            }
            PolicySettings::Jockey { .. } => self.jockey_config().map(|_| ()),
            PolicySettings::Fifo {}
            | PolicySettings::Fair { .. }
            | PolicySettings::Priority {}
            | PolicySettings::GangFifo {}
            | PolicySettings::Edf {} => Ok(()),
        }
    }

    /// The policy these settings describe, ready to run. Assumes [`check`](Self::check)
    /// passed (the config readers call it); unchecked shares only skew the decisions.
    pub fn build(&self) -> Box<dyn Policy> {
        match self {
            PolicySettings::Fifo {} => Box::new(Fifo::default()),
            PolicySettings::Fair { preemption } => Box::new(Fair::new(*preemption)),
            PolicySettings::Priority {} => Box::new(Priority::default()),
            PolicySettings::Capacity { queues, preemption } => {
                Box::new(Capacity::new(queues.clone(), *preemption))
            }
            PolicySettings::GangFifo {} => Box::new(GangFifo),
            PolicySettings::Dress { theta, initial_delta, interval_secs, window_secs, heading, gang } => {
                Box::new(Dress::new(DressSettings {
                    theta: *theta,
                    initial_delta: *initial_delta,
                    interval_ms: (interval_secs * 1000.0).round().max(1.0) as u64,
                    window_ms: (window_secs * 1000.0).round().max(0.0) as u64,
                    heading: *heading,
                    gang: *gang,
                }))
            }
            PolicySettings::Edf {} => Box::new(Edf::default()),
            PolicySettings::Proportional(dp) => Box::new(Proportional::new(dp)),
            PolicySettings::Jockey { .. } => Box::new(Jockey::new(self.jockey_config().unwrap_or_default())),
        }
    }

    /// The `jockey` settings as the policy takes them, checked; the defaults for any
    /// other policy.
    pub fn jockey_config(&self) -> Result<JockeyConfig, PolicySettingsError> {
        let PolicySettings::Jockey {
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
            slack_at_end,
            stage_reserve_below,
            stage_reserve_chance,
            stage_reserve_until_started,
            pace_floor,
            pace_ceiling,
            pace_scales_reserves,
            pace_decay,
            slowdown_prior,
        } = self
        else {
            return Ok(JockeyConfig::default());
        };
        let within = |field, range, value: f64, ok: bool| {
            if ok { Ok(()) } else { Err(PolicySettingsError::JockeyOutOfRange { field, range, value }) }
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
            within("all_in_within_s", "a finite number", *within_s, within_s.is_finite())?;
        }
        within("all_in_slowdown", "at least 0", *all_in_slowdown, *all_in_slowdown >= 0.0)?;
        if let Some(slack) = all_in_slack {
            within("all_in_slack", "at least 0.1", *slack, *slack >= 0.1)?;
        }
        within("all_in_margin", "in [0, 1)", *all_in_margin, (0.0..1.0).contains(all_in_margin))?;
        within("all_in_reserve", "in [0, 1]", *all_in_reserve, (0.0..=1.0).contains(all_in_reserve))?;
        if let Some(slack) = slack_at_end {
            within("slack_at_end", "at least 0.1", *slack, *slack >= 0.1)?;
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
            if changed && !partner_on {
                Err(PolicySettingsError::JockeyNeeds { field, needs })
            } else {
                Ok(())
            }
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
        needs("slowdown_prior", "count_running is false", *slowdown_prior != 1.0, !*count_running)?;
        // The policy's curve applies to deadline jobs only, so it always has a deadline.
        let utility = if utility.0.is_empty() {
            Utility::default()
        } else if let Some(problem) = utility.problem(true) {
            return Err(PolicySettingsError::Utility(problem));
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
            slack_at_end: *slack_at_end,
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

/// Checks that `value` of `field` is within `range` (NaN is not).
fn check_range(
    field: &'static str,
    value: f64,
    range: &'static str,
    within: impl Fn(f64) -> bool,
) -> Result<(), PolicySettingsError> {
    if within(value) { Ok(()) } else { Err(PolicySettingsError::OutOfRange { field, range, value }) }
}

/// Checks `capacity` queue shares: each in (0, 1], summing to at most 1.
fn check_queue_shares(shares: &BTreeMap<String, f64>) -> Result<(), PolicySettingsError> {
    for (queue, &share) in shares {
        if !(share > 0.0 && share <= 1.0) {
            return Err(PolicySettingsError::ShareOutOfRange { queue: queue.clone(), share });
        }
    }
    let sum: f64 = shares.values().sum();
    if sum > 1.0 + 1e-9 {
        return Err(PolicySettingsError::SharesOverOne { sum });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde::de::value::{Error as ValueError, MapDeserializer};

    use super::*;

    /// Deserializes a flat `[policy]` table of string values (enough for `name`).
    fn from_pairs(pairs: &[(&'static str, &'static str)]) -> Result<PolicySettings, ValueError> {
        PolicySettings::deserialize(MapDeserializer::new(pairs.iter().copied()))
    }

    /// The variant names serde derived from the enum, read from its own "unknown
    /// variant" message, so that a new variant shows up here without anyone listing it.
    fn variants_serde_knows() -> Vec<String> {
        let err = from_pairs(&[("name", "no-such-policy")]).unwrap_err().to_string();
        let (_, list) = err.split_once("expected one of ").unwrap_or_else(|| panic!("{err}"));
        list.split(", ").map(|v| v.trim_matches('`').to_string()).collect()
    }

    #[test]
    fn every_policy_settings_variant_is_listed_in_policy_name_all() {
        let listed: Vec<&str> = PolicyName::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(
            variants_serde_knows(),
            listed,
            "a PolicySettings variant is missing from PolicyName::ALL"
        );
        for name in PolicyName::ALL {
            let settings = from_pairs(&[("name", name.name())]).unwrap();
            assert_eq!(settings.name(), name);
            assert_eq!(settings.build().name(), name);
            assert_eq!(settings.check(), Ok(()), "{name}: its defaults must be valid");
        }
    }

    #[test]
    fn defaults_fill_every_field_but_the_name() {
        assert_eq!(from_pairs(&[("name", "fair")]).unwrap(), PolicySettings::Fair { preemption: false });
        assert_eq!(
            from_pairs(&[("name", "capacity")]).unwrap(),
            PolicySettings::Capacity { queues: BTreeMap::new(), preemption: false }
        );
        assert_eq!(PolicySettings::default().name(), PolicyName::Fifo);
        let err = from_pairs(&[]).unwrap_err().to_string();
        assert!(err.contains("missing field `name`"), "{err}");
    }

    #[test]
    fn a_field_the_named_policy_does_not_take_is_refused() {
        let err = from_pairs(&[("name", "fair"), ("queues", "x")]).unwrap_err().to_string();
        assert!(err.contains("unknown field `queues`"), "{err}");
        let err = from_pairs(&[("name", "fifo"), ("preemption", "true")]).unwrap_err().to_string();
        assert!(err.contains("preemption"), "{err}");
    }

    #[test]
    fn proportional_takes_its_own_keys_only_and_checks_its_amounts() {
        let dp = from_pairs(&[("name", "proportional")]).unwrap();
        assert_eq!(dp, PolicySettings::Proportional(ProportionalSettings::default()));
        let err = from_pairs(&[("name", "proportional"), ("queues", "x")]).unwrap_err().to_string();
        assert!(err.contains("unknown field `queues`"), "{err}");
        let mut bad = ProportionalSettings::default();
        bad.income.insert("lab".into(), f64::INFINITY);
        let err = PolicySettings::Proportional(bad).check().unwrap_err();
        assert!(err.to_string().starts_with("income.lab: must be a number of credits"), "{err}");
    }

    #[test]
    fn queue_shares_must_be_fractions_adding_up_to_at_most_one() {
        let capacity = |queues: &[(&str, f64)]| PolicySettings::Capacity {
            queues: queues.iter().map(|&(q, s)| (q.to_string(), s)).collect(),
            preemption: false,
        };
        assert_eq!(capacity(&[("a", 0.7), ("b", 0.3)]).check(), Ok(()));
        assert_eq!(capacity(&[]).check(), Ok(()));
        let over = capacity(&[("a", 0.7), ("b", 0.4)]).check().unwrap_err();
        assert!(matches!(over, PolicySettingsError::SharesOverOne { .. }), "{over}");
        assert!(over.to_string().starts_with("queues: shares add up to 1.1"), "{over}");
        let zero = capacity(&[("a", 0.0)]).check().unwrap_err();
        assert_eq!(zero.to_string(), "queues.a: share must be in (0, 1], got 0");
        let nan = capacity(&[("a", f64::NAN)]).check();
        assert!(matches!(nan, Err(PolicySettingsError::ShareOutOfRange { .. })));
    }

    #[test]
    fn jockey_settings_default_to_the_papers_and_refuse_what_cannot_work() {
        let parse =
            |text: &str| toml::from_str::<PolicySettings>(&format!("name = \"jockey\"\n{text}")).unwrap();
        let config = parse("").jockey_config().unwrap();
        assert_eq!(config, JockeyConfig::default());
        assert_eq!(config.interval_ms, 60_000);
        assert_eq!(
            (config.control.slack, config.control.hysteresis, config.control.dead_zone_ms),
            (1.2, 0.5, 180_000)
        );
        let custom = parse(
            "interval_s = 5\nslack = 1.5\npredictor = \"amdahl\"\nindicator = \"cp\"\nadapt = false\nutility = [[0, 2.0], [1, -1.0]]",
        );
        let config = custom.jockey_config().unwrap();
        assert_eq!((config.interval_ms, config.control.slack), (5_000, 1.5));
        assert_eq!(
            (config.predictor, config.indicator, config.adapt),
            (Predictor::Amdahl, Indicator::Cp, false)
        );
        assert_eq!(config.control.utility.points, vec![(0, 2.0), (60_000, -1.0)]);
        let both = parse("spare = true\npooled_tail = true\ncount_running = true").jockey_config().unwrap();
        assert_eq!((both.spare, both.pooled_tail, both.count_running), (true, true, true));
        let later =
            parse("hysteresis_down = 0.6\ndemand_cap = true\npooled_below = 30").jockey_config().unwrap();
        assert_eq!(
            (later.control.hysteresis_down, later.demand_cap, later.pooled_below),
            (Some(0.6), true, 30)
        );
        assert_eq!((config.control.hysteresis_down, config.demand_cap), (None, true));
        let newer = parse("profile_runs = 3\ntail_quantile = 0.99").jockey_config().unwrap();
        assert_eq!((newer.profile_runs, newer.tail_quantile), (3, 0.99));
        assert_eq!((config.profile_runs, config.tail_quantile), (0, 0.97));
        let split = parse("raise_early = true\nstage_reserve = 0.5").jockey_config().unwrap();
        assert_eq!((split.control.raise_early, split.stage_reserve), (true, 0.5));
        assert_eq!((config.control.raise_early, config.stage_reserve), (false, 0.0));
        assert_eq!(parse("expected_utility = 0.05").jockey_config().unwrap().expected_utility, Some(0.05));
        assert_eq!(config.expected_utility, None);
        assert!(!config.carry_rounding);
        assert!(parse("carry_rounding = true").jockey_config().unwrap().carry_rounding);
        let quantile = parse("stage_reserve = 1\nstage_reserve_quantile = 0.95").jockey_config().unwrap();
        assert_eq!((quantile.stage_reserve_quantile, config.stage_reserve_quantile), (0.95, 1.0));
        let ahead =
            parse("ahead_steps = 2\nahead_hysteresis = 0.8\nahead_slack = 1.0").jockey_config().unwrap();
        assert_eq!((ahead.ahead_steps, ahead.ahead_hysteresis, ahead.ahead_slack), (2, 0.8, Some(1.0)));
        assert_eq!((config.ahead_steps, config.ahead_hysteresis, config.ahead_slack), (0, 1.0, None));
        let err = parse("ahead_hysteresis = 0").check().unwrap_err();
        assert_eq!(err.to_string(), "ahead_hysteresis: must be in (0, 1], got 0");
        assert_eq!(parse("all_in_within_s = 180").jockey_config().unwrap().all_in_within_ms, Some(180_000));
        assert_eq!(parse("all_in_within_s = -30").jockey_config().unwrap().all_in_within_ms, Some(-30_000));
        assert_eq!(config.all_in_within_ms, None);
        assert_eq!(
            parse("all_in_within_s = 0\nall_in_slowdown = 1.0").jockey_config().unwrap().all_in_slowdown,
            1.0
        );
        assert_eq!(config.all_in_slowdown, 0.0);
        assert!(
            parse("all_in_margin = 0.1\nall_in_keep_smoothed = true")
                .jockey_config()
                .unwrap()
                .all_in_keep_smoothed
        );
        assert!(!config.all_in_keep_smoothed);
        assert_eq!(
            parse("all_in_within_s = 0\nall_in_slack = 1.0").jockey_config().unwrap().all_in_slack,
            Some(1.0)
        );
        assert_eq!(config.all_in_slack, None);
        assert_eq!(parse("slack_at_end = 1.05").jockey_config().unwrap().slack_at_end, Some(1.05));
        assert_eq!(config.slack_at_end, None);
        assert_eq!(
            parse("stage_reserve = 1\nstage_reserve_below = 20").jockey_config().unwrap().stage_reserve_below,
            20
        );
        assert_eq!(config.stage_reserve_below, 0);
        assert_eq!(
            parse("stage_reserve = 1\nstage_reserve_chance = 0.02")
                .jockey_config()
                .unwrap()
                .stage_reserve_chance,
            Some(0.02)
        );
        assert_eq!(config.stage_reserve_chance, None);
        assert!(
            parse("stage_reserve = 1\nstage_reserve_until_started = true")
                .jockey_config()
                .unwrap()
                .stage_reserve_until_started
        );
        assert!(!config.stage_reserve_until_started);
        let pace = parse("pace_floor = 0.5\npace_ceiling = 1.2").jockey_config().unwrap();
        assert_eq!((pace.pace_floor, pace.pace_ceiling), (0.5, 1.2));
        assert_eq!((config.pace_floor, config.pace_ceiling), (0.0, 1.0));
        assert!(
            parse("pace_floor = 0.5\npace_scales_reserves = true")
                .jockey_config()
                .unwrap()
                .pace_scales_reserves
        );
        assert!(!config.pace_scales_reserves);
        let err = parse("stage_reserve_chance = -0.1").check().unwrap_err();
        assert_eq!(err.to_string(), "stage_reserve_chance: must be at least 0, got -0.1");
        let err = parse("pace_floor = 1.5").check().unwrap_err();
        assert_eq!(err.to_string(), "pace_floor: must be in [0, 1], got 1.5");
        assert_eq!(parse("pace_floor = 0.5\npace_decay = 0.5").jockey_config().unwrap().pace_decay, 0.5);
        assert_eq!(config.pace_decay, 1.0);
        assert_eq!(parse("slowdown_prior = 1.4").jockey_config().unwrap().slowdown_prior, 1.4);
        assert_eq!(config.slowdown_prior, 1.0);
        let err = parse("slowdown_prior = 5").check().unwrap_err();
        assert_eq!(err.to_string(), "slowdown_prior: must be in [0.5, 4], got 5");
        let err = parse("pace_decay = 0").check().unwrap_err();
        assert_eq!(err.to_string(), "pace_decay: must be in (0, 1], got 0");
        let err = parse("pace_ceiling = 0.9").check().unwrap_err();
        assert_eq!(err.to_string(), "pace_ceiling: must be at least 1, got 0.9");
        let err = parse("slack_at_end = 0").check().unwrap_err();
        assert_eq!(err.to_string(), "slack_at_end: must be at least 0.1, got 0");
        let err = parse("all_in_slack = 0.05").check().unwrap_err();
        assert_eq!(err.to_string(), "all_in_slack: must be at least 0.1, got 0.05");
        let all_in = parse("all_in_margin = 0.1\nall_in_reserve = 0.5").jockey_config().unwrap();
        assert_eq!((all_in.all_in_margin, all_in.all_in_reserve), (0.1, 0.5));
        assert_eq!((config.all_in_margin, config.all_in_reserve), (0.0, 1.0));
        let err = parse("all_in_margin = 1").check().unwrap_err();
        assert_eq!(err.to_string(), "all_in_margin: must be in [0, 1), got 1");
        let err = parse("all_in_reserve = 1.5").check().unwrap_err();
        assert_eq!(err.to_string(), "all_in_reserve: must be in [0, 1], got 1.5");
        let err = parse("all_in_slowdown = -1").check().unwrap_err();
        assert_eq!(err.to_string(), "all_in_slowdown: must be at least 0, got -1");
        let err = parse("ahead_slack = 0").check().unwrap_err();
        assert_eq!(err.to_string(), "ahead_slack: must be at least 0.1, got 0");
        let err = parse("stage_reserve = -1").jockey_config().unwrap_err();
        assert_eq!(err.to_string(), "stage_reserve: must be at least 0, got -1");
        let err = parse("tail_quantile = 1.5").check().unwrap_err();
        assert_eq!(err.to_string(), "tail_quantile: must be in [0, 1], got 1.5");
        let err = parse("hysteresis_down = 1.5").check().unwrap_err();
        assert_eq!(err.to_string(), "hysteresis_down: must be in (0, 1], got 1.5");
        let err = parse("hysteresis = 0").check().unwrap_err();
        assert_eq!(err.to_string(), "hysteresis: must be in (0, 1], got 0");
        let err = parse("utility = [[5, 1.0], [1, 0.0]]").check().unwrap_err();
        assert!(err.to_string().starts_with("utility: point 1: times must not go back"), "{err}");
        let three = toml::from_str::<PolicySettings>("name = \"jockey\"\nutility = [[0, 1.0, 7]]");
        assert!(three.unwrap_err().to_string().contains("pair of numbers"), "a third number is refused");
        assert!(toml::from_str::<PolicySettings>("name = \"jockey\"\npredictor = \"psychic\"").is_err());
    }

    #[test]
    fn a_jockey_setting_that_refines_another_is_refused_without_it() {
        let check = |text: &str| {
            toml::from_str::<PolicySettings>(&format!("name = \"jockey\"\n{text}")).unwrap().check()
        };
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
            "all_in_within_s = 180\nall_in_slowdown = 1.3\nall_in_keep_smoothed = true\nall_in_slack = 1.0\nall_in_reserve = 0.5",
            "all_in_margin = 0.2\nall_in_slowdown = 1.3",
            "slowdown_prior = 1.35",
            "stage_reserve_quantile = 1\npace_decay = 1\nahead_hysteresis = 1\nall_in_slowdown = 0\nall_in_reserve = 1\ncount_running = true\nslowdown_prior = 1",
        ];
        for text in accepted {
            assert_eq!(check(text), Ok(()), "{text}");
        }
    }
}
