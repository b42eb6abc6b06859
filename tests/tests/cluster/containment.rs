//! No task process outlives its container: not the children of a task whose agent was
//! SIGKILLed (swept when the agent restarts on the same work directory), and not a process
//! that left its task's process group with `setsid` (killed on cancel). Each in both
//! containment modes: cgroups where this machine allows them (`auto`), and the process
//! scan (`scan`). Under the scan the agent also adopts what its tasks leave behind, and
//! reaps it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use slotmarket_common::protocol::JobState;

use crate::support::{
    AgentSpec, TestCluster, WAIT, agent, connected, status, submit, wait_running, wait_until,
};

/// One map task whose shell starts `script`.
fn one_task(script: &str) -> String {
    format!(
        r#"
name = "stubborn"
[[stage]]
name = "map"
tasks = 1
slot = "map"
command = "{script}"
"#
    )
}

const NODE: AgentSpec = agent("node-1", 1, 1);

/// A cluster of one agent with `containment = MODE`.
async fn cluster_with(mode: &str) -> TestCluster {
    let mut cluster = TestCluster::start(&[]).await;
    let shared = cluster.shared_dir();
    cluster.start_agent_with(&NODE, &shared, &[&format!("containment = \"{mode}\"")]);
    let admin = cluster.client("admin").await;
    wait_until(|| async { connected(&admin).await.len() == 1 }, "the agent to register").await;
    admin.close().await;
    cluster
}

/// Waits until `count` task processes run, and returns them.
async fn task_processes(cluster: &TestCluster, count: usize) -> BTreeSet<u32> {
    let what = format!("{count} task processes");
    wait_until(|| async { cluster.processes_inside().len() >= count }, &what).await;
    cluster.processes_inside().into_iter().collect()
}

async fn sigkilled_agent_leaves_nothing_after_restart(mode: &str) {
    let mut cluster = cluster_with(mode).await;
    let client = cluster.client("alice").await;
    let job = submit(&client, &one_task("sleep 300 & sleep 300")).await;
    wait_running(&client, job, 1).await;
    // The shell (or the sleep it became) and its background sleep.
    let before = task_processes(&cluster, 2).await;

    cluster.kill_agent(NODE.name);
    // The shell dies with the agent (PDEATHSIG); its background child does not.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let orphans: Vec<u32> = before.iter().copied().filter(|&pid| TestCluster::alive(pid)).collect();
    assert!(!orphans.is_empty(), "{mode}: expected the background sleep to outlive the agent");

    let shared = cluster.shared_dir();
    cluster.start_agent_with(&NODE, &shared, &[&format!("containment = \"{mode}\"")]);
    // The restarted agent sweeps before it registers; the re-run may start new processes.
    let admin = cluster.client("admin").await;
    wait_until(|| async { connected(&admin).await.len() == 1 }, "the agent to register again").await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while before.iter().any(|&pid| TestCluster::alive(pid)) {
        assert!(
            Instant::now() < deadline,
            "{mode}: processes of the killed agent's task are still running: {:?}\n{}",
            before.iter().filter(|&&pid| TestCluster::alive(pid)).collect::<Vec<_>>(),
            cluster.log_tail(NODE.name)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.cancel(job).await.expect("cancel"), JobState::Cancelled);
    wait_until(|| async { cluster.processes_inside().is_empty() }, "the re-run to be gone").await;
    client.close().await;
    admin.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_agents_task_children_are_swept_on_restart_with_cgroups_where_usable() {
    sigkilled_agent_leaves_nothing_after_restart("auto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_agents_task_children_are_swept_on_restart_by_the_process_scan() {
    sigkilled_agent_leaves_nothing_after_restart("scan").await;
}

async fn cancelled_setsid_task_leaves_nothing(mode: &str) {
    let cluster = cluster_with(mode).await;
    let client = cluster.client("alice").await;
    let job = submit(&client, &one_task("setsid sleep 300 & sleep 300")).await;
    wait_running(&client, job, 1).await;
    task_processes(&cluster, 2).await;
    assert_eq!(client.cancel(job).await.expect("cancel"), JobState::Cancelled);
    let deadline = Instant::now() + WAIT;
    while !cluster.processes_inside().is_empty() {
        assert!(Instant::now() < deadline, "{mode}: left after cancel: {:?}", cluster.processes_inside());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status(&client, job).await.summary.state, JobState::Cancelled);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_that_called_setsid_leaves_nothing_with_cgroups_where_usable() {
    cancelled_setsid_task_leaves_nothing("auto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_that_called_setsid_leaves_nothing_with_the_process_scan() {
    cancelled_setsid_task_leaves_nothing("scan").await;
}

/// The children of `pid`'s threads, each with whether it is a zombie.
fn children_of(pid: u32) -> Vec<(u32, bool)> {
    let mut children = Vec::new();
    for thread in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let list = std::fs::read_to_string(thread.path().join("children")).unwrap_or_default();
        for child in list.split_whitespace().filter_map(|child| child.parse::<u32>().ok()) {
            children.push((child, !TestCluster::alive(child)));
        }
    }
    children
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_process_scan_the_agent_adopts_its_tasks_orphans_and_reaps_them() {
    let cluster = cluster_with("scan").await;
    let agent = cluster.agent_pid(NODE.name);
    let client = cluster.client("alice").await;
    // Two orphans: one in a session of its own that runs on, and one that exits soon.
    let job = submit(&client, &one_task("(setsid sleep 300 &); (sleep 1 &); sleep 300")).await;
    wait_running(&client, job, 1).await;
    // The task's leader and both orphans, all the agent's children.
    let live = |children: &[(u32, bool)]| children.iter().filter(|(_, zombie)| !zombie).count();
    wait_until(|| async { live(&children_of(agent)) == 3 }, "the task's two orphans to be the agent's").await;
    // The short one exits and is reaped while the task runs on.
    wait_until(
        || async {
            let children = children_of(agent);
            children.len() == 2 && live(&children) == 2
        },
        "the exited orphan to be reaped",
    )
    .await;
    assert_eq!(client.cancel(job).await.expect("cancel"), JobState::Cancelled);
    // Nothing left below the agent: the orphan killed, and both orphans reaped.
    let deadline = Instant::now() + WAIT;
    while !children_of(agent).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left below the agent after cancel: {:?}\n{}",
            children_of(agent),
            cluster.log_tail(NODE.name)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cluster.processes_inside().is_empty(), "{:?}", cluster.processes_inside());
    client.close().await;
}
