//! The tail of a failed task's stderr, for its `Failed` report: the master puts it in the
//! job's failure message and the node's quarantine reason, so "slotmarket-task: not
//! found" shows up where people look instead of only in the container's directory.
//!
//! The text is the task's (untrusted) output: control characters are replaced so it is
//! safe to print on a terminal, and lines are joined with " | " so it stays one line in
//! tables.
//!
//! A task whose directory's file system is full usually fails with nothing on stderr
//! (its writes there failed too), so the tail then says, in parentheses, that the file
//! system is full.

use std::io::SeekFrom;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// At most this many bytes are read from the end of the file.
pub const TAIL_BYTES: u64 = 1024;
/// At most this many of the last lines are kept.
pub const TAIL_LINES: usize = 10;

/// The last lines of the file at `path`, cleaned for printing; `None` if it is missing,
/// unreadable or holds only whitespace.
pub async fn read(path: &Path) -> Option<String> {
    let mut file = tokio::fs::File::open(path).await.ok()?;
    let len = file.metadata().await.ok()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).await.ok()?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(TAIL_BYTES).read_to_end(&mut bytes).await.ok()?;
    // A cut in the middle of the file drops the partial first line.
    let whole = if start > 0 {
        bytes.iter().position(|&b| b == b'\n').map_or(&[][..], |i| &bytes[i + 1..])
    } else {
        &bytes[..]
    };
    clean(whole)
}

/// What a failed task's report carries: the tail of the stderr in `dir`, and a note if
/// `dir`'s file system is full.
pub async fn of_failed(dir: &Path) -> Option<String> {
    let tail = read(&dir.join("stderr")).await;
    match (tail, file_system_full(dir)) {
        (Some(tail), Some(full)) => Some(format!("{tail} | ({full})")),
        (None, Some(full)) => Some(format!("(empty; {full})")),
        (tail, None) => tail,
    }
}

/// "file system full" if no block or no inode is left on `dir`'s file system for an
/// unprivileged writer; `None` if there is room or it cannot be told.
fn file_system_full(dir: &Path) -> Option<String> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer the size of `statvfs`.
    if unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded, so it filled the buffer.
    let stat = unsafe { stat.assume_init() };
    // The counts are u32 on some targets.
    #[allow(clippy::unnecessary_cast)]
    full_message(stat.f_bavail as u64, stat.f_files as u64, stat.f_favail as u64)
}

/// The note for a file system with `blocks_free` blocks and `inodes_free` of `inodes`
/// inodes free to unprivileged writers (file systems without a fixed inode table report 0
/// inodes).
fn full_message(blocks_free: u64, inodes: u64, inodes_free: u64) -> Option<String> {
    if blocks_free == 0 {
        Some("the file system of the task's directory is full: no space left".into())
    } else if inodes > 0 && inodes_free == 0 {
        Some("the file system of the task's directory is full: no inode left".into())
    } else {
        None
    }
}

/// The last [`TAIL_LINES`] non-empty lines of `bytes`, lossily decoded, with control
/// characters replaced by `?`, joined with " | ".
pub fn clean(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<String> = text
        .lines()
        .map(|line| line.trim_end().chars().map(|c| if c.is_control() { '?' } else { c }).collect::<String>())
        .filter(|line| !line.trim().is_empty())
        .collect();
    let kept = &lines[lines.len().saturating_sub(TAIL_LINES)..];
    (!kept.is_empty()).then(|| kept.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_lines_are_kept_cleaned_and_joined() {
        let text: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let tail = clean(text.as_bytes()).unwrap();
        assert_eq!(tail, (3..=12).map(|i| format!("line {i}")).collect::<Vec<_>>().join(" | "));
        assert_eq!(clean(b"\x1b[31mred\x1b[0m\r\n\n  \n").unwrap(), "?[31mred?[0m");
        assert_eq!(clean(b" \n\n"), None);
        assert_eq!(clean(b"\xffbad\n").unwrap(), "\u{fffd}bad");
    }

    #[test]
    fn a_file_system_without_a_free_block_or_inode_is_named_full() {
        assert_eq!(full_message(10, 100, 5), None);
        assert_eq!(full_message(10, 0, 0), None, "no inode table: only blocks count");
        assert!(full_message(0, 100, 5).unwrap().contains("no space left"));
        assert!(full_message(10, 100, 0).unwrap().contains("no inode left"));
    }

    #[tokio::test]
    async fn a_failed_tasks_report_is_its_stderr_tail_while_there_is_room() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(of_failed(dir.path()).await, None);
        std::fs::write(dir.path().join("stderr"), "boom\n").unwrap();
        assert_eq!(of_failed(dir.path()).await.as_deref(), Some("boom"));
    }

    #[tokio::test]
    async fn a_long_file_is_read_from_its_last_kilobyte_without_a_partial_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stderr");
        let long: String = (0..200).map(|i| format!("noise {i:04}\n")).collect();
        std::fs::write(&path, format!("{long}sh: 1: slotmarket-task: not found\n")).unwrap();
        let tail = read(&path).await.unwrap();
        assert!(tail.ends_with("noise 0199 | sh: 1: slotmarket-task: not found"), "{tail}");
        assert_eq!(tail.split(" | ").count(), TAIL_LINES);
        assert!(tail.split(" | ").all(|line| line.starts_with("noise ") || line.starts_with("sh:")));
        assert_eq!(read(&dir.path().join("missing")).await, None);
    }
}
