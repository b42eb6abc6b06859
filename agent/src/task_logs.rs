//! Reading a container's `stdout` or `stderr` for the master (`slotmarket logs`): only
//! those two files of the named container's directory, from an offset, at most
//! [`MAX_LOG_CHUNK`] bytes per read.

use std::io::SeekFrom;
use std::path::Path;

use slotmarket_common::ids::ContainerId;
use slotmarket_common::protocol::{LogRead, MAX_LOG_CHUNK};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// Reads what `read` asks for from `containers_dir/<container>/{stdout,stderr}`. The path
/// is built from the container id and a fixed file name, never from text the master
/// sends, so no read can leave that container's directory. A missing file is an error
/// the user sees (the container ran on another node, or its directory was cleaned).
pub async fn read(containers_dir: &Path, read: &LogRead) -> Result<Vec<u8>, String> {
    let path = log_path(containers_dir, read.container, read.stderr);
    let mut file = tokio::fs::File::open(&path)
        .await
        .map_err(|e| format!("cannot open the log of container {} on this node: {e}", read.container))?;
    file.seek(SeekFrom::Start(read.offset)).await.map_err(|e| format!("cannot seek in the log: {e}"))?;
    let max = u64::from(read.max.min(MAX_LOG_CHUNK));
    let mut data = Vec::new();
    file.take(max).read_to_end(&mut data).await.map_err(|e| format!("cannot read the log: {e}"))?;
    Ok(data)
}

/// The log file of `container`: its `stderr` or its `stdout`.
fn log_path(containers_dir: &Path, container: ContainerId, stderr: bool) -> std::path::PathBuf {
    containers_dir.join(container.to_string()).join(if stderr { "stderr" } else { "stdout" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(container: u64, stderr: bool, offset: u64, max: u32) -> LogRead {
        LogRead { request: 1, container: ContainerId(container), stderr, offset, max }
    }

    #[tokio::test]
    async fn reads_the_asked_file_from_the_offset_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let container = dir.path().join(ContainerId(7).to_string());
        std::fs::create_dir_all(&container).unwrap();
        std::fs::write(container.join("stdout"), b"hello world\n").unwrap();
        std::fs::write(container.join("stderr"), b"oops\n").unwrap();
        assert_eq!(read(dir.path(), &ask(7, false, 0, 5)).await.unwrap(), b"hello");
        assert_eq!(read(dir.path(), &ask(7, false, 6, 100)).await.unwrap(), b"world\n");
        assert_eq!(read(dir.path(), &ask(7, true, 0, 100)).await.unwrap(), b"oops\n");
        // Past the end: nothing, not an error (the task may still write).
        assert!(read(dir.path(), &ask(7, false, 100, 100)).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_container_without_logs_here_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = read(dir.path(), &ask(9, false, 0, 10)).await.unwrap_err();
        assert!(err.contains(&ContainerId(9).to_string()), "{err}");
    }

    #[tokio::test]
    async fn a_huge_ask_is_capped_at_one_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let container = dir.path().join(ContainerId(3).to_string());
        std::fs::create_dir_all(&container).unwrap();
        std::fs::write(container.join("stdout"), vec![b'x'; MAX_LOG_CHUNK as usize + 10]).unwrap();
        let data = read(dir.path(), &ask(3, false, 0, u32::MAX)).await.unwrap();
        assert_eq!(data.len(), MAX_LOG_CHUNK as usize);
    }
}
