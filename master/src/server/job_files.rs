//! A job's files on the agents, for the actor: which nodes serve a job's final outputs
//! (`slotmarket fetch`, one node per data directory), output reads relayed to them, and
//! the removal of ended jobs' directories (`[cleanup] retain_s` after a job ended, or at
//! once on `slotmarket cleanup`). The store remembers which removals each node is still
//! owed (`store::cleanup`), so a restart neither forgets nor repeats one and a node that
//! was away gets its removals when it registers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::Identity;
use slotmarket_common::ids::{AgentId, ContainerId, JobId};
use slotmarket_common::protocol::{
    ErrorKind, JobCleanup, MasterToAgent, OutputOp, OutputQuery, OutputRead, OutputReadReply, RemoveJob,
    Response,
};
use slotmarket_common::time::Timestamp;
use tokio::sync::oneshot;
use tracing::{error, info};

use super::{Actor, answer, reads, stored_read};
use crate::store::StoreError;

/// How long an ended job's directories stay on the agents by default.
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(3600);

/// Most containers named in one `RemoveJob` message (a few bytes each, far under a frame).
const CONTAINERS_PER_REMOVAL: usize = 10_000;

/// The actor's state about job files.
#[derive(Debug)]
pub(crate) struct JobFiles {
    /// How long after a job ended its directories are removed.
    pub(crate) retain: Duration,
    /// The data directory id each node last registered with (kept while it is away, so
    /// another node sharing the directory can serve its outputs).
    node_dirs: BTreeMap<String, String>,
    /// Output reads sent to agents and not answered yet, by request number.
    reads: BTreeMap<u64, (AgentId, oneshot::Sender<Response>)>,
    next_read: u64,
}

impl JobFiles {
    /// No node known yet; directories retained for `retain`.
    pub(crate) fn new(retain: Duration) -> JobFiles {
        JobFiles { retain, node_dirs: BTreeMap::new(), reads: BTreeMap::new(), next_read: 1 }
    }

    /// How often the actor looks for jobs whose retention ran out.
    pub(crate) fn check_every(&self) -> Duration {
        (self.retain / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }
}

/// The nodes to read `holders`' files from: each holder itself when connected, else a
/// connected node that shares its data directory; one node per data directory (agents
/// sharing a directory hold the same files). Sorted by node name.
pub(super) fn serving_nodes(
    holders: &BTreeSet<String>,
    connected: &BTreeMap<String, AgentId>,
    node_dirs: &BTreeMap<String, String>,
) -> Result<Vec<(String, AgentId)>, String> {
    let mut by_dir: BTreeMap<&str, (String, AgentId)> = BTreeMap::new();
    for holder in holders {
        let dir = node_dirs.get(holder).map_or(holder.as_str(), String::as_str);
        if by_dir.contains_key(dir) {
            continue;
        }
        let server = match connected.get(holder) {
            Some(&agent) => Some((holder.clone(), agent)),
            None => connected
                .iter()
                .find(|(node, _)| node_dirs.get(*node).is_some_and(|d| d == dir))
                .map(|(node, &agent)| (node.clone(), agent)),
        };
        let Some(server) = server else {
            return Err(format!(
                "node {holder}, which holds some of the outputs, is not connected; try again when it is"
            ));
        };
        by_dir.insert(dir, server);
    }
    let mut servers: Vec<_> = by_dir.into_values().collect();
    servers.sort();
    servers.dedup();
    Ok(servers)
}

/// For each node owed a removal of one job (sorted), whether it removes the job
/// directory: the first node of each data directory does, the others only their
/// containers' directories.
pub(super) fn removes_job_dir(nodes: &[String], node_dirs: &BTreeMap<String, String>) -> Vec<bool> {
    let mut seen = BTreeSet::new();
    nodes.iter().map(|node| seen.insert(node_dirs.get(node).map_or(node.as_str(), String::as_str))).collect()
}

impl Actor {
    /// Remembers `node`'s data directory and sends it the removals it is owed.
    pub(super) fn on_agent_data_dir(&mut self, node: String, dir_id: String) {
        self.files.node_dirs.insert(node.clone(), dir_id);
        self.deliver_removals(Some(&node));
    }

    /// The connected agents by node name.
    fn connected_nodes(&self) -> BTreeMap<String, AgentId> {
        let view = self.core.view();
        view.nodes()
            .into_iter()
            .filter(|n| n.connected && self.agents.contains_key(&n.agent))
            .map(|n| (n.node, n.agent))
            .collect()
    }

