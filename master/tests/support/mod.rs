//! Helpers shared by the simulator's integration tests.

use slotmarket_common::spec::JobClass;
use slotmarket_master::sim::generate::Mrm;
use slotmarket_master::sim::workload::Trace;

/// An MRM-mix trace with each job in a queue named after its class, so `capacity` has
/// something to divide.
pub(crate) fn mrm_trace_queued_by_class(mrm: Mrm) -> Trace {
    let mut jobs = Vec::new();
    mrm.generate(|mut job| {
        job.queue =
            Some(if job.class == Some(JobClass::DelaySensitive) { "sensitive" } else { "tolerant" }.into());
        jobs.push(job);
        Ok::<(), ()>(())
    })
    .expect("generates");
    Trace::new(jobs).expect("valid trace")
}
