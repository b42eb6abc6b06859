//! Sort (TeraSort-style): every map samples the input deterministically to agree on the
//! same key ranges, sends each line of its split to the reducer owning its range, and
//! writes one sorted part per reducer; the reduce merges its parts into `out/part-{r}`.
//! Concatenating `out/part-0`, `out/part-1`, ... gives every input line, sorted by bytes.
//!
//! Memory: the map buffers lines up to `spill_bytes` and spills sorted runs beyond that,
//! merged at the end; the reduce holds one line per map.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::layout::{create_spill_dir, map_part, map_parts_for, out_part};
use crate::merge::merge_lines;
use crate::output::AtomicFile;
use crate::partition::RangePartitioner;
use crate::split::{LineChunks, for_each_line};
use crate::task::MapTask;

/// What a sort map task did.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SortMapStats {
    /// Input bytes read.
    pub bytes: u64,
    /// Lines (records) written.
    pub records: u64,
    /// How many times the buffer was spilled to disk.
    pub spills: u32,
}

struct Entry {
    /// The first 8 bytes, big-endian, zero-padded: orders most pairs without a memcmp.
    prefix: u64,
    part: u32,
    offset: usize,
    len: usize,
}

/// Lines of a split with their reducers, in one arena.
#[derive(Default)]
struct LineBuffer {
    arena: Vec<u8>,
    entries: Vec<Entry>,
}

impl LineBuffer {
    fn push(&mut self, line: &[u8], part: u32) {
        let mut head = [0u8; 8];
        let n = line.len().min(8);
        head[..n].copy_from_slice(&line[..n]);
        self.entries.push(Entry {
            prefix: u64::from_be_bytes(head),
            part,
            offset: self.arena.len(),
            len: line.len(),
        });
        self.arena.extend_from_slice(line);
    }

    fn memory_bytes(&self) -> usize {
        self.arena.len() + self.entries.len() * size_of::<Entry>()
    }

    fn line(&self, entry: &Entry) -> &[u8] {
        &self.arena[entry.offset..entry.offset + entry.len]
    }

    /// Sorts by reducer, then line, and writes each reducer's lines to `sink(reducer)`.
    fn write_sorted<W: Write>(
        &mut self,
        reducers: u32,
        mut sink: impl FnMut(u32) -> Result<W>,
        mut done: impl FnMut(W) -> Result<()>,
    ) -> Result<()> {
        let arena = &self.arena;
        self.entries.sort_unstable_by(|a, b| {
            (a.part, a.prefix)
                .cmp(&(b.part, b.prefix))
                .then_with(|| arena[a.offset..a.offset + a.len].cmp(&arena[b.offset..b.offset + b.len]))
        });
        let mut next = 0;
        for reducer in 0..reducers {
            let end = next + self.entries[next..].partition_point(|e| e.part == reducer);
            let mut out = sink(reducer)?;
            for entry in &self.entries[next..end] {
                out.write_all(self.line(entry))?;
                out.write_all(b"\n")?;
            }
            done(out)?;
            next = end;
        }
        Ok(())
    }

    /// Empties the buffer, keeping its allocations for the next run.
    fn clear(&mut self) {
        self.arena.clear();
        self.entries.clear();
    }
}

/// Sorted runs a map spilled, per reducer, in a hidden directory removed however the map
/// ends.
struct Spills {
    dir: PathBuf,
    runs: Vec<Vec<PathBuf>>,
    count: u32,
}

impl Spills {
    fn create(job_dir: &Path, task: u32, reducers: u32) -> Result<Spills> {
        let dir = create_spill_dir(job_dir, task)?;
        Ok(Spills { dir, runs: vec![Vec::new(); reducers as usize], count: 0 })
    }

    /// Writes the buffer as one sorted run per reducer and empties it.
    fn spill(&mut self, buffer: &mut LineBuffer) -> Result<()> {
        let (dir, runs, spill) = (&self.dir, &mut self.runs, self.count);
        buffer.write_sorted(
            runs.len() as u32,
            |reducer| {
                let path = dir.join(format!("run-{spill}-part-{reducer}"));
                let file = std::fs::File::create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                runs[reducer as usize].push(path);
                Ok(BufWriter::with_capacity(1 << 20, file))
            },
            |mut out| out.flush().context("cannot write spill run"),
        )?;
        buffer.clear();
        self.count += 1;
        Ok(())
    }
}

impl Drop for Spills {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a sort map task.
pub fn map(task: &MapTask) -> Result<SortMapStats> {
    task.check()?;
    let input = task.open_input()?;
    let partitioner = RangePartitioner::sample(&input, task.reducers)?;
    let mut chunks = LineChunks::new(input.split(task.task, task.tasks)?);
    let mut buffer = LineBuffer::default();
    let mut spills: Option<Spills> = None;
    let mut records = 0u64;
    while let Some(chunk) = chunks.next_chunk()? {
        for_each_line(chunk, |line| buffer.push(line, partitioner.partition(line)));
        if buffer.memory_bytes() > task.spill_bytes {
            records += buffer.entries.len() as u64;
            let spills = match &mut spills {
                Some(spills) => spills,
                None => spills.insert(Spills::create(&task.job_dir, task.task, task.reducers)?),
            };
            spills.spill(&mut buffer)?;
        }
    }
    records += buffer.entries.len() as u64;
    let part_of = |reducer| map_part(&task.job_dir, task.task, reducer);
    let spill_count = match &mut spills {
        None => {
            buffer.write_sorted(
                task.reducers,
                |reducer| AtomicFile::create(&part_of(reducer)),
                AtomicFile::commit,
            )?;
            0
        }
        Some(spills) => {
            if !buffer.entries.is_empty() {
                spills.spill(&mut buffer)?;
            }
            for (reducer, runs) in spills.runs.iter().enumerate() {
                let mut out = AtomicFile::create(&part_of(reducer as u32))?;
                merge_lines(runs, &mut out)
                    .with_context(|| format!("cannot merge spilled runs into {}", out.dest().display()))?;
                out.commit()?;
            }
            spills.count
        }
    };
    Ok(SortMapStats { bytes: chunks.bytes_read(), records, spills: spill_count })
}

/// Runs sort reduce task `reducer` of the job in `job_dir`, whose map stage had `maps`
/// tasks; returns the lines written.
pub fn reduce(job_dir: &Path, reducer: u32, maps: u32) -> Result<u64> {
    let parts = map_parts_for(job_dir, reducer, maps)?;
    let mut out = AtomicFile::create(&out_part(job_dir, reducer))?;
    let lines = merge_lines(&parts, &mut out)?;
    out.commit()?;
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_sorts_by_reducer_then_bytes() {
        let mut buffer = LineBuffer::default();
        for (line, part) in [("b", 1), ("abcdefghZ", 0), ("abcdefgh", 0), ("", 1), ("abcdefghA", 0), ("a", 1)]
        {
            buffer.push(line.as_bytes(), part);
        }
        let mut outs = Vec::new();
        let collect = |out: Vec<u8>| {
            outs.push(String::from_utf8(out).unwrap());
            Ok(())
        };
        buffer.write_sorted(2, |_| Ok(Vec::new()), collect).unwrap();
        assert_eq!(outs, ["abcdefgh\nabcdefghA\nabcdefghZ\n", "\na\nb\n"]);
    }
}
