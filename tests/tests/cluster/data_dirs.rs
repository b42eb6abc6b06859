//! Agents that do not share a data directory: the master refuses every agent whose
//! directory is not the registered agents', saying which directories differ and how to
//! fix it, so the example wordcount job runs only where its stages see each other's files
//! and never completes with words missing.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{
    TestCluster, agent, assert_completed, connected, submit, wait_finished, wait_for, wait_until,
};

/// `configs/jobs/wordcount.toml` shrunk to test size (1 MB of text).
fn wordcount_spec() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/jobs/wordcount.toml");
    let text = std::fs::read_to_string(&path).expect("read the wordcount template");
    assert!(text.contains("--bytes 33554432"), "the template's size changed; update this test");
    text.replace("--bytes 33554432", "--bytes 1000000")
}

/// Word counts of every file in `dir`.
fn count_words(dir: &Path) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("list input").flatten() {
        let text = std::fs::read_to_string(entry.path()).expect("read input");
        for word in text.split_ascii_whitespace() {
            *counts.entry(word.to_string()).or_default() += 1;
        }
    }
    counts
}

/// `word<TAB>count` lines of every reducer output.
fn read_counts(out: &Path) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for entry in std::fs::read_dir(out).expect("list out").flatten() {
        let text = std::fs::read_to_string(entry.path()).expect("read out");
        for line in text.lines() {
            let (word, count) = line.split_once('\t').expect("word<TAB>count");
            counts.insert(word.to_string(), count.parse().expect("count"));
        }
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_with_separate_data_directories_never_complete_wordcount_with_words_missing() {
    let mut cluster = TestCluster::start(&[]).await;
    let dirs: Vec<_> = (1..=3).map(|i| cluster.dir.path().join(format!("data-{i}"))).collect();
    let specs = [agent("node-1", 2, 1), agent("node-2", 2, 1), agent("node-3", 2, 1)];
    let admin = cluster.client("admin").await;
    cluster.start_agent_with(&specs[0], &dirs[0], &[]);
    wait_until(|| async { connected(&admin).await.len() == 1 }, "node-1 to register").await;
    for (spec, dir) in specs.iter().zip(&dirs).skip(1) {
        cluster.start_agent_with(spec, dir, &[]);
    }
    // Each refused agent says which directory is not shared and with whom.
    for (spec, dir) in specs.iter().zip(&dirs).skip(1) {
        let expected =
            format!("data directory {} of agent {} is not the directory", dir.display(), spec.name);
        let log = cluster.dir.path().join(format!("{}.log", spec.name));
        wait_for(
            || std::fs::read_to_string(&log).ok().filter(|text| text.contains(&expected)),
            "the refusal in the agent's log",
        )
        .await;
        let text = std::fs::read_to_string(&log).expect("agent log");
        assert!(text.contains(&format!("agent node-1 uses {}", dirs[0].display())), "{text}");
    }
    let nodes = connected(&admin).await;
    assert_eq!(nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["node-1"]);

    let client = cluster.client("alice").await;
    let job = submit(&client, &wordcount_spec()).await;
    let status = wait_finished(&client, job).await;
    assert_completed(&cluster, &status);
    let job_dir = dirs[0].join("jobs").join(job.to_string());
    let expected = count_words(&job_dir.join("input"));
    assert!(expected.values().sum::<u64>() > 100_000, "the input holds the words");
    assert_eq!(read_counts(&job_dir.join("out")), expected, "every word counted once");
    for dir in &dirs[1..] {
        assert!(!dir.join("jobs").exists(), "no task ran on {}", dir.display());
    }
    client.close().await;
    admin.close().await;
}
