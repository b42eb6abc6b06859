//! Job history: what one ended job did, as the master records it when the job ends. The
//! store keeps it per job name, the core replays it at start-up for estimators (MRM) and
//! profiles (Jockey), and `slotmarket history` shows it.
//!
//! Times: `submitted`, `started` and `finished` are the master's clock; task run times are
//! measured on the agent that ran the task (its `Running` to `Completed` reports), so clock
//! skew between hosts does not reach them.

use serde::{Deserialize, Serialize};

use crate::ids::{AccountId, JobId};
use crate::protocol::JobState;
use crate::spec::{JobClass, SlotKind};
use crate::time::Timestamp;

/// One ended job.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JobHistory {
    /// Its id.
    pub job: JobId,
    /// Its spec's name: the key history is kept by.
    pub name: String,
    /// The account it ran on.
    pub account: AccountId,
    /// Its service class, if the spec gave one.
    pub class: Option<JobClass>,
    /// How it ended.
    pub state: JobState,
    /// When it was admitted.
    pub submitted: Timestamp,
    /// When its first task ran, if one did.
    pub started: Option<Timestamp>,
    /// When it ended.
    pub finished: Timestamp,
    /// Its deadline, if it had one.
    pub deadline: Option<Timestamp>,
    /// Size of its input as the spec declared it (`input_bytes`), when known.
    pub input_bytes: Option<u64>,
    /// Milliseconds its attempts held map and reduce slots, in that order.
    pub slot_ms: [u64; 2],
    /// Per stage, in spec order.
    pub stages: Vec<StageHistory>,
}

/// One stage of an ended job.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StageHistory {
    /// The stage's name.
    pub name: String,
    /// Its slot kind.
    pub slot: SlotKind,
    /// Per task, by index: how long the attempt that completed it ran, in milliseconds
    /// (`None` for a task that never completed).
    pub run_ms: Vec<Option<u64>>,
    /// Per task, by index: attempts launched (1 for a task that ran once).
    pub attempts: Vec<u32>,
}

impl JobHistory {
    /// Admission to first task running, if a task ran.
    pub fn wait_ms(&self) -> Option<u64> {
        self.started.map(|s| s.0.saturating_sub(self.submitted.0))
    }

    /// Admission to the end.
    pub fn completion_ms(&self) -> u64 {
        self.finished.0.saturating_sub(self.submitted.0)
    }

    /// Tasks over all stages.
    pub fn tasks(&self) -> usize {
        self.stages.iter().map(|s| s.run_ms.len()).sum()
    }

    /// Slot-seconds held, both kinds together.
    pub fn slot_secs(&self) -> f64 {
        (self.slot_ms[0] + self.slot_ms[1]) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_times_come_from_the_recorded_ones() {
        let record = JobHistory {
            job: JobId(3),
            name: "wc".into(),
            account: AccountId("alice".into()),
            class: None,
            state: JobState::Completed,
            submitted: Timestamp(1_000),
            started: Some(Timestamp(1_500)),
            finished: Timestamp(9_000),
            deadline: None,
            input_bytes: Some(42),
            slot_ms: [3_000, 1_500],
            stages: vec![StageHistory {
                name: "map".into(),
                slot: SlotKind::Map,
                run_ms: vec![Some(1_000), None],
                attempts: vec![1, 4],
            }],
        };
        assert_eq!(record.wait_ms(), Some(500));
        assert_eq!(record.completion_ms(), 8_000);
        assert_eq!(record.tasks(), 2);
        assert_eq!(record.slot_secs(), 4.5);
        let bytes = postcard::to_allocvec(&record).unwrap();
        assert_eq!(postcard::from_bytes::<JobHistory>(&bytes).unwrap(), record);
    }
}
