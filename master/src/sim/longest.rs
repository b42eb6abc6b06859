//! The longest drawn task of every stage of every trace job, noted as tasks launch, so
//! that the run's critical paths (`JobResult::critical_path_ms`) need no second draw of
//! every task's duration at the end (that was 3 % of a run).

use super::workload::Trace;

/// Per stage of every trace job: the longest duration drawn so far and how many of its
/// tasks have been drawn.
pub(super) struct LongestTasks {
    /// Where each trace job's stages start in `longest` and `drawn`, and (last) where
    /// they all end.
    first: Vec<u32>,
    longest: Vec<u64>,
    drawn: Vec<u32>,
}

impl LongestTasks {
    /// Nothing drawn yet, for every stage of `trace`.
    pub(super) fn new(trace: &Trace) -> LongestTasks {
        let mut first = Vec::with_capacity(trace.len() + 1);
        let mut stages = 0u32;
        for job in &trace.jobs {
            first.push(stages);
            stages += job.stages.len() as u32;
        }
        first.push(stages);
        let n = stages as usize;
        LongestTasks { first, longest: vec![0; n], drawn: vec![0; n] }
    }

    /// A task of stage `stage` of trace job `ix` was drawn to last `ms`; `first_attempt`:
    /// its first launch (a re-run draws the same duration again and is not counted).
    pub(super) fn note(&mut self, ix: u32, stage: u32, ms: u64, first_attempt: bool) {
        let Some(slot) = self.slot(ix, stage) else { return };
        self.longest[slot] = self.longest[slot].max(ms);
        self.drawn[slot] += u32::from(first_attempt);
    }

    /// The longest task of each stage of trace job `ix`, if every task of every stage
    /// was drawn; `None` otherwise (the job did not run to the end).
    pub(super) fn of(&self, trace: &Trace, ix: u32) -> Option<&[u64]> {
        let job = trace.jobs.get(ix as usize)?;
        let stages = self.stages(ix)?;
        let drawn = self.drawn.get(stages.clone())?;
        let complete =
            job.stages.len() == drawn.len() && job.stages.iter().zip(drawn).all(|(s, &n)| n == s.tasks);
        complete.then(|| &self.longest[stages])
    }

    /// Where trace job `ix`'s stages are in `longest` and `drawn`.
    fn stages(&self, ix: u32) -> Option<std::ops::Range<usize>> {
        let ix = ix as usize;
        Some(*self.first.get(ix)? as usize..*self.first.get(ix + 1)? as usize)
    }

    fn slot(&self, ix: u32, stage: u32) -> Option<usize> {
        let stages = self.stages(ix)?;
        let slot = stages.start + stage as usize;
        stages.contains(&slot).then_some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = concat!(
        r#"{"id":"a","arrival_s":0,"stages":[{"name":"map","slot":"map","tasks":2,"duration_s":[3,5]},"#,
        r#"{"name":"reduce","slot":"reduce","tasks":1,"after":["map"],"duration_s":[7]}]}"#,
        "\n",
        r#"{"id":"b","arrival_s":1,"stages":[{"name":"map","slot":"map","tasks":2,"duration_s":[1,1]}]}"#,
        "\n"
    );

    #[test]
    fn a_stage_counts_once_every_task_was_drawn_and_reruns_do_not_count() {
        let trace = Trace::read(TRACE.as_bytes()).unwrap();
        let mut longest = LongestTasks::new(&trace);
        longest.note(0, 0, 3000, true);
        longest.note(0, 1, 7000, true);
        // A re-run of the first map task: not a new task.
        longest.note(0, 0, 3000, false);
        assert_eq!(longest.of(&trace, 0), None);
        longest.note(0, 0, 5000, true);
        assert_eq!(longest.of(&trace, 0), Some(&[5000, 7000][..]));
        assert_eq!(trace.jobs[0].critical_path_through(&[5000, 7000]), trace.jobs[0].critical_path_ms(0, 1));
        // Job b's stages are its own; a stage past its last is ignored.
        longest.note(1, 1, 9000, true);
        assert_eq!(longest.of(&trace, 1), None);
        longest.note(1, 0, 1000, true);
        longest.note(1, 0, 1000, true);
        assert_eq!(longest.of(&trace, 1), Some(&[1000][..]));
    }
}
