//! Workload traces: the JSON-lines format, reading it with errors that name the line,
//! turning a trace job into the [`JobSpec`] the core admits, and drawing task durations.
//!
//! # Trace format
//!
//! One JSON object per line; empty lines and lines starting with `#` are skipped. Jobs
//! need not be sorted by arrival. Times are seconds from the start of the trace.
//!
//! ```json
//! {"id":"j1","arrival_s":0,"user":"alice","class":"delay-sensitive","deadline_s":60,
//!  "stages":[{"name":"map","slot":"map","tasks":3,"duration_s":10},
//!            {"name":"reduce","slot":"reduce","tasks":1,"after":["map"],
//!             "duration_s":{"normal":{"mean":20,"sd":2}}}]}
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `id` | unique name; becomes the job's name |
//! | `arrival_s` | submit time (for a job with `follows`: the earliest submit time) |
//! | `user` | account that submits it (default `user`) |
//! | `class` | `delay-sensitive`, `delay-tolerant`, or absent |
//! | `queue` | `capacity` queue (default `default`) |
//! | `deadline_s` | optional absolute deadline |
//! | `follows`, `think_s` | submit `think_s` (default 0) after job `follows` (an earlier line) ends: a user's closed-loop stream (DP §4) |
//! | `max_attempts` | attempts per task (default 4) |
//! | `stages[].name`, `slot`, `tasks`, `after` | as in a job spec |
//! | `utility` | the job's own utility curve for `jockey`, as a job spec's: `[[minutes after the deadline, utility], ...]`; needs `deadline_s` |
//! | `stages[].duration_s` | a number (every task), a list (one per task), or `{"uniform":{"min":..,"max":..}}`, `{"normal":{"mean":..,"sd":..}}`, `{"exp":{"mean":..}}` drawn per task from the run's seed |

use std::collections::HashMap;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use slotmarket_common::spec::{DeadlineSpec, JobClass, JobSpec, SlotKind, StageSpec, UtilityCurve, validate};
use slotmarket_common::time::Timestamp;
use thiserror::Error;

use super::rng;
use super::trace_blocks::{self, Block};

/// The command every simulated stage carries; the simulator never runs it.
const SIM_COMMAND: &str = "sim";
/// Shortest task the simulator runs, so a task's end is always after its start.
pub const MIN_TASK_MS: u64 = 1;

/// A trace that cannot be used.
#[derive(Debug, Error)]
pub enum TraceError {
    /// A line is not a valid trace job.
    #[error("line {line}: {problem}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// Reading or writing failed.
    #[error("trace i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// One job of a trace, as written on its line.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceJob {
    /// Unique name.
    pub id: String,
    /// Submit time in seconds (earliest submit time for a follower).
    pub arrival_s: f64,
    /// Submitting account.
    #[serde(default = "default_user")]
    pub user: String,
    /// Service class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<JobClass>,
    /// `capacity` queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Absolute deadline in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_s: Option<f64>,
    /// The job whose end triggers this one's submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// Pause after `follows` ends, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_s: Option<f64>,
    /// Attempts per task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The stages.
    pub stages: Vec<TraceStage>,
    /// The spec's name, when it differs from `id`: runs sharing a name share a history
    /// (Jockey profiles a job from its earlier runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Deadline changes while the job runs, as a client would ask for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deadline_moves: Vec<DeadlineMove>,
    /// The job's own utility curve (a job spec's `utility`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utility: Option<UtilityCurve>,
}

/// A deadline change in a trace: `after_s` after the job's submission, its deadline
/// becomes submission + `deadline_after_s`.
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadlineMove {
    /// When, in seconds after submission.
    pub after_s: f64,
    /// The new deadline, in seconds after submission.
    pub deadline_after_s: f64,
}

fn default_user() -> String {
    "user".to_string()
}

/// One stage of a trace job.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceStage {
    /// Unique within the job.
    pub name: String,
    /// Slot kind.
    pub slot: SlotKind,
    /// Number of tasks.
    pub tasks: u32,
    /// Stages that must complete first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// How long each task runs.
    pub duration_s: Durations,
}

