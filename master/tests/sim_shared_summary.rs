//! The simulator's summary is the shared one (`slotmarket_common::metrics`) that
//! `slotmarket workload run` prints for live runs: a run's `jobs.csv`, read back and
//! summarised on its own, prints exactly the table the simulator printed. So the table
//! depends on the per-job records alone, and the live runner, which writes the same
//! columns and renders through the same code, prints lines that compare one for one.

mod support;

use std::collections::BTreeMap;
use std::process::Command;

use slotmarket_common::metrics::{RunFacts, read_jobs_csv, summarise};
use slotmarket_common::time::Timestamp;
use slotmarket_master::core::{CoreConfig, PolicySettings};
use slotmarket_master::sim::generate::Mrm;
use slotmarket_master::sim::report::{Outcome, Summary, records, run_facts, write_jobs_csv};
use slotmarket_master::sim::workload::Trace;
use slotmarket_master::sim::{self, SimConfig};

/// 120 jobs of the MRM mix on 6 nodes, queued by class, with noise and failures.
fn trace() -> Trace {
    support::mrm_trace_queued_by_class(Mrm {
        jobs: 120,
        interarrival_s: 40.0,
        map_slots: 12,
        reduce_slots: 12,
        seed: 3,
        ..Mrm::default()
    })
}

fn config(policy: PolicySettings, horizon_s: Option<u64>) -> SimConfig {
    SimConfig {
        core: CoreConfig { policy, ..CoreConfig::default() },
        nodes: 6,
        seed: 8,
        noise: 0.2,
        fail_prob: 0.02,
        horizon: horizon_s.map(Timestamp::from_secs),
        ..SimConfig::default()
    }
}

/// The text after the simulator's own lines: the shared table.
fn table(text: &str) -> &str {
    text.split_once("\n\n").map_or("", |(_, table)| table)
}

#[test]
fn a_jobs_csv_read_back_prints_the_table_the_simulator_printed() {
    let trace = trace();
    // Preempting policies (kills), and a horizon that leaves jobs unfinished and unsubmitted.
    let queues: BTreeMap<String, f64> =
        [("sensitive".to_string(), 0.6), ("tolerant".to_string(), 0.4)].into();
    let cases = [
        (PolicySettings::Fair { preemption: true }, None),
        (PolicySettings::Capacity { queues, preemption: true }, None),
        (PolicySettings::Fifo {}, Some(2500)),
    ];
    for (policy, horizon) in cases {
        let config = config(policy.clone(), horizon);
        let run = sim::run(&trace, &config).expect("run finishes");
        let summary = Summary::new(&trace, &run, &config);
        let mut printed = Vec::new();
        summary.write_text(&mut printed).expect("writes to memory");
        let printed = String::from_utf8(printed).expect("utf-8");
        let mut csv = Vec::new();
        write_jobs_csv(&trace, &run, &mut csv).expect("writes to memory");

        let read = read_jobs_csv(std::str::from_utf8(&csv).expect("utf-8")).expect("reads back");
        assert_eq!(read, records(&trace, &run), "{policy:?}: the CSV loses nothing the summary uses");
        let again = summarise(&read, run_facts(&run, &config));
        assert_eq!(again, summary.metrics, "{policy:?}");
        assert_eq!(again.to_string(), table(&printed), "{policy:?}");
        assert!(again.all.preemptions.is_some_and(|p| p > 0) || horizon.is_some(), "{policy:?}: no kills");
        if horizon.is_some() {
            let outcomes: Vec<Outcome> = read.iter().map(|r| r.outcome).collect();
            assert!(outcomes.contains(&Outcome::Unfinished) && outcomes.contains(&Outcome::NotSubmitted));
        }
    }
}

#[test]
fn the_command_line_prints_the_shared_table_and_writes_the_shared_csv() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("mrm.jsonl");
    let out = dir.path().join("out");
    let sim = |args: &[&str]| {
        let status = Command::new(env!("CARGO_BIN_EXE_slotmarket-sim")).args(args).output().expect("runs");
        assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        String::from_utf8(status.stdout).expect("utf-8")
    };
    let path = |p: &std::path::Path| p.to_str().expect("utf-8 path").to_string();
    sim(&["gen", "mrm", "--jobs", "60", "--interarrival", "30", "--seed", "2", "-o", &path(&trace)]);
    let printed = sim(&["run", "--trace", &path(&trace), "--nodes", "4", "--out", &path(&out)]);
    assert_eq!(std::fs::read_to_string(out.join("summary.txt")).expect("summary.txt"), printed);
    let csv = std::fs::read_to_string(out.join("jobs.csv")).expect("jobs.csv");
    assert_eq!(csv.lines().next(), Some(slotmarket_common::metrics::JOB_COLUMNS));
    let read = read_jobs_csv(&csv).expect("reads back");
    // Every job ended, so when the run stopped does not matter.
    assert!(read.iter().all(|r| r.outcome == Outcome::Completed));
    let again = summarise(&read, RunFacts { slots: Some(4 * 4), stopped_s: None });
    assert_eq!(again.to_string(), table(&printed));
    let lines: Vec<&str> = table(&printed).lines().collect();
    assert!(lines[0].starts_with("metric ") && lines[0].ends_with(" all  delay-sensitive  delay-tolerant"));
    assert_eq!(lines[1].split_whitespace().take(2).collect::<Vec<_>>(), ["jobs", "60"]);
}
