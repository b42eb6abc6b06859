//! Wire types of MRM quotes and deadline purchases: what `slotmarket quote` shows (the
//! runtime estimate with its prediction interval, the earliest feasible finish and the
//! price–deadline curve), the buyer's choice a `SubmitChoosing` carries, what an admitted
//! choice bought, and why a choice was refused with the best alternative now. Same
//! postcard rule as `messages`: append variants and fields at the end, never reorder.

use serde::{Deserialize, Serialize};

use crate::ids::JobId;
use crate::money::Credits;
use crate::time::Timestamp;

/// Slot-milliseconds one credit of a deadline's price stands for: prices are in credits
/// per slot-hour of (PI-upper) work, the unit DP spending rates use.
pub const SLOT_MS_PER_CREDIT: f64 = 3_600_000.0;

/// A buyer's choice of deadline, sent with `Request::SubmitChoosing`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum DeadlineChoice {
    /// The earliest feasible finish, whatever it costs.
    Earliest,
    /// This deadline; refused if it is not feasible now.
    Deadline(Timestamp),
    /// The earliest deadline costing at most this much.
    MaxPrice(Credits),
}

/// One point of a price–deadline curve.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct QuotePoint {
    /// The promised finish.
    pub deadline: Timestamp,
    /// What it costs.
    pub price: Credits,
}

/// The master's quote for a job spec (answer to `Request::Quote`).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct QuoteInfo {
    /// When the quote was made (the master's clock).
    pub at: Timestamp,
    /// Expected work of the job in slot-milliseconds (mean task times × tasks).
    pub work_ms: u64,
    /// The upper end of its prediction interval in slot-milliseconds: what prices start at.
    pub work_upper_ms: u64,
    /// One-sided level of the prediction interval, e.g. 0.95.
    pub pi_level: f64,
    /// Expected milliseconds of one map task, and the PI upper end (0 without map tasks).
    pub map_task_ms: (u64, u64),
    /// Expected milliseconds of one reduce task, and the PI upper end.
    pub reduce_task_ms: (u64, u64),
    /// The earliest finish that can be promised without breaking an admitted deadline.
    pub earliest: QuotePoint,
    /// Deadlines from the earliest on, with their prices (non-increasing).
    pub curve: Vec<QuotePoint>,
    /// Admitted deadline jobs the quote was made against.
    pub admitted: u32,
    /// Map and reduce slots the quote assumed because no agent offered that kind yet
    /// (a restarted master before its agents reconnect): the capacity last known, kept
    /// in the store. `None` when the quote is against the slots connected now.
    pub assumed_slots: Option<(u32, u32)>,
}

/// What a `SubmitChoosing` bought: the job, its deadline and the price charged.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Purchase {
    /// The admitted job.
    pub job: JobId,
    /// Its promised finish.
    pub deadline: Timestamp,
    /// What was charged to its account (one `DeadlinePurchase` ledger entry).
    pub price: Credits,
    /// The earliest feasible finish at the time.
    pub earliest: Timestamp,
}

/// Why a choice was refused, and the best that can be had now.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
pub struct ChoiceRefusal {
    /// A sentence for the user, naming the alternative.
    pub reason: String,
    /// The earliest feasible finish now and its price, if the job can be quoted.
    pub earliest: Option<QuotePoint>,
    /// The earliest deadline the account's balance (or the buyer's maximum) buys, if any.
    pub affordable: Option<QuotePoint>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_types_round_trip_through_postcard() {
        let point = QuotePoint { deadline: Timestamp(5_000), price: Credits(1_234) };
        let info = QuoteInfo {
            at: Timestamp(1),
            work_ms: 10,
            work_upper_ms: 12,
            pi_level: 0.95,
            map_task_ms: (5, 6),
            reduce_task_ms: (0, 0),
            earliest: point,
            curve: vec![point, QuotePoint { deadline: Timestamp(9_000), price: Credits(900) }],
            admitted: 3,
            assumed_slots: None,
        };
        let bytes = postcard::to_allocvec(&info).unwrap();
        assert_eq!(postcard::from_bytes::<QuoteInfo>(&bytes).unwrap(), info);
        for choice in [
            DeadlineChoice::Earliest,
            DeadlineChoice::Deadline(Timestamp(7)),
            DeadlineChoice::MaxPrice(Credits(-1)),
        ] {
            let bytes = postcard::to_allocvec(&choice).unwrap();
            assert_eq!(postcard::from_bytes::<DeadlineChoice>(&bytes).unwrap(), choice);
        }
        let refusal = ChoiceRefusal { reason: "r".into(), earliest: Some(point), affordable: None };
        let bytes = postcard::to_allocvec(&refusal).unwrap();
        assert_eq!(postcard::from_bytes::<ChoiceRefusal>(&bytes).unwrap(), refusal);
    }
}
