//! What every input-reading map task (wordcount, grep, sort) is given, and what it
//! reports.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::count::CountMapStats;

/// What a wordcount, grep or sort map task is given.
#[derive(Clone, Debug)]
pub struct MapTask {
    /// A file, or a directory of files.
    pub input: PathBuf,
    /// This task's index, `0..tasks`.
    pub task: u32,
    /// The number of map tasks.
    pub tasks: u32,
    /// The number of reduce tasks.
    pub reducers: u32,
    /// The job's directory; output goes to `map-{task}/`.
    pub job_dir: PathBuf,
    /// Memory bound of the in-memory table or buffer before it spills.
    pub spill_bytes: usize,
}

impl MapTask {
    pub(crate) fn check(&self) -> Result<()> {
        if self.tasks == 0 || self.task >= self.tasks {
            bail!("--task {} must be below --tasks {}", self.task, self.tasks);
        }
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
