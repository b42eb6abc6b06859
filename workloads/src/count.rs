//! Counting by key for wordcount and grep: an open-addressing table of byte keys (hashed
//! once, with FNV-1a, for both the table and the reducer), spilled to sorted runs when it
//! outgrows its memory bound, and written as one sorted `key\tcount` part per reducer; and
//! the reduce side that merges those parts summing counts.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::layout::{create_spill_dir, map_part, map_parts_for, out_part};
use crate::merge::{CountTotals, merge_counts};
use crate::output::{AtomicFile, write_count_line};
use crate::partition::hash_partition;

#[derive(Clone, Copy, Default)]
struct Slot {
    hash: u64,
    offset: usize,
    len: usize,
    /// 0 marks an empty slot; a stored key has a count of at least 1.
    count: u64,
}

/// A hash table from byte keys to counts. Keys live in one arena, so adding a key that is
/// already present allocates nothing; the caller supplies the key's FNV-1a hash.
pub struct CountTable {
    slots: Vec<Slot>,
    arena: Vec<u8>,
    len: usize,
    /// `64 - log2(slots.len())`: the table index is the top bits of a mixed hash.
    shift: u32,
}

const INITIAL_SLOTS: usize = 1024;

impl Default for CountTable {
    fn default() -> Self {
        CountTable::new()
    }
}

impl CountTable {
    /// An empty table.
    pub fn new() -> CountTable {
        CountTable {
            slots: vec![Slot::default(); INITIAL_SLOTS],
            arena: Vec::new(),
            len: 0,
            shift: 64 - INITIAL_SLOTS.trailing_zeros(),
        }
    }

    /// Distinct keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes used by keys and slots.
    pub fn memory_bytes(&self) -> usize {
        self.arena.len() + self.slots.len() * size_of::<Slot>()
    }

    #[inline(always)]
    fn index_of(&self, hash: u64) -> usize {
        (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Adds `n` to the count of `key`, whose FNV-1a hash is `hash`. Adding 0 does nothing.
    #[inline]
    pub fn add(&mut self, key: &[u8], hash: u64, n: u64) {
        if n == 0 {
            return;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.index_of(hash);
        loop {
            let slot = &mut self.slots[i];
            if slot.count == 0 {
                *slot = Slot { hash, offset: self.arena.len(), len: key.len(), count: n };
                self.arena.extend_from_slice(key);
                self.len += 1;
                return;
            }
            if slot.hash == hash
                && slot.len == key.len()
                && &self.arena[slot.offset..slot.offset + slot.len] == key
            {
                slot.count += n;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// The count of `key`, if present.
    pub fn get(&self, key: &[u8], hash: u64) -> Option<u64> {
        let mask = self.slots.len() - 1;
        let mut i = self.index_of(hash);
        loop {
            let slot = &self.slots[i];
            if slot.count == 0 {
                return None;
            }
            if slot.hash == hash && self.key(slot) == key {
                return Some(slot.count);
            }
            i = (i + 1) & mask;
        }
    }

    fn key(&self, slot: &Slot) -> &[u8] {
        &self.arena[slot.offset..slot.offset + slot.len]
    }

    fn grow(&mut self) {
        let doubled = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.shift -= 1;
        let mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|s| s.count != 0) {
            let mut i = self.index_of(slot.hash);
            while self.slots[i].count != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }

    /// Empties the table, shrinking it back to its initial size.
    pub fn clear(&mut self) {
        *self = CountTable::new();
    }

    /// Writes the keys of each reducer's partition, sorted, to `sink(reducer)`; returns
    /// the number of keys written per reducer.
    fn write_sorted<W: Write>(
        &self,
        reducers: u32,
        mut sink: impl FnMut(u32) -> Result<Option<W>>,
        mut done: impl FnMut(u32, W) -> Result<()>,
    ) -> Result<Vec<u64>> {
        let mut order: Vec<(u32, u32)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.count != 0)
            .map(|(i, s)| (hash_partition(s.hash, reducers), i as u32))
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| self.key(&self.slots[a.1 as usize]).cmp(self.key(&self.slots[b.1 as usize])))
        });
        let mut written = vec![0u64; reducers as usize];
        let mut next = 0;
        for reducer in 0..reducers {
            let end = next + order[next..].partition_point(|(r, _)| *r == reducer);
            if let Some(mut out) = sink(reducer)? {
                for &(_, i) in &order[next..end] {
                    let slot = &self.slots[i as usize];
                    write_count_line(&mut out, self.key(slot), slot.count)?;
                }
                done(reducer, out)?;
            }
            written[reducer as usize] = (end - next) as u64;
            next = end;
        }
        Ok(written)
    }
}

/// What a counting map task wrote.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CountMapStats {
    /// Distinct keys written, summed over parts.
    pub keys: u64,
    /// Sum of all counts written.
    pub total: u64,
    /// How many times the table was spilled to disk.
    pub spills: u32,
}

/// The output side of a counting map task: counts keys in a [`CountTable`] bounded to
/// `spill_bytes`, and on [`CountingMap::finish`] writes `map-{task}/part-{r}` for every
/// reducer (empty ones too), each sorted by key with one line per key.
pub struct CountingMap {
    table: CountTable,
    job_dir: PathBuf,
    task: u32,
    reducers: u32,
    spill_bytes: usize,
    spill_dir: Option<PathBuf>,
    /// Spilled runs, per reducer.
    runs: Vec<Vec<PathBuf>>,
    spills: u32,
    total: u64,
}

impl CountingMap {
    /// A map task `task` of the job in `job_dir`, with `reducers` reducers (`> 0`).
    pub fn new(job_dir: &Path, task: u32, reducers: u32, spill_bytes: usize) -> CountingMap {
        CountingMap {
            table: CountTable::new(),
            job_dir: job_dir.to_path_buf(),
            task,
            reducers: reducers.max(1),
            spill_bytes,
            spill_dir: None,
            runs: vec![Vec::new(); reducers.max(1) as usize],
            spills: 0,
            total: 0,
        }
    }

