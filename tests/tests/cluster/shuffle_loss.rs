//! An agent in local data mode SIGKILLed after its maps completed and before the reduces
//! fetched them: the master re-runs those maps on the other agents (Hadoop's behaviour)
//! and the job's output still equals a single-process run.

use std::path::Path;

use slotmarket_common::ids::JobId;

use crate::shuffle::{MAPS, REDUCES, generate, log_of, single_process};
use crate::support::{TestCluster, agent, assert_completed, status, submit, wait_finished, wait_until};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

/// Wordcount whose reducers sleep first, so that they have fetched nothing when a map
/// holder is killed; the sleep outlasts the master's agent timeout (2 s in tests).
fn wordcount_with_late_reduce(input: &Path) -> String {
    format!(
        r#"
        name = "wordcount-late-reduce"
        [[stage]]
        name = "map"
        tasks = {MAPS}
        slot = "map"
        command = 'slotmarket-task wordcount map --input "{input}" --parts 4 --task {{task}} --tasks {{tasks}} --reducers {{tasks.reduce}} --job-dir "{{job_dir}}"'
        [[stage]]
        name = "reduce"
        tasks = {REDUCES}
        slot = "reduce"
        after = ["map"]
        command = 'sleep 5; slotmarket-task wordcount reduce --task {{task}} --maps {{tasks.map}} --job-dir "{{job_dir}}"'
        "#,
        input = input.display()
    )
}

/// The nodes whose own directory holds a completed map's output of `job`.
fn map_holders(cluster: &TestCluster, job: JobId) -> Vec<&'static str> {
    NODES
        .into_iter()
        .filter(|node| (0..MAPS).any(|m| cluster.local_job_dir(node, job).join(format!("map-{m}")).is_dir()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maps_lost_with_a_killed_local_agent_run_again_and_the_output_equals_a_single_process_run() {
    let specs = [agent("node-1", 2, 1), agent("node-2", 2, 1), agent("node-3", 2, 1)];
    let mut cluster = TestCluster::start_local(&specs).await;
    let text = generate(cluster.dir.path(), "gen-text", "600000");
    let client = cluster.client("alice").await;
    let job = submit(&client, &wordcount_with_late_reduce(&text)).await;
    wait_until(|| async { status(&client, job).await.stages[0].completed == MAPS }, "every map to complete")
        .await;
    let holders = map_holders(&cluster, job);
    let victim = *holders.first().expect("some agent holds map outputs");
    cluster.kill_agent(victim);

    let finished = wait_finished(&client, job).await;
    assert_completed(&cluster, &finished);
    let log = log_of(&cluster, "master");
    assert!(log.contains(&format!("whose output was on {victim}")), "no re-run logged:\n{log}");
    // The re-run maps are no failed attempts.
    assert_eq!(finished.stages[0].failed_attempts, 0, "{:?}", finished.stages[0]);

    let reference = single_process("wordcount", &text, &cluster.dir.path().join("reference"));
    for (r, expected) in reference.iter().enumerate() {
        let survivors = NODES.iter().filter(|n| **n != victim);
        let found = survivors
            .map(|node| cluster.local_job_dir(node, job).join("out").join(format!("part-{r}")))
            .find(|path| path.is_file())
            .unwrap_or_else(|| panic!("no surviving agent holds out/part-{r}"));
        let got = std::fs::read(found).expect("read output");
        assert!(!expected.is_empty(), "reducer {r} of the reference wrote nothing");
        assert!(got == *expected, "out/part-{r} differs from the single-process run");
    }
    client.close().await;
}
