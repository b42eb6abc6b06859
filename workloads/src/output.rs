//! Atomic part files: written under a hidden temporary name in the destination's
//! directory, flushed and synced, then renamed over the destination. A reader sees the
//! old part, the new part, or none, never half of one; a killed attempt leaves at most a
//! hidden `.NAME.tmp.PID.N` file, which no reader opens (see [`crate::layout`]).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// Size of the write buffer in front of a part file.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Distinguishes the temporary files of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file that appears at its destination only on [`AtomicFile::commit`]. Dropped without
/// committing, it removes its temporary file.
pub struct AtomicFile {
    dest: PathBuf,
    temp: PathBuf,
    writer: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Starts writing what will become `dest`, creating its directory if needed.
    pub fn create(dest: &Path) -> Result<AtomicFile> {
        let dir = match dest.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
        let name = dest
            .file_name()
            .with_context(|| format!("output path {} has no file name", dest.display()))?
            .to_string_lossy();
        let unique = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}.tmp.{}.{unique}", std::process::id()));
        let file = File::create(&temp).with_context(|| format!("cannot create {}", temp.display()))?;
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            temp,
            writer: Some(BufWriter::with_capacity(WRITE_BUFFER_BYTES, file)),
        })
    }

    /// Where the file will appear.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flushes, syncs and renames the file into place, replacing any earlier version.
    pub fn commit(mut self) -> Result<()> {
        let Some(writer) = self.writer.take() else { return Ok(()) };
        let file = writer
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write {}", self.temp.display()))?;
        file.sync_all().with_context(|| format!("cannot sync {}", self.temp.display()))?;
        drop(file);
        std::fs::rename(&self.temp, &self.dest)
            .with_context(|| format!("cannot rename {} to {}", self.temp.display(), self.dest.display()))?;
        Ok(())
    }

    fn writer(&mut self) -> io::Result<&mut BufWriter<File>> {
        self.writer.as_mut().ok_or_else(|| io::Error::other("part file already committed"))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer()?.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer()?.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer()?.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            // Not committed: the attempt failed; leave no temporary file behind.
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Writes `count` in decimal followed by a newline, without going through `fmt`.
#[inline]
pub fn write_count_line(out: &mut impl Write, key: &[u8], count: u64) -> io::Result<()> {
    let mut digits = [0u8; 22];
    let mut at = digits.len() - 1;
    digits[at] = b'\n';
    let mut n = count;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    at -= 1;
    digits[at] = b'\t';
    out.write_all(key)?;
    out.write_all(&digits[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn nothing_appears_until_commit_and_commit_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("map-0").join("part-0");
        let mut file = AtomicFile::create(&dest).unwrap();
        file.write_all(b"first").unwrap();
        assert!(!dest.exists());
        file.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"first");
        let mut again = AtomicFile::create(&dest).unwrap();
        again.write_all(b"second").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"first");
        again.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"second");
        assert_eq!(dir_entries(&dir.path().join("map-0")), ["part-0"]);
    }

    #[test]
    fn an_abandoned_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = AtomicFile::create(&dir.path().join("part-3")).unwrap();
        file.write_all(b"half").unwrap();
        drop(file);
        assert!(dir_entries(dir.path()).is_empty());
    }

    #[test]
    fn count_lines_are_key_tab_decimal() {
        let mut out = Vec::new();
        for (key, count) in [(&b"a"[..], 0), (b"word", 7), (b"big", u64::MAX)] {
            write_count_line(&mut out, key, count).unwrap();
        }
        assert_eq!(out, format!("a\t0\nword\t7\nbig\t{}\n", u64::MAX).into_bytes());
    }
}
