//! [`PolicySettings`]: the one settings type per policy, read from the `[policy]` table of
//! `master.toml` by the master and from `--policy-config` / `--set` by the simulator,
//! checked here and turned into a running [`Policy`] here. Adding a policy means adding a
//! variant (with its fields and their serde defaults) and one arm in each `match` below;
//! the tests at the end fail until [`PolicyName::ALL`] lists it too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::jockey::{Jockey, JockeySettings, JockeySettingsError};
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
    Jockey(Box<JockeySettings>),
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
    /// A `jockey` setting cannot work.
    #[error(transparent)]
    Jockey(#[from] JockeySettingsError),
}

impl PolicySettingsError {
    /// The `[policy]` key the error is about, dotted for a key of a nested table
    /// (`queues.small`).
    pub fn key(&self) -> String {
        match self {
            PolicySettingsError::ShareOutOfRange { queue, .. } => format!("queues.{queue}"),
            PolicySettingsError::OutOfRange { field, .. } => field.to_string(),
            PolicySettingsError::SharesOverOne { .. } => "queues".to_string(),
            PolicySettingsError::Proportional { field, .. } => field.clone(),
            PolicySettingsError::Jockey(err) => err.key().to_string(),
        }
    }
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
            PolicySettings::Jockey(_) => PolicyName::Jockey,
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
            PolicySettings::Jockey(jockey) => jockey.config().map(|_| ()).map_err(Into::into),
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
            PolicySettings::Jockey(jockey) => Box::new(Jockey::new(jockey.config().unwrap_or_default())),
        }
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
}
