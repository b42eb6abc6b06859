//! `status JOB --tasks` and `logs`: per-task rows built from the core's view of the job
//! (who may see it, its stages) and the store's containers (node, attempts, times), and
//! log reads relayed to the agent that ran a task's latest attempt. A job the caller may
//! not see answers exactly as an unknown one does, for both.

use std::collections::BTreeMap;

use slotmarket_common::identity::Identity;
use slotmarket_common::ids::{AgentId, ContainerId, JobId};
use slotmarket_common::protocol::{
    ErrorKind, ErrorReply, JobStatus, LogChunk, LogQuery, LogReadReply, Response, TaskList, TaskRow,
};
use tokio::sync::oneshot;

use super::reads;
use crate::core::CoreView;
use crate::store::{Store, StoreError, StoredAttempt};

/// Most encoded bytes of the rows of one `Tasks` answer (a quarter of the default frame
/// limit); a job with more tasks than fit is answered with the first ones, `truncated`.
const TASKS_BYTES: usize = 256 << 10;

/// Every task of `job`, in stage and index order: its latest attempt from the store, or
/// `pending` for a task that never had a container.
pub(super) fn task_list(
    view: &CoreView<'_>,
    store: &Store,
    caller: &Identity,
    job: JobId,
) -> Result<Result<TaskList, ErrorReply>, StoreError> {
    let status = match reads::job_status(view, store, caller, job)? {
        Ok(status) => status,
        Err(err) => return Ok(Err(err)),
    };
    let latest = store.latest_attempts(job)?;
    Ok(Ok(rows(&status, &latest)))
}

/// The rows of `status`'s tasks given their stored latest attempts.
fn rows(status: &JobStatus, latest: &BTreeMap<(u32, u32), StoredAttempt>) -> TaskList {
    let mut list = TaskList { tasks: Vec::new(), truncated: false };
    let mut bytes = 0;
    for (stage_ix, stage) in status.stages.iter().enumerate() {
        for index in 0..stage.tasks {
            let row = row(&stage.name, index, latest.get(&(stage_ix as u32, index)));
            bytes += postcard::experimental::serialized_size(&row).unwrap_or(TASKS_BYTES);
            if bytes > TASKS_BYTES {
                list.truncated = true;
                return list;
            }
            list.tasks.push(row);
        }
    }
    list
}

fn row(stage: &str, index: u32, attempt: Option<&StoredAttempt>) -> TaskRow {
    let Some(a) = attempt else {
        return TaskRow {
            stage: stage.to_string(),
            index,
            attempts: 0,
            container: None,
            node: None,
            state: "pending".into(),
            started: None,
            finished: None,
            exit_code: None,
            message: None,
        };
    };
    TaskRow {
        stage: stage.to_string(),
        index,
        attempts: a.attempts,
        container: Some(a.container),
        node: Some(a.node.clone()),
        state: a.state.name().into(),
        started: a.started,
        finished: a.state.is_terminal().then_some(a.at),
        exit_code: a.exit_code,
        message: a.message.clone(),
    }
}

/// Where a log read goes: the task's latest container and the agent holding its files.
pub(super) struct LogTarget {
    /// The container.
    pub(super) container: ContainerId,
    /// The connected agent of the node it ran on.
    pub(super) agent: AgentId,
    /// Whether the attempt has ended (its log no longer grows).
    pub(super) ended: bool,
}

/// Finds the container whose log `query` asks for, checking that the caller may see the
/// job, that the stage and task exist and ran, and that their node is connected.
pub(super) fn log_target(
    view: &CoreView<'_>,
    store: &Store,
    caller: &Identity,
    query: &LogQuery,
) -> Result<Result<LogTarget, ErrorReply>, StoreError> {
    let status = match reads::job_status(view, store, caller, query.job)? {
        Ok(status) => status,
        Err(err) => return Ok(Err(err)),
    };
    let stage_ix = match &query.stage {
        None => 0,
        Some(name) => match status.stages.iter().position(|s| &s.name == name) {
            Some(ix) => ix,
            None => return Ok(Err(not_found(format!("job {} has no stage {name:?}", query.job)))),
        },
    };
    let Some(stage) = status.stages.get(stage_ix) else {
        return Ok(Err(not_found(format!("job {} has no stages", query.job))));
    };
    let index = query.task.unwrap_or(0);
    if index >= stage.tasks {
        let message = match stage.tasks {
            0 => format!("stage {:?} of job {} has no tasks", stage.name, query.job),
            1 => format!("stage {:?} of job {} has one task, 0", stage.name, query.job),
            n => format!("stage {:?} of job {} has tasks 0 to {}", stage.name, query.job, n - 1),
        };
        return Ok(Err(not_found(message)));
    }
    let latest = store.latest_attempts(query.job)?;
    let Some(attempt) = latest.get(&(stage_ix as u32, index)) else {
        let message = format!("task {}:{index} of job {} has not started yet; no log", stage.name, query.job);
        return Ok(Err(not_found(message)));
    };
    let agent = view.nodes().into_iter().find(|n| n.connected && n.node == attempt.node).map(|n| n.agent);
    let Some(agent) = agent else {
        let message = format!(
            "node {} that ran {} is not connected; its log cannot be read now",
            attempt.node, attempt.container
        );
        return Ok(Err(ErrorReply::new(ErrorKind::NotFound, message)));
    };
    Ok(Ok(LogTarget { container: attempt.container, agent, ended: attempt.state.is_terminal() }))
}