    /// The nodes serving `job`'s final outputs: those of the connected agents (one per
    /// data directory) holding what its last stage's completed tasks wrote.
    fn output_servers(
        &self,
        caller: &Identity,
        job: JobId,
    ) -> Result<Result<Vec<(String, AgentId)>, Response>, StoreError> {
        let status = match reads::job_status(&self.core.view(), &self.store, caller, job)? {
            Ok(status) => status,
            Err(err) => return Ok(Err(Response::Error(err))),
        };
        let Some(last) = status.stages.len().checked_sub(1) else {
            return Ok(Err(Response::error(ErrorKind::NotFound, format!("job {job} has no stages"))));
        };
        let holders: BTreeSet<String> = self
            .store
            .latest_attempts(job)?
            .into_iter()
            .filter(|((stage, _), a)| *stage as usize == last && a.state == ContainerState::Completed)
            .map(|(_, a)| a.node)
            .collect();
        if holders.is_empty() {
            let stage = &status.stages[last].name;
            let message =
                format!("no task of job {job}'s last stage {stage:?} has completed; it has no outputs yet");
            return Ok(Err(Response::error(ErrorKind::NotFound, message)));
        }
        let servers = serving_nodes(&holders, &self.connected_nodes(), &self.files.node_dirs);
        Ok(servers.map_err(|message| Response::error(ErrorKind::NotFound, format!("job {job}: {message}"))))
    }

    /// Answers `OutputNodes`.
    pub(super) fn answer_output_nodes(
        &self,
        caller: &Identity,
        job: JobId,
        reply: oneshot::Sender<Response>,
    ) {
        let response = match self.output_servers(caller, job) {
            Ok(Ok(servers)) => Response::OutputNodes(servers.into_iter().map(|(node, _)| node).collect()),
            Ok(Err(response)) => response,
            Err(err) => stored_read::<Response>(Err(err)),
        };
        answer(reply, response);
    }

    /// Relays an `Output` query to the agent of the node it names, which must serve the
    /// job's outputs; the answer comes back through [`Actor::on_output_read`].
    pub(super) fn start_output_read(
        &mut self,
        caller: &Identity,
        query: OutputQuery,
        reply: oneshot::Sender<Response>,
    ) {
        let servers = match self.output_servers(caller, query.job) {
            Ok(Ok(servers)) => servers,
            Ok(Err(response)) => return drop(answer(reply, response)),
            Err(err) => return drop(answer(reply, stored_read::<Response>(Err(err)))),
        };
        let Some((_, agent)) = servers.into_iter().find(|(node, _)| *node == query.node) else {
            let message =
                format!("node {} does not serve job {}'s outputs; ask OutputNodes", query.node, query.job);
            return drop(answer(reply, Response::error(ErrorKind::NotFound, message)));
        };
        let op = match query.op {
            OutputOp::Read { path, offset, max } => {
                OutputOp::Read { path, offset, max: max.min(slotmarket_common::protocol::MAX_OUTPUT_CHUNK) }
            }
            list => list,
        };
        let request = self.files.next_read;
        self.files.next_read += 1;
        let sent = self.agents.get(&agent).is_some_and(|out| {
            out.send(MasterToAgent::ReadOutput(OutputRead { request, job: query.job, op })).is_ok()
        });
        if !sent {
            let message = format!("node {} is not connected", query.node);
            return drop(answer(reply, Response::error(ErrorKind::NotFound, message)));
        }
        self.files.reads.insert(request, (agent, reply));
    }

    /// An agent's answer to an output read; only the agent asked may answer, once.
    pub(super) fn on_output_read(&mut self, agent: AgentId, reply: OutputReadReply) {
        if self.files.reads.get(&reply.request).is_none_or(|(asked, _)| *asked != agent) {
            return;
        }
        if let Some((_, client)) = self.files.reads.remove(&reply.request) {
            let response = match reply.result {
                Ok(data) => Response::Output(data),
                Err(message) => Response::error(ErrorKind::NotFound, message),
            };
            let _ = client.send(response);
        }
    }

    /// Fails the output reads waiting on `agent`, which disconnected.
    pub(super) fn fail_output_reads(&mut self, agent: AgentId) {
        let lost: Vec<u64> =
            self.files.reads.iter().filter(|(_, (a, _))| *a == agent).map(|(&r, _)| r).collect();
        for request in lost {
            if let Some((_, client)) = self.files.reads.remove(&request) {
                let message = "the agent holding the outputs disconnected; try again";
                let _ = client.send(Response::error(ErrorKind::NotFound, message));
            }
        }
    }

    /// Plans the removal of every ended job whose retention ran out and sends the
    /// removals owed to connected nodes. A store failure is logged; the next round retries.
    pub(super) fn cleanup_round(&mut self, now: Timestamp) {
        let planned = self.store.jobs_due_for_cleanup(now - self.files.retain).and_then(|due| {
            let jobs: Vec<JobId> = due.into_iter().map(|(job, _)| job).collect();
            self.store.plan_cleanup(&jobs, now).map(|()| jobs)
        });
        match planned {
            Ok(jobs) if !jobs.is_empty() => {
                info!(jobs = jobs.len(), "ended jobs' retention ran out; removing their directories")
            }
            Ok(_) => {}
            Err(err) => error!(error = %err, "planning job directory removals failed"),
        }
        self.deliver_removals(None);
    }

