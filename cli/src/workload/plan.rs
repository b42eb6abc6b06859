//! WORKLOAD.toml → a plan: each job's arrival offset, size bin, program, class, deadline
//! and the self-contained [`JobSpec`] it is submitted as (generate input → map → reduce,
//! like configs/jobs/*.toml). Pure and seeded: the same file and seed give the same plan.

use std::time::Duration;

use slotmarket_common::spec::{DeadlineSpec, JobClass, JobSpec, SlotKind, StageSpec, validate};
use slotmarket_common::workload_mix::alone_s;

use super::calibration::TaskKind;
use super::file::{Arrivals, Bin, ClusterSlots, Program, TaskSeconds, WorkloadFile};
use super::rng::{Draw, keyed};

/// The substring grep jobs count (about 6 % of generated lines contain it).
const GREP_PATTERN: &str = "kaihem";
/// Bytes per TeraGen-style record.
const RECORD_BYTES: u64 = 100;
/// Bytes per MiB.
const MIB: f64 = 1_048_576.0;

/// A whole plan: the jobs in arrival order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    /// The workload's name.
    pub(crate) name: String,
    /// The seed it was drawn with.
    pub(crate) seed: u64,
    /// The jobs, in arrival order.
    pub(crate) jobs: Vec<PlannedJob>,
}

/// One job of the plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlannedJob {
    /// Position in the plan, from 0.
    pub(crate) index: u32,
    /// Seconds after the run starts at which it is submitted.
    pub(crate) arrival_s: f64,
    /// The program it runs.
    pub(crate) program: Program,
    /// Its size bin, from 1 (Table 1's numbering).
    pub(crate) bin: usize,
    /// Its service class, if it has one.
    pub(crate) class: Option<JobClass>,
    /// Map tasks after scaling.
    pub(crate) maps: u32,
    /// Reduce tasks after scaling (pi jobs have at most one).
    pub(crate) reduces: u32,
    /// Input generated for the maps, in bytes (0 for pi).
    pub(crate) input_bytes: u64,
    /// Seconds the job should take with the cluster to itself.
    pub(crate) estimate_s: f64,
    /// Deadline as seconds after its submission, if its class has one.
    pub(crate) deadline_after_s: Option<f64>,
    /// What is submitted.
    pub(crate) spec: JobSpec,
}

/// Draws the plan for `file` with `seed`; fails (naming the job) only if a generated
/// spec does not validate, e.g. a scale that makes a stage too large.
pub(crate) fn generate(file: &WorkloadFile, seed: u64) -> Result<Plan, String> {
    let bins = file.bins();
    let mut jobs = Vec::with_capacity(file.jobs as usize);
    let mut arrival_s = 0.0;
    for index in 0..file.jobs {
        if index > 0 {
            arrival_s += gap_s(file, seed, index);
        }
        let job = plan_job(file, &bins, seed, index, arrival_s);
        validate(&job.spec).map_err(|e| format!("generated job {} does not validate: {e}", job.spec.name))?;
        jobs.push(job);
    }
    Ok(Plan { name: file.name.clone(), seed, jobs })
}

/// The gap before job `index` arrives.
fn gap_s(file: &WorkloadFile, seed: u64, index: u32) -> f64 {
    match file.arrivals {
        Arrivals::Poisson => {
            keyed(seed, u64::from(index), Draw::Arrival).exponential(file.mean_interarrival_s)
        }
        Arrivals::Fixed => file.mean_interarrival_s,
    }
}

