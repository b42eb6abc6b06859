//! Tests of the estimator: the normal quantile, each method on known data, the choice
//! between them, and PI coverage on held-out runs.

use slotmarket_common::protocol::{JobHistory, StageHistory};
use slotmarket_common::rng::SplitMix64;
use slotmarket_common::spec::{EstimateSpec, JobSpec, StageSpec};

use super::*;

fn spec(maps: u32, reduces: u32, input_bytes: Option<u64>) -> JobSpec {
    let stage = |name: &str, tasks, slot| StageSpec {
        name: name.into(),
        tasks,
        slot,
        command: "true".into(),
        after: Vec::new(),
    };
    let mut stages = vec![stage("map", maps, SlotKind::Map)];
    if reduces > 0 {
        stages.push(stage("reduce", reduces, SlotKind::Reduce));
    }
    JobSpec {
        name: "wc".into(),
        input: None,
        max_attempts: None,
        stages,
        class: None,
        queue: None,
        deadline: None,
        account: None,
        input_bytes,
        estimate: None,
        time_limit: None,
        after: Vec::new(),
        utility: None,
    }
}

/// A run of `wc` whose map tasks took `map_ms` each (None: never completed).
fn run(map_ms: &[Option<u64>], input_bytes: Option<u64>) -> JobHistory {
    JobHistory {
        input_bytes,
        stages: vec![StageHistory {
            name: "map".into(),
            slot: SlotKind::Map,
            run_ms: map_ms.to_vec(),
            attempts: vec![1; map_ms.len()],
        }],
        ..crate::core::completed_run(1, "wc")
    }
}

