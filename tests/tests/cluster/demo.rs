//! `slotmarket demo --json` runs its whole workload on a fresh local cluster and exits 0
//! with every job completed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::binary;

#[test]
fn the_demo_completes_every_job() {
    let mut child = Command::new(binary("slotmarket"))
        .args(["demo", "--json"])
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
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("demo prints one JSON document");
    assert_eq!(report["all_completed"], true, "{report}");
    let jobs = report["jobs"].as_array().expect("jobs array");
    assert!(jobs.len() >= 4, "{report}");
    for job in jobs {
        assert_eq!(job["state"], "completed", "{job}");
        assert!(job["finished_s"].as_f64().unwrap() >= job["started_s"].as_f64().unwrap());
        assert!(job["wait_s"].as_f64().unwrap() >= 0.0);
    }
}
