//! Which agent messages wait with the acknowledgements, and where reservations end.

use std::collections::BTreeMap;

use slotmarket_common::ids::{AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::Launch;
use slotmarket_common::spec::{SlotKind, TaskVars};

use super::*;

fn launch_of(job: u64) -> Action {
    let task = TaskId { job: JobId(job), stage: StageId(0), index: 0 };
    let vars = TaskVars {
        job: JobId(job),
        stage: "map".into(),
        task: 0,
        tasks: 1,
        attempt: AttemptId(1),
        input: None,
        stage_tasks: BTreeMap::new().into(),
    };
    let launch = Launch {
        container: ContainerId(job),
        task,
        attempt: AttemptId(1),
        slot: SlotKind::Map,
        command: "true".into(),
        vars,
        account: "alice".into(),
    };
    Action::Launch { agent: AgentId(1), launch }
}

#[test]
fn a_launch_beyond_the_durable_reservation_and_everything_after_a_held_one_wait() {
    let dir = tempfile::tempdir().unwrap();
    let mut pipeline = Pipeline::start(&Store::open(dir.path()).unwrap()).unwrap();
    pipeline.job_ids = JobIds { written: 3000, written_in: 7, durable: 2000 };
    assert!(!pipeline.agent_messages_wait(&[launch_of(2000)]), "covered: goes out at once");
    assert!(pipeline.agent_messages_wait(&[launch_of(1), launch_of(2001)]), "not durably reserved");
    let message = MasterToAgent::Refused { reason: "held".into() };
    pipeline.held.push(7, Ack::Agent { agent: AgentId(1), message });
    assert!(pipeline.agent_messages_wait(&[launch_of(1)]), "behind a held message, to keep its order");
}

#[test]
fn reservations_end_a_block_or_more_ahead_on_a_block_boundary() {
    assert_eq!(reservation_for(1), 2000);
    assert_eq!(reservation_for(999), 2000);
    assert_eq!(reservation_for(1000), 3000);
    assert_eq!(reservation_for(2001), 4000);
    for id in [1, 500, 1001, 123_456] {
        assert!(reservation_for(id) >= id + JOB_ID_BLOCK);
    }
}
