//! Builders for the inputs of scenario tests: job specs and recovered jobs.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{ContainerReport, JobState};
use slotmarket_common::spec::{JobSpec, SlotKind, StageSpec};
use slotmarket_common::time::Timestamp;

use crate::core::RecoveredJob;

/// Builds a [`JobSpec`].
pub(super) struct JobBuilder {
    spec: JobSpec,
}

impl JobBuilder {
    /// `maps` map tasks feeding `reduces` reduce tasks through a barrier.
    pub(super) fn map_reduce(maps: u32, reduces: u32) -> JobBuilder {
        let map = stage("map", maps, SlotKind::Map, &[]);
        let reduce = stage("reduce", reduces, SlotKind::Reduce, &["map"]);
        JobBuilder { spec: spec(vec![map, reduce]) }
    }

    /// A single stage of `tasks` map tasks.
    pub(super) fn maps(tasks: u32) -> JobBuilder {
        JobBuilder { spec: spec(vec![stage("map", tasks, SlotKind::Map, &[])]) }
    }

    pub(super) fn name(mut self, name: &str) -> JobBuilder {
        self.spec.name = name.to_string();
        self
    }

    pub(super) fn max_attempts(mut self, attempts: u32) -> JobBuilder {
        self.spec.max_attempts = Some(attempts);
        self
    }

    pub(super) fn build(self) -> JobSpec {
        self.spec
    }
}

fn spec(stages: Vec<StageSpec>) -> JobSpec {
    JobSpec {
        name: "test".to_string(),
        input: Some("/data/in".to_string()),
        max_attempts: None,
        stages,
        class: None,
        queue: None,
        deadline: None,
        account: None,
        input_bytes: None,
        estimate: None,
        time_limit: None,
        after: Vec::new(),
        utility: None,
    }
}

fn stage(name: &str, tasks: u32, slot: SlotKind, after: &[&str]) -> StageSpec {
    StageSpec {
        name: name.to_string(),
        tasks,
        slot,
        command: format!("task {name} {{task}}/{{tasks}} in={{input}} a={{attempt}} dir={{job_dir}}"),
        after: after.iter().map(|s| s.to_string()).collect(),
    }
}

/// Task `index` of stage `stage` of `job`.
pub(super) fn task(job: JobId, stage: u32, index: u32) -> TaskId {
    TaskId { job, stage: StageId(stage), index }
}

/// A container report as an agent (or the store) would hold it.
pub(super) fn report(
    container: u64,
    task: TaskId,
    attempt: u32,
    state: ContainerState,
    at: Timestamp,
) -> ContainerReport {
    ContainerReport {
        container: ContainerId(container),
        task,
        attempt: AttemptId(attempt),
        state,
        at,
        exit_code: match state {
            ContainerState::Completed => Some(0),
            ContainerState::Failed => Some(1),
            _ => None,
        },
        message: None,
    }
}

/// A job as the store would hand it back, owned by alice, with no containers yet.
pub(super) fn recovered(id: u64, spec: JobSpec, state: JobState) -> RecoveredJob {
    RecoveredJob {
        id: JobId(id),
        account: AccountId("alice".to_string()),
        owner: AccountId("alice".to_string()),
        deadline: None,
        spec,
        submitted: Timestamp::from_secs(1),
        state,
        started: None,
        finished: None,
        message: None,
        containers: Vec::new(),
    }
}
