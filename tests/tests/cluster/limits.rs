//! Launch messages stay under the agent's frame limit however large a valid job's
//! launches are, and the master's task limits refuse oversized submissions.

use slotmarket_common::spec::{JobSpec, MAX_INPUT_LEN, MAX_STAGE_NAME_LEN, MAX_STAGES};

use crate::support::{TestCluster, agent, assert_completed, connected, wait_finished};

/// `MAX_STAGES` one-task stages with the longest names and the largest `input`: every
/// launch carries about 33 KB, and all of them are scheduled in one step.
fn widest_job() -> String {
    let mut spec = format!("name = \"wide\"\ninput = \"{}\"\n", "i".repeat(MAX_INPUT_LEN));
    for i in 0..MAX_STAGES {
        let name = format!("{i:0>width$}", width = MAX_STAGE_NAME_LEN);
        spec.push_str(&format!(
            "[[stage]]\nname = \"{name}\"\ntasks = 1\nslot = \"map\"\ncommand = \"test -n {{input}}\"\n"
        ));
    }
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_the_largest_valid_launches_runs_without_dropping_its_agent() {
    let slots = MAX_STAGES as u32;
    let cluster = TestCluster::start(&[agent("node-1", slots, 1)]).await;
    let client = cluster.client("alice").await;
    let admin = cluster.client("admin").await;
    let first_registration = connected(&admin).await[0].agent;
    // 64 launches of ~33 KB: 32 to a message made frames over the 1 MiB limit.
    let spec = JobSpec::from_toml(&widest_job()).expect("valid spec");
    let job = client.submit(spec).await.expect("submit");
    let finished = wait_finished(&client, job).await;
    assert_completed(&cluster, &finished);
    assert!(finished.stages.iter().all(|s| s.failed_attempts == 0), "{finished:?}");
    let nodes = connected(&admin).await;
    assert_eq!(nodes[0].agent, first_registration, "the agent was dropped and registered again");
    client.close().await;
    admin.close().await;
}