impl TraceStage {
    /// A MapReduce job's stages: `maps` map tasks and, if `reduces > 0`, a reduce stage
    /// behind the maps' barrier.
    pub fn map_reduce(maps: u32, map: Durations, reduces: u32, reduce: Durations) -> Vec<TraceStage> {
        let mut stages = vec![TraceStage {
            name: "map".into(),
            slot: SlotKind::Map,
            tasks: maps,
            after: vec![],
            duration_s: map,
        }];
        if reduces > 0 {
            stages.push(TraceStage {
                name: "reduce".into(),
                slot: SlotKind::Reduce,
                tasks: reduces,
                after: vec!["map".into()],
                duration_s: reduce,
            });
        }
        stages
    }
}

/// Task durations of a stage, in seconds.
#[derive(Clone, PartialEq, Debug, Serialize)]
#[serde(untagged)]
pub enum Durations {
    /// Every task takes this long.
    Fixed(f64),
    /// Task `i` takes the `i`-th value.
    PerTask(Vec<f64>),
    /// Drawn per task.
    Drawn(Dist),
}

/// Read by the shape of the value (a number, a list, a map) rather than, as
/// `#[serde(untagged)]` reads, by buffering it and trying each variant in turn: that built
/// an error message for every variant that did not fit, and was over a third of parsing a
/// trace line.
impl<'de> Deserialize<'de> for Durations {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Durations, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        use serde::de::{MapAccess, SeqAccess, Visitor};

        struct ByShape;
        impl<'de> Visitor<'de> for ByShape {
            type Value = Durations;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("seconds, a list of seconds (one per task), or a distribution such as {\"exp\":{\"mean\":20}}")
            }

            fn visit_f64<E>(self, seconds: f64) -> Result<Durations, E> {
                Ok(Durations::Fixed(seconds))
            }

            fn visit_u64<E>(self, seconds: u64) -> Result<Durations, E> {
                Ok(Durations::Fixed(seconds as f64))
            }

            fn visit_i64<E>(self, seconds: i64) -> Result<Durations, E> {
                Ok(Durations::Fixed(seconds as f64))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, list: A) -> Result<Durations, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(list)).map(Durations::PerTask)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Durations, A::Error> {
                let dist = Dist::deserialize(MapAccessDeserializer::new(&mut map))?;
                if map.next_key::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(serde::de::Error::custom(
                        "a distribution names one kind: uniform, normal or exp",
                    ));
                }
                Ok(Durations::Drawn(dist))
            }
        }
        deserializer.deserialize_any(ByShape)
    }
}

/// A distribution of task durations in seconds.
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Dist {
    /// Uniform between `min` and `max`.
    Uniform {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// Normal, cut off below at a tenth of the mean so no task is absurdly short.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        sd: f64,
    },
    /// Exponential.
    Exp {
        /// Mean.
        mean: f64,
    },
}

/// A checked trace: jobs in file order, with `follows` resolved to indexes.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The jobs, in file order; a job's index is its position here.
    pub jobs: Vec<TraceJob>,
    /// For each job, the index of the job it follows.
    follows: Vec<Option<u32>>,
}

impl Trace {
    /// Checks jobs (unique ids, valid stages and durations, `follows` naming an earlier
    /// job) and builds a trace; errors number jobs from 1 as if they were lines.
    pub fn new(jobs: Vec<TraceJob>) -> Result<Trace, TraceError> {
        let follows = resolve(&jobs, |ix| ix + 1, check_job)?;
        Ok(Trace { jobs, follows })
    }

