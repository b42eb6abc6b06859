//! Refusals worded once for the core and the server. The server answers some job
//! requests without the core (a deadline check the simulator must not meet, a job the
//! core no longer holds), and the user should not be able to tell which one answered.

use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{ErrorKind, ErrorReply, JobState};
use slotmarket_common::spec::format_rfc3339;
use slotmarket_common::time::Timestamp;

/// Refuses a deadline `at` that is not after `now`: a job cannot be asked to finish in
/// the past, whether at submit or by `deadline set`.
pub fn check_deadline_ahead(at: Timestamp, now: Timestamp) -> Result<(), ErrorReply> {
    if at <= now {
        let message = format!("deadline: {} has already passed", format_rfc3339(at));
        return Err(ErrorReply::new(ErrorKind::BadRequest, message));
    }
    Ok(())
}

/// The refusal to move or drop the deadline of `job`, which ended in `state`.
pub fn deadline_of_ended_job(job: JobId, state: JobState) -> ErrorReply {
    let message = format!("job {job} has ended ({}); its deadline can no longer change", state.name());
    ErrorReply::new(ErrorKind::BadRequest, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_must_be_strictly_after_now() {
        let now = Timestamp::from_secs(100);
        assert!(check_deadline_ahead(Timestamp(100_001), now).is_ok());
        let refusal = check_deadline_ahead(now, now).unwrap_err();
        assert_eq!(refusal.kind, ErrorKind::BadRequest);
        assert_eq!(refusal.message, "deadline: 1970-01-01T00:01:40Z has already passed");
    }
}