/// One job's draws and spec.
fn plan_job(file: &WorkloadFile, bins: &[Bin], seed: u64, index: u32, arrival_s: f64) -> PlannedJob {
    let key = u64::from(index);
    let mut size = keyed(seed, key, Draw::Size);
    let bin = pick_bin(bins, size.unit());
    let (maps_lo, maps_hi) = bins[bin].maps.bounds();
    let (reduces_lo, reduces_hi) = bins[bin].reduces.bounds();
    let maps = scaled(size.range(maps_lo, maps_hi), file.scale);
    let mut reduces = scaled(size.range(reduces_lo, reduces_hi), file.scale);
    let program = file.programs[index as usize % file.programs.len()];
    if program == Program::Pi {
        // `pi reduce` combines every map's count into one estimate: one task at most.
        reduces = reduces.min(1);
    }
    let class = pick_class(file, keyed(seed, key, Draw::Class).unit());
    let data_seed = keyed(seed, key, Draw::DataSeed).next_u64() >> 16;
    let input_bytes = match program {
        Program::Pi => 0,
        _ => (f64::from(maps) * file.input_mib_per_map * MIB).round() as u64,
    };
    let name = format!("w{index:03}-{}-b{}", program.name(), bin + 1);
    let shape = Shape { program, maps, reduces, input_bytes, data_seed };
    let stages = stages(file, &shape);
    let estimate_s = estimate_s(&stages, file.estimate.of(program), file.cluster);
    let settings = class.and_then(|c| file.class.of(c));
    let deadline_after_s = settings.and_then(|s| s.deadline_factor).map(|f| f * estimate_s);
    let spec = JobSpec {
        name,
        input: None,
        max_attempts: file.max_attempts,
        stages,
        class,
        queue: settings.and_then(|s| s.queue.clone()),
        // The master holds the job to the same deadline the summary judges it by.
        deadline: deadline_after_s
            .map(|s| DeadlineSpec::In(Duration::from_millis((s * 1000.0).round() as u64))),
        account: None,
        input_bytes: (input_bytes > 0).then_some(input_bytes),
        estimate: None,
        time_limit: None,
        after: Vec::new(),
        utility: None,
    };
    PlannedJob {
        index,
        arrival_s,
        program,
        bin: bin + 1,
        class,
        maps,
        reduces,
        input_bytes,
        estimate_s,
        deadline_after_s,
        spec,
    }
}

/// The bin a uniform draw `u` in [0, 1) falls into, bins weighted by their percent.
fn pick_bin(bins: &[Bin], u: f64) -> usize {
    let total: f64 = bins.iter().map(|b| b.percent).sum();
    let mut point = u * total;
    for (i, bin) in bins.iter().enumerate() {
        if point < bin.percent {
            return i;
        }
        point -= bin.percent;
    }
    // Only float rounding at the very top of the range gets here.
    bins.len() - 1
}

/// The class a uniform draw `u` gives: delay-sensitive below its share, delay-tolerant in
/// the next share, no class above both.
fn pick_class(file: &WorkloadFile, u: f64) -> Option<JobClass> {
    let sensitive = file.class.delay_sensitive.as_ref().map_or(0.0, |s| s.share);
    let tolerant = file.class.delay_tolerant.as_ref().map_or(0.0, |s| s.share);
    if u < sensitive {
        Some(JobClass::DelaySensitive)
    } else if u < sensitive + tolerant {
        Some(JobClass::DelayTolerant)
    } else {
        None
    }
}

/// A count scaled to the cluster: rounded, and at least 1 where the bin has any, so
/// small bins keep their job shape (map-only or map-reduce) instead of vanishing.
fn scaled(count: u32, scale: f64) -> u32 {
    if count == 0 { 0 } else { ((f64::from(count) * scale).round() as u32).max(1) }
}

/// What a job's stages are built from.
struct Shape {
    program: Program,
    maps: u32,
    reduces: u32,
    input_bytes: u64,
    data_seed: u64,
}

