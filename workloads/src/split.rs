//! Input splitting the Hadoop way: the input (a file, or every visible regular file of a
//! directory in name order) is treated as one concatenated byte range, cut into N equal
//! byte ranges, and each cut is moved to a line boundary, so every line is read by exactly
//! one map task.
//!
//! Rule: a line belongs to the split that holds its first byte. So a split that starts
//! mid-line skips to the next line, and a split reads past its end to finish its last line
//! (as Hadoop's `LineRecordReader` does). Lines never span files: a file's end ends its
//! last line, newline or not. A line longer than a split leaves the splits it covers empty.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Take};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::layout::require_all;
use crate::task::share;

/// One input file and its length when the input was listed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct InputFile {
    /// Where the file is.
    pub path: PathBuf,
    /// Its length in bytes.
    pub len: u64,
}

/// The input of a map stage: one file, or the visible regular files of a directory.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Input {
    files: Vec<InputFile>,
    total: u64,
}

/// A byte range `start..end` of one file holding whole lines.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FileRange {
    /// The file.
    pub path: PathBuf,
    /// First byte, at the start of a line.
    pub start: u64,
    /// One past the last byte, just after a newline or at the end of the file.
    pub end: u64,
}

impl FileRange {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the range holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    /// Opens the file positioned at `start`, reading no further than `end`.
    pub fn open(&self) -> Result<Take<File>> {
        let mut file =
            File::open(&self.path).with_context(|| format!("cannot open input {}", self.path.display()))?;
        file.seek(SeekFrom::Start(self.start))
            .with_context(|| format!("cannot seek to byte {} of {}", self.start, self.path.display()))?;
        Ok(file.take(self.len()))
    }
}

/// Whether a directory entry is hidden: Hadoop skips names starting with `.` or `_`, and
/// so do we, which also keeps a killed generator's temporary files out of the input.
fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().first().is_some_and(|b| *b == b'.' || *b == b'_')
}

impl Input {
    /// Lists `path`: the file itself, or the visible regular files in the directory (not
    /// recursive, symlinks followed), sorted by name.
    pub fn open(path: &Path) -> Result<Input> {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read input {}", path.display()))?;
        let mut files = Vec::new();
        if meta.is_file() {
            files.push(InputFile { path: path.to_path_buf(), len: meta.len() });
        } else if meta.is_dir() {
            let entries =
                std::fs::read_dir(path).with_context(|| format!("cannot list input {}", path.display()))?;
            for entry in entries {
                let entry = entry.with_context(|| format!("cannot list input {}", path.display()))?;
                if is_hidden(&entry.file_name()) {
                    continue;
                }
                let file = entry.path();
                let meta =
                    std::fs::metadata(&file).with_context(|| format!("cannot read {}", file.display()))?;
                if meta.is_file() {
                    files.push(InputFile { path: file, len: meta.len() });
                }
            }
            files.sort_by(|a, b| a.path.file_name().cmp(&b.path.file_name()));
        } else {
            bail!("input {} is neither a regular file nor a directory", path.display());
        }
        Ok(Input::from_files(files))
    }