fn not_found(message: String) -> ErrorReply {
    ErrorReply::new(ErrorKind::NotFound, message)
}

/// A log read sent to an agent, waiting for its answer.
pub(super) struct PendingLogRead {
    /// The agent asked; if it disconnects the read fails.
    pub(super) agent: AgentId,
    /// Where the answer goes.
    pub(super) reply: oneshot::Sender<Response>,
    /// The container read and whether its attempt had ended.
    pub(super) container: ContainerId,
    pub(super) ended: bool,
    /// The offset read from.
    pub(super) offset: u64,
}

impl PendingLogRead {
    /// Answers the client with the agent's `answer`.
    pub(super) fn finish(self, answer: LogReadReply) {
        let response = match answer.result {
            Ok(data) => {
                let next_offset = self.offset + data.len() as u64;
                Response::Log(LogChunk { container: self.container, data, next_offset, ended: self.ended })
            }
            Err(message) => Response::error(ErrorKind::NotFound, message),
        };
        // A client that hung up needs no answer.
        let _ = self.reply.send(response);
    }

    /// Fails the read: the agent went away before answering.
    pub(super) fn lost(self) {
        let message = format!("the agent holding {}'s log disconnected; try again", self.container);
        let _ = self.reply.send(Response::error(ErrorKind::NotFound, message));
    }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::container::ContainerState;
    use slotmarket_common::protocol::StageStatus;
    use slotmarket_common::spec::SlotKind;
    use slotmarket_common::time::Timestamp;

    use super::*;

    fn stage(name: &str, tasks: u32) -> StageStatus {
        let (pending, running, completed, failed_attempts) = (0, 0, 0, 0);
        StageStatus {
            name: name.into(),
            slot: SlotKind::Map,
            tasks,
            pending,
            running,
            completed,
            failed_attempts,
        }
    }

    #[test]
    fn every_task_gets_a_row_and_the_ones_that_ran_carry_their_latest_attempt() {
        let alice = slotmarket_common::ids::AccountId("alice".into());
        let summary = slotmarket_common::protocol::JobSummary {
            id: JobId(1),
            name: "wc".into(),
            account: alice.clone(),
            state: slotmarket_common::protocol::JobState::Running,
            submitted: Timestamp(1),
            started: None,
            finished: None,
            tasks_total: 3,
            tasks_completed: 1,
            tasks_running: 0,
            owner: alice,
            deadline: None,
            predicted_finish: None,
            price: None,
            paid: None,
            demand_class: None,
        };
        let status = JobStatus {
            summary,
            stages: vec![stage("map", 2), stage("reduce", 1)],
            message: None,
            slo: None,
        };
        let ran = StoredAttempt {
            attempts: 2,
            container: ContainerId(5),
            node: "n1".into(),
            state: ContainerState::Completed,
            at: Timestamp(900),
            started: Some(Timestamp(800)),
            exit_code: Some(0),
            message: None,
        };
        let latest = BTreeMap::from([((0, 1), ran)]);
        let list = rows(&status, &latest);
        assert!(!list.truncated);
        let names: Vec<_> =
            list.tasks.iter().map(|t| (t.stage.as_str(), t.index, t.state.as_str())).collect();
        assert_eq!(names, [("map", 0, "pending"), ("map", 1, "completed"), ("reduce", 0, "pending")]);
        let done = &list.tasks[1];
        assert_eq!(
            (done.attempts, done.container, done.node.as_deref()),
            (2, Some(ContainerId(5)), Some("n1"))
        );
        assert_eq!(
            (done.started, done.finished, done.exit_code),
            (Some(Timestamp(800)), Some(Timestamp(900)), Some(0))
        );
    }
}
