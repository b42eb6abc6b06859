//! The WORKLOAD.toml format: what a generated trace looks like (how many jobs, how they
//! arrive, their size bins, programs and classes), parsed and checked with errors that
//! name the field. MRM's Table 1 is the default size mix.
//!
//! ```toml
//! name = "mrm-mix"
//! seed = 1
//! jobs = 40
//! mean_interarrival_s = 2.5      # Poisson arrivals (exponential gaps)
//! arrivals = "poisson"           # or "fixed": every gap is the mean
//! scale = 0.075                  # task counts x scale (at least 1 where the bin has any)
//! programs = ["wordcount", "grep", "sort", "pi"]   # rotated job by job
//! input_mib_per_map = 16         # MRM: 64 MB of input per map task
//! pi_samples_per_map = 2000000
//!
//! [cluster]                      # for deadline estimates and, if nodes cannot be listed, utilisation
//! map_slots = 6
//! reduce_slots = 3
//!
//! [estimate]                     # seconds per task when the job runs alone
//! wordcount = { gen_s = 0.3, map_s = 0.5, reduce_s = 0.2 }
//!
//! [class.delay-sensitive]        # shares of the mix; the rest gets no class
//! share = 0.5
//! deadline_factor = 2.0          # deadline = submit + factor x estimate
//!
//! [[bin]]                        # replaces MRM Table 1 when given
//! percent = 38
//! maps = 1                       # or [min, max], drawn uniformly
//! reduces = 0
//! ```

use serde::{Deserialize, Serialize};
use slotmarket_common::spec::JobClass;
use slotmarket_common::workload_mix::MRM_TABLE_1;

/// Most jobs one workload may plan.
const MAX_JOBS: u32 = 100_000;

/// A parsed, checked workload file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkloadFile {
    /// Names the run (output directory, job names' context); letters, digits, `.`, `_`, `-`.
    pub(crate) name: String,
    /// Seed of every draw; `--seed` overrides it.
    #[serde(default)]
    pub(crate) seed: u64,
    /// Jobs to submit.
    pub(crate) jobs: u32,
    /// Mean gap between arrivals in seconds (0 submits everything at once).
    pub(crate) mean_interarrival_s: f64,
    /// How gaps are drawn: `poisson` (exponential gaps, the default) or `fixed` (every
    /// gap is the mean, e.g. to time jobs one at a time).
    #[serde(default)]
    pub(crate) arrivals: Arrivals,
    /// Factor on every bin's task counts.
    #[serde(default = "one")]
    pub(crate) scale: f64,
    /// Programs, rotated job by job.
    #[serde(default = "all_programs")]
    pub(crate) programs: Vec<Program>,
    /// Input per map task in MiB (wordcount, grep, sort).
    #[serde(default = "default_input_mib")]
    pub(crate) input_mib_per_map: f64,
    /// Halton points per pi map task.
    #[serde(default = "default_pi_samples")]
    pub(crate) pi_samples_per_map: u64,
    /// The task program as the agents find it.
    #[serde(default = "default_task_command")]
    pub(crate) task_command: String,
    /// Attempts per task (the master's default when absent).
    #[serde(default)]
    pub(crate) max_attempts: Option<u32>,
    /// The cluster's slots.
    pub(crate) cluster: ClusterSlots,
    /// Per-task time estimates by program.
    #[serde(default)]
    pub(crate) estimate: Estimates,
    /// The class split and per-class settings.
    #[serde(default)]
    pub(crate) class: Classes,
    /// Size bins; MRM Table 1 when empty.
    #[serde(default, rename = "bin")]
    pub(crate) bins: Vec<Bin>,
}

/// How arrival gaps are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Arrivals {
    /// Exponential gaps with the mean: a Poisson process.
    #[default]
    Poisson,
    /// Every gap equals the mean.
    Fixed,
}