    /// Counts one occurrence of `key` (FNV-1a hash `hash`).
    #[inline(always)]
    pub fn add(&mut self, key: &[u8], hash: u64) {
        self.table.add(key, hash, 1);
        self.total += 1;
    }

    /// Spills the table to sorted runs if it has outgrown its bound. Call it every so often
    /// (after each input chunk); the bound is exceeded by at most what was added since.
    pub fn maybe_spill(&mut self) -> Result<()> {
        if self.table.memory_bytes() > self.spill_bytes && !self.table.is_empty() {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        let dir = match &self.spill_dir {
            Some(dir) => dir.clone(),
            None => self.spill_dir.insert(create_spill_dir(&self.job_dir, self.task)?).clone(),
        };
        let spill = self.spills;
        let runs = &mut self.runs;
        self.table.write_sorted(
            self.reducers,
            |reducer| {
                let path = dir.join(format!("run-{spill}-part-{reducer}"));
                let file = std::fs::File::create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                runs[reducer as usize].push(path);
                Ok(Some(std::io::BufWriter::with_capacity(1 << 20, file)))
            },
            |_, mut out| out.flush().context("cannot write spill run"),
        )?;
        self.table.clear();
        self.spills += 1;
        Ok(())
    }

    /// Writes every reducer's part and removes the spill files.
    pub fn finish(mut self) -> Result<CountMapStats> {
        let (job_dir, task) = (self.job_dir.clone(), self.task);
        let mut stats = CountMapStats { keys: 0, total: self.total, spills: self.spills };
        if self.spills == 0 {
            let written = self.table.write_sorted(
                self.reducers,
                |reducer| AtomicFile::create(&map_part(&job_dir, task, reducer)).map(Some),
                |_, out| out.commit(),
            )?;
            stats.keys = written.iter().sum();
        } else {
            if !self.table.is_empty() {
                self.spill()?;
            }
            for (reducer, runs) in self.runs.iter().enumerate() {
                let mut out = AtomicFile::create(&map_part(&job_dir, task, reducer as u32))?;
                let totals = merge_counts(runs, &mut out)
                    .with_context(|| format!("cannot merge spilled runs into {}", out.dest().display()))?;
                out.commit()?;
                stats.keys += totals.keys;
            }
        }
        Ok(stats)
    }
}

impl Drop for CountingMap {
    fn drop(&mut self) {
        if let Some(dir) = &self.spill_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Reduce task `reducer` of a counting job: merges `map-{i}/part-{reducer}` of every map
/// `i < maps` into `out/part-{reducer}`, one `key\tcount` line per key, sorted by key.
pub fn count_reduce(job_dir: &Path, reducer: u32, maps: u32) -> Result<CountTotals> {
    let parts = map_parts_for(job_dir, reducer, maps)?;
    let mut out = AtomicFile::create(&out_part(job_dir, reducer))?;
    let totals = merge_counts(&parts, &mut out)?;
    out.commit()?;
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::map_dir;
    use crate::partition::fnv1a;

    #[test]
    fn the_table_counts_and_grows() {
        let mut table = CountTable::new();
        for round in 0..3u64 {
            for k in 0..5000u64 {
                let key = format!("key{k}");
                table.add(key.as_bytes(), fnv1a(key.as_bytes()), round + 1);
            }
        }
        assert_eq!(table.len(), 5000);
        assert_eq!(table.get(b"key4999", fnv1a(b"key4999")), Some(6));
        assert_eq!(table.get(b"nope", fnv1a(b"nope")), None);
        table.add(b"", fnv1a(b""), 0);
        assert_eq!(table.get(b"", fnv1a(b"")), None);
        table.clear();
        assert!(table.is_empty());
        assert_eq!(table.get(b"key1", fnv1a(b"key1")), None);
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn spilled_and_unspilled_maps_write_the_same_parts() {
        let keys: Vec<String> = (0..3000).map(|i| format!("w{}", (i * 7919) % 1000)).collect();
        let mut outputs = Vec::new();
        for spill_bytes in [usize::MAX, 1] {
            let dir = tempfile::tempdir().unwrap();
            let mut map = CountingMap::new(dir.path(), 4, 3, spill_bytes);
            for chunk in keys.chunks(250) {
                for key in chunk {
                    map.add(key.as_bytes(), fnv1a(key.as_bytes()));
                }
                map.maybe_spill().unwrap();
            }
            let stats = map.finish().unwrap();
            assert_eq!((stats.keys, stats.total), (1000, 3000));
            assert_eq!(stats.spills > 0, spill_bytes == 1);
            let names: Vec<_> = std::fs::read_dir(map_dir(dir.path(), 4))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            assert_eq!(names.len(), 3, "spill files must be gone: {names:?}");
            outputs.push((0..3).map(|r| read(&map_part(dir.path(), 4, r))).collect::<Vec<_>>());
        }
        assert_eq!(outputs[0], outputs[1]);
        for (r, part) in outputs[0].iter().enumerate() {
            let words: Vec<&str> = part.lines().map(|l| l.split('\t').next().unwrap()).collect();
            assert!(words.windows(2).all(|w| w[0] < w[1]));
            assert!(words.iter().all(|w| hash_partition(fnv1a(w.as_bytes()), 3) == r as u32));
            assert!(part.lines().all(|l| l.ends_with("\t3")));
        }
    }
}
