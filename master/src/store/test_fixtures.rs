//! Writes the store's tests share: a job's admission and its containers' reports, with
//! the values most tests do not care about filled in, so each test spells out only what
//! it is about.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AccountId, AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::ContainerReport;
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;

use crate::core::Persist;

/// The TOML of a job named `wc` of one stage of `tasks` map tasks running `true`.
pub(super) fn map_spec_toml(tasks: u32) -> String {
    format!("name = \"wc\"\n[[stage]]\nname = \"map\"\ntasks = {tasks}\nslot = \"map\"\ncommand = \"true\"\n")
}

/// The job [`map_spec_toml`] describes.
pub(super) fn map_spec(tasks: u32) -> JobSpec {
    JobSpec::from_toml(&map_spec_toml(tasks)).expect("a valid spec")
}

/// A job's admission as the core persists it. [`Admission::of`] gives job `job` of alice,
/// charged to her own account, two map tasks, submitted at 100 ms, no deadline.
pub(super) struct Admission {
    /// The job's id.
    pub(super) job: u64,
    /// Who submitted it; also the account it is charged to.
    pub(super) owner: &'static str,
    /// What it runs.
    pub(super) spec: JobSpec,
    /// When it was submitted, in milliseconds.
    pub(super) submitted: u64,
    /// Its deadline, in milliseconds, if it bought one.
    pub(super) deadline: Option<u64>,
}

impl Admission {
    /// Job `job` with every other field at its default.
    pub(super) fn of(job: u64) -> Self {
        Admission { job, owner: "alice", spec: map_spec(2), submitted: 100, deadline: None }
    }

    /// The write the core makes when it admits this job.
    pub(super) fn persist(self) -> Persist {
        Persist::JobAdmitted {
            job: JobId(self.job),
            account: AccountId(self.owner.into()),
            owner: AccountId(self.owner.into()),
            spec: self.spec.into(),
            submitted: Timestamp(self.submitted),
            deadline: self.deadline.map(Timestamp),
        }
    }
}

/// A report of attempt 1 of map task `index` of `job` in `container`: in `state` at `at`
/// ms, with exit code 0 once completed.
pub(super) fn map_report(
    job: u64,
    container: u64,
    index: u32,
    state: ContainerState,
    at: u64,
) -> ContainerReport {
    ContainerReport {
        container: ContainerId(container),
        task: TaskId { job: JobId(job), stage: StageId(0), index },
        attempt: AttemptId(1),
        state,
        at: Timestamp(at),
        exit_code: (state == ContainerState::Completed).then_some(0),
        message: None,
    }
}

/// `report` as the store records it for `node`.
pub(super) fn on_node(node: &str, report: ContainerReport) -> Persist {
    Persist::Container { node: node.into(), report }
}