/// The real programs a job can run (`slotmarket-task` subcommands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Program {
    /// Word counts of generated text.
    Wordcount,
    /// Lines containing a substring, in generated text.
    Grep,
    /// TeraSort-style sort of generated records.
    Sort,
    /// Monte Carlo pi; no input.
    Pi,
}

impl Program {
    /// The name used in files and job names.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Program::Wordcount => "wordcount",
            Program::Grep => "grep",
            Program::Sort => "sort",
            Program::Pi => "pi",
        }
    }
}

/// Slots of the cluster the workload is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterSlots {
    /// Map slots over all agents.
    pub(crate) map_slots: u32,
    /// Reduce slots over all agents.
    pub(crate) reduce_slots: u32,
}

/// Seconds one task of each stage takes when the job has the cluster to itself.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskSeconds {
    /// A data generator task.
    #[serde(default = "one")]
    pub(crate) gen_s: f64,
    /// A map task.
    #[serde(default = "one")]
    pub(crate) map_s: f64,
    /// A reduce task.
    #[serde(default = "one")]
    pub(crate) reduce_s: f64,
}

impl Default for TaskSeconds {
    fn default() -> TaskSeconds {
        TaskSeconds { gen_s: 1.0, map_s: 1.0, reduce_s: 1.0 }
    }
}

/// Estimates by program; one second per task where absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Estimates {
    /// For wordcount jobs.
    pub(crate) wordcount: Option<TaskSeconds>,
    /// For grep jobs.
    pub(crate) grep: Option<TaskSeconds>,
    /// For sort jobs.
    pub(crate) sort: Option<TaskSeconds>,
    /// For pi jobs.
    pub(crate) pi: Option<TaskSeconds>,
}

impl Estimates {
    /// The estimate for `program`.
    pub(crate) fn of(&self, program: Program) -> TaskSeconds {
        let given = match program {
            Program::Wordcount => self.wordcount,
            Program::Grep => self.grep,
            Program::Sort => self.sort,
            Program::Pi => self.pi,
        };
        given.unwrap_or_default()
    }
}

/// Settings of the two classes.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Classes {
    /// `[class.delay-sensitive]`.
    #[serde(rename = "delay-sensitive")]
    pub(crate) delay_sensitive: Option<ClassSettings>,
    /// `[class.delay-tolerant]`.
    #[serde(rename = "delay-tolerant")]
    pub(crate) delay_tolerant: Option<ClassSettings>,
}

impl Classes {
    /// The settings of `class`, if the file has any.
    pub(crate) fn of(&self, class: JobClass) -> Option<&ClassSettings> {
        match class {
            JobClass::DelaySensitive => self.delay_sensitive.as_ref(),
            JobClass::DelayTolerant => self.delay_tolerant.as_ref(),
        }
    }
}

/// One class's share of the mix, deadline and queue.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClassSettings {
    /// Fraction of jobs in this class (0..=1).
    pub(crate) share: f64,
    /// Deadline = submit + factor x the job's estimate; no deadline when absent.
    #[serde(default)]
    pub(crate) deadline_factor: Option<f64>,
    /// The `capacity` policy's queue for this class's jobs.
    #[serde(default)]
    pub(crate) queue: Option<String>,
}

/// One size bin: how often it occurs and its task counts before scaling.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Bin {
    /// Weight of the bin (percent of jobs in Table 1; any positive weights work).
    pub(crate) percent: f64,
    /// Map tasks, drawn uniformly from the range.
    pub(crate) maps: Count,
    /// Reduce tasks, drawn uniformly from the range.
    pub(crate) reduces: Count,
}

/// A task count: one number or an inclusive `[min, max]` range.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum Count {
    /// Always this many.
    Fixed(u32),
    /// Uniform in `min..=max`.
    Range([u32; 2]),
}

