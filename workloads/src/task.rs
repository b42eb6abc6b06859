//! What every input-reading map task (wordcount, grep, sort) is given, what it reports,
//! and how `tasks` tasks of a stage share its work ([`share`]).

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::count::CountMapStats;
use crate::split::Input;

/// What a wordcount, grep or sort map task is given.
#[derive(Clone, Debug)]
pub struct MapTask {
    /// A file, or a directory of files.
    pub input: PathBuf,
    /// This task's index, `0..tasks`.
    pub task: u32,
    /// The number of map tasks.
    pub tasks: u32,
    /// When `input` is a directory of generated parts: how many (`part-0` ..), so that a
    /// missing one is an error rather than a smaller input. `None` reads the directory's
    /// visible files, whatever they are.
    pub input_parts: Option<u32>,
    /// The number of reduce tasks.
    pub reducers: u32,
    /// The job's directory; output goes to `map-{task}/`.
    pub job_dir: PathBuf,
    /// Memory bound of the in-memory table or buffer before it spills.
    pub spill_bytes: usize,
}

/// Task `task`'s share `lo..hi` of `0..total` when `tasks` tasks split it evenly: shares
/// differ by at most one, the first starts at 0 and the last ends at `total`. Refuses a
/// `task` outside `0..tasks` (so also `tasks == 0`), naming the flags.
pub fn share(total: u64, task: u32, tasks: u32) -> Result<(u64, u64)> {
    if task >= tasks {
        bail!("--task {task} must be below --tasks {tasks}");
    }
    let at = |k: u32| (u128::from(total) * u128::from(k) / u128::from(tasks)) as u64;
    Ok((at(task), at(task + 1)))
}

impl MapTask {
    /// Opens the input: the named parts if `input_parts` is given, else the file or
    /// directory as it is.
    pub fn open_input(&self) -> Result<Input> {
        match self.input_parts {
            Some(parts) => Input::open_parts(&self.input, parts),
            None => Input::open(&self.input),
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        share(0, self.task, self.tasks)?;
        if self.reducers == 0 {
            bail!("--reducers must be at least 1");
        }
        Ok(())
    }
}

/// What a counting map task (wordcount, grep) did.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct MapStats {
    /// Input bytes read.
    pub bytes: u64,
    /// Keys written and spills.
    pub counts: CountMapStats,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_total_evenly_and_bad_tasks_are_refused() {
        let shares: Vec<(u64, u64)> = (0..3).map(|t| share(10, t, 3).unwrap()).collect();
        assert_eq!(shares, [(0, 3), (3, 6), (6, 10)]);
        assert_eq!(share(u64::MAX, 1, 2).unwrap(), (u64::MAX / 2, u64::MAX));
        assert_eq!(share(5, 3, 3).unwrap_err().to_string(), "--task 3 must be below --tasks 3");
        assert!(share(5, 0, 0).is_err());
    }
}
