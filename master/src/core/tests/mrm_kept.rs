//! MRM's kept admission schedule under random runs: deadline jobs bought and submitted,
//! best-effort jobs, tasks completed, failed and lost, jobs cancelled, agents joining
//! and leaving, time passing, with a quote between steps. Every quote in a debug build
//! checks the kept schedule against one built from scratch (`Market::check_kept`), so a
//! change the core forgot to note fails here; and no admission may make an admitted job
//! infeasible in the model.

use std::time::Duration;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::ContainerId;
use slotmarket_common::rng::SplitMix64;
use slotmarket_common::spec::{DeadlineSpec, EstimateSpec, JobSpec};

use super::builders::JobBuilder;
use super::env::{TestEnv, root};
use crate::core::{AdmissionMode, AdmissionSettings, Choice, CoreConfig, PolicySettings};

/// A job of a few maps and sometimes reduces with an `[estimate]`.
fn random_job(rng: &mut SplitMix64, n: u64) -> JobSpec {
    let maps = rng.range(1, 6);
    let reduces = if rng.below(2) == 0 { 0 } else { rng.range(1, 3) };
    let mut spec = if reduces == 0 {
        JobBuilder::maps(maps).name(&format!("j{n}")).build()
    } else {
        JobBuilder::map_reduce(maps, reduces).name(&format!("j{n}")).build()
    };
    spec.estimate = Some(EstimateSpec {
        map_task_ms: Some(rng.between(1_000, 20_000)),
        reduce_task_ms: (reduces > 0).then(|| rng.between(1_000, 20_000)),
        spread_pct: Some(10),
        task_spread_pct: Some(10),
    });
    spec
}

/// Whether every admitted job meets its deadline in the model at the core's time.
fn model_feasible(env: &mut TestEnv) -> bool {
    let now = env.now;
    env.core.admission_schedule(now).all_feasible()
}

/// One random run of `steps` steps; returns how many deadlines were bought.
fn random_run(seed: u64, steps: usize) -> usize {
    let mut rng = SplitMix64::new(seed);
    let admission = AdmissionSettings { mode: AdmissionMode::Mrm, ..AdmissionSettings::default() };
    let config = CoreConfig {
        admission,
        policy: PolicySettings::Edf {},
        predict_from_progress: seed % 2 == 0,
        ..CoreConfig::default()
    };
    let mut env = TestEnv::with_config(config);
    env.join_agent("n1", 2, 1);
    env.join_agent("n2", 2, 1);
    let mut n2_joined = true;
    let mut live: Vec<ContainerId> = Vec::new();
    let mut jobs = Vec::new();
    let mut bought = 0;
    for step in 0..steps as u64 {
        match rng.below(10) {
            0..=2 => {
                let mut spec = random_job(&mut rng, step);
                let choice = match rng.below(3) {
                    0 => Choice::Earliest,
                    1 => Choice::BehindAll,
                    _ => Choice::MaxPrice(env.core.quote(env.now, &spec).unwrap().work_ms * 1.5),
                };
                let before = model_feasible(&mut env);
                let (_, offer) = env.core.offer(env.now, &spec, choice).unwrap();
                spec.deadline = Some(DeadlineSpec::At(offer.deadline));
                jobs.push(env.submit(spec));
                bought += 1;
                assert!(
                    !before || model_feasible(&mut env),
                    "seed {seed} step {step}: admission broke a promise"
                );
            }
            3 => jobs.push(env.submit(random_job(&mut rng, step))),
            4 | 5 if !live.is_empty() => {
                let container = live.swap_remove(rng.below(live.len() as u64) as usize);
                env.finish(container);
            }
            6 if !live.is_empty() => {
                let container = live.swap_remove(rng.below(live.len() as u64) as usize);
                // Killed, not failed: failures would quarantine the nodes and leave no
                // slots to quote against.
                env.run_to(container, ContainerState::Killed);
            }
            7 if !jobs.is_empty() => {
                let job = jobs[rng.below(jobs.len() as u64) as usize];
                env.cancel_as(root(), job);
            }
            8 => {
                // n2 leaves (its tasks are lost) or comes back: the slots change.
                if n2_joined {
                    env.leave("n2");
                } else {
                    env.join_agent("n2", 2, 1);
                }
                n2_joined = !n2_joined;
            }
            _ => {
                env.advance_ms(rng.between(100, 10_000));
                env.heartbeat("n1");
                if n2_joined {
                    env.heartbeat("n2");
                }
                env.tick();
            }
        }
        live.extend(env.take_all_launches().iter().map(|l| l.container));
        live.retain(|c| env.core.state().containers.contains_key(c));
        // A quote walks the kept schedule and, in a debug build, checks it.
        let probe = random_job(&mut rng, 1_000_000 + step);
        env.core.quote(env.now, &probe).unwrap();
    }
    bought
}

#[test]
fn the_kept_schedule_matches_a_rebuild_through_random_runs() {
    let bought: usize = (0..40).map(|seed| random_run(seed, 150)).sum();
    // In a release build only the feasibility half is checked (`check_kept` is debug-only).
    assert!(bought > 40 * 20, "too few purchases to mean anything: {bought}");
}

#[test]
fn a_job_admitted_between_quotes_is_quoted_against_at_once() {
    let admission = AdmissionSettings { mode: AdmissionMode::Mrm, ..AdmissionSettings::default() };
    let mut env = TestEnv::with_config(CoreConfig { admission, ..CoreConfig::default() });
    env.join_agent("n1", 2, 0);
    let exact = |name: &str| {
        let mut spec = JobBuilder::maps(4).name(name).build();
        spec.estimate = Some(EstimateSpec {
            map_task_ms: Some(10_000),
            reduce_task_ms: None,
            spread_pct: Some(0),
            task_spread_pct: Some(0),
        });
        spec
    };
    let probe = exact("probe");
    assert_eq!(env.core.quote(env.now, &probe).unwrap().earliest, env.now + Duration::from_secs(20));
    let mut a = exact("a");
    a.deadline = Some(DeadlineSpec::At(env.now + Duration::from_secs(20)));
    let a = env.submit(a);
    // Kept since the first quote: a is added, not missed.
    let quote = env.core.quote(env.now, &probe).unwrap();
    assert_eq!((quote.admitted, quote.earliest), (1, env.now + Duration::from_secs(40)));
    // Two of a's tasks done: 2 × 10 s left, so the probe fits 10 s sooner.
    for launch in env.take_launches(2) {
        env.finish(launch.container);
    }
    assert_eq!(env.core.quote(env.now, &probe).unwrap().earliest, env.now + Duration::from_secs(30));
    env.cancel_as(root(), a);
    let quote = env.core.quote(env.now, &probe).unwrap();
    assert_eq!((quote.admitted, quote.earliest), (0, env.now + Duration::from_secs(20)));
}