/// The job's stages: `gen` (one generator task per map, so each map reads one part),
/// `map`, and `reduce` when the bin has reduces. A map-only job still partitions its
/// output for one reducer, which nothing reads, as in a map-only Hadoop job.
fn stages(file: &WorkloadFile, shape: &Shape) -> Vec<StageSpec> {
    // A literal brace in the program's path must not read as a placeholder.
    let cmd = file.task_command.replace('{', "{{").replace('}', "}}");
    let (maps, seed) = (shape.maps, shape.data_seed);
    let reducers = shape.reduces.max(1);
    let split = format!("--task {{task}} --tasks {{tasks}} --reducers {reducers} --job-dir \"{{job_dir}}\"");
    // Each map reads exactly the `maps` generated parts, so a missing one fails it.
    let input = format!("--input \"{{job_dir}}/input\" --parts {maps}");
    let gen_tail = format!("--output \"{{job_dir}}/input\" --seed {seed} --task {{task}} --tasks {{tasks}}");
    let (generator, map) = match shape.program {
        Program::Wordcount | Program::Grep => (
            Some(format!("{cmd} gen-text {gen_tail} --bytes {}", shape.input_bytes)),
            match shape.program {
                Program::Grep => format!("{cmd} grep map {input} --pattern {GREP_PATTERN} {split}"),
                _ => format!("{cmd} wordcount map {input} {split}"),
            },
        ),
        Program::Sort => (
            Some(format!("{cmd} gen-records {gen_tail} --records {}", shape.input_bytes / RECORD_BYTES)),
            format!("{cmd} sort map {input} {split}"),
        ),
        Program::Pi => (
            None,
            format!(
                "{cmd} pi map --samples {} --task {{task}} --job-dir \"{{job_dir}}\" --seed {seed}",
                file.pi_samples_per_map
            ),
        ),
    };
    let reduce = match shape.program {
        Program::Pi => format!("{cmd} pi reduce --maps {maps} --job-dir \"{{job_dir}}\""),
        other => {
            format!("{cmd} {} reduce --task {{task}} --maps {maps} --job-dir \"{{job_dir}}\"", other.name())
        }
    };
    let mut out = Vec::with_capacity(3);
    if let Some(command) = generator {
        out.push(stage("gen", maps, SlotKind::Map, command, &[]));
    }
    let map_after: &[&str] = if out.is_empty() { &[] } else { &["gen"] };
    out.push(stage("map", maps, SlotKind::Map, map, map_after));
    if shape.reduces > 0 {
        out.push(stage("reduce", shape.reduces, SlotKind::Reduce, reduce, &["map"]));
    }
    out
}

fn stage(name: &str, tasks: u32, slot: SlotKind, command: String, after: &[&str]) -> StageSpec {
    StageSpec { name: name.into(), tasks, slot, command, after: after.iter().map(|s| (*s).into()).collect() }
}

