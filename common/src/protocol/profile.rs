//! A job profile as `slotmarket profile NAME` shows it (Jockey §4.1): per stage, what the
//! recorded runs of one job name say about its tasks (how many, how long, how often an
//! attempt fails) and the stages it waits for. Answered to `Request::Profile`.

use serde::{Deserialize, Serialize};

use crate::ids::JobId;
use crate::spec::SlotKind;

/// One job name's profile.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ProfileView {
    /// The job name.
    pub name: String,
    /// Recorded runs it was built from (those the caller may see).
    pub runs: u32,
    /// The newest of them.
    pub newest_run: JobId,
    /// Whether the stage DAG comes from a job of this name the master holds; when not,
    /// the stages are the newest run's and their barriers are unknown (shown as none).
    pub dag_known: bool,
    /// Total work (`Σ T_s`), in slot-milliseconds.
    pub work_ms: u64,
    /// The longest chain of longest tasks through the DAG, in milliseconds.
    pub critical_path_ms: u64,
    /// Per stage, in spec order.
    pub stages: Vec<StageProfileView>,
}

/// One stage of a profile.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StageProfileView {
    /// The stage's name.
    pub name: String,
    /// Its slot kind.
    pub slot: SlotKind,
    /// Its tasks.
    pub tasks: u32,
    /// The stages it waits for.
    pub after: Vec<String>,
    /// Completed task run times recorded.
    pub samples: u32,
    /// Mean task run time, in milliseconds.
    pub mean_ms: u64,
    /// Median task run time, in milliseconds.
    pub p50_ms: u64,
    /// 90th percentile task run time, in milliseconds.
    pub p90_ms: u64,
    /// Longest task run time, in milliseconds.
    pub max_ms: u64,
    /// Share of attempts that failed, in thousandths.
    pub failure_permille: u32,
    /// The stage's work (`T_s`: tasks × mean, inflated by retries), in slot-milliseconds.
    pub work_ms: u64,
}
