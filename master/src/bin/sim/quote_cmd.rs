//! `slotmarket-sim bench-quote`: how long one MRM quote takes with N admitted deadline
//! jobs, on the master's own core (the figure `scripts/bench/quote.sh` reports). The
//! admitted jobs are submitted with FCFS deadlines straight into the core, so the set
//! is built in linear time; then the same new job is quoted repeatedly.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Args;
use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::AgentId;
use slotmarket_common::protocol::DataMode;
use slotmarket_common::spec::{DeadlineSpec, EstimateSpec, JobSpec, SlotKind, StageSpec};
use slotmarket_common::time::Timestamp;
use slotmarket_master::core::{Core, CoreConfig, Event, RequestId};

/// Flags of `bench-quote`.
#[derive(Args, Debug)]
pub(crate) struct QuoteArgs {
    /// Admitted deadline jobs to quote against.
    #[arg(long, default_value_t = 1000)]
    admitted: u32,
    /// Quotes to time.
    #[arg(long, default_value_t = 200)]
    quotes: u32,
    /// Simulated nodes (2 map + 2 reduce slots each).
    #[arg(long, default_value_t = 40)]
    nodes: u32,
}

/// A job of 10 map tasks of 20 s and 2 reduce tasks of 30 s, with an `[estimate]`.
fn job(name: String, deadline: Option<Timestamp>) -> JobSpec {
    let stage = |name: &str, tasks, slot, after: Vec<String>| StageSpec {
        name: name.into(),
        tasks,
        slot,
        command: "true".into(),
        after,
    };
    JobSpec {
        name,
        input: None,
        max_attempts: None,
        stages: vec![
            stage("map", 10, SlotKind::Map, Vec::new()),
            stage("reduce", 2, SlotKind::Reduce, vec!["map".into()]),
        ],
        class: None,
        queue: None,
        deadline: deadline.map(DeadlineSpec::At),
        account: None,
        input_bytes: None,
        estimate: Some(EstimateSpec {
            map_task_ms: Some(20_000),
            reduce_task_ms: Some(30_000),
            spread_pct: Some(10),
            task_spread_pct: Some(10),
        }),
        time_limit: None,
        after: Vec::new(),
        utility: None,
    }
}

pub(crate) fn run(args: QuoteArgs) -> Result<()> {
    if args.quotes == 0 || args.nodes == 0 {
        bail!("--quotes and --nodes must be at least 1");
    }
    let mut core = Core::new(CoreConfig::default());
    let now = Timestamp(1_000_000);
    for n in 0..args.nodes {
        let agent = AgentId(n + 1);
        let event = Event::AgentJoined {
            agent,
            node: format!("node-{n}"),
            map_slots: 2,
            reduce_slots: 2,
            live_containers: Vec::new(),
            data_mode: DataMode::Shared,
            data_dir_id: String::new(),
        };
        let _ = core.handle(now, event);
    }
    let caller = Identity { role: Role::User, principal: "bench".into() };
    for i in 0..args.admitted {
        // FCFS deadlines one job-size apart, an hour out: every one feasible.
        let deadline = now + Duration::from_secs(3600 + u64::from(i) * 10);
        let spec = job(format!("admitted-{i}"), Some(deadline));
        let event = Event::JobSubmitted { request: RequestId(u64::from(i)), caller: caller.clone(), spec };
        let _ = core.handle(now, event);
    }
    let new = job("new".into(), None);
    let first = core.quote(now, &new)?;
    let started = Instant::now();
    for _ in 0..args.quotes {
        black_box(core.quote(now, black_box(&new))?);
    }
    let per_quote = started.elapsed() / args.quotes;
    println!(
        "admitted={} quoted_against={} quotes={} per_quote_ms={:.3} earliest_s={:.1}",
        args.admitted,
        first.admitted,
        args.quotes,
        per_quote.as_secs_f64() * 1000.0,
        first.earliest.0.saturating_sub(now.0) as f64 / 1000.0
    );
    Ok(())
}