    /// Reads a JSON-lines trace. Blocks of lines are parsed and checked on up to four
    /// threads while the next block is read (a half-million-job trace is over 100 MB of
    /// JSON, never held whole); ids and `follows` are then resolved in line order, and the
    /// error reported is the first line's.
    pub fn read(input: impl Read) -> Result<Trace, TraceError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
        let blocks = trace_blocks::map_blocks(input, trace_blocks::BLOCK_BYTES, threads, parse_block)?;
        // Room for every job at once: grown by doubling, a half-million-job table was
        // copied and its pages faulted in again at every step.
        let count = blocks.iter().map(|(jobs, _)| jobs.len()).sum();
        let (mut jobs, mut lines) = (Vec::with_capacity(count), Vec::with_capacity(count));
        let mut unparsed = None;
        for (parsed, error) in blocks {
            for (line, job) in parsed {
                lines.push(line);
                jobs.push(job);
            }
            if error.is_some() {
                unparsed = error;
                break;
            }
        }
        // The lines above a line that does not parse are resolved first: the error
        // reported is the first line's.
        let follows = resolve(&jobs, |ix| lines[ix], |_| Ok(()))?;
        match unparsed {
            Some(error) => Err(error),
            None => Ok(Trace { jobs, follows }),
        }
    }

    /// Writes the trace as JSON lines.
    pub fn write(&self, out: &mut impl Write) -> Result<(), TraceError> {
        for job in &self.jobs {
            write_job(out, job)?;
        }
        Ok(())
    }

    /// The job that job `ix` follows, if any.
    pub fn follows(&self, ix: usize) -> Option<usize> {
        self.follows.get(ix).copied().flatten().map(|f| f as usize)
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether there are no jobs.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Tasks over every job.
    pub fn total_tasks(&self) -> u64 {
        self.jobs.iter().map(TraceJob::total_tasks).sum()
    }
}

/// Parses and checks a block's lines up to the first bad one: the jobs before it, with
/// their line numbers (an earlier line's duplicate id is the error to report), and its error.
/// For each job, the index of the job it follows, checking `jobs` in order: each passes
/// `check`, its id is new, and its `follows` names a job above it. The first problem is
/// reported at its job's line (`line_of` its index). A hashed table of the ids borrowed
/// from the jobs: an ordered one of copies took a third of a second at half a million.
fn resolve(
    jobs: &[TraceJob],
    line_of: impl Fn(usize) -> usize,
    check: impl Fn(&TraceJob) -> Result<(), String>,
) -> Result<Vec<Option<u32>>, TraceError> {
    let mut ids: HashMap<&str, u32> = HashMap::with_capacity(jobs.len());
    let mut follows = Vec::with_capacity(jobs.len());
    for (ix, job) in jobs.iter().enumerate() {
        let bad = |problem: String| TraceError::Line { line: line_of(ix), problem };
        check(job).map_err(bad)?;
        let leader = match &job.follows {
            None => None,
            Some(id) => Some(*ids.get(id.as_str()).ok_or_else(|| {
                bad(format!("follows: no earlier job \"{id}\"; a job may only follow one above it"))
            })?),
        };
        if ids.insert(&job.id, ix as u32).is_some() {
            return Err(bad(format!("id: \"{}\" is used by an earlier job; ids must be unique", job.id)));
        }
        follows.push(leader);
    }
    Ok(follows)
}

fn parse_block(block: &Block) -> (Vec<(usize, TraceJob)>, Option<TraceError>) {
    let mut jobs = Vec::new();
    for (n, text) in block.text.lines().enumerate() {
        let (line, text) = (block.first_line + n, text.trim());
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let job = serde_json::from_str(text)
            .map_err(|e| e.to_string())
            .and_then(|job: TraceJob| check_job(&job).map(|()| job));
        match job {
            Ok(job) => jobs.push((line, job)),
            Err(problem) => return (jobs, Some(TraceError::Line { line, problem })),
        }
    }
    (jobs, None)
}

/// Writes one job as a JSON line.
pub fn write_job(out: &mut impl Write, job: &TraceJob) -> Result<(), TraceError> {
    serde_json::to_writer(&mut *out, job).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Checks what serde cannot: finite times, sane durations and a valid job spec.
fn check_job(job: &TraceJob) -> Result<(), String> {
    if !(job.arrival_s.is_finite() && job.arrival_s >= 0.0) {
        return Err(format!("arrival_s: must be a finite number >= 0, got {}", job.arrival_s));
    }
    for (field, value) in [("deadline_s", job.deadline_s), ("think_s", job.think_s)] {
        if value.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
            return Err(format!("{field}: must be a finite number >= 0"));
        }
    }
    if job.user.is_empty() {
        return Err("user: must not be empty".to_string());
    }
    for (i, stage) in job.stages.iter().enumerate() {
        stage.duration_s.check(stage.tasks).map_err(|p| format!("stages[{i}].duration_s: {p}"))?;
    }
    validate(&job.spec()).map_err(|e| e.to_string())
}