/// The job's run time with the cluster to itself ([`alone_s`]), each stage's tasks taking
/// the file's estimate for their kind.
pub(crate) fn estimate_s(stages: &[StageSpec], per_task: TaskSeconds, cluster: ClusterSlots) -> f64 {
    alone_s(stages.iter().map(|stage| {
        let kind = TaskKind::of(stage.slot, &stage.name);
        let slots = if kind == TaskKind::Reduce { cluster.reduce_slots } else { cluster.map_slots };
        (stage.tasks, slots, kind.seconds(per_task))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::file::tests::SMALL;
    use slotmarket_common::workload_mix::MRM_TABLE_1;

    fn file_with(jobs: u32) -> WorkloadFile {
        WorkloadFile::parse(&SMALL.replace("jobs = 8", &format!("jobs = {jobs}"))).unwrap()
    }

    #[test]
    fn plans_repeat_for_a_seed_and_differ_between_seeds() {
        let file = file_with(50);
        let plan = generate(&file, 7).unwrap();
        assert_eq!(plan, generate(&file, 7).unwrap());
        let other = generate(&file, 8).unwrap();
        assert_ne!(plan.jobs, other.jobs);
        // Arrivals start at 0 and never go back.
        assert_eq!(plan.jobs[0].arrival_s, 0.0);
        assert!(plan.jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        let fixed = WorkloadFile { arrivals: Arrivals::Fixed, ..file };
        let arrivals: Vec<f64> =
            generate(&fixed, 7).unwrap().jobs.iter().take(3).map(|j| j.arrival_s).collect();
        assert_eq!(arrivals, [0.0, 2.0, 4.0]);
    }

    #[test]
    fn bin_shares_follow_table_1_over_many_jobs() {
        let n = 20_000;
        let plan = generate(&file_with(n), 1).unwrap();
        let mut counts = [0u32; 9];
        for job in &plan.jobs {
            counts[job.bin - 1] += 1;
        }
        for (bin, mrm) in MRM_TABLE_1.iter().enumerate() {
            let share = f64::from(counts[bin]) / f64::from(n);
            // Three standard errors of the largest share (38 %) over 20 000 jobs is 0.01.
            assert!((share - f64::from(mrm.percent) / 100.0).abs() < 0.012, "bin {}: {share}", bin + 1);
        }
        let sensitive = plan.jobs.iter().filter(|j| j.class == Some(JobClass::DelaySensitive)).count();
        assert!((sensitive as f64 / f64::from(n) - 0.5).abs() < 0.015, "{sensitive}");
        let mean_gap = plan.jobs[plan.jobs.len() - 1].arrival_s / f64::from(n - 1);
        assert!((mean_gap - 2.0).abs() < 0.1, "{mean_gap}");
    }

    #[test]
    fn task_counts_are_the_bins_scaled_and_rounded() {
        let plan = generate(&file_with(2_000), 3).unwrap();
        for job in &plan.jobs {
            let mrm = MRM_TABLE_1[job.bin - 1];
            let [lo, hi] = mrm.maps;
            assert!(job.maps >= scaled(lo, 0.1) && job.maps <= scaled(hi, 0.1), "{job:?}");
            let reduce_bounds = (scaled(mrm.reduces, 0.1), scaled(mrm.reduces, 0.1));
            if job.program == Program::Pi {
                assert!(job.reduces <= 1);
            } else {
                assert!(job.reduces >= reduce_bounds.0 && job.reduces <= reduce_bounds.1, "{job:?}");
            }
        }
        assert_eq!((scaled(0, 0.1), scaled(1, 0.1), scaled(6, 0.1), scaled(480, 0.075)), (0, 1, 1, 36));
    }

    #[test]
    fn specs_chain_gen_map_reduce_and_rotate_programs() {
        let plan = generate(&file_with(8), 5).unwrap();
        let programs: Vec<Program> = plan.jobs.iter().map(|j| j.program).collect();
        assert_eq!(&programs[..4], &[Program::Wordcount, Program::Grep, Program::Sort, Program::Pi]);
        let sort = &plan.jobs[2];
        let names: Vec<&str> = sort.spec.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(&names[..2], &["gen", "map"]);
        assert_eq!(sort.spec.stages[0].tasks, sort.maps);
        assert!(sort.spec.stages[0].command.contains(&format!("--records {}", sort.input_bytes / 100)));
        assert_eq!(sort.spec.stages[1].after, vec!["gen".to_string()]);
        assert_eq!(sort.spec.name, format!("w002-sort-b{}", sort.bin));
        let pi = &plan.jobs[3];
        assert_eq!((pi.input_bytes, pi.spec.stages[0].name.as_str()), (0, "map"));
        assert!(pi.spec.stages[0].command.contains("--samples 1000 "));
        for job in &plan.jobs {
            let last = job.spec.stages.last().map(|s| s.slot);
            assert_eq!(last, Some(if job.reduces > 0 { SlotKind::Reduce } else { SlotKind::Map }));
            match job.class {
                Some(JobClass::DelaySensitive) => {
                    assert_eq!(job.deadline_after_s, Some(2.0 * job.estimate_s));
                    assert_eq!(job.spec.queue.as_deref(), Some("fast"));
                }
                _ => assert_eq!(job.deadline_after_s, None),
            }
        }
    }

    #[test]
    fn estimates_count_waves_per_slot_kind() {
        let per_task = TaskSeconds { gen_s: 1.0, map_s: 2.0, reduce_s: 3.0 };
        let cluster = ClusterSlots { map_slots: 6, reduce_slots: 3 };
        let stages = [
            stage("gen", 7, SlotKind::Map, "x".into(), &[]),
            stage("map", 6, SlotKind::Map, "x".into(), &["gen"]),
            stage("reduce", 4, SlotKind::Reduce, "x".into(), &["map"]),
        ];
        // 2 waves of gen, 1 of map, 2 of reduce.
        assert_eq!(estimate_s(&stages, per_task, cluster), 2.0 + 2.0 + 6.0);
    }
}