impl Count {
    /// `(min, max)`.
    pub(crate) fn bounds(self) -> (u32, u32) {
        match self {
            Count::Fixed(n) => (n, n),
            Count::Range([lo, hi]) => (lo, hi),
        }
    }
}

fn one() -> f64 {
    1.0
}

fn all_programs() -> Vec<Program> {
    vec![Program::Wordcount, Program::Grep, Program::Sort, Program::Pi]
}

fn default_input_mib() -> f64 {
    64.0
}

fn default_pi_samples() -> u64 {
    10_000_000
}

fn default_task_command() -> String {
    "slotmarket-task".into()
}

impl WorkloadFile {
    /// Parses and checks a workload file; the error names the field and the fix.
    pub(crate) fn parse(text: &str) -> Result<WorkloadFile, String> {
        let file: WorkloadFile = toml::from_str(text).map_err(|e| format!("invalid workload file: {e}"))?;
        file.check()?;
        Ok(file)
    }

    /// The bins in use: the file's, or MRM Table 1.
    pub(crate) fn bins(&self) -> Vec<Bin> {
        if !self.bins.is_empty() {
            return self.bins.clone();
        }
        MRM_TABLE_1
            .iter()
            .map(|bin| Bin {
                percent: f64::from(bin.percent),
                maps: Count::Range(bin.maps),
                reduces: Count::Range([bin.reduces; 2]),
            })
            .collect()
    }

    /// Checks what serde cannot.
    fn check(&self) -> Result<(), String> {
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if self.name.is_empty() || !self.name.chars().all(name_ok) {
            return Err(format!("name: \"{}\" must be letters, digits, '.', '_' or '-'", self.name));
        }
        if self.jobs == 0 || self.jobs > MAX_JOBS {
            return Err(format!("jobs: must be between 1 and {MAX_JOBS}, got {}", self.jobs));
        }
        non_negative("mean_interarrival_s", self.mean_interarrival_s)?;
        positive("scale", self.scale)?;
        positive("input_mib_per_map", self.input_mib_per_map)?;
        if self.programs.is_empty() {
            return Err("programs: list at least one of wordcount, grep, sort, pi".into());
        }
        if self.pi_samples_per_map == 0 {
            return Err("pi_samples_per_map: must be at least 1".into());
        }
        if self.task_command.trim().is_empty() {
            return Err("task_command: must name the task program".into());
        }
        if self.cluster.map_slots == 0 || self.cluster.reduce_slots == 0 {
            return Err("cluster: map_slots and reduce_slots must both be at least 1".into());
        }
        self.check_estimates()?;
        self.check_classes()?;
        self.check_bins()
    }

    fn check_estimates(&self) -> Result<(), String> {
        for program in all_programs() {
            let t = self.estimate.of(program);
            for (stage, value) in [("gen_s", t.gen_s), ("map_s", t.map_s), ("reduce_s", t.reduce_s)] {
                non_negative(&format!("estimate.{}.{stage}", program.name()), value)?;
            }
        }
        Ok(())
    }

    fn check_classes(&self) -> Result<(), String> {
        let mut total = 0.0;
        for class in [JobClass::DelaySensitive, JobClass::DelayTolerant] {
            let Some(settings) = self.class.of(class) else { continue };
            let field = format!("class.{}", class.name());
            if !(settings.share.is_finite() && (0.0..=1.0).contains(&settings.share)) {
                return Err(format!("{field}.share: must be between 0 and 1, got {}", settings.share));
            }
            if let Some(factor) = settings.deadline_factor {
                positive(&format!("{field}.deadline_factor"), factor)?;
            }
            if settings.queue.as_deref().is_some_and(str::is_empty) {
                return Err(format!("{field}.queue: must not be empty (leave it out for the default)"));
            }
            total += settings.share;
        }
        if total > 1.0 + 1e-9 {
            return Err(format!("class: the shares add up to {total}, more than 1"));
        }
        Ok(())
    }

