//! Wordcount: the map counts the whitespace-separated words of its split (bytes, not
//! UTF-8; whitespace as in `u8::is_ascii_whitespace`: space, tab, LF, FF, CR) into one
//! `word\tcount` part per reducer, partitioned by FNV-1a; the reduce sums the parts into
//! `out/part-{r}`, sorted by word.
//!
//! Memory: the map's table is bounded by `spill_bytes` (spilled to sorted runs and merged
//! at the end when it grows past that), plus one read buffer; the reduce holds one line
//! per map.

use anyhow::{Context, Result};

use crate::count::{CountingMap, count_reduce};
use crate::merge::CountTotals;
use crate::partition::{fnv1a_start, fnv1a_step};
use crate::split::LineChunks;
use crate::task::{MapStats, MapTask};

/// Whether a byte separates words (`u8::is_ascii_whitespace`), as a lookup table.
static IS_SPACE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_whitespace();
        b += 1;
    }
    table
};

/// Adds every word of `chunk` (whole lines) to `counts`, hashing each word once while
/// scanning it.
#[inline]
fn count_words(chunk: &[u8], counts: &mut CountingMap) {
    let mut i = 0;
    let n = chunk.len();
    while i < n {
        while i < n && IS_SPACE[chunk[i] as usize] {
            i += 1;
        }
        let start = i;
        let mut hash = fnv1a_start();
        while i < n && !IS_SPACE[chunk[i] as usize] {
            hash = fnv1a_step(hash, chunk[i]);
            i += 1;
        }
        if start < i {
            counts.add(&chunk[start..i], hash);
        }
    }
}

/// Runs a wordcount map task.
pub fn map(task: &MapTask) -> Result<MapStats> {
    task.check()?;
    let input = task.open_input()?;
    let mut chunks = LineChunks::new(input.split(task.task, task.tasks)?);
    let mut counts = CountingMap::new(&task.job_dir, task.task, task.reducers, task.spill_bytes);
    while let Some(chunk) = chunks.next_chunk()? {
        count_words(chunk, &mut counts);
        counts.maybe_spill()?;
    }
    let counts =
        counts.finish().with_context(|| format!("wordcount map {} cannot write its parts", task.task))?;
    Ok(MapStats { bytes: chunks.bytes_read(), counts })
}

/// Runs wordcount reduce task `reducer` of the job in `job_dir`, whose map stage had `maps`
/// tasks.
pub fn reduce(job_dir: &std::path::Path, reducer: u32, maps: u32) -> Result<CountTotals> {
    count_reduce(job_dir, reducer, maps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::fnv1a;

    #[test]
    fn words_are_split_on_ascii_whitespace_and_hashed_with_fnv() {
        let dir = tempfile::tempdir().unwrap();
        let mut counts = CountingMap::new(dir.path(), 0, 1, usize::MAX);
        count_words(b"  a\tbb a\x0cc\r\nbb\x0bz  ", &mut counts);
        let stats = counts.finish().unwrap();
        assert_eq!(stats.total, 5);
        let part = std::fs::read(crate::layout::map_part(dir.path(), 0, 0)).unwrap();
        assert_eq!(part, b"a\t2\nbb\t1\nbb\x0bz\t1\nc\t1\n");
        assert_eq!(fnv1a(b"bb"), {
            let mut h = fnv1a_start();
            h = fnv1a_step(h, b'b');
            fnv1a_step(h, b'b')
        });
    }
}
