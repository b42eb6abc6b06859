//! Accounts through the real `slotmarket` command line against a real master: admins
//! create accounts and grant budget, users see only what they belong to, and after the
//! master is SIGKILLed and restarted on the same data directory every balance still
//! equals its grants minus its charges and the ledger is intact.

use serde_json::Value;

use crate::support::TestCluster;

/// Runs a command that must succeed and parses its JSON.
async fn ok(cluster: &TestCluster, identity: &str, args: &[&str]) -> Value {
    let out = cluster.cli(identity, args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{identity}: slotmarket {args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stderr}"))
}

/// Runs a command that must fail with exit code 1 and returns its error text.
async fn refused(cluster: &TestCluster, identity: &str, args: &[&str]) -> String {
    let out = cluster.cli(identity, args).await;
    assert_eq!(out.status.code(), Some(1), "{identity}: slotmarket {args:?} should fail: {out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn micro(value: &Value, field: &str) -> i64 {
    value[field].as_i64().unwrap_or_else(|| panic!("{field} missing in {value}"))
}

/// grants - charges, from the ledger's own entries.
fn grants_minus_charges(ledger: &Value) -> i64 {
    let entries = ledger["entries"].as_array().expect("entries");
    let sum = |kind: &str| -> i64 {
        entries.iter().filter(|e| e["kind"] == kind).map(|e| micro(e, "amount_micro").abs()).sum()
    };
    sum("grant") - sum("charge")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balances_equal_grants_minus_charges_after_a_master_kill_and_restart() {
    let mut cluster = TestCluster::start(&[]).await;
    let lab = ok(&cluster, "admin", &["account", "add", "lab", "--budget", "10", "--member", "alice"]).await;
    assert_eq!(micro(&lab["account"], "balance_micro"), 10_000_000);
    ok(&cluster, "admin", &["account", "add", "alice"]).await;
    for (account, amount) in
        [("alice", "2.5"), ("alice", "4"), ("alice", "-1.25"), ("lab", "-3"), ("alice", "0.000001")]
    {
        ok(&cluster, "admin", &["budget", "add", account, amount, "--memo", "test grant"]).await;
    }
    let overdraw = refused(&cluster, "admin", &["budget", "add", "alice", "-100"]).await;
    assert!(overdraw.contains("less than the 100.00 asked for"), "{overdraw}");

    // Users cannot grant, and another user's account looks exactly like a missing one.
    let forbidden = refused(&cluster, "alice", &["budget", "add", "alice", "5"]).await;
    assert!(forbidden.contains("may not grant budget"), "{forbidden}");
    let other = refused(&cluster, "bob", &["account", "lab"]).await;
    let missing = refused(&cluster, "bob", &["account", "ghost"]).await;
    assert!(other.contains("no account lab"), "{other}");
    assert_eq!(other.replace("lab", "X"), missing.replace("ghost", "X"));
    let hidden = refused(&cluster, "bob", &["ledger", "alice"]).await;
    assert!(hidden.contains("no account alice"), "{hidden}");

    let ledger_before = ok(&cluster, "alice", &["ledger"]).await;
    let lab_ledger_before = ok(&cluster, "alice", &["ledger", "lab"]).await;
    assert_eq!(ledger_before["entries"].as_array().map(Vec::len), Some(4));

    cluster.restart_master().await;

    let accounts = ok(&cluster, "alice", &["account"]).await;
    let names: Vec<&str> =
        accounts["accounts"].as_array().unwrap().iter().filter_map(|a| a["account"].as_str()).collect();
    assert_eq!(names, ["alice", "lab"], "alice sees her own account and the one listing her");
    let ledger_after = ok(&cluster, "alice", &["ledger"]).await;
    assert_eq!(ledger_after, ledger_before, "the ledger changed across the restart");
    assert_eq!(ok(&cluster, "alice", &["ledger", "lab"]).await, lab_ledger_before);
    for (account, ledger, expected) in
        [("alice", &ledger_after, 5_250_001), ("lab", &lab_ledger_before, 7_000_000)]
    {
        let summary =
            &accounts["accounts"].as_array().unwrap().iter().find(|a| a["account"] == account).unwrap();
        assert_eq!(micro(summary, "balance_micro"), expected, "{summary}");
        assert_eq!(micro(summary, "balance_micro"), grants_minus_charges(ledger), "{account}");
        assert_eq!(micro(ledger, "sum_micro"), expected, "{account}");
        assert_eq!(micro(summary, "granted_micro") - micro(summary, "charged_micro"), expected);
    }

    // The sequence continues after the recovered entries, and paging reads the same ledger.
    let last_seq = ledger_after["entries"].as_array().unwrap().last().unwrap()["seq"].as_u64().unwrap();
    let granted = ok(&cluster, "admin", &["budget", "add", "alice", "1"]).await;
    assert!(granted["entry"]["seq"].as_u64().unwrap() > last_seq, "{granted}");
    assert_eq!(micro(&granted["account"], "balance_micro"), 6_250_001);
    let page = ok(&cluster, "admin", &["ledger", "alice", "--limit", "2"]).await;
    let page_seqs: Vec<u64> =
        page["entries"].as_array().unwrap().iter().filter_map(|e| e["seq"].as_u64()).collect();
    let all_seqs: Vec<u64> =
        ledger_after["entries"].as_array().unwrap().iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(page_seqs, all_seqs[..2]);
    assert_eq!(page["next_after"].as_u64(), Some(all_seqs[1]));
}
