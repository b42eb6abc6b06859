//! The data directory's identity. A job's stages pass data through the data directory (map
//! outputs, generated inputs), so every agent must see the same one. Each directory names
//! itself with a random id in [`SHARED_ID_FILE`], made by the first agent that uses it;
//! agents that share the directory read the same id, and the agent reports it in
//! `Register`, so the master can refuse an agent whose directory is not the others'.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The file in the data directory holding its id.
pub const SHARED_ID_FILE: &str = ".slotmarket-shared-id";

/// Hex digits of an id (128 random bits).
const ID_LEN: usize = 32;

/// Why the data directory's id cannot be had.
#[derive(Debug, Error)]
pub enum DataDirError {
    /// The directory or the id file could not be created, read or written.
    #[error("cannot use data directory {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The id file holds something else than an id.
    #[error("{0} does not hold a data directory id; delete it if no agent uses this directory")]
    Corrupt(PathBuf),
}

/// The id of `data_dir`, creating the directory and the id file if needed. Agents racing
/// to create it agree: the file is written under a private name and linked into place,
/// which fails for all but the first (also on NFS), and the losers read the winner's.
pub fn shared_id(data_dir: &Path) -> Result<String, DataDirError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DataDirError::Io { path, source }
    };
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    let file = data_dir.join(SHARED_ID_FILE);
    if !file.exists() {
        let id = random_id().map_err(io(&file))?;
        let tmp = data_dir.join(format!("{SHARED_ID_FILE}.{}.{id}", std::process::id()));
        let mut out = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        out.write_all(format!("{id}\n").as_bytes()).and_then(|()| out.sync_all()).map_err(io(&tmp))?;
        let linked = std::fs::hard_link(&tmp, &file);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(&file)(e)),
        }
    }
    let text = std::fs::read_to_string(&file).map_err(io(&file))?;
    let id = text.trim();
    if id.len() != ID_LEN || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(DataDirError::Corrupt(file));
    }
    Ok(id.to_string())
}

/// 128 bits from the kernel's random source, in hex.
fn random_id() -> io::Result<String> {
    let mut bytes = [0u8; ID_LEN / 2];
    let mut filled = 0;
    while filled < bytes.len() {
        let rest = &mut bytes[filled..];
        // SAFETY: the pointer and length describe `rest`, which the call may fill.
        let got = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if got < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        filled += got as usize;
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_sharing_a_directory_read_one_id_and_others_differ() {
        let shared = tempfile::tempdir().unwrap();
        let dir = shared.path().join("data");
        let first = shared_id(&dir).unwrap();
        assert_eq!(first.len(), ID_LEN);
        assert_eq!(shared_id(&dir).unwrap(), first, "a second agent on the same directory");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [SHARED_ID_FILE], "no temporary file is left");
        let other = tempfile::tempdir().unwrap();
        assert_ne!(shared_id(other.path()).unwrap(), first);
    }

    #[test]
    fn racing_agents_agree() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8).map(|_| s.spawn(|| shared_id(dir.path()).unwrap())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    }

    #[test]
    fn a_damaged_id_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SHARED_ID_FILE), "not an id\n").unwrap();
        let err = shared_id(dir.path()).unwrap_err().to_string();
        assert!(err.contains(SHARED_ID_FILE) && err.contains("delete it"), "{err}");
    }
}
