//! What `slotmarket reservation` shows: the slot partitions the scheduling policy holds
//! (DRESS's share for small-demand jobs), its reserve ratio δ and the container releases
//! it predicts. Answered to `Request::Reservation`. Also the demand class DRESS gives
//! each job, which `status` and `jobs` show.

use serde::{Deserialize, Serialize};

use crate::ids::JobId;
use crate::spec::SlotKind;

/// The reservation picture of the master's policy.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct ReservationView {
    /// The policy's name.
    pub policy: String,
    /// Its reserve ratio δ, if it keeps one (`dress`).
    pub delta: Option<f64>,
    /// Per slot kind: total, reserved and free slots.
    pub kinds: Vec<ReservedKind>,
    /// Containers of small-demand jobs predicted to be released over the next interval.
    pub predicted_small: Option<f64>,
    /// Containers of large-demand jobs predicted to be released over the next interval.
    pub predicted_large: Option<f64>,
    /// The jobs the reserved slots are held for (small-demand), among those the caller
    /// may see; every other running job is large-demand.
    pub small_jobs: Vec<JobId>,
}

/// One slot kind's partition.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ReservedKind {
    /// The kind.
    pub kind: SlotKind,
    /// Slots offered by agents that take work.
    pub total: u32,
    /// Slots reserved (used or idle) for the reserved jobs.
    pub reserved: u32,
    /// Slots the reserved jobs use.
    pub reserved_used: u32,
    /// Slots free now.
    pub free: u32,
}

/// A job's demand class under `dress`: large-demand when a stage asks for more than θ of
/// its slot kind's slots, small-demand otherwise.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum DemandClass {
    /// Small demand (SD): served from the reserved share first.
    Small,
    /// Large demand (LD): kept off the reserved share.
    Large,
}

impl DemandClass {
    /// The paper's abbreviation, as `status`, `jobs` and their JSON show it: `SD` or `LD`.
    pub fn abbreviation(self) -> &'static str {
        match self {
            DemandClass::Small => "SD",
            DemandClass::Large => "LD",
        }
    }
}
