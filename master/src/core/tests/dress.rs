//! DRESS's Figure 1 (paper §I) on the real core: four jobs on a cluster of six
//! containers, submitted a second apart, each task of a job lasting the job's length.
//! Gang-start FCFS runs them one after another; DRESS lets the small jobs start in the
//! share reserved for them while the large one waits for room.
//!
//! The figure's sizes are not in the paper's text beyond Job 1 (R3 L10); the others are
//! fixed by the text. FCFS (waits 0, 9, 28, 27 s, makespan 40 s): Job 2 needs more than
//! Job 1 leaves (R ≥ 4) and runs 20 s, Job 3 cannot run beside Job 2, and Job 3 and 4
//! start together at 30 s and end by 40 s. DRESS ("Job 1 and 3 run concurrently, and
//! then Job 2 and 4 execute in parallel", makespan 30 s): Job 3 fits beside Job 1, Job 4
//! does not fit beside both but does beside Job 2, and Job 3 ends by 10 s so that Job 2
//! can start then. R4 L20, R3 L8 and R2 L10 satisfy all of it, and both schedules come
//! out of the real policies in that order.
//!
//! The remaining difference is the paper's mean wait for DRESS: 5.75 s, where this
//! schedule gives 0, 9, 0, 7 s (mean 4 s). With the FCFS figures fixed, the 30 s
//! makespan puts Job 2 at 10–30 s (9 s wait), so 5.75 s needs Job 3 and 4 to wait 14 s
//! together; Job 3 starting beside Job 1 and Job 4 beside Job 2 at 10 s gives at most
//! 0 + 7. An exhaustive search over R ≤ 6, L ≤ 20 found no sizes that give 30 s and
//! 5.75 s with each job starting once its slots are free, so the paper's 5.75 s looks
//! like an arithmetic slip (23 s of waiting where the order it describes has 16 s).

use std::collections::BTreeMap;
use std::time::Duration;

use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::protocol::DemandClass;
use slotmarket_common::spec::SlotKind;
use slotmarket_common::time::Timestamp;

use super::builders::JobBuilder;
use super::env::{START, TestEnv, alice, bob};
use crate::core::CoreConfig;
use crate::core::policy::PolicySettings;

/// (submitted after START in s, containers, length in s) of Figure 1's four jobs.
const FIGURE_1: [(u64, u32, u64); 4] = [(0, 3, 10), (1, 4, 20), (2, 3, 8), (3, 2, 10)];

/// Runs Figure 1 under `policy`, a second at a time; returns (makespan, waits) in s.
fn run_figure_1(policy: PolicySettings) -> (u64, Vec<u64>) {
    // The agents never fall silent here: the test is about order, not heartbeats.
    let config = CoreConfig { policy, agent_timeout: Duration::MAX, ..CoreConfig::default() };
    let mut env = TestEnv::with_config(config);
    env.join_agent("n1", 3, 0);
    env.join_agent("n2", 3, 0);
    let mut jobs: BTreeMap<JobId, usize> = BTreeMap::new();
    let mut ends: BTreeMap<ContainerId, u64> = BTreeMap::new();
    let mut first_start: BTreeMap<usize, u64> = BTreeMap::new();
    let mut last_end = 0;
    for second in 0..=60 {
        let now = second;
        for (ix, &(at, tasks, _)) in FIGURE_1.iter().enumerate() {
            if at == now {
                jobs.insert(env.submit(JobBuilder::maps(tasks).name(&format!("job{}", ix + 1)).build()), ix);
            }
        }
        let done: Vec<ContainerId> = ends.iter().filter(|&(_, &end)| end == now).map(|(&c, _)| c).collect();
        for c in done {
            ends.remove(&c);
            env.finish(c);
            last_end = now;
        }
        env.tick();
        for launch in env.take_all_launches() {
            let Some(&ix) = jobs.get(&launch.task.job) else { panic!("unknown job {}", launch.task.job) };
            first_start.entry(ix).or_insert(now);
            ends.insert(launch.container, now + FIGURE_1[ix].2);
        }
        env.advance(1);
        assert_eq!(env.now, Timestamp(START.0 + (second + 1) * 1000));
    }
    assert!(ends.is_empty(), "every task ran: {ends:?}");
    assert_eq!(first_start.len(), FIGURE_1.len(), "every job started: {first_start:?}");
    let waits = FIGURE_1.iter().enumerate().map(|(ix, &(at, ..))| first_start[&ix] - at).collect();
    (last_end, waits)
}

fn mean(waits: &[u64]) -> f64 {
    waits.iter().sum::<u64>() as f64 / waits.len() as f64
}

fn dress(gang: bool) -> PolicySettings {
    // θ = 1/2 makes Job 2 (R4 of 6) the one large-demand job; δ starts at 1/3 (two
    // containers), which Job 2 may not take while Job 4 waits for them.
    PolicySettings::Dress {
        theta: 0.5,
        initial_delta: 1.0 / 3.0,
        interval_secs: 1.0,
        window_secs: 10.0,
        heading: 2,
        gang,
    }
}