fn normal(rng: &mut SplitMix64) -> f64 {
    let (u1, u2) = (rng.unit().max(1e-300), rng.unit());
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[test]
fn the_normal_quantile_matches_the_table() {
    for (level, z) in [(0.95, 1.644_853_6), (0.975, 1.959_964_0), (0.99, 2.326_347_9), (0.999, 3.090_232_3)] {
        let got = z_for_level(level).unwrap();
        assert!((got - z).abs() < 1e-6, "level {level}: {got} != {z}");
    }
    assert_eq!(z_for_level(0.4), Err(EstimateError::Level(0.4)));
    assert!(z_for_level(f64::NAN).is_err());
}

#[test]
fn bins_give_the_mean_and_a_widened_spread_of_past_task_times() {
    let runs =
        [run(&[Some(10_000), Some(10_000)], None), run(&[Some(12_000)], None), run(&[Some(14_000)], None)];
    let refs: Vec<&JobHistory> = runs.iter().collect();
    let est = estimate(&spec(4, 0, None), &refs, &EstimateSettings::default()).unwrap();
    let map = est.phase(SlotKind::Map);
    assert_eq!(map.method, EstimateMethod::Bins);
    assert!((map.task_ms - 12_000.0).abs() < 1e-9);
    // sd of {10, 12, 14} s is 2 s; the PI widens it by sqrt(1 + 1/3).
    let upper = 12_000.0 + 1.644_853_6 * 2_000.0 * (4.0f64 / 3.0).sqrt();
    assert!((map.task_upper_ms - upper).abs() < 0.1, "{}", map.task_upper_ms);
    assert!((est.work_upper_ms() - 4.0 * upper).abs() < 0.5);
    assert_eq!(est.phase(SlotKind::Reduce).method, EstimateMethod::Empty);
}

#[test]
fn runs_with_an_unfinished_task_are_left_out() {
    let runs = [run(&[Some(10_000)], None), run(&[Some(20_000)], None), run(&[Some(1), None], None)];
    let refs: Vec<&JobHistory> = runs.iter().collect();
    let est = estimate(&spec(1, 0, None), &refs, &EstimateSettings::default()).unwrap();
    assert!((est.phase(SlotKind::Map).task_ms - 15_000.0).abs() < 1e-9);
}

#[test]
fn an_unseen_name_uses_the_spec_estimate_or_is_refused_naming_the_field() {
    let mut job = spec(2, 1, None);
    let err = estimate(&job, &[], &EstimateSettings::default()).unwrap_err();
    assert!(err.to_string().contains("map_task_ms"), "{err}");
    job.estimate = Some(EstimateSpec {
        map_task_ms: Some(30_000),
        reduce_task_ms: None,
        spread_pct: Some(10),
        task_spread_pct: None,
    });
    let err = estimate(&job, &[], &EstimateSettings::default()).unwrap_err();
    assert_eq!(err, EstimateError::NoEstimate { name: "wc".into(), field: "reduce_task_ms" });
    job.estimate = Some(EstimateSpec {
        map_task_ms: Some(30_000),
        reduce_task_ms: Some(60_000),
        spread_pct: None,
        task_spread_pct: None,
    });
    let est = estimate(&job, &[], &EstimateSettings::default()).unwrap();
    let reduce = est.phase(SlotKind::Reduce);
    assert_eq!((reduce.method, reduce.tasks), (EstimateMethod::Spec, 1));
    // Default spread 20 %: 60 s × (1 + 1.645 × 0.2).
    assert!((reduce.task_upper_ms - 60_000.0 * (1.0 + 1.644_853_6 * 0.2)).abs() < 0.1);
}

/// Runs of `wc` whose work is 2 s + 5 s per map task + 30 s per GB, with Gaussian noise
/// of `sd_ms` on the total.
fn linear_runs(n: usize, sd_ms: f64, rng: &mut SplitMix64) -> Vec<JobHistory> {
    (0..n)
        .map(|_| {
            let tasks = rng.range(1, 20);
            let bytes = rng.between(0, 4_000_000_000);
            let work =
                2_000.0 + 5_000.0 * f64::from(tasks) + 30_000.0 * bytes as f64 / 1e9 + sd_ms * normal(rng);
            let per_task = (work / f64::from(tasks)).max(1.0).round() as u64;
            run(&vec![Some(per_task); tasks as usize], Some(bytes))
        })
        .collect()
}

#[test]
fn ols_recovers_a_linear_model_from_the_features() {
    let mut rng = SplitMix64::new(7);
    let runs = linear_runs(40, 0.0, &mut rng);
    let refs: Vec<&JobHistory> = runs.iter().collect();
    let est = estimate(&spec(10, 0, Some(2_000_000_000)), &refs, &EstimateSettings::default()).unwrap();
    let map = est.phase(SlotKind::Map);
    assert_eq!(map.method, EstimateMethod::Ols);
    // 2 + 50 + 60 = 112 s over 10 tasks (rounding per task leaves a few ms).
    assert!((map.work_ms() - 112_000.0).abs() < 50.0, "{}", map.work_ms());
    assert!(map.task_upper_ms >= map.task_ms);
}

#[test]
fn ols_needs_features_that_vary_and_falls_back_to_bins() {
    let runs: Vec<JobHistory> = (0..10).map(|i| run(&[Some(10_000 + i * 100); 3], None)).collect();
    let refs: Vec<&JobHistory> = runs.iter().collect();
    let est = estimate(&spec(3, 0, None), &refs, &EstimateSettings::default()).unwrap();
    assert_eq!(est.phase(SlotKind::Map).method, EstimateMethod::Bins);
}

#[test]
fn ols_prediction_intervals_cover_about_their_level_on_held_out_runs() {
    let mut rng = SplitMix64::new(11);
    // A large training set, so that the coverage of this one fit is near the average over fits.
    let train = linear_runs(1_000, 4_000.0, &mut rng);
    let test = linear_runs(2_000, 4_000.0, &mut rng);
    let refs: Vec<&JobHistory> = train.iter().collect();
    for level in [0.8, 0.95] {
        let settings = EstimateSettings { pi_level: level };
        let inside = test
            .iter()
            .filter(|t| {
                let tasks = t.stages[0].run_ms.len() as u32;
                let est = estimate(&spec(tasks, 0, t.input_bytes), &refs, &settings).unwrap();
                let actual: u64 = t.stages[0].run_ms.iter().flatten().sum();
                actual as f64 <= est.phase(SlotKind::Map).work_upper_ms()
            })
            .count();
        let coverage = inside as f64 / test.len() as f64;
        assert!((coverage - level).abs() < 0.03, "level {level}: coverage {coverage}");
    }
}
