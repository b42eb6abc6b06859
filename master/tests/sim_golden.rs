//! Simulator regression tests (STYLE layer 3): a golden summary per policy under
//! `tests/golden/`, reviewed as a diff and regenerated with `SLOTMARKET_BLESS=1`; runs
//! repeat exactly for a seed; and seeded random workloads keep the core's invariants
//! after every step.

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use slotmarket_common::spec::{JobClass, SlotKind};
use slotmarket_master::core::{CoreConfig, PolicySettings};
use slotmarket_master::sim::generate::Mrm;
use slotmarket_master::sim::report::{Outcome, Summary, write_jobs_csv, write_slots_csv};
use slotmarket_master::sim::rng::Rng;
use slotmarket_master::sim::workload::{Dist, Durations, Trace, TraceJob, TraceStage};
use slotmarket_master::sim::{self, SimConfig};

/// 200 jobs of the MRM mix at about 90 % map load (a job every 65 s on 10 nodes), with noise and
/// failures, queues by class so `capacity` has something to divide.
fn golden_trace() -> Trace {
    support::mrm_trace_queued_by_class(Mrm {
        jobs: 200,
        interarrival_s: 65.0,
        map_slots: 20,
        reduce_slots: 20,
        seed: 11,
        ..Mrm::default()
    })
}

/// The queue shares of the `capacity` golden run.
fn golden_queues() -> BTreeMap<String, f64> {
    [("sensitive".to_string(), 0.7), ("tolerant".to_string(), 0.3)].into()
}

/// The cluster every golden run uses (the simulator's flags `--nodes 10 --seed 5
/// --noise 0.1 --fail-prob 0.01`), under `policy`.
fn golden_config(policy: PolicySettings) -> SimConfig {
    SimConfig {
        core: CoreConfig { policy, ..CoreConfig::default() },
        nodes: 10,
        seed: 5,
        noise: 0.1,
        fail_prob: 0.01,
        ..SimConfig::default()
    }
}

