//! Job specs: the TOML a user submits, parsed into [`JobSpec`], validated with errors
//! that name the field and the fix, and command templates rendered per task.
//!
//! ```toml
//! name = "wordcount"
//! input = "/data/text"          # optional, substituted as {input}
//! max_attempts = 4              # optional, attempts per task before the job fails
//! deadline = "+30m"             # optional: "+1h30m" after admission, or "2026-11-22T18:00:00Z"
//! account = "research"          # optional: the account it runs on (default: your own)
//! input_bytes = 1073741824      # optional: input size, recorded in history for estimates
//! time_limit = "10m"            # optional: tasks killed and the job failed this long after it started
//! after = [3, 4]                # optional: stays pending until jobs j3 and j4 completed; fails if one does not
//! utility = [[0, 1], [10, -1]]  # optional, with a deadline: [minutes after it, utility] for `jockey`
//!
//! [[stage]]
//! name = "map"
//! tasks = 10
//! slot = "map"
//! command = "slotmarket-task wordcount map --input {input} --task {task} --reducers {tasks.reduce} --job-dir {job_dir}"
//!
//! [[stage]]
//! name = "reduce"
//! tasks = 2
//! slot = "reduce"
//! after = ["map"]               # a barrier: starts once every map task completed
//! command = "slotmarket-task wordcount reduce --task {task} --maps {tasks.map} --job-dir {job_dir}"
//! ```

mod deadline;
mod limits;
mod shell;
mod template;
mod utility;
mod validate;

pub use deadline::{DeadlineSpec, format_duration, format_rfc3339, parse_duration};
pub use limits::{MAX_TIME_LIMIT, TimeLimit};
pub use template::{PLACEHOLDERS, TaskVars, TemplateError, render};
pub use utility::{MAX_UTILITY_MINUTES, MAX_UTILITY_POINTS, MAX_UTILITY_VALUE, UtilityCurve};
pub use validate::{
    MAX_INPUT_LEN, MAX_JOB_DEPENDENCIES, MAX_STAGE_NAME_LEN, MAX_STAGES, MAX_TASKS_PER_STAGE, MAX_TEXT_LEN,
    SpecError, validate,
};

use serde::{Deserialize, Serialize};

use crate::ids::JobId;

/// Attempts per task when the spec does not say.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;

/// A job: a DAG of stages joined by barriers.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// A short human name shown in tables; need not be unique.
    pub name: String,
    /// Substituted as `{input}` in command templates.
    #[serde(default)]
    pub input: Option<String>,
    /// Attempts per task before the job fails (default 4).
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// The stages, in any order that respects `after`.
    #[serde(rename = "stage")]
    pub stages: Vec<StageSpec>,
    /// Service class, used by the `priority` policy and reported per class.
    #[serde(default)]
    pub class: Option<JobClass>,
    /// Queue for the `capacity` policy; `default` when unset.
    #[serde(default)]
    pub queue: Option<String>,
    /// When the job should finish: relative to admission or absolute.
    #[serde(default)]
    pub deadline: Option<DeadlineSpec>,
    /// The account the job runs on and is charged to; the submitter's own when unset.
    #[serde(default)]
    pub account: Option<String>,
    /// Size of the job's input in bytes, where the submitter knows it: recorded in the
    /// job's history as a feature for runtime estimates.
    #[serde(default)]
    pub input_bytes: Option<u64>,
    /// The submitter's own runtime estimate, used by MRM admission for a job name the
    /// master has no history of yet.
    #[serde(default)]
    pub estimate: Option<EstimateSpec>,
    /// How long the job may run once its first task started; then its tasks are killed
    /// and it fails, saying so.
    #[serde(default)]
    pub time_limit: Option<TimeLimit>,
    /// Jobs that must complete before this one starts (like Slurm's
    /// `--dependency=afterok`); it fails if one of them fails or is cancelled.
    #[serde(default)]
    pub after: Vec<JobId>,
    /// The job's own utility curve for the `jockey` policy, `[minutes after the
    /// deadline, utility]` points; the policy's `utility` setting when unset. Needs a
    /// deadline.
    #[serde(default)]
    pub utility: Option<UtilityCurve>,
}

/// A submitter's runtime estimate (`[estimate]` in a spec): the mean time of one task of
/// each slot kind and the relative spread of that time, from which the master derives a
/// prediction interval until the job's own history takes over.
///
/// ```toml
/// [estimate]
/// map_task_ms = 30000
/// reduce_task_ms = 60000
/// spread_pct = 20
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimateSpec {
    /// Mean milliseconds one map task runs; required when the job has map tasks.
    #[serde(default)]
    pub map_task_ms: Option<u64>,
    /// Mean milliseconds one reduce task runs; required when the job has reduce tasks.
    #[serde(default)]
    pub reduce_task_ms: Option<u64>,
    /// Standard deviation of the job's mean task time as a percentage of it: how far
    /// off this estimate may be (default 20).
    #[serde(default)]
    pub spread_pct: Option<u32>,
    /// Standard deviation of one task's time around the job's mean, as a percentage of
    /// it: how unevenly the tasks of a stage run, which sets how long the slowest one
    /// takes (default: `spread_pct`).
    #[serde(default)]
    pub task_spread_pct: Option<u32>,
}

