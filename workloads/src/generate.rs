//! Input generators. `gen-text` writes random lines like Hadoop's `RandomTextWriter`: a
//! key of 5–10 words, a tab, a value of 20–100 words, drawn uniformly from a fixed
//! 1000-word vocabulary. `gen-records` writes TeraGen-style 100-byte records in the
//! printable form of `gensort -a`: a 10-byte key, a space, the record number in 32 hex
//! digits, a space, 55 filler bytes and a newline.
//!
//! Generator task `I` of `N` writes `DIR/part-{I}` atomically. Text depends on the seed
//! and the task; record `k` depends only on the seed and `k`, so the records are the same
//! however many tasks write them.

use std::io::Write;
use std::ops::AddAssign;
use std::path::{Path, PathBuf};

use anyhow::Result;
use slotmarket_common::rng::SplitMix64;

use crate::output::AtomicFile;
use crate::task::share;

/// Words in the text vocabulary.
pub const VOCABULARY_WORDS: usize = 1000;

/// The fixed vocabulary: 1000 distinct pronounceable words of 1–4 syllables (2–12
/// letters), the same for every seed, like `RandomTextWriter`'s word list.
pub fn vocabulary() -> Vec<Vec<u8>> {
    const ONSETS: &[&str] = &[
        "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch",
        "cl", "dr", "gr", "ph", "pl", "qu", "sh", "st", "th", "tr",
    ];
    const NUCLEI: &[&str] = &["a", "e", "i", "o", "u", "ai", "ea", "ou", "y"];
    const CODAS: &[&str] = &["", "", "", "n", "r", "s", "t", "l", "m", "x"];
    let mut rng = SplitMix64::new(0x00C0_FFEE);
    let mut seen = std::collections::HashSet::new();
    let mut words = Vec::with_capacity(VOCABULARY_WORDS);
    while words.len() < VOCABULARY_WORDS {
        let mut word = String::new();
        for _ in 0..rng.between(1, 4) {
            word.push_str(ONSETS[rng.below(ONSETS.len() as u64) as usize]);
            word.push_str(NUCLEI[rng.below(NUCLEI.len() as u64) as usize]);
        }
        word.push_str(CODAS[rng.below(CODAS.len() as u64) as usize]);
        if seen.insert(word.clone()) {
            words.push(word.into_bytes());
        }
    }
    words
}

/// What one generator task is asked for.
#[derive(Clone, Debug)]
pub struct GenTask {
    /// The directory to write `part-{task}` into.
    pub output: PathBuf,
    /// Seed of the random data.
    pub seed: u64,
    /// This generator's index, `0..tasks`.
    pub task: u32,
    /// The number of generator tasks sharing the work.
    pub tasks: u32,
}

impl GenTask {
    /// This task's share `lo..hi` of `0..total`; refuses a task outside `0..tasks`.
    fn share(&self, total: u64) -> Result<(u64, u64)> {
        share(total, self.task, self.tasks)
    }

    /// Where this task writes.
    pub fn part(&self) -> PathBuf {
        crate::layout::generated_part(&self.output, self.task)
    }
}

/// What a generator wrote.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct GenStats {
    /// Bytes written.
    pub bytes: u64,
    /// Lines (records) written.
    pub lines: u64,
}

impl AddAssign for GenStats {
    fn add_assign(&mut self, other: GenStats) {
        self.bytes += other.bytes;
        self.lines += other.lines;
    }
}

/// Writes this task's share of `total_bytes` of random text: whole lines, stopping at the
/// first line that reaches the share (so a part overshoots by less than one line).
pub fn text(task: &GenTask, total_bytes: u64) -> Result<GenStats> {
    let (lo, hi) = task.share(total_bytes)?;
    let target = hi - lo;
    let words = vocabulary();
    let mut rng = SplitMix64::for_stream(task.seed, u64::from(task.task));
    let mut out = AtomicFile::create(&task.part())?;
    let mut line = Vec::with_capacity(2048);
    let mut stats = GenStats::default();
    while stats.bytes < target {
        line.clear();
        let key_words = rng.between(5, 10);
        let value_words = rng.between(20, 100);
        for i in 0..key_words + value_words {
            if i == key_words {
                line.push(b'\t');
            } else if i > 0 {
                line.push(b' ');
            }
            line.extend_from_slice(&words[rng.below(VOCABULARY_WORDS as u64) as usize]);
        }
        line.push(b'\n');
        out.write_all(&line)?;
        stats.bytes += line.len() as u64;
        stats.lines += 1;
    }
    out.commit()?;
    Ok(stats)
}

/// Length of one generated record, newline included.
pub const RECORD_BYTES: usize = 100;
/// Length of a record's key.
pub const KEY_BYTES: usize = 10;

