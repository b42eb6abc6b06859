//! K-way merges of sorted part files, streaming with one buffered line per file: by
//! whole line for sort, and by key with counts summed for `key\tcount` parts (wordcount,
//! grep). Used by reducers and by map tasks combining their spilled runs.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::output::write_count_line;

/// Read buffer per merged file.
const READ_BUFFER_BYTES: usize = 128 << 10;

/// A sorted part file read line by line.
struct LineSource {
    reader: BufReader<File>,
    path: PathBuf,
    line_no: u64,
}

impl LineSource {
    fn open(path: &Path) -> Result<LineSource> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Ok(LineSource {
            reader: BufReader::with_capacity(READ_BUFFER_BYTES, file),
            path: path.to_path_buf(),
            line_no: 0,
        })
    }

    /// Reads the next line into `buf` without its newline; false at the end.
    fn read_line(&mut self, buf: &mut Vec<u8>) -> Result<bool> {
        buf.clear();
        let n = self
            .reader
            .read_until(b'\n', buf)
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        if n == 0 {
            return Ok(false);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        self.line_no += 1;
        Ok(true)
    }
}

/// The current line of one source; ordered so that `BinaryHeap` pops the smallest key
/// (ties by source index, so the merge is deterministic).
struct Head {
    line: Vec<u8>,
    key_len: usize,
    source: usize,
}

impl Head {
    fn key(&self) -> &[u8] {
        &self.line[..self.key_len]
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(self.key()).then(other.source.cmp(&self.source))
    }
}

/// Merges the sorted files `paths`, calling `each(line, key_len)` for every line in
/// ascending key order. `key_len` says how much of a line is its key. Fails if a file is
/// not sorted by that key.
fn merge_sorted(
    paths: &[PathBuf],
    key_len: impl Fn(&[u8]) -> Option<usize>,
    mut each: impl FnMut(&[u8], usize) -> Result<()>,
) -> Result<()> {
    let mut sources = paths.iter().map(|p| LineSource::open(p)).collect::<Result<Vec<_>>>()?;
    let key_of = |line: &[u8], source: &LineSource| match key_len(line) {
        Some(len) => Ok(len),
        None => bail!("{}:{}: malformed line", source.path.display(), source.line_no),
    };
    let mut heap = BinaryHeap::with_capacity(sources.len());
    for (index, source) in sources.iter_mut().enumerate() {
        let mut line = Vec::new();
        if source.read_line(&mut line)? {
            let key_len = key_of(&line, source)?;
            heap.push(Head { line, key_len, source: index });
        }
    }
    let mut spare = Vec::new();
    while let Some(mut top) = heap.peek_mut() {
        each(&top.line, top.key_len)?;
        let source = &mut sources[top.source];
        if source.read_line(&mut spare)? {
            let key_len = key_of(&spare, source)?;
            if spare[..key_len] < *top.key() {
                bail!(
                    "{}:{}: out of order; part files must be sorted",
                    source.path.display(),
                    source.line_no
                );
            }
            std::mem::swap(&mut spare, &mut top.line);
            top.key_len = key_len;
        } else {
            std::collections::binary_heap::PeekMut::pop(top);
        }
    }
    Ok(())
}

/// Merges sorted line files into `out`, keeping duplicates. Returns the number of lines.
pub fn merge_lines(paths: &[PathBuf], out: &mut impl Write) -> Result<u64> {
    let mut lines = 0u64;
    merge_sorted(
        paths,
        |line| Some(line.len()),
        |line, _| {
            lines += 1;
            out.write_all(line)?;
            out.write_all(b"\n")?;
            Ok(())
        },
    )?;
    Ok(lines)
}

/// Splits a `key\tcount` line into its key length and count. The key is everything before
/// the last tab, so it may itself hold tabs (grep's matching lines do).
pub fn parse_count_line(line: &[u8]) -> Option<(usize, u64)> {
    let tab = memchr::memrchr(b'\t', line)?;
    let digits = &line[tab + 1..];
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut count = 0u64;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        count = count.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some((tab, count))
}

/// What a count merge produced.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CountTotals {
    /// Distinct keys written.
    pub keys: u64,
    /// Sum of all counts.
    pub total: u64,
}

/// Merges `key\tcount` files sorted by key into `out`, one line per key with the counts
/// summed, sorted by key.
pub fn merge_counts(paths: &[PathBuf], out: &mut impl Write) -> Result<CountTotals> {
    let mut totals = CountTotals::default();
    let mut current: Option<(Vec<u8>, u64)> = None;
    merge_sorted(
        paths,
        |line| parse_count_line(line).map(|(key_len, _)| key_len),
        |line, key_len| {
            let key = &line[..key_len];
            let count = parse_count_line(line).map_or(0, |(_, count)| count);
            totals.total = totals.total.saturating_add(count);
            match &mut current {
                Some((current_key, sum)) if current_key.as_slice() == key => {
                    *sum = sum.saturating_add(count);
                }
                slot => {
                    if let Some((done_key, sum)) = slot.take() {
                        write_count_line(out, &done_key, sum)?;
                        totals.keys += 1;
                    }
                    *slot = Some((key.to_vec(), count));
                }
            }
            Ok(())
        },
    )?;
    if let Some((key, sum)) = current {
        write_count_line(out, &key, sum)?;
        totals.keys += 1;
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, contents: &[&str]) -> Vec<PathBuf> {
        contents
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let p = dir.join(format!("part-{i}"));
                std::fs::write(&p, c).unwrap();
                p
            })
            .collect()
    }

    #[test]
    fn lines_merge_in_order_with_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path(), &["a\nc\nc\n", "", "b\nc\nd"]);
        let mut out = Vec::new();
        assert_eq!(merge_lines(&paths, &mut out).unwrap(), 6);
        assert_eq!(out, b"a\nb\nc\nc\nc\nd\n");
    }

    #[test]
    fn counts_merge_by_key_and_sum() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path(), &["a\t1\nb\tx\t2\nz\t5\n", "a\t2\nb\t1\n", "b\tx\t10\n"]);
        let mut out = Vec::new();
        let totals = merge_counts(&paths, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\t3\nb\t1\nb\tx\t12\nz\t5\n");
        assert_eq!(totals, CountTotals { keys: 4, total: 21 });
    }

    #[test]
    fn unsorted_or_malformed_parts_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let unsorted = files(dir.path(), &["b\t1\na\t1\n"]);
        let err = format!("{:#}", merge_counts(&unsorted, &mut Vec::new()).unwrap_err());
        assert!(err.contains("part-0:2: out of order"), "{err}");
        let malformed = files(dir.path(), &["a\t1\nb 2\n"]);
        let err = format!("{:#}", merge_counts(&malformed, &mut Vec::new()).unwrap_err());
        assert!(err.contains("part-0:2: malformed"), "{err}");
        assert_eq!(parse_count_line(b"k\t99999999999999999999"), None);
        assert_eq!(parse_count_line(b"k\t"), None);
        assert_eq!(parse_count_line(b"\t0"), Some((0, 0)));
    }
}
