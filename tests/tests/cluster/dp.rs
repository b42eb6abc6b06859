//! The `proportional` (DP) policy on a real master: a user sets their own spending rate
//! (and only theirs), running tasks are charged every interval and income credited, a
//! charge never overdraws, and after the master is SIGKILLed and restarted the ledger is
//! intact, every balance equals grants + income - charges, and the rate its user set and
//! the income an admin set are kept.

use std::time::Duration;

use serde_json::Value;
use slotmarket_common::protocol::JobState;

use crate::support::{TestCluster, agent, sleepers, submit, wait_finished};

/// Runs `slotmarket --json ARGS` as `identity`; returns success, stdout JSON (or null) and stderr.
async fn slotmarket(cluster: &TestCluster, identity: &str, args: &[&str]) -> (bool, Value, String) {
    let out = cluster.cli(identity, args).await;
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), json, String::from_utf8_lossy(&out.stderr).into_owned())
}

async fn ok(cluster: &TestCluster, identity: &str, args: &[&str]) -> Value {
    let (success, json, stderr) = slotmarket(cluster, identity, args).await;
    assert!(success, "{identity}: slotmarket {args:?} failed: {stderr}");
    json
}

/// Sum of the absolute amounts of the ledger's entries of `kind`, in micro-credits.
fn total(ledger: &Value, kind: &str) -> i64 {
    let entries = ledger["entries"].as_array().expect("entries");
    entries
        .iter()
        .filter(|e| e["kind"] == kind)
        .filter_map(|e| e["amount_micro"].as_i64())
        .map(i64::abs)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_charges_income_and_rates_survive_a_master_kill_as_grants_plus_income_minus_charges() {
    let mut cluster = TestCluster::start(&[agent("n1", 2, 0)]).await;
    // Half-second intervals; alice earns 1 credit a second and bids 1 per slot-second.
    let config = cluster.dir.path().join("dp.toml");
    let table = "[policy]\nname = \"proportional\"\ninterval_s = 0.5\n[policy.rates]\nalice = 3600\n";
    std::fs::write(&config, table).expect("write config");
    let config = config.to_string_lossy().into_owned();
    cluster.restart_master_with(&["--config", &config]).await;
    // The admin gives alice an income when creating her account, then doubles it; she
    // may not set it herself.
    let added =
        ok(&cluster, "admin", &["account", "add", "alice", "--budget", "2", "--income", "1800"]).await;
    assert_eq!(added["account"]["income"], "1800.00", "{added}");
    let (success, _, stderr) = slotmarket(&cluster, "alice", &["account", "income", "alice", "1"]).await;
    assert!(!success && stderr.contains("may not set income"), "{stderr}");
    ok(&cluster, "admin", &["account", "income", "alice", "3600"]).await;

    // Alice sets her own rate; bob may not set hers.
    let set = ok(&cluster, "alice", &["rate", "set", "7200"]).await;
    assert_eq!((set["account"].as_str(), set["rate"].as_str()), (Some("alice"), Some("7200.00")), "{set}");
    let (success, _, stderr) = slotmarket(&cluster, "bob", &["rate", "set", "1", "--account", "alice"]).await;
    assert!(!success && stderr.contains("no account alice"), "{stderr}");

    // Two slots at 2 credits per slot-second for ~2 s: far more than 2 credits + income,
    // so charges are clipped at the balance and the job still completes on spare slots.
    let client = cluster.client("alice").await;
    let job = submit(&client, &sleepers("paid", 4, 1.0)).await;
    let status = wait_finished(&client, job).await;
    assert_eq!(status.summary.state, JobState::Completed, "{status:?}");
    client.close().await;
    // Let the last interval after the job's end pass, so the ledger stops growing.
    tokio::time::sleep(Duration::from_millis(1200)).await;

    let before = ok(&cluster, "alice", &["ledger"]).await;
    let (grants, income, charges) =
        (total(&before, "grant"), total(&before, "income"), total(&before, "charge"));
    assert_eq!(grants, 2_000_000, "{before}");
    assert!(income > 0, "no income was credited: {before}");
    assert!(charges > 0, "nothing was charged: {before}");

    cluster.restart_master_with(&["--config", &config]).await;

    let after = ok(&cluster, "alice", &["ledger"]).await;
    assert_eq!(after["entries"], before["entries"], "the ledger changed across the restart");
    let account = ok(&cluster, "alice", &["account", "alice"]).await;
    let summary = &account["accounts"][0];
    let balance = summary["balance_micro"].as_i64().expect("balance");
    assert_eq!(balance, grants + income - charges, "{summary}");
    assert!(balance >= 0);
    // The rate alice set and the income the admin set outlived the master.
    assert_eq!(
        (summary["rate_set"].as_str(), summary["income"].as_str()),
        (Some("7200.00"), Some("3600.00"))
    );
}
