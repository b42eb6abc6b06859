//! Deadlines that move while a job runs: `SetDeadline` is answered with the new deadline,
//! shown by `status`, survives a `kill -9` of the master, and only the job's owner (or an
//! admin) may move it. Under `jockey`, a deadline job with a past run is guaranteed slots
//! from a completion model the master builds off its scheduling loop, and `Profile` shows
//! what the job's past run says.

use slotmarket_common::protocol::JobState;
use slotmarket_common::spec::{JobSpec, UtilityCurve};
use slotmarket_common::time::Timestamp;

use crate::support::{TestCluster, agent, status, wait_finished, wait_for};

const SPEC: &str = r#"
name = "moving"
deadline = "+2h"
[[stage]]
name = "sleep"
tasks = 1
slot = "map"
command = "sleep 30"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_deadline_is_answered_shown_and_survives_a_master_kill() {
    let mut cluster = TestCluster::start(&[agent("node-1", 1, 1)]).await;
    let alice = cluster.client("alice").await;
    let job = alice.submit(JobSpec::from_toml(SPEC).expect("spec")).await.expect("submit");
    let first = status(&alice, job).await.summary.deadline.expect("a deadline");
    let moved = Timestamp(first.0 - 3_600_000);
    assert_eq!(alice.set_deadline(job, Some(moved)).await.expect("move"), Some(moved));
    assert_eq!(status(&alice, job).await.summary.deadline, Some(moved));

    let bob = cluster.client("bob").await;
    let refused = bob.set_deadline(job, None).await.expect_err("bob may not");
    assert!(refused.to_string().contains(&format!("no job {job}")), "{refused}");
    bob.close().await;
    alice.close().await;

    cluster.restart_master().await;
    let alice = cluster.client("alice").await;
    assert_eq!(status(&alice, job).await.summary.deadline, Some(moved));
    assert_eq!(alice.set_deadline(job, None).await.expect("clear"), None);
    assert_eq!(status(&alice, job).await.summary.deadline, None);
    alice.cancel(job).await.expect("cancel");
    assert_eq!(wait_finished(&alice, job).await.summary.state, JobState::Cancelled);
    let ended = alice.set_deadline(job, Some(moved)).await.expect_err("an ended job's deadline stays");
    assert!(ended.to_string().contains("can no longer change"), "{ended}");
    alice.close().await;
}

/// Two map tasks of a second behind which one reduce runs.
fn etl(deadline: Option<&str>) -> JobSpec {
    let deadline = deadline.map_or_else(String::new, |d| format!("deadline = \"{d}\"\n"));
    let text = format!(
        "name = \"etl\"\n{deadline}[[stage]]\nname = \"map\"\ntasks = 2\nslot = \"map\"\ncommand = \"sleep 1\"\n\
         [[stage]]\nname = \"reduce\"\ntasks = 1\nslot = \"reduce\"\ncommand = \"true\"\nafter = [\"map\"]\n"
    );
    JobSpec::from_toml(&text).expect("spec")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_jockey_a_deadline_job_is_guaranteed_slots_from_a_model_built_off_the_actor() {
    let mut cluster = TestCluster::start(&[agent("node-1", 2, 1)]).await;
    let alice = cluster.client("alice").await;
    let first = alice.submit(etl(None)).await.expect("submit the profiling run");
    assert_eq!(wait_finished(&alice, first).await.summary.state, JobState::Completed);
    // The profile of that one run: the spec's stages and barrier, the tasks' run times.
    let profile = alice.profile("etl".into()).await.expect("a profile after one run");
    assert_eq!((profile.runs, profile.newest_run, profile.dag_known), (1, first, true));
    let shape: Vec<(&str, u32, Vec<String>)> =
        profile.stages.iter().map(|s| (s.name.as_str(), s.tasks, s.after.clone())).collect();
    assert_eq!(shape, vec![("map", 2, vec![]), ("reduce", 1, vec!["map".to_string()])]);
    // Each map sleeps 1 s; a run time is measured from the agent's `Running` report, which
    // a loaded machine may send a little after the process started, so allow slack.
    assert!(profile.stages[0].mean_ms >= 500 && profile.stages[0].samples == 2, "{profile:?}");
    let bob = cluster.client("bob").await;
    let unseen = bob.profile("etl".into()).await.expect_err("bob sees no run of alice's");
    assert!(unseen.to_string().contains("no recorded run"), "{unseen}");
    bob.close().await;
    alice.close().await;

    cluster.restart_master_with(&["--policy", "jockey"]).await;
    let alice = cluster.client("alice").await;
    let job = alice.submit(etl(Some("+10m"))).await.expect("submit under a deadline");
    let slo = status(&alice, job).await.slo.expect("jockey controls a deadline job");
    assert!((1..=3).contains(&slo.guaranteed), "{slo:?}");
    assert!(!slo.utility_from_spec, "no curve in the spec: the policy's");
    // A spec's own utility curve crosses the wire and is the one in force.
    let mut own = etl(Some("+10m"));
    own.utility = Some(UtilityCurve(vec![(0.0, 1.0), (60.0, 1.0), (70.0, -1.0)]));
    let own = alice.submit(own).await.expect("submit with its own utility curve");
    assert!(status(&alice, own).await.slo.expect("a deadline job").utility_from_spec);
    assert_eq!(wait_finished(&alice, job).await.summary.state, JobState::Completed);
    assert_eq!(wait_finished(&alice, own).await.summary.state, JobState::Completed);
    let log = cluster.master_dir().join("../master.log");
    wait_for(
        || std::fs::read_to_string(&log).ok().filter(|text| text.contains("completion model built")),
        "the master to log the model it built",
    )
    .await;
    alice.close().await;
}
