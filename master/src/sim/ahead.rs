//! Work done ahead of the core, on a second thread: for each job that arrives on its own,
//! in the order the loop submits them, the spec it is submitted with and every task's
//! drawn duration. Both depend only on the trace and the seed (draws are keyed by seed,
//! job, stage and task), never on the core's state, so which thread computes them and
//! when cannot change a run's output; the loop's thread is left the core's work.
//!
//! A bounded channel carries the prepared jobs in batches of [`BATCH`] (one message and
//! at most one wake-up per batch, not per job): the thread runs at most [`BATCHES`]
//! batches in front of the loop, and stops when the loop drops its end (a run stopped
//! early).

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use slotmarket_common::spec::JobSpec;

use super::workload::{Trace, task_key};

/// Jobs sent in one message.
const BATCH: usize = 256;

/// Most batches sent and not yet taken: enough that the loop rarely waits, few enough
/// that their drawn durations stay small (about 60 tasks a job in the MRM mix).
const BATCHES: usize = 4;

/// One job made ready for submission.
pub(super) struct Prepared {
    /// Its trace index.
    pub(super) ix: u32,
    /// The spec the simulator submits for it ([`TraceJob::spec`](super::workload::TraceJob::spec)).
    pub(super) spec: JobSpec,
    /// Every task's drawn duration, in milliseconds.
    pub(super) durations: Durations,
    /// Its critical path ([`TraceJob::critical_path_ms`](super::workload::TraceJob::critical_path_ms)),
    /// from the same draws.
    pub(super) critical_path_ms: u64,
}

/// A job's drawn task durations, stage after stage, each stage's tasks in order.
#[derive(Debug, Default)]
pub(super) struct Durations {
    /// Where each stage's tasks start in `ms`.
    first: Box<[u32]>,
    ms: Box<[u64]>,
}

impl Durations {
    /// Draws every task of trace job `ix` under `seed`.
    fn draw(trace: &Trace, ix: u32, seed: u64) -> Durations {
        let job = &trace.jobs[ix as usize];
        let mut first = Vec::with_capacity(job.stages.len());
        let mut ms = Vec::with_capacity(job.total_tasks() as usize);
        for (stage, s) in (0u32..).zip(&job.stages) {
            first.push(ms.len() as u32);
            ms.extend(
                (0..s.tasks).map(|index| job.keyed_task_ms(stage, index, task_key(seed, ix, stage, index))),
            );
        }
        Durations { first: first.into_boxed_slice(), ms: ms.into_boxed_slice() }
    }

    /// The longest task of each stage, in stage order.
    fn longest(&self) -> Vec<u64> {
        let ends = self.first.iter().skip(1).map(|&e| e as usize).chain([self.ms.len()]);
        self.first
            .iter()
            .zip(ends)
            .map(|(&start, end)| self.ms[start as usize..end].iter().copied().max().unwrap_or(0))
            .collect()
    }

    /// Task `index` of stage `stage`, if the job has it.
    pub(super) fn get(&self, stage: u32, index: u32) -> Option<u64> {
        let start = *self.first.get(stage as usize)? as usize;
        let end = self.first.get(stage as usize + 1).map_or(self.ms.len(), |&e| e as usize);
        let at = start + index as usize;
        if at < end { self.ms.get(at).copied() } else { None }
    }
}

/// The loop's end of the channel: prepared jobs in submission order.
pub(super) struct Ahead {
    ready: Receiver<Vec<Prepared>>,
    /// The batch being taken from.
    batch: std::vec::IntoIter<Prepared>,
}

impl Ahead {
    /// The prepared job `ix`, if it is the next one the thread sent (jobs submitted out
    /// of the arrival order, such as followers, are prepared by the caller).
    pub(super) fn take(&mut self, ix: u32) -> Option<Prepared> {
        if self.batch.len() == 0 {
            // A closed channel (the thread ended) leaves the caller to prepare the job.
            self.batch = self.ready.recv().ok()?.into_iter();
        }
        // The loop submits arrivals in the order they were sent, so the next job is `ix`.
        self.batch.next().filter(|p| p.ix == ix)
    }
}

/// A channel for prepared jobs: the loop's end, and the sending end for [`prepare`].
pub(super) fn channel() -> (Ahead, SyncSender<Vec<Prepared>>) {
    let (send, ready) = sync_channel(BATCHES);
    (Ahead { ready, batch: Vec::new().into_iter() }, send)
}

/// Prepares the jobs of `order` (trace indices, in the order the loop will submit them)
/// and sends them in batches; returns when all are sent or the loop has hung up.
pub(super) fn prepare(trace: &Trace, order: &[u32], seed: u64, send: SyncSender<Vec<Prepared>>) {
    for part in order.chunks(BATCH) {
        let batch = part
            .iter()
            .map(|&ix| {
                let job = &trace.jobs[ix as usize];
                let durations = Durations::draw(trace, ix, seed);
                let critical_path_ms = job.critical_path_through(&durations.longest());
                Prepared { ix, spec: job.spec(), durations, critical_path_ms }
            })
            .collect();
        if send.send(batch).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::workload::{Dist, Durations as TraceDurations, TraceJob, TraceStage};

    fn trace() -> Trace {
        let drawn = TraceDurations::Drawn(Dist::Exp { mean: 30.0 });
        let jobs = (0..3)
            .map(|i| {
                let stages = TraceStage::map_reduce(4 + i, drawn.clone(), 2, drawn.clone());
                TraceJob::new(format!("j{i}"), f64::from(i), "u", stages)
            })
            .collect();
        Trace::new(jobs).expect("a valid trace")
    }

    #[test]
    fn prepared_durations_are_the_keyed_draws_of_every_task() {
        let trace = trace();
        let d = Durations::draw(&trace, 1, 7);
        for (stage, s) in (0u32..).zip(&trace.jobs[1].stages) {
            for index in 0..s.tasks {
                assert_eq!(d.get(stage, index), Some(trace.jobs[1].task_ms(1, stage, index, 7)));
            }
            assert_eq!(d.get(stage, s.tasks), None, "past a stage's last task");
        }
        assert_eq!(d.get(2, 0), None, "no third stage");
        let path = trace.jobs[1].critical_path_through(&d.longest());
        assert_eq!(path, trace.jobs[1].critical_path_ms(1, 7));
    }

    #[test]
    fn jobs_arrive_in_the_order_given_and_a_job_out_of_turn_is_not_taken() {
        let trace = trace();
        let (mut ahead, send) = channel();
        let trace = &trace;
        std::thread::scope(|scope| {
            scope.spawn(move || prepare(trace, &[2, 0, 1], 7, send));
            let first = ahead.take(2).expect("job 2 first");
            assert_eq!(first.spec, trace.jobs[2].spec());
            assert!(ahead.take(1).is_none(), "job 0 was next, not job 1");
        });
    }
}
