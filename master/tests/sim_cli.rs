//! The `slotmarket-sim` command line as scripts use it: `gen`, `run` (also without the
//! subcommand), `--json`, `--out` and `report`; output must repeat byte for byte.

use std::path::Path;
use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    let out =
        Command::new(env!("CARGO_BIN_EXE_slotmarket-sim")).args(args).output().expect("slotmarket-sim runs");
    assert!(out.status.success(), "slotmarket-sim {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

#[test]
fn the_same_trace_policy_and_seed_print_the_same_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("mrm.jsonl");
    sim(&["gen", "mrm", "--jobs", "150", "--interarrival", "20", "--seed", "4", "-o", path(&trace)]);
    let args = ["--policy", "fifo", "--trace", path(&trace), "--seed", "9", "--nodes", "10"];
    let first = sim(&args);
    let second = sim(&args);
    assert!(!first.stdout.is_empty());
    assert_eq!(first.stdout, second.stdout, "two identical runs printed different summaries");
    let text = String::from_utf8(first.stdout).expect("utf-8");
    assert!(text.starts_with("policy fifo · seed 9 · 10 nodes"), "{text}");
    // `run` spelled out is the same command.
    let mut run = vec!["run"];
    run.extend(args);
    assert_eq!(sim(&run).stdout, text.as_bytes());
}

#[test]
fn json_summaries_carry_the_documented_fields_overall_and_per_class() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = |trace: &Path, policy: &[&str]| -> serde_json::Value {
        let mut args = vec!["run", "--trace", path(trace), "--json"];
        args.extend(policy);
        serde_json::from_slice(&sim(&args).stdout).expect("JSON summary")
    };
    let dress = dir.path().join("dress.jsonl");
    sim(&["gen", "dress", "--jobs", "30", "--small-share", "0.4", "--seed", "2", "-o", path(&dress)]);
    let mrm = dir.path().join("mrm.jsonl");
    sim(&["gen", "mrm", "--jobs", "40", "--seed", "2", "-o", path(&mrm)]);
    let summaries = [
        json(&dress, &["--policy", "capacity", "--set", "queues.small=0.2"]),
        json(&mrm, &["--policy", "priority"]),
    ];
    for summary in &summaries {
        for field in ["jobs", "makespan_s", "mean_wait_s", "deadline_jobs", "slot_utilisation", "preemptions"]
        {
            assert!(summary[field].is_number(), "no {field} in {summary}");
            for class in ["delay-sensitive", "delay-tolerant"] {
                assert!(summary["classes"][class][field].is_number(), "no {class}.{field} in {summary}");
            }
        }
    }
    // DRESS traces carry no deadlines: no violation rate rather than a rate of 0.
    let [dress, mrm] = summaries;
    assert_eq!((dress["deadline_jobs"].as_u64(), dress["violation_rate"].is_null()), (Some(0), true));
    assert!(mrm["violation_rate"].is_number(), "{mrm}");
    for class in ["delay-sensitive", "delay-tolerant"] {
        assert!(mrm["classes"][class]["violation_rate"].is_number(), "no {class}.violation_rate in {mrm}");
    }
    assert_eq!((dress["jobs"].as_u64(), mrm["jobs"].as_u64()), (Some(30), Some(40)));
    assert_eq!(dress["policy"], "capacity");
}

#[test]
fn run_out_writes_csvs_that_report_plots() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("dp.jsonl");
    sim(&["gen", "dp", "--jobs", "12", "--users", "3", "--maps", "8", "--seed", "1", "-o", path(&trace)]);
    for policy in ["fifo", "fair"] {
        let out = dir.path().join(policy);
        sim(&["run", "--trace", path(&trace), "--policy", policy, "--nodes", "4", "--out", path(&out)]);
        for file in ["summary.txt", "summary.json", "jobs.csv", "slots.csv"] {
            assert!(out.join(file).is_file(), "{policy}: no {file}");
        }
        let jobs = std::fs::read_to_string(out.join("jobs.csv")).expect("jobs.csv");
        assert_eq!(jobs.lines().count(), 13, "a header and one line per job");
    }
    let plots = dir.path().join("plots");
    let fifo = dir.path().join("fifo");
    let fair = format!("fair={}", path(&dir.path().join("fair")));
    sim(&["report", path(&fifo), &fair, "-o", path(&plots)]);
    for file in ["completion_cdf.svg", "wait_by_class.svg", "slot_use.svg"] {
        let svg = std::fs::read_to_string(plots.join(file)).expect("plot written");
        assert!(svg.starts_with("<svg") && svg.contains(">fifo") && svg.contains(">fair"), "{file}");
    }
}

#[test]
fn bad_input_is_refused_with_a_message_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("bad.jsonl");
    std::fs::write(&trace, "{\"id\":\"a\",\"arrival_s\":0,\"stages\":[]}\n").expect("written");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_slotmarket-sim")).args(args).output().expect("runs");
        assert!(!out.status.success(), "{args:?} should fail");
        String::from_utf8(out.stderr).expect("utf-8")
    };
    let err = run(&["run", "--trace", path(&trace)]);
    assert!(err.contains("line 1: stage: a job needs at least one [[stage]] table"), "{err}");
    assert!(run(&["run"]).contains("no trace: pass --trace FILE"));
    let err = run(&[
        "run",
        "--trace",
        path(&trace),
        "--set",
        "name=capacity",
        "--set",
        "queues.a=0.8",
        "--set",
        "queues.b=0.5",
    ]);
    assert!(err.contains("[policy] queues: shares add up to 1.3"), "{err}");
    let err = run(&["run", "--trace", path(&trace), "--policy", "lottery"]);
    assert!(err.contains("unknown variant `lottery`, expected one of `fifo`, `fair`"), "{err}");
    let err = run(&["run", "--trace", path(&trace), "--policy", "fifo", "--set", "preemption=true"]);
    assert!(err.contains("unknown field `preemption`"), "{err}");
    let missing = dir.path().join("missing.toml");
    assert!(
        run(&["run", "--trace", path(&trace), "--policy-config", path(&missing)]).contains("missing.toml")
    );
}
