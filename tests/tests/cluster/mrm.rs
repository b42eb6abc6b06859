//! MRM on a real cluster: a master with `[admission] mode = "mrm"` and the `edf` policy
//! quotes a job (through the `slotmarket quote` binary too), sells its earliest deadline,
//! the job completes by it and the ledger shows the charge; a master SIGKILLed while a
//! bought job runs comes back with the job, its deadline and price, and every balance.

use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{DeadlineChoice, EntryKind, JobState};
use slotmarket_common::spec::JobSpec;

use crate::support::{TestCluster, agent, connected, status, wait_finished, wait_running, wait_until};

/// `tasks` map tasks sleeping `secs`, estimated (with no spread) at `estimate_ms` each.
fn estimated(name: &str, tasks: u32, secs: f64, estimate_ms: u64) -> String {
    format!(
        "name = \"{name}\"\n[[stage]]\nname = \"sleep\"\ntasks = {tasks}\nslot = \"map\"\n\
         command = \"sleep {secs}\"\n[estimate]\nmap_task_ms = {estimate_ms}\nspread_pct = 0\n\
         task_spread_pct = 0\n"
    )
}

/// The flags of a master running MRM admission in front of `edf` (config in the test dir).
fn mrm_master(cluster: &TestCluster) -> Vec<String> {
    let config = cluster.master_dir().join("../mrm.toml");
    std::fs::write(&config, "[admission]\nmode = \"mrm\"\n").expect("write master config");
    let config = config.to_str().expect("utf-8 path").to_string();
    vec!["--policy".into(), "edf".into(), "--config".into(), config]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bought_deadline_is_met_charged_and_kept_across_a_master_kill() {
    let mut cluster = TestCluster::start(&[agent("node-1", 2, 1)]).await;
    let flags = mrm_master(&cluster);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    cluster.restart_master_with(&flags).await;
    let admin = cluster.client("admin").await;
    // Quotes need the cluster's slots: wait for the agent to reconnect.
    wait_until(|| async { connected(&admin).await.len() == 1 }, "the agent to reconnect").await;
    let alice_account = AccountId("alice".into());
    admin.account_add(alice_account.clone(), Some(Credits::from_credits(1)), vec![]).await.expect("account");

    // The quote through the command line, then through the client.
    let quick = estimated("quick", 2, 0.5, 3_000);
    let file = cluster.master_dir().join("../quick.toml");
    std::fs::write(&file, &quick).expect("write spec");
    let output = cluster.cli("alice", &["quote", file.to_str().expect("utf-8")]).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("quote json");
    assert_eq!(json["work_upper_ms"], 6_000, "{json}");
    assert!(json["curve"].as_array().is_some_and(|c| c.len() > 1), "{json}");

    let alice = cluster.client("alice").await;
    let spec = JobSpec::from_toml(&quick).expect("spec");
    let quote = alice.quote(spec.clone()).await.expect("quote");
    let bought =
        alice.submit_choosing(spec, DeadlineChoice::Earliest).await.expect("submit").expect("bought");
    assert!(bought.deadline >= quote.earliest.deadline, "{bought:?} vs {quote:?}");
    let done = wait_finished(&alice, bought.job).await;
    assert_eq!(done.summary.state, JobState::Completed);
    let finished = done.summary.finished.expect("finish time");
    assert!(finished <= bought.deadline, "finished {finished:?} after its deadline {:?}", bought.deadline);
    assert_eq!((done.summary.price, done.summary.paid), (Some(bought.price), Some(bought.price)));
    let ledger = alice.ledger_page(alice_account.clone(), 0, 100).await.expect("ledger");
    let charge = ledger.entries.iter().find(|e| e.kind.name() == "deadline").expect("a purchase entry");
    assert_eq!(charge.kind, EntryKind::DeadlinePurchase { job: bought.job, deadline: bought.deadline });
    assert_eq!(charge.amount, Credits(-bought.price.micros()));

    // An unaffordable maximum is refused with the alternative, and nothing is charged.
    let long = JobSpec::from_toml(&estimated("long", 1, 30.0, 40_000)).expect("spec");
    let refused =
        alice.submit_choosing(long.clone(), DeadlineChoice::MaxPrice(Credits(1))).await.expect("answer");
    let refusal = refused.expect_err("one micro-credit buys nothing");
    assert!(refusal.reason.contains("the cheapest costs"), "{}", refusal.reason);

    // A bought job running when the master is SIGKILLed keeps its promise and its price.
    let running =
        alice.submit_choosing(long, DeadlineChoice::Earliest).await.expect("submit").expect("bought");
    wait_running(&alice, running.job, 1).await;
    let before = alice.accounts(Some(alice_account.clone())).await.expect("accounts");
    assert_eq!(before[0].balance.micros(), 1_000_000 - bought.price.micros() - running.price.micros());
    let predicted = status(&alice, running.job).await.summary.predicted_finish.expect("a prediction");
    assert!(predicted <= running.deadline + std::time::Duration::from_secs(1), "{predicted:?}");
    alice.close().await;
    admin.close().await;

    cluster.restart_master_with(&flags).await;
    let alice = cluster.client("alice").await;
    let after = status(&alice, running.job).await.summary;
    assert!(!after.state.is_terminal(), "{after:?}");
    assert_eq!(
        (after.deadline, after.price, after.paid),
        (Some(running.deadline), Some(running.price), Some(running.price))
    );
    assert_eq!(alice.accounts(Some(alice_account.clone())).await.expect("accounts"), before);
    let ended = status(&alice, bought.job).await.summary;
    assert_eq!((ended.state, ended.price), (JobState::Completed, Some(bought.price)));
    alice.cancel(running.job).await.expect("cancel");
    assert_eq!(wait_finished(&alice, running.job).await.summary.state, JobState::Cancelled);
    alice.close().await;
}