impl TraceJob {
    /// Job `id` of `user` arriving at `arrival_s` seconds with these stages, and nothing
    /// else set: no class, queue, deadline, leader or attempt limit.
    pub fn new(
        id: impl Into<String>,
        arrival_s: f64,
        user: impl Into<String>,
        stages: Vec<TraceStage>,
    ) -> TraceJob {
        TraceJob {
            id: id.into(),
            arrival_s,
            user: user.into(),
            class: None,
            queue: None,
            deadline_s: None,
            follows: None,
            think_s: None,
            max_attempts: None,
            stages,
            name: None,
            deadline_moves: Vec::new(),
            utility: None,
        }
    }

    /// The spec the simulator submits for this job.
    pub fn spec(&self) -> JobSpec {
        JobSpec {
            name: self.name.clone().unwrap_or_else(|| self.id.clone()),
            input: None,
            max_attempts: self.max_attempts,
            stages: self
                .stages
                .iter()
                .map(|s| StageSpec {
                    name: s.name.clone(),
                    tasks: s.tasks,
                    slot: s.slot,
                    command: SIM_COMMAND.to_string(),
                    after: s.after.clone(),
                })
                .collect(),
            class: self.class,
            queue: self.queue.clone(),
            deadline: self.deadline().map(DeadlineSpec::At),
            account: None,
            input_bytes: None,
            estimate: None,
            time_limit: None,
            after: Vec::new(),
            utility: self.utility.clone(),
        }
    }

    /// Submit time (or earliest submit time).
    pub fn arrival(&self) -> Timestamp {
        Timestamp(secs_to_ms(self.arrival_s))
    }

    /// Absolute deadline.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.deadline_s.map(|d| Timestamp(secs_to_ms(d)))
    }

    /// Pause after the followed job ends, in milliseconds.
    pub fn think_ms(&self) -> u64 {
        self.think_s.map_or(0, secs_to_ms)
    }

    /// Tasks over all stages: its [`spec`](TraceJob::spec)'s
    /// [`total_tasks`](JobSpec::total_tasks), without building the spec.
    pub fn total_tasks(&self) -> u64 {
        self.stages.iter().map(|s| u64::from(s.tasks)).sum()
    }

    /// The duration of task `index` of stage `stage` when this job is trace job `ix` of
    /// a run with `seed`, in milliseconds. Drawn durations are keyed by all four, so a
    /// task lasts as long under every policy and whenever it starts.
    pub fn task_ms(&self, ix: u32, stage: u32, index: u32, seed: u64) -> u64 {
        self.keyed_task_ms(stage, index, task_key(seed, ix, stage, index))
    }

    /// [`task_ms`](TraceJob::task_ms) given the task's key ([`task_key`]), for a caller
    /// that needs the key too (the simulator's launch also draws each attempt's noise
    /// from it): the key's hash was a fifth of a drawn duration's cost.
    pub fn keyed_task_ms(&self, stage: u32, index: u32, key: u64) -> u64 {
        self.stages.get(stage as usize).map_or(MIN_TASK_MS, |s| s.duration_s.task_ms(index, key))
    }

    /// Its critical path as trace job `ix` of a run with `seed`, in milliseconds: its
    /// length on an idle, unbounded cluster, the longest chain of stages, each as long as
    /// its longest task.
    pub fn critical_path_ms(&self, ix: u32, seed: u64) -> u64 {
        let longest: Vec<u64> = (0..self.stages.len() as u32)
            .map(|s| {
                (0..self.stages[s as usize].tasks).map(|t| self.task_ms(ix, s, t, seed)).max().unwrap_or(0)
            })
            .collect();
        self.critical_path_through(&longest)
    }

    /// Its critical path given the longest task of each stage (in stage order), in
    /// milliseconds (see [`critical_path_ms`](TraceJob::critical_path_ms)).
    pub fn critical_path_through(&self, longest: &[u64]) -> u64 {
        // Stages are validated to form a DAG but may be listed in any order: relax until
        // stable (stage counts are tiny).
        let mut finish = vec![0u64; self.stages.len()];
        for _ in 0..self.stages.len() {
            for (s, stage) in self.stages.iter().enumerate() {
                let ready = stage
                    .after
                    .iter()
                    .filter_map(|name| self.stages.iter().position(|x| &x.name == name))
                    .map(|d| finish[d])
                    .max()
                    .unwrap_or(0);
                finish[s] = ready + longest.get(s).copied().unwrap_or(0);
            }
        }
        finish.into_iter().max().unwrap_or(0)
    }
}

