//! A 10-map/2-reduce wordcount on three agents produces exactly the counts a plain
//! single-process count of the same input gives.

use std::collections::BTreeMap;
use std::process::Command;

use crate::support::{TestCluster, agent, assert_completed, binary, submit, wait_finished};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wordcount_with_ten_maps_and_two_reduces_is_correct() {
    let cluster =
        TestCluster::start(&[agent("node-1", 2, 1), agent("node-2", 2, 1), agent("node-3", 2, 1)]).await;
    let input = cluster.shared_dir().join("input");
    let generated = Command::new(binary("slotmarket-task"))
        .args(["gen-text", "--bytes", "3000000", "--seed", "7", "--tasks", "1", "--task", "0", "--output"])
        .arg(&input)
        .status()
        .expect("run gen-text");
    assert!(generated.success());

    let spec = format!(
        r#"
        name = "wordcount"
        input = "{input}"
        [[stage]]
        name = "map"
        tasks = 10
        slot = "map"
        command = "slotmarket-task wordcount map --input {{input}} --task {{task}} --tasks {{tasks}} --reducers {{tasks.reduce}} --job-dir {{job_dir}}"
        [[stage]]
        name = "reduce"
        tasks = 2
        slot = "reduce"
        after = ["map"]
        command = "slotmarket-task wordcount reduce --task {{task}} --maps {{tasks.map}} --job-dir {{job_dir}}"
        "#,
        input = input.display()
    );
    let client = cluster.client("alice").await;
    let job = submit(&client, &spec).await;
    let status = wait_finished(&client, job).await;
    assert_completed(&cluster, &status);
    assert_eq!((status.summary.tasks_completed, status.summary.tasks_total), (12, 12));

    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for file in std::fs::read_dir(&input).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        for word in text.split_whitespace() {
            *expected.entry(word.to_string()).or_default() += 1;
        }
    }
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    for reducer in 0..2 {
        let out = cluster.job_dir(job).join("out").join(format!("part-{reducer}"));
        let text = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        for line in text.lines() {
            let (word, count) = line.split_once('\t').expect("word<TAB>count");
            let previous = counted.insert(word.to_string(), count.parse().expect("count"));
            assert!(previous.is_none(), "{word} counted by two reducers");
        }
    }
    assert!(!expected.is_empty());
    assert_eq!(counted, expected);
    client.close().await;
}