/// The summary JSON must equal `tests/golden/NAME.json`; `SLOTMARKET_BLESS=1` rewrites it.
fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    if std::env::var_os("SLOTMARKET_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("golden dir");
        std::fs::write(&path, actual).expect("golden written");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with SLOTMARKET_BLESS=1 to create it", path.display()));
    assert!(
        expected == actual,
        "{name}: summary differs from {}; if the change is intended, rerun with SLOTMARKET_BLESS=1 and review \
         the diff\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// `dress` at the paper's settings; `gang` as given.
fn dress_settings(gang: bool) -> PolicySettings {
    PolicySettings::Dress {
        theta: 0.1,
        initial_delta: 0.1,
        interval_secs: 5.0,
        window_secs: 10.0,
        heading: 2,
        gang,
    }
}

#[test]
fn golden_summaries_per_policy() {
    let trace = golden_trace();
    let cases = [
        ("fifo", PolicySettings::Fifo {}),
        ("fair", PolicySettings::Fair { preemption: false }),
        ("fair-preempt", PolicySettings::Fair { preemption: true }),
        ("priority", PolicySettings::Priority {}),
        ("capacity-preempt", PolicySettings::Capacity { queues: golden_queues(), preemption: true }),
        ("gang-fifo", PolicySettings::GangFifo {}),
        ("dress", dress_settings(false)),
    ];
    for (name, policy) in cases {
        let config = golden_config(policy);
        let run = sim::run(&trace, &config).expect("run finishes");
        check_golden(name, &Summary::new(&trace, &run, &config).to_json());
    }
}

#[test]
fn a_run_repeats_exactly_for_a_seed_and_changes_with_it() {
    let trace = golden_trace();
    let outputs = |seed: u64| {
        let config = SimConfig { seed, ..golden_config(PolicySettings::Fair { preemption: true }) };
        let run = sim::run(&trace, &config).expect("run finishes");
        let (mut jobs, mut slots) = (Vec::new(), Vec::new());
        write_jobs_csv(&trace, &run, &mut jobs).expect("csv");
        write_slots_csv(&run, &config, &mut slots).expect("csv");
        (Summary::new(&trace, &run, &config).to_json(), jobs, slots, run.stats)
    };
    let first = outputs(5);
    assert!(first == outputs(5), "two runs with the same seed differ");
    assert!(first.0 != outputs(6).0, "the seed does not reach the durations");
}

/// A random job: one to four stages in a chain or a fork, random kinds, counts and
/// durations, sometimes a class, a queue, a deadline or few attempts.
fn random_job(rng: &mut Rng, n: u32, at: f64) -> TraceJob {
    let stage_count = rng.range(1, 4);
    let stages = (0..stage_count)
        .map(|s| {
            let after = match (s, rng.range(0, 2)) {
                (0, _) => vec![],
                (_, 0) => vec!["s0".to_string()],
                _ => vec![format!("s{}", s - 1)],
            };
            let duration_s = match rng.range(0, 2) {
                0 => Durations::Fixed(f64::from(rng.range(1, 30))),
                1 => Durations::Drawn(Dist::Exp { mean: 8.0 }),
                _ => Durations::Drawn(Dist::Uniform { min: 1.0, max: 20.0 }),
            };
            let slot = if rng.chance(0.6) { SlotKind::Map } else { SlotKind::Reduce };
            TraceStage { name: format!("s{s}"), slot, tasks: rng.range(1, 12), after, duration_s }
        })
        .collect();
    let class = match rng.range(0, 2) {
        0 => None,
        1 => Some(JobClass::DelaySensitive),
        _ => Some(JobClass::DelayTolerant),
    };
    // Drawn in the order the fields were always drawn in, so the workloads stay the same.
    let mut job = TraceJob::new(format!("j{n}"), at, format!("u{}", rng.range(1, 3)), stages);
    job.class = class;
    job.queue = rng.chance(0.7).then(|| format!("q{}", rng.range(1, 3)));
    job.deadline_s = rng.chance(0.5).then(|| at + f64::from(rng.range(5, 200)));
    job.follows = (n > 0 && rng.chance(0.1)).then(|| format!("j{}", rng.range(0, n - 1)));
    job.max_attempts = rng.chance(0.3).then(|| rng.range(1, 3));
    job
}

#[test]
fn seeded_random_workloads_keep_the_invariants_after_every_step() {
    for seed in 0..24u64 {
        let mut rng = Rng::new(seed);
        let mut at = 0.0;
        let jobs: Vec<TraceJob> = (0..rng.range(5, 30))
            .map(|n| {
                at += rng.exponential(4.0);
                random_job(&mut rng, n, (at * 1000.0_f64).round() / 1000.0)
            })
            .collect();
        let trace = Trace::new(jobs).expect("valid trace");
        let queues: BTreeMap<String, f64> = if rng.chance(0.5) {
            [("q1".to_string(), 0.5), ("q2".to_string(), 0.3)].into()
        } else {
            BTreeMap::new()
        };
        let preemption = rng.chance(0.5);
        let policy = match seed % 6 {
            0 => PolicySettings::Fifo {},
            1 => PolicySettings::Fair { preemption },
            2 => PolicySettings::Priority {},
            3 => PolicySettings::GangFifo {},
            4 => dress_settings(preemption),
            _ => PolicySettings::Capacity { queues, preemption },
        };
        let config = SimConfig {
            core: CoreConfig { policy, ..CoreConfig::default() },
            nodes: rng.range(1, 4),
            map_slots: rng.range(1, 3),
            reduce_slots: rng.range(1, 2),
            seed,
            noise: if rng.chance(0.5) { 0.3 } else { 0.0 },
            fail_prob: [0.0, 0.05, 0.3][rng.range(0, 2) as usize],
            check_invariants: true,
            ..SimConfig::default()
        };
        let run = sim::run(&trace, &config).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for (ix, job) in run.jobs.iter().enumerate() {
            let ended = matches!(job.outcome, Outcome::Completed | Outcome::Failed);
            assert!(ended, "seed {seed}: job {ix} is {:?} after the run drained", job.outcome);
        }
        let summary = Summary::new(&trace, &run, &config);
        assert_eq!(summary.metrics.all.jobs, trace.len() as u64, "seed {seed}");
        assert!(summary.map_utilisation <= 1.0 && summary.reduce_utilisation <= 1.0, "seed {seed}");
    }
}

/// The `capacity-preempt` golden run through the `slotmarket-sim` command line, its
/// policy configured three ways: a master.toml `[policy]` table (`--policy-config`),
/// `--set` overrides alone, and `--policy` with `--set`. Each must print the golden
/// summary byte for byte, so the file and the flags parse into the same settings as the
/// library run above.
#[test]
fn the_capacity_golden_is_reproduced_from_a_master_toml_and_from_set_flags() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace_path = dir.path().join("golden.jsonl");
    let mut trace = Vec::new();
    golden_trace().write(&mut trace).expect("trace serialises");
    std::fs::write(&trace_path, trace).expect("trace written");
    let master_toml = dir.path().join("master.toml");
    std::fs::write(
        &master_toml,
        "listen = \"127.0.0.1:0\"\n\n[policy]\nname = \"capacity\"\npreemption = true\n\n\
         [policy.queues]\nsensitive = 0.7\ntolerant = 0.3\n",
    )
    .expect("master.toml written");
    let trace_arg = trace_path.to_str().expect("utf-8 path");
    let config_arg = master_toml.to_str().expect("utf-8 path");
    let sets = ["--set", "preemption=true", "--set", "queues.sensitive=0.7", "--set", "queues.tolerant=0.3"];
    let ways: [Vec<&str>; 3] = [
        vec!["--policy-config", config_arg],
        [&["--set", "name=capacity"][..], &sets].concat(),
        [&["--policy", "capacity"][..], &sets].concat(),
    ];
    for way in ways {
        let mut args = vec!["run", "--trace", trace_arg, "--json", "--nodes", "10", "--seed", "5"];
        args.extend(["--noise", "0.1", "--fail-prob", "0.01"]);
        args.extend(&way);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slotmarket-sim"))
            .args(&args)
            .output()
            .expect("slotmarket-sim runs");
        assert!(out.status.success(), "{way:?}: {}", String::from_utf8_lossy(&out.stderr));
        let printed = String::from_utf8(out.stdout).expect("utf-8 summary");
        check_golden("capacity-preempt", &printed);
    }
}