    /// Exactly `dir/part-0` .. `dir/part-{parts - 1}`, the parts `parts` generator tasks
    /// wrote. Naming them, rather than listing the directory, makes a part written where this
    /// task cannot see it (an agent not sharing the data directory) an error naming it, and
    /// keeps stray files out of the input.
    pub fn open_parts(dir: &Path, parts: u32) -> Result<Input> {
        if parts == 0 {
            bail!("--parts must be at least 1");
        }
        let paths = (0..parts).map(|part| dir.join(format!("part-{part}"))).collect();
        let paths = require_all(dir, paths, "input parts")?;
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let len =
                std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?.len();
            files.push(InputFile { path, len });
        }
        Ok(Input::from_files(files))
    }

    /// An input made of these files, in this order.
    pub fn from_files(files: Vec<InputFile>) -> Input {
        let total = files.iter().map(|f| f.len).sum();
        Input { files, total }
    }

    /// The files, in order.
    pub fn files(&self) -> &[InputFile] {
        &self.files
    }

    /// Total bytes over all files.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// The line-aligned ranges of split `task` of `tasks` (`task < tasks`), in input order.
    /// Empty ranges are left out.
    pub fn split(&self, task: u32, tasks: u32) -> Result<Vec<FileRange>> {
        let (split_start, split_end) = share(self.total, task, tasks)?;
        let mut ranges = Vec::new();
        let mut base = 0u64;
        for file in &self.files {
            let (file_start, file_end) = (base, base + file.len);
            base = file_end;
            if file_end <= split_start || file_start >= split_end || file.len == 0 {
                continue;
            }
            let local_start = split_start.saturating_sub(file_start);
            let local_end = split_end.min(file_end) - file_start;
            let handle = File::open(&file.path)
                .with_context(|| format!("cannot open input {}", file.path.display()))?;
            let start = next_line_start(&handle, &file.path, local_start, file.len)?;
            let end = next_line_start(&handle, &file.path, local_end, file.len)?;
            if start < end {
                ranges.push(FileRange { path: file.path.clone(), start, end });
            }
        }
        Ok(ranges)
    }

    /// Up to `count` line prefixes (at most `prefix_len` bytes each, without the newline),
    /// one from the first line starting at or after each of `count` evenly spaced offsets.
    /// Depends on nothing but the input, so every caller gets the same sample.
    pub fn sample_line_prefixes(&self, count: usize, prefix_len: usize) -> Result<Vec<Vec<u8>>> {
        let mut samples = Vec::with_capacity(count);
        if self.total == 0 || count == 0 {
            return Ok(samples);
        }
        let mut file_index = 0;
        let mut base = 0u64;
        let mut handle: Option<File> = None;
        for j in 0..count as u64 {
            let offset =
                (u128::from(self.total) * u128::from(2 * j + 1) / u128::from(2 * count as u64)) as u64;
            while base + self.files[file_index].len <= offset {
                base += self.files[file_index].len;
                file_index += 1;
                handle = None;
            }
            let file = &self.files[file_index];
            let handle = match &mut handle {
                Some(h) => h,
                slot => slot.insert(
                    File::open(&file.path)
                        .with_context(|| format!("cannot open input {}", file.path.display()))?,
                ),
            };
            let start = next_line_start(handle, &file.path, offset - base, file.len)?;
            if start >= file.len {
                continue;
            }
            let mut prefix = vec![0u8; prefix_len.min((file.len - start) as usize)];
            read_exact_at(handle, &file.path, &mut prefix, start)?;
            if let Some(newline) = memchr::memchr(b'\n', &prefix) {
                prefix.truncate(newline);
            }
            samples.push(prefix);
        }
        Ok(samples)
    }
}

fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], at: u64) -> Result<()> {
    file.read_exact_at(buf, at).with_context(|| format!("cannot read byte {at} of {}", path.display()))
}

/// The first line start at or after `pos` in a file of `len` bytes: `pos` itself if it is 0
/// or follows a newline, else just past the next newline, else `len`.
fn next_line_start(file: &File, path: &Path, pos: u64, len: u64) -> Result<u64> {
    if pos == 0 || pos >= len {
        return Ok(pos.min(len));
    }
    // Look for a newline at or after pos - 1, reading in growing chunks: usually the line
    // is short and one small read finds it; a long line costs a few larger reads.
    let mut at = pos - 1;
    let mut chunk = 256usize;
    let mut buf = Vec::new();
    while at < len {
        let want = chunk.min((len - at) as usize);
        buf.resize(want, 0);
        let got = file
            .read_at(&mut buf, at)
            .with_context(|| format!("cannot read byte {at} of {}", path.display()))?;
        if got == 0 {
            break;
        }
        if let Some(newline) = memchr::memchr(b'\n', &buf[..got]) {
            return Ok(at + newline as u64 + 1);
        }
        at += got as u64;
        chunk = (chunk * 2).min(1 << 20);
    }
    Ok(len)
}

