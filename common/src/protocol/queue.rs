//! What `slotmarket queue` shows: the jobs with work still to place, in the order the
//! policy serves them, each with the reason it waits (like `squeue`'s REASON column).
//! Answered to `Request::Queue`.

use serde::{Deserialize, Serialize};

use crate::ids::{AccountId, JobId};
use crate::protocol::JobState;
use crate::time::Timestamp;

/// The master's queue of pending work.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct QueueView {
    /// The policy whose order this is.
    pub policy: String,
    /// Jobs with pending tasks, first served first.
    pub entries: Vec<QueueEntry>,
}

/// One job with pending tasks.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct QueueEntry {
    /// The job.
    pub job: JobId,
    /// Its name, when the caller may see the job (their own; every job for admins).
    pub name: Option<String>,
    /// Who submitted it, under the same condition.
    pub owner: Option<AccountId>,
    /// `pending`, or `running` for a job with some tasks placed.
    pub state: JobState,
    /// Map tasks neither running nor completed.
    pub pending_map: u32,
    /// Reduce tasks neither running nor completed.
    pub pending_reduce: u32,
    /// Why its next task is not running.
    pub reason: WaitReason,
    /// With [`WaitReason::Dependency`]: the jobs it still waits for.
    pub waiting_for: Vec<JobId>,
    /// Its deadline, if it has one.
    pub deadline: Option<Timestamp>,
}

/// Why a job's next task is not running, first match wins.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum WaitReason {
    /// It runs `after` jobs that have not completed.
    Dependency,
    /// Its pending tasks are in stages behind a barrier (reduce waits for map).
    Barrier,
    /// A job ahead of it in the policy's order wants the same kind of slot.
    Priority,
    /// No slot of the kind it needs is free.
    Resources,
    /// Slots are free, but the policy holds them back (a share, a reservation, a budget).
    Policy,
}

impl WaitReason {
    /// The name shown in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            WaitReason::Dependency => "dependency",
            WaitReason::Barrier => "barrier",
            WaitReason::Priority => "priority",
            WaitReason::Resources => "resources",
            WaitReason::Policy => "policy",
        }
    }
}