    fn check_bins(&self) -> Result<(), String> {
        for (i, bin) in self.bins.iter().enumerate() {
            positive(&format!("bin[{i}].percent"), bin.percent)?;
            let (lo, hi) = bin.maps.bounds();
            if lo == 0 || lo > hi {
                return Err(format!("bin[{i}].maps: need 1 <= min <= max, got [{lo}, {hi}]"));
            }
            let (lo, hi) = bin.reduces.bounds();
            if lo > hi {
                return Err(format!("bin[{i}].reduces: need min <= max, got [{lo}, {hi}]"));
            }
        }
        Ok(())
    }
}

fn positive(field: &str, value: f64) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("{field}: must be above 0, got {value}"))
    }
}

fn non_negative(field: &str, value: f64) -> Result<(), String> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(format!("{field}: must be 0 or more, got {value}"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small valid file for tests in this module tree.
    pub(crate) const SMALL: &str = r#"
        name = "small"
        seed = 5
        jobs = 8
        mean_interarrival_s = 2.0
        scale = 0.1
        input_mib_per_map = 1
        pi_samples_per_map = 1000
        [cluster]
        map_slots = 6
        reduce_slots = 3
        [estimate]
        sort = { gen_s = 0.5, map_s = 2.0, reduce_s = 1.0 }
        [class.delay-sensitive]
        share = 0.5
        deadline_factor = 2.0
        queue = "fast"
        [class.delay-tolerant]
        share = 0.5
    "#;

    #[test]
    fn a_small_file_parses_with_defaults_and_table_1() {
        let file = WorkloadFile::parse(SMALL).unwrap();
        assert_eq!(file.programs.len(), 4);
        assert_eq!(file.task_command, "slotmarket-task");
        assert_eq!(file.estimate.of(Program::Sort).map_s, 2.0);
        assert_eq!(file.estimate.of(Program::Pi), TaskSeconds::default());
        let bins = file.bins();
        assert_eq!(bins.len(), 9);
        assert_eq!(bins.iter().map(|b| b.percent).sum::<f64>(), 100.0);
        assert_eq!(bins[8].maps.bounds(), (361, 480));
        assert_eq!(file.class.of(JobClass::DelaySensitive).unwrap().deadline_factor, Some(2.0));
    }

    #[test]
    fn bins_accept_a_number_or_a_range() {
        let text = format!("{SMALL}\n[[bin]]\npercent = 1\nmaps = 2\nreduces = [0, 3]\n");
        let file = WorkloadFile::parse(&text).unwrap();
        assert_eq!(
            file.bins(),
            vec![Bin { percent: 1.0, maps: Count::Fixed(2), reduces: Count::Range([0, 3]) }]
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("jobs = 8", "jobs = 0", "jobs:"),
            ("scale = 0.1", "scale = -1.0", "scale:"),
            ("name = \"small\"", "name = \"a b\"", "name:"),
            (
                "share = 0.5\n        deadline_factor",
                "share = 0.9\n        deadline_factor",
                "class: the shares",
            ),
            ("deadline_factor = 2.0", "deadline_factor = 0.0", "class.delay-sensitive.deadline_factor"),
            ("map_s = 2.0", "map_s = -2.0", "estimate.sort.map_s"),
            ("reduce_slots = 3", "reduce_slots = 0", "cluster:"),
            ("seed = 5", "sed = 5", "unknown field `sed`"),
        ];
        for (from, to, wanted) in cases {
            let text = SMALL.replacen(from, to, 1);
            assert_ne!(text, SMALL, "{from}");
            let err = WorkloadFile::parse(&text).unwrap_err();
            assert!(err.contains(wanted), "{to}: {err}");
        }
        let bad_bin = format!("{SMALL}\n[[bin]]\npercent = 1\nmaps = [3, 2]\nreduces = 0\n");
        assert!(WorkloadFile::parse(&bad_bin).unwrap_err().contains("bin[0].maps"));
    }
}