/// Size of the buffer [`LineChunks`] reads into; it grows only for a longer line.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Reads a split's ranges in large chunks, each made of whole lines: the bytes up to the
/// last newline of a read, or the unterminated last line of a file. Memory is one buffer
/// of [`CHUNK_BYTES`], or the longest line if that is longer.
pub struct LineChunks {
    ranges: VecDeque<FileRange>,
    reader: Option<(Take<File>, PathBuf)>,
    buf: Vec<u8>,
    /// Bytes `..consumed` were handed out; `consumed..filled` are carried to the next call.
    consumed: usize,
    filled: usize,
    bytes_read: u64,
}

impl LineChunks {
    /// Chunks over `ranges`, in order.
    pub fn new(ranges: Vec<FileRange>) -> LineChunks {
        LineChunks::with_capacity(ranges, CHUNK_BYTES)
    }

    /// Chunks over `ranges` with an initial buffer of `capacity` bytes (tests use tiny ones).
    pub fn with_capacity(ranges: Vec<FileRange>, capacity: usize) -> LineChunks {
        LineChunks {
            ranges: ranges.into(),
            reader: None,
            buf: vec![0; capacity.max(1)],
            consumed: 0,
            filled: 0,
            bytes_read: 0,
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The next chunk of whole lines (never empty), or `None` at the end of the split.
    pub fn next_chunk(&mut self) -> Result<Option<&[u8]>> {
        loop {
            if self.consumed > 0 {
                self.buf.copy_within(self.consumed..self.filled, 0);
                self.filled -= self.consumed;
                self.consumed = 0;
            }
            if self.filled == self.buf.len() {
                let grown = self.buf.len() * 2;
                self.buf.resize(grown, 0);
            }
            if self.reader.is_none() {
                match self.ranges.pop_front() {
                    Some(range) => self.reader = Some((range.open()?, range.path)),
                    None => return Ok(None),
                }
            }
            let Some((reader, path)) = &mut self.reader else { continue };
            let n = reader
                .read(&mut self.buf[self.filled..])
                .with_context(|| format!("cannot read input {}", path.display()))?;
            if n == 0 {
                // The range ended; anything carried is a last line without a newline.
                self.reader = None;
                if self.filled > 0 {
                    self.consumed = self.filled;
                    return Ok(Some(&self.buf[..self.filled]));
                }
                continue;
            }
            self.bytes_read += n as u64;
            let fresh = self.filled;
            self.filled += n;
            if let Some(newline) = memchr::memrchr(b'\n', &self.buf[fresh..self.filled]) {
                self.consumed = fresh + newline + 1;
                return Ok(Some(&self.buf[..self.consumed]));
            }
        }
    }
}

/// Calls `each` on every line of a chunk, without its newline. A trailing newline does not
/// start another line.
#[inline]
pub fn for_each_line(chunk: &[u8], mut each: impl FnMut(&[u8])) {
    let mut start = 0;
    for newline in memchr::memchr_iter(b'\n', chunk) {
        each(&chunk[start..newline]);
        start = newline + 1;
    }
    if start < chunk.len() {
        each(&chunk[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input_of(dir: &Path, files: &[&[u8]]) -> Input {
        for (i, content) in files.iter().enumerate() {
            std::fs::write(dir.join(format!("f{i:02}")), content).unwrap();
        }
        Input::open(dir).unwrap()
    }

    fn lines_of_split(input: &Input, task: u32, tasks: u32, capacity: usize) -> Vec<Vec<u8>> {
        let mut chunks = LineChunks::with_capacity(input.split(task, tasks).unwrap(), capacity);
        let mut lines = Vec::new();
        while let Some(chunk) = chunks.next_chunk().unwrap() {
            for_each_line(chunk, |line| lines.push(line.to_vec()));
        }
        lines
    }

    #[test]
    fn every_line_is_read_exactly_once_for_any_split_count() {
        let dir = tempfile::tempdir().unwrap();
        let long = vec![b'x'; 700];
        let mut third = b"tail without newline\n\nafter empty\n".to_vec();
        third.extend_from_slice(&long);
        let input = input_of(
            dir.path(),
            &[b"a\nbb\nccc\n", b"", &[&long[..], b"\nshort\n"].concat(), &third, b"no newline"],
        );
        let mut expected = Vec::new();
        for file in input.files() {
            let content = std::fs::read(&file.path).unwrap();
            if !content.is_empty() {
                let trimmed = content.strip_suffix(b"\n").unwrap_or(&content);
                expected.extend(trimmed.split(|b| *b == b'\n').map(<[u8]>::to_vec));
            }
        }
        for tasks in [1, 2, 3, 5, 7, 16, 64, 1000] {
            for capacity in [1, 7, 4096] {
                let mut got = Vec::new();
                for task in 0..tasks {
                    got.extend(lines_of_split(&input, task, tasks, capacity));
                }
                assert_eq!(got, expected, "tasks={tasks} capacity={capacity}");
            }
        }
    }

    #[test]
    fn a_split_inside_a_long_line_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let input = input_of(dir.path(), &[&[&vec![b'y'; 1000][..], b"\nz\n"].concat()]);
        assert_eq!(input.split(0, 10).unwrap().len(), 1);
        assert_eq!(input.split(0, 10).unwrap()[0].end, 1001);
        assert!((1..9).all(|t| input.split(t, 10).unwrap().is_empty()));
        // The last split starts inside the long line and reads only the line after it.
        assert_eq!(lines_of_split(&input, 9, 10, 16), vec![b"z".to_vec()]);
    }

    #[test]
    fn named_parts_are_read_in_part_order_and_missing_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        for (part, text) in [(0, "a\n"), (1, "bb\n"), (2, "ccc\n")] {
            std::fs::write(dir.path().join(format!("part-{part}")), text).unwrap();
        }
        std::fs::write(dir.path().join("stray"), "not input\n").unwrap();
        let input = Input::open_parts(dir.path(), 3).unwrap();
        let names: Vec<_> = input.files().iter().map(|f| f.path.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["part-0", "part-1", "part-2"]);
        assert_eq!(input.total_bytes(), 9);
        let err = Input::open_parts(dir.path(), 5).unwrap_err().to_string();
        assert!(err.starts_with("2 of 5 input parts missing in "), "{err}");
        assert!(err.contains(": part-3, part-4. "), "{err}");
    }

    #[test]
    fn hidden_files_and_subdirectories_are_not_input() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b"), "2\n").unwrap();
        std::fs::write(dir.path().join("a"), "1\n").unwrap();
        std::fs::write(dir.path().join(".part-0.tmp.1.0"), "half").unwrap();
        std::fs::write(dir.path().join("_SUCCESS"), "").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let input = Input::open(dir.path()).unwrap();
        let names: Vec<_> = input.files().iter().map(|f| f.path.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(input.total_bytes(), 4);
        assert!(Input::open(&dir.path().join("missing")).is_err());
        assert!(input.split(1, 1).is_err());
    }

    #[test]
    fn samples_are_line_prefixes_and_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..100).map(|i| format!("{i:03}-some-longer-line\n")).collect();
        let input = input_of(dir.path(), &[text.as_bytes()]);
        let a = input.sample_line_prefixes(10, 5).unwrap();
        assert_eq!(a, input.sample_line_prefixes(10, 5).unwrap());
        assert_eq!(a.len(), 10);
        assert!(a.iter().all(|s| s.len() == 5 && s[3] == b'-'));
    }
}