impl Durations {
    fn check(&self, tasks: u32) -> Result<(), String> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        match self {
            Durations::Fixed(v) if !ok(*v) => Err(format!("must be >= 0, got {v}")),
            Durations::PerTask(list) if list.len() != tasks as usize => {
                Err(format!("lists {} durations for {tasks} tasks; give one per task", list.len()))
            }
            Durations::PerTask(list) if !list.iter().all(|&v| ok(v)) => {
                Err("every duration must be a finite number >= 0".to_string())
            }
            Durations::Drawn(Dist::Uniform { min, max }) if !(ok(*min) && ok(*max) && min <= max) => {
                Err(format!("uniform needs 0 <= min <= max, got {min} and {max}"))
            }
            Durations::Drawn(Dist::Normal { mean, sd }) if !(ok(*mean) && ok(*sd)) => {
                Err(format!("normal needs mean and sd >= 0, got {mean} and {sd}"))
            }
            Durations::Drawn(Dist::Exp { mean }) if !ok(*mean) => {
                Err(format!("exp needs mean >= 0, got {mean}"))
            }
            _ => Ok(()),
        }
    }

    /// Task `task`'s duration in milliseconds. Drawn durations are keyed by `key` (the
    /// run's seed, the job's index, the stage and the task), so a task lasts as long
    /// under every policy and whatever order tasks start in.
    pub fn task_ms(&self, task: u32, key: u64) -> u64 {
        let secs = match self {
            Durations::Fixed(v) => *v,
            Durations::PerTask(list) => list.get(task as usize).copied().unwrap_or(0.0),
            Durations::Drawn(Dist::Uniform { min, max }) => min + (max - min) * rng::unit(rng::mix(key)),
            Durations::Drawn(Dist::Normal { mean, sd }) => {
                (mean + sd * rng::normal(rng::mix(key), rng::mix(key ^ 1))).max(mean / 10.0)
            }
            Durations::Drawn(Dist::Exp { mean }) => -mean * (1.0 - rng::unit(rng::mix(key))).ln(),
        };
        secs_to_ms(secs).max(MIN_TASK_MS)
    }
}

/// The key of a task's drawn duration: the run's seed, the job's trace index, the stage
/// and the task.
pub fn task_key(seed: u64, ix: u32, stage: u32, index: u32) -> u64 {
    rng::hash(&[seed, u64::from(ix), u64::from(stage), u64::from(index)])
}