#[test]
fn figure_1_gang_start_fcfs_makespan_40_s_mean_wait_16_s() {
    let (makespan, waits) = run_figure_1(PolicySettings::GangFifo {});
    assert_eq!(waits, vec![0, 9, 28, 27]);
    assert_eq!((makespan, mean(&waits)), (40, 16.0));
}

#[test]
fn figure_1_dress_runs_jobs_1_and_3_then_2_and_4_makespan_30_s() {
    // Job 3 (small) starts at once beside Job 1; Job 4 finds no free slot; Job 2 (large)
    // waits for room. At 10 s Job 1 and 3 end: Job 4 takes the two reserved slots and
    // Job 2 the four others, and they run in parallel (the paper's order). The mean wait
    // is 4 s against the paper's 5.75 s (see the module header).
    let (makespan, waits) = run_figure_1(dress(true));
    assert_eq!(waits, vec![0, 9, 0, 7]);
    assert_eq!((makespan, mean(&waits)), (30, 4.0));
}

#[test]
fn the_reservation_view_shows_delta_the_partition_and_only_jobs_the_caller_may_see() {
    let policy = PolicySettings::Dress {
        theta: 0.1,
        initial_delta: 0.25,
        interval_secs: 5.0,
        window_secs: 10.0,
        heading: 2,
        gang: false,
    };
    let config = CoreConfig { policy, agent_timeout: Duration::MAX, ..CoreConfig::default() };
    let mut env = TestEnv::with_config(config);
    env.join_agent("n1", 10, 0);
    env.join_agent("n2", 10, 0);
    let large = env.submit(JobBuilder::maps(30).build());
    let small = env.submit(JobBuilder::maps(2).build());
    // δ = 0.25 of 20 map slots: 5 held for the small job, which uses 2 of them; the
    // large job got the other 15 and 3 stay free (idle reserved).
    let launches = env.take_all_launches();
    assert_eq!(launches.iter().filter(|l| l.task.job == large).count(), 15);
    assert_eq!(launches.iter().filter(|l| l.task.job == small).count(), 2);
    let view = env.core.reservation(&alice());
    assert_eq!((view.policy.as_str(), view.delta), ("dress", Some(0.25)));
    let partition: Vec<_> =
        view.kinds.iter().map(|k| (k.kind, k.total, k.reserved, k.reserved_used, k.free)).collect();
    assert_eq!(partition, vec![(SlotKind::Map, 20, 5, 2, 3), (SlotKind::Reduce, 0, 0, 0, 0)]);
    assert_eq!(view.small_jobs, vec![small]);
    assert!(env.core.reservation(&bob()).small_jobs.is_empty(), "bob may not see alice's jobs");
    let fifo = TestEnv::new().core.reservation(&alice());
    assert_eq!((fifo.policy.as_str(), fifo.delta, fifo.kinds.len()), ("fifo", None, 0));
    env.assert_no_commands();
}

#[test]
fn status_and_jobs_show_each_jobs_demand_class_under_dress_only() {
    let policy = PolicySettings::Dress {
        theta: 0.1,
        initial_delta: 0.25,
        interval_secs: 5.0,
        window_secs: 10.0,
        heading: 2,
        gang: false,
    };
    let config = CoreConfig { policy, agent_timeout: Duration::MAX, ..CoreConfig::default() };
    let mut env = TestEnv::with_config(config);
    env.join_agent("n1", 10, 0);
    env.join_agent("n2", 10, 0);
    let large = env.submit(JobBuilder::maps(30).build());
    let small = env.submit(JobBuilder::maps(2).build());
    assert_eq!(env.status(large).summary.demand_class, Some(DemandClass::Large));
    assert_eq!(env.status(small).summary.demand_class, Some(DemandClass::Small));
    let listed: Vec<_> = env.core.view().all_jobs(&alice()).iter().map(|s| (s.id, s.demand_class)).collect();
    assert_eq!(listed, vec![(large, Some(DemandClass::Large)), (small, Some(DemandClass::Small))]);
    // An ended job keeps its class while the core still holds it.
    for launch in env.take_all_launches().into_iter().filter(|l| l.task.job == small) {
        env.finish(launch.container);
    }
    assert!(env.status(small).summary.state.is_terminal());
    assert_eq!(env.status(small).summary.demand_class, Some(DemandClass::Small));

    let mut fifo = TestEnv::new();
    fifo.join_agent("n1", 10, 0);
    let job = fifo.submit(JobBuilder::maps(30).build());
    assert_eq!(fifo.status(job).summary.demand_class, None);
    assert_eq!(fifo.core.view().all_jobs(&alice())[0].demand_class, None);
}
