//! `slotmarket demo --json` runs its whole workload on a fresh local cluster and exits 0
//! with every job completed; `demo --rates` shows DP's shares following the users' rates;
//! `demo --slo` shows Jockey raising a slow deadline job's guarantee until it meets its
//! deadline.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::binary;

/// Runs `slotmarket demo --json EXTRA`, bounded, and answers its report once it exited 0.
fn demo(extra: &[&str]) -> Value {
    let mut child = Command::new(binary("slotmarket"))
        .args(["demo", "--json"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start demo");
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("demo did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = child.wait_with_output().expect("demo output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "demo failed: {}\n{stderr}", output.status);
    serde_json::from_slice(&output.stdout).expect("demo prints one JSON document")
}

#[test]
fn under_dp_the_demo_users_slots_follow_their_rates() {
    let report = demo(&["--rates"]);
    assert_eq!(report["all_completed"], true, "{report}");
    let shares = &report["shares"];
    // Four samples a second over the seconds both users had tasks waiting: a few
    // seconds even where the pi tasks run fastest.
    assert!(shares["contended_samples"].as_u64().unwrap() >= 8, "{report}");
    let user = |k: usize, what: &str| shares["users"][k][what].as_f64().unwrap();
    assert_eq!((user(0, "rate"), user(1, "rate")), (1.0, 2.0), "{report}");
    // Six map slots allotted 1 : 2 in every second both users had tasks waiting.
    assert_eq!((user(0, "mean_share"), user(1, "mean_share")), (2.0, 4.0), "{report}");
    // Running follows the share (both jobs wait for the agents, so neither is first to
    // the slots); a sample may catch a slot between two tasks.
    let ratio = user(1, "mean_running") / user(0, "mean_running");
    assert!((1.4..=2.6).contains(&ratio), "running slots 1 : {ratio:.2}, rates 1 : 2: {report}");
}

#[test]
fn under_jockey_the_demo_deadline_jobs_guarantee_rises_and_its_deadline_is_met() {
    let report = demo(&["--slo"]);
    assert_eq!(report["all_completed"], true, "{report}");
    let slo = &report["slo"];
    assert_eq!(slo["met"], true, "{report}");
    // The control loop pools the completed maps' times with ten tasks' worth of "as
    // profiled", so with 12 maps it reads above 1.5 only if they ran over 1.9 times as
    // long as profiled (their sleep is three times as long).
    assert!(slo["slowdown"].as_f64().unwrap() > 1.5, "{report}");
    let guarantees: Vec<u64> =
        slo["samples"].as_array().unwrap().iter().map(|s| s["guaranteed"].as_u64().unwrap()).collect();
    // Planned from the profile it starts small; once its first maps show the run
    // slower, the control loop raises it.
    let first = *guarantees.first().unwrap_or_else(|| panic!("no samples: {report}"));
    assert!(guarantees.iter().any(|&g| g > first), "the guarantee never rose: {report}");
}

#[test]
fn the_demo_completes_every_job() {
    let report = demo(&[]);
    assert_eq!(report["all_completed"], true, "{report}");
    let jobs = report["jobs"].as_array().expect("jobs array");
    assert!(jobs.len() >= 4, "{report}");
    for job in jobs {
        assert_eq!(job["state"], "completed", "{job}");
        assert!(job["finished_s"].as_f64().unwrap() >= job["started_s"].as_f64().unwrap());
        assert!(job["wait_s"].as_f64().unwrap() >= 0.0);
    }
}