    /// Sends the removals owed to `only` (or to every connected node) and records each
    /// as sent; returns the (job, node) pairs sent.
    fn deliver_removals(&mut self, only: Option<&str>) -> Vec<(JobId, String)> {
        let connected = self.connected_nodes();
        let mut owed: BTreeMap<JobId, Vec<(String, Vec<ContainerId>)>> = BTreeMap::new();
        for node in connected.keys().filter(|n| only.is_none_or(|o| o == n.as_str())) {
            match self.store.cleanups_owed(node) {
                Ok(jobs) => {
                    for (job, containers) in jobs {
                        owed.entry(job).or_default().push((node.clone(), containers));
                    }
                }
                Err(err) => error!(error = %err, %node, "reading owed removals failed"),
            }
        }
        let mut sent = Vec::new();
        if owed.is_empty() {
            return sent;
        }
        // A removal lets the agent forget a job's files: the job's end must be durable
        // first (a barrier, rare: removals go out at most once per job and node).
        if let Err(err) = self.sync_now() {
            error!(error = %err, "syncing the store before sending removals failed");
            return sent;
        }
        for (job, nodes) in owed {
            let names: Vec<String> = nodes.iter().map(|(n, _)| n.clone()).collect();
            let job_dirs = removes_job_dir(&names, &self.files.node_dirs);
            for ((node, containers), job_dir) in nodes.into_iter().zip(job_dirs) {
                let Some(out) = connected.get(&node).and_then(|agent| self.agents.get(agent)) else {
                    continue;
                };
                if !send_removal(out, job, containers, job_dir) {
                    continue;
                }
                if let Err(err) = self.store.cleanup_sent(job, &node) {
                    error!(error = %err, %job, %node, "recording a sent removal failed");
                }
                sent.push((job, node));
            }
        }
        sent
    }

    /// Answers `Cleanup`: plans the removal of `jobs` (every ended job of the caller's
    /// not yet removed when empty) now, and sends it to the connected nodes.
    pub(super) fn cleanup_now(
        &mut self,
        caller: &Identity,
        jobs: Vec<JobId>,
        now: Timestamp,
        reply: oneshot::Sender<Response>,
    ) {
        let jobs = match self.cleanup_targets(caller, jobs, now) {
            Ok(Ok(jobs)) => jobs,
            Ok(Err(response)) => return drop(answer(reply, response)),
            Err(err) => return drop(answer(reply, stored_read::<Response>(Err(err)))),
        };
        if let Err(err) = self.store.plan_cleanup(&jobs, now) {
            error!(error = %err, "planning job directory removals failed");
            return drop(answer(
                reply,
                Response::error(
                    ErrorKind::Internal,
                    format!("the master could not store the cleanup: {err}"),
                ),
            ));
        }
        let sent = self.deliver_removals(None);
        let mut done = Vec::with_capacity(jobs.len());
        for job in jobs {
            let removed_on = sent.iter().filter(|(j, _)| *j == job).map(|(_, n)| n.clone()).collect();
            let pending_on = self.store.cleanup_nodes_owed(job).unwrap_or_default();
            done.push(JobCleanup { job, removed_on, pending_on });
        }
        answer(reply, Response::CleanedUp(done));
    }

    /// The jobs a `Cleanup` names, checked: each visible to the caller, owned by them
    /// (or the caller is an admin) and ended.
    fn cleanup_targets(
        &self,
        caller: &Identity,
        jobs: Vec<JobId>,
        now: Timestamp,
    ) -> Result<Result<Vec<JobId>, Response>, StoreError> {
        if jobs.is_empty() {
            let due = self.store.jobs_due_for_cleanup(now)?;
            let mine = due
                .into_iter()
                .filter(|(_, owner)| caller.may_act_for(&slotmarket_common::ids::AccountId(owner.clone())));
            return Ok(Ok(mine.map(|(job, _)| job).collect()));
        }
        for &job in &jobs {
            let status = match reads::job_status(&self.core.view(), &self.store, caller, job)? {
                Ok(status) => status,
                Err(err) => return Ok(Err(Response::Error(err))),
            };
            if !caller.may_act_for(&status.summary.owner) {
                let message = format!(
                    "job {job} is {}'s; only its owner or an admin may clean it up",
                    status.summary.owner.0
                );
                return Ok(Err(Response::error(ErrorKind::Forbidden, message)));
            }
            if !status.summary.state.is_terminal() {
                let message =
                    format!("job {job} is {}; cancel it or wait for it to end first", status.summary.state);
                return Ok(Err(Response::error(ErrorKind::BadRequest, message)));
            }
        }
        Ok(Ok(jobs))
    }
}

/// Sends `job`'s removal to one agent, its containers in bounded batches; whether every
/// message was queued.
fn send_removal(
    out: &tokio::sync::mpsc::UnboundedSender<MasterToAgent>,
    job: JobId,
    containers: Vec<ContainerId>,
    job_dir: bool,
) -> bool {
    let mut batches: Vec<Vec<ContainerId>> =
        containers.chunks(CONTAINERS_PER_REMOVAL).map(<[_]>::to_vec).collect();
    if batches.is_empty() {
        batches.push(Vec::new());
    }
    batches.into_iter().enumerate().all(|(i, containers)| {
        let remove = RemoveJob { job, containers, job_dir: job_dir && i == 0 };
        out.send(MasterToAgent::RemoveJob(remove)).is_ok()
    })
}

#[cfg(test)]
#[path = "job_files_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "job_files_actor_tests.rs"]
mod actor_tests;