impl EstimateSpec {
    /// Spread assumed when the spec gives none, in percent of the mean.
    pub const DEFAULT_SPREAD_PCT: u32 = 20;

    /// The mean task time given for `kind`, if any.
    pub fn task_ms(&self, kind: SlotKind) -> Option<u64> {
        match kind {
            SlotKind::Map => self.map_task_ms,
            SlotKind::Reduce => self.reduce_task_ms,
        }
    }

    /// The relative spread of the estimate as a fraction.
    pub fn spread(&self) -> f64 {
        f64::from(self.spread_pct.unwrap_or(Self::DEFAULT_SPREAD_PCT)) / 100.0
    }

    /// The relative spread of one task's time around the mean, as a fraction.
    pub fn task_spread(&self) -> f64 {
        self.task_spread_pct.map_or(self.spread(), |pct| f64::from(pct) / 100.0)
    }
}

/// The service classes the papers distinguish (MRM §6, DRESS §V).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobClass {
    /// Waiting costs the user: served first by `priority`.
    DelaySensitive,
    /// Can wait for cheaper or spare capacity.
    DelayTolerant,
}

impl JobClass {
    /// The name used in specs, traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            JobClass::DelaySensitive => "delay-sensitive",
            JobClass::DelayTolerant => "delay-tolerant",
        }
    }
}

impl JobSpec {
    /// Parses and validates a TOML job spec.
    pub fn from_toml(text: &str) -> Result<JobSpec, SpecError> {
        let spec: JobSpec = toml::from_str(text).map_err(|e| SpecError::Toml(e.to_string()))?;
        validate(&spec)?;
        Ok(spec)
    }

    /// Attempts per task, applying the default.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS)
    }

    /// Total number of tasks over all stages.
    pub fn total_tasks(&self) -> u64 {
        self.stages.iter().map(|s| u64::from(s.tasks)).sum()
    }

    /// The position of the stage called `name`.
    pub fn stage_index(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }
}

/// One stage: `tasks` copies of a command, each in a slot of kind `slot`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// Unique within the job; other stages name it in `after`.
    pub name: String,
    /// Number of tasks (at least 1).
    pub tasks: u32,
    /// The kind of slot each task needs.
    pub slot: SlotKind,
    /// Command template run by `/bin/sh -c` after substitution (see [`PLACEHOLDERS`]).
    pub command: String,
    /// Stages that must complete entirely before this one starts.
    #[serde(default)]
    pub after: Vec<String>,
}

/// The two kinds of slot an agent offers.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SlotKind {
    /// A map slot.
    Map,
    /// A reduce slot.
    Reduce,
}

impl SlotKind {
    /// Both kinds, map first.
    pub const ALL: [SlotKind; 2] = [SlotKind::Map, SlotKind::Reduce];

    /// Lower-case name used in specs and tables.
    pub fn name(self) -> &'static str {
        match self {
            SlotKind::Map => "map",
            SlotKind::Reduce => "reduce",
        }
    }
}

impl std::fmt::Display for SlotKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const WORDCOUNT: &str = r#"
        name = "wordcount"
        input = "/data/text"
        [[stage]]
        name = "map"
        tasks = 10
        slot = "map"
        command = "task map --input {input} --task {task} --reducers {tasks.reduce} --job-dir {job_dir}"
        [[stage]]
        name = "reduce"
        tasks = 2
        slot = "reduce"
        after = ["map"]
        command = "task reduce --task {task} --job-dir {job_dir}"
    "#;

    #[test]
    fn a_map_reduce_spec_parses() {
        let spec = JobSpec::from_toml(WORDCOUNT).unwrap();
        assert_eq!(spec.stages.len(), 2);
        assert_eq!(spec.stages[1].after, vec!["map".to_string()]);
        assert_eq!(spec.total_tasks(), 12);
        assert_eq!(spec.max_attempts(), DEFAULT_MAX_ATTEMPTS);
        assert_eq!((spec.class, &spec.queue), (None, &None));
        let classed = format!("class = \"delay-sensitive\"\nqueue = \"research\"\n{WORDCOUNT}");
        let classed = JobSpec::from_toml(&classed).unwrap();
        assert_eq!(classed.class, Some(JobClass::DelaySensitive));
        assert_eq!(classed.queue.as_deref(), Some("research"));
        assert_eq!(spec.stage_index("reduce"), Some(1));
    }

    #[test]
    fn unknown_fields_are_refused_with_their_name() {
        let err = JobSpec::from_toml("name = \"x\"\ntaks = 3\nstage = []").unwrap_err();
        assert!(err.to_string().contains("taks"), "{err}");
    }

    #[test]
    fn specs_round_trip_through_postcard() {
        let spec = JobSpec::from_toml(WORDCOUNT).unwrap();
        let bytes = postcard::to_allocvec(&spec).unwrap();
        assert_eq!(postcard::from_bytes::<JobSpec>(&bytes).unwrap(), spec);
    }
}