/// Writes record number `k` of the data set with `seed` into `record`.
pub fn record(seed: u64, k: u64, record: &mut [u8; RECORD_BYTES]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut rng = SplitMix64::for_stream(seed, k);
    for byte in &mut record[..KEY_BYTES] {
        // Printable ASCII without space: '!' ..= '~'.
        *byte = b'!' + rng.below(94) as u8;
    }
    record[KEY_BYTES] = b' ';
    let number = u128::from(k);
    for (i, byte) in record[KEY_BYTES + 1..KEY_BYTES + 33].iter_mut().enumerate() {
        *byte = HEX[((number >> (4 * (31 - i))) & 0xF) as usize];
    }
    record[KEY_BYTES + 33] = b' ';
    for (i, byte) in record[KEY_BYTES + 34..RECORD_BYTES - 1].iter_mut().enumerate() {
        // gensort-style filler: runs of 4 equal letters that shift with the record number.
        *byte = b'A' + ((k as usize / 4 + i / 4) % 26) as u8;
    }
    record[RECORD_BYTES - 1] = b'\n';
}

/// Writes this task's share of records `0..total_records`.
pub fn records(task: &GenTask, total_records: u64) -> Result<GenStats> {
    let (lo, hi) = task.share(total_records)?;
    let mut out = AtomicFile::create(&task.part())?;
    let mut buf = [0u8; RECORD_BYTES];
    for k in lo..hi {
        record(task.seed, k, &mut buf);
        out.write_all(&buf)?;
    }
    out.commit()?;
    Ok(GenStats { bytes: (hi - lo) * RECORD_BYTES as u64, lines: hi - lo })
}

/// Convenience for tests and benchmarks: runs all `tasks` tasks of `generator` ([`text`]
/// or [`records`]) with `total` into `output`, one after another; returns their sums.
pub fn run_all(
    generator: fn(&GenTask, u64) -> Result<GenStats>,
    output: &Path,
    total: u64,
    seed: u64,
    tasks: u32,
) -> Result<GenStats> {
    let mut stats = GenStats::default();
    for task in 0..tasks {
        stats += generator(&GenTask { output: output.to_path_buf(), seed, task, tasks }, total)?;
    }
    Ok(stats)
}

/// [`run_all`] of [`text`]: all `tasks` text generators into `output`.
pub fn text_all(output: &Path, total_bytes: u64, seed: u64, tasks: u32) -> Result<GenStats> {
    run_all(text, output, total_bytes, seed, tasks)
}

/// [`run_all`] of [`records`]: all `tasks` record generators into `output`.
pub fn records_all(output: &Path, total_records: u64, seed: u64, tasks: u32) -> Result<GenStats> {
    run_all(records, output, total_records, seed, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_is_fixed_and_distinct() {
        let words = vocabulary();
        assert_eq!(words.len(), VOCABULARY_WORDS);
        assert_eq!(words, vocabulary());
        let distinct: std::collections::HashSet<_> = words.iter().collect();
        assert_eq!(distinct.len(), VOCABULARY_WORDS);
        assert!(words.iter().all(|w| w.iter().all(u8::is_ascii_lowercase)));
    }

    #[test]
    fn text_parts_hold_their_share_in_key_tab_value_lines() {
        let dir = tempfile::tempdir().unwrap();
        let stats = text_all(dir.path(), 100_000, 1, 3).unwrap();
        assert!(stats.bytes >= 100_000 && stats.bytes < 100_000 + 3 * 2000, "{stats:?}");
        let part = std::fs::read_to_string(dir.path().join("part-1")).unwrap();
        assert!(part.len() >= 33_333 && part.len() < 33_334 + 2000);
        assert!(part.lines().all(|l| l.split('\t').count() == 2));
        let again = tempfile::tempdir().unwrap();
        text_all(again.path(), 100_000, 1, 3).unwrap();
        assert_eq!(std::fs::read(again.path().join("part-1")).unwrap(), part.as_bytes());
    }

    #[test]
    fn records_do_not_depend_on_the_task_count() {
        let (one, four) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        records_all(one.path(), 1001, 9, 1).unwrap();
        records_all(four.path(), 1001, 9, 4).unwrap();
        let whole = std::fs::read(one.path().join("part-0")).unwrap();
        let joined: Vec<u8> =
            (0..4).flat_map(|i| std::fs::read(four.path().join(format!("part-{i}"))).unwrap()).collect();
        assert_eq!(whole, joined);
        assert_eq!(whole.len(), 1001 * RECORD_BYTES);
        for rec in whole.chunks(RECORD_BYTES) {
            assert_eq!(rec[RECORD_BYTES - 1], b'\n');
            assert!(rec[..RECORD_BYTES - 1].iter().all(|b| (b' '..=b'~').contains(b)));
            assert!(rec[..KEY_BYTES].iter().all(|b| *b != b' '));
        }
    }
}
