//! The demo's workload: job specs embedded in the binary, submitted a moment apart so
//! the FIFO order shows, then followed with a progress line a second until every job ends.
//! Also the wait for agents to register before anything is submitted.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobSummary, JobsQuery};
use slotmarket_common::spec::JobSpec;

use super::cluster::{Cluster, node_name, tail_of};
use super::report;
use crate::connection;
use crate::submit;

/// The demo's job specs, in submission order: three MapReduce jobs (each with a generator
/// stage feeding map and reduce) and three small independent pi jobs.
pub(crate) const JOBS: &[(&str, &str)] = &[
    ("wordcount.toml", include_str!("jobs/wordcount.toml")),
    ("sort.toml", include_str!("jobs/sort.toml")),
    ("grep.toml", include_str!("jobs/grep.toml")),
    ("pi-1.toml", include_str!("jobs/pi-1.toml")),
    ("pi-2.toml", include_str!("jobs/pi-2.toml")),
    ("pi-3.toml", include_str!("jobs/pi-3.toml")),
];

/// Pause between submissions: long enough that submission order is unambiguous in the
/// report, short enough that later jobs still queue behind earlier ones.
const SUBMIT_SPACING: Duration = Duration::from_millis(400);
/// How often progress is polled and printed.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// How long agents get to register after they are started.
const AGENTS_TIMEOUT: Duration = Duration::from_secs(30);

/// Parses every embedded spec.
pub(crate) fn specs() -> Result<Vec<JobSpec>> {
    JOBS.iter().map(|&(file, text)| parse_embedded(file, text)).collect()
}

/// Parses the embedded spec `text`; a failure here is a bug in the demo, named by `file`.
pub(crate) fn parse_embedded(file: &str, text: &str) -> Result<JobSpec> {
    JobSpec::from_toml(text).with_context(|| format!("embedded demo job {file}"))
}

/// Polls `Nodes` until `agents` agents are connected, failing early if a process dies.
pub(crate) async fn wait_for_agents(client: &Client, cluster: &mut Cluster, agents: u32) -> Result<()> {
    let started = Instant::now();
    loop {
        cluster.check_alive()?;
        let nodes = connection::bounded(client.nodes()).await.context("listing agents")?;
        let connected = nodes.iter().filter(|n| n.connected).count();
        if connected >= agents as usize {
            return Ok(());
        }
        if started.elapsed() > AGENTS_TIMEOUT {
            // The agent's side and the master's side of a refused registration.
            let (agent_log, master_log) = (cluster.log_path(&node_name(1)), cluster.log_path("master"));
            bail!(
                "only {connected} of {agents} agents registered within {}s; logs are in {}\n{}{}\n{}{}",
                AGENTS_TIMEOUT.as_secs(),
                cluster.logs_dir().display(),
                agent_log.display(),
                tail_of(&agent_log),
                master_log.display(),
                tail_of(&master_log)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Submits every spec, [`SUBMIT_SPACING`] apart; answers the ids in submission order.
pub(crate) async fn submit_all(client: &Client, specs: Vec<JobSpec>, started: Instant) -> Result<Vec<JobId>> {
    let mut ids = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(SUBMIT_SPACING).await;
        }
        let name = spec.name.clone();
        let tasks = spec.total_tasks();
        let job = submit::submit(client, spec).await?;
        eprintln!("[{:.1}s] submitted {job} {name} ({tasks} tasks)", started.elapsed().as_secs_f64());
        ids.push(job);
    }
    Ok(ids)
}

/// Prints progress every [`PROGRESS_INTERVAL`] until every job in `ids` has ended or
/// `timeout` has passed; answers their last summaries in submission order.
pub(crate) async fn follow(
    client: &Client,
    cluster: &mut Cluster,
    ids: &[JobId],
    started: Instant,
    timeout: Duration,
) -> Result<Vec<JobSummary>> {
    loop {
        cluster.check_alive()?;
        let jobs = our_jobs(client, ids).await?;
        eprintln!("{}", report::progress_line(started.elapsed(), &jobs, ids.len()));
        let all_ended = jobs.len() == ids.len() && jobs.iter().all(|j| j.state.is_terminal());
        if all_ended {
            return Ok(jobs);
        }
        if started.elapsed() > timeout {
            eprintln!("gave up waiting after {}s (raise it with --timeout)", timeout.as_secs());
            return Ok(jobs);
        }
        tokio::time::sleep(PROGRESS_INTERVAL).await;
    }
}

/// The demo's jobs out of `Jobs`, in submission order.
pub(crate) async fn our_jobs(client: &Client, ids: &[JobId]) -> Result<Vec<JobSummary>> {
    let after = ids.iter().min().map(|first| JobId(first.0.saturating_sub(1)));
    let query = JobsQuery { newest_first: false, after, ..JobsQuery::default() };
    let all = connection::bounded(client.all_jobs(query)).await.context("listing the demo's jobs")?;
    let wanted: BTreeSet<JobId> = ids.iter().copied().collect();
    let mut ours: Vec<JobSummary> = all.into_iter().filter(|j| wanted.contains(&j.id)).collect();
    ours.sort_by_key(|j| ids.iter().position(|id| *id == j.id));
    Ok(ours)
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::{JobState, JobsPage, Response};
    use slotmarket_common::spec::SlotKind;

    use super::*;
    use crate::fake_master::{FakeMaster, status};

    #[tokio::test]
    async fn progress_follows_only_the_demo_jobs_in_submission_order() {
        let fake = FakeMaster::start(|_| {
            let job = |id, state| status(JobId(id), "x", state).summary;
            let jobs = vec![job(1, JobState::Running), job(3, JobState::Completed), job(2, JobState::Failed)];
            vec![Response::Jobs(JobsPage { jobs, next: None })]
        });
        let client = fake.options("alice").connect().await.unwrap();
        let ours = our_jobs(&client, &[JobId(3), JobId(2)]).await.unwrap();
        let ids: Vec<JobId> = ours.iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![JobId(3), JobId(2)]);
    }

    #[test]
    fn every_embedded_job_parses_and_validates() {
        let specs = specs().unwrap();
        assert_eq!(specs.len(), JOBS.len());
        let names: BTreeSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), specs.len(), "job names are distinct so the report is readable");
    }

    #[test]
    fn the_workload_has_map_reduce_and_independent_jobs() {
        let specs = specs().unwrap();
        let wordcount = specs.iter().find(|s| s.name == "wordcount").unwrap();
        let stage = |name: &str| &wordcount.stages[wordcount.stage_index(name).unwrap()];
        assert_eq!((stage("gen").tasks, stage("map").tasks, stage("reduce").tasks), (3, 6, 2));
        assert_eq!(stage("map").after, vec!["gen".to_string()]);
        assert_eq!(stage("reduce").after, vec!["map".to_string()]);
        assert_eq!(stage("reduce").slot, SlotKind::Reduce);
        assert_eq!(specs.iter().filter(|s| s.name.starts_with("pi-")).count(), 3);
        // Every command runs the task program each agent puts on its tasks' PATH.
        for spec in &specs {
            for stage in &spec.stages {
                assert!(stage.command.starts_with("slotmarket-task "), "{}: {}", spec.name, stage.command);
            }
        }
    }
}