/// Seconds to whole milliseconds, rounded; negative and non-finite values become 0.
pub fn secs_to_ms(secs: f64) -> u64 {
    if secs.is_finite() && secs > 0.0 { (secs * 1000.0).round() as u64 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"id":"j1","arrival_s":1.5,"class":"delay-tolerant","deadline_s":60,"stages":[{"name":"map","slot":"map","tasks":3,"duration_s":[1,2,3]},{"name":"reduce","slot":"reduce","tasks":1,"after":["map"],"duration_s":{"normal":{"mean":20,"sd":2}}}]}"#;

    #[test]
    fn a_trace_round_trips_through_json_lines() {
        let text = format!("# a comment\n\n{LINE}\n");
        let trace = Trace::read(text.as_bytes()).unwrap();
        assert_eq!(trace.len(), 1);
        let job = &trace.jobs[0];
        assert_eq!((job.arrival(), job.user.as_str(), job.total_tasks()), (Timestamp(1500), "user", 4));
        assert_eq!(job.total_tasks(), job.spec().total_tasks());
        assert_eq!(job.stages[0].duration_s.task_ms(2, 0), 3000);
        let mut out = Vec::new();
        trace.write(&mut out).unwrap();
        let again = Trace::read(out.as_slice()).unwrap();
        assert_eq!(again.jobs, trace.jobs);
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let dup = format!("{LINE}\n{LINE}\n");
        let err = Trace::read(dup.as_bytes()).unwrap_err().to_string();
        assert!(err.starts_with("line 2: id:"), "{err}");
        // The first bad line is reported, whether its fault is found in parsing or linking.
        let dup_then_bad = format!("{LINE}\n# comment\n{LINE}\nnot json\n");
        let err = Trace::read(dup_then_bad.as_bytes()).unwrap_err().to_string();
        assert!(err.starts_with("line 3: id:"), "{err}");
        let short = LINE.replace("[1,2,3]", "[1,2]");
        let err = Trace::read(short.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("stages[0].duration_s: lists 2 durations for 3 tasks"), "{err}");
        let follows = LINE.replace("\"id\":\"j1\"", "\"id\":\"j2\",\"follows\":\"j9\"");
        let err = Trace::read(follows.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("follows: no earlier job \"j9\""), "{err}");
        let bad_after = LINE.replace("\"after\":[\"map\"]", "\"after\":[\"mop\"]");
        let err = Trace::read(bad_after.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("stage[1].after"), "{err}");
        let err = Trace::read("{\"id\":1}".as_bytes()).unwrap_err().to_string();
        assert!(err.starts_with("line 1: invalid type"), "{err}");
    }

    #[test]
    fn durations_are_read_by_the_shape_of_their_value() {
        let read = |json: &str| serde_json::from_str::<Durations>(json).map_err(|e| e.to_string());
        assert_eq!(read("4"), Ok(Durations::Fixed(4.0)));
        assert_eq!(read("-2"), Ok(Durations::Fixed(-2.0)), "a range is checked with the job, not here");
        assert_eq!(read("2.5"), Ok(Durations::Fixed(2.5)));
        assert_eq!(read("[1, 2.5]"), Ok(Durations::PerTask(vec![1.0, 2.5])));
        assert_eq!(read(r#"{"exp":{"mean":20}}"#), Ok(Durations::Drawn(Dist::Exp { mean: 20.0 })));
        let normal = Dist::Normal { mean: 20.0, sd: 2.0 };
        assert_eq!(read(r#"{"normal":{"mean":20,"sd":2}}"#), Ok(Durations::Drawn(normal)));
        for (json, says) in [
            (r#""ten""#, "expected seconds, a list of seconds (one per task), or a distribution"),
            ("null", "expected seconds"),
            (r#"[1,"a"]"#, "expected f64"),
            (r#"{"poisson":{"mean":2}}"#, "unknown variant `poisson`"),
            (r#"{"exp":{"mean":2},"normal":{"mean":1,"sd":1}}"#, "a distribution names one kind"),
            (r#"{"exp":{"mean":2,"sd":1}}"#, "unknown field `sd`"),
        ] {
            let err = read(json).unwrap_err();
            assert!(err.contains(says), "{json}: {err}");
        }
    }

    #[test]
    fn a_trace_job_carries_its_own_utility_curve_into_its_spec() {
        let own = LINE.replace("\"deadline_s\":60", "\"deadline_s\":60,\"utility\":[[0,1],[30,-1]]");
        let trace = Trace::read(own.as_bytes()).unwrap();
        let curve = UtilityCurve(vec![(0.0, 1.0), (30.0, -1.0)]);
        assert_eq!(trace.jobs[0].spec().utility, Some(curve));
        let mut out = Vec::new();
        trace.write(&mut out).unwrap();
        assert_eq!(Trace::read(out.as_slice()).unwrap().jobs, trace.jobs);
        // Without it, the line is written as before.
        let mut plain = Vec::new();
        Trace::read(LINE.as_bytes()).unwrap().write(&mut plain).unwrap();
        assert!(!String::from_utf8_lossy(&plain).contains("utility"));
        let undated = own.replace("\"deadline_s\":60,", "");
        let err = Trace::read(undated.as_bytes()).unwrap_err().to_string();
        assert!(err.starts_with("line 1: utility: is measured from the deadline"), "{err}");
    }

    #[test]
    fn drawn_durations_depend_only_on_their_key() {
        let d = Durations::Drawn(Dist::Normal { mean: 20.0, sd: 4.0 });
        assert_eq!(d.task_ms(0, 42), d.task_ms(0, 42));
        assert_ne!(d.task_ms(0, 42), d.task_ms(0, 43));
        let u = Durations::Drawn(Dist::Uniform { min: 5.0, max: 6.0 });
        assert!((5000..=6000).contains(&u.task_ms(0, 9)));
        assert_eq!(Durations::Fixed(0.0).task_ms(0, 0), MIN_TASK_MS);
    }
}
