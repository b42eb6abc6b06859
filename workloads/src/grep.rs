//! Grep: the map counts the lines of its split that contain a fixed byte string (a
//! substring match, found with a SIMD `memmem` over whole chunks, so lines that cannot
//! match cost no per-line work) into `line\tcount` parts partitioned by FNV-1a; the reduce
//! sums them into `out/part-{r}`, sorted by line. The count is after the last tab, so
//! matching lines may hold tabs.
//!
//! Regular expressions are not supported: a substring covers the benchmark use (Hadoop's
//! grep example is usually run with a literal) without adding the `regex` crate.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::count::{CountingMap, count_reduce};
use crate::merge::CountTotals;
use crate::partition::fnv1a;
use crate::split::{LineChunks, for_each_line};
use crate::task::{MapStats, MapTask};

/// Runs a grep map task: counts each distinct line containing `pattern`.
pub fn map(task: &MapTask, pattern: &[u8]) -> Result<MapStats> {
    task.check()?;
    if pattern.contains(&b'\n') {
        bail!("the pattern contains a newline, so it can never match within a line");
    }
    let input = task.open_input()?;
    let mut chunks = LineChunks::new(input.split(task.task, task.tasks)?);
    let mut counts = CountingMap::new(&task.job_dir, task.task, task.reducers, task.spill_bytes);
    let finder = memchr::memmem::Finder::new(pattern);
    while let Some(chunk) = chunks.next_chunk()? {
        if pattern.is_empty() {
            for_each_line(chunk, |line| counts.add(line, fnv1a(line)));
        } else {
            let mut from = 0;
            while let Some(found) = finder.find(&chunk[from..]) {
                let at = from + found;
                let start = memchr::memrchr(b'\n', &chunk[..at]).map_or(0, |nl| nl + 1);
                let end = memchr::memchr(b'\n', &chunk[at..]).map_or(chunk.len(), |nl| at + nl);
                let line = &chunk[start..end];
                counts.add(line, fnv1a(line));
                from = end + 1;
                if from >= chunk.len() {
                    break;
                }
            }
        }
        counts.maybe_spill()?;
    }
    let counts = counts.finish().with_context(|| format!("grep map {} cannot write its parts", task.task))?;
    Ok(MapStats { bytes: chunks.bytes_read(), counts })
}

/// Runs grep reduce task `reducer` of the job in `job_dir`, whose map stage had `maps` tasks.
pub fn reduce(job_dir: &Path, reducer: u32, maps: u32) -> Result<CountTotals> {
    count_reduce(job_dir, reducer, maps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::map_part;

    fn run(text: &str, pattern: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, text).unwrap();
        let job_dir = dir.path().join("job");
        let task = MapTask {
            input,
            task: 0,
            tasks: 1,
            input_parts: None,
            reducers: 1,
            job_dir: job_dir.clone(),
            spill_bytes: usize::MAX,
        };
        map(&task, pattern.as_bytes()).unwrap();
        std::fs::read_to_string(map_part(&job_dir, 0, 0)).unwrap()
    }

    #[test]
    fn matching_lines_are_counted_once_per_occurrence_of_the_line() {
        let text = "foo bar\nnothing\nfoofoo\nfoo bar\n\tfoo\tx\nlast foo";
        assert_eq!(run(text, "foo"), "\tfoo\tx\t1\nfoo bar\t2\nfoofoo\t1\nlast foo\t1\n");
        assert_eq!(run(text, "zzz"), "");
        assert_eq!(run("a\n\na\n", ""), "\t1\na\t2\n");
        assert_eq!(run("ab\nab", "ab"), "ab\t2\n");
    }
}
