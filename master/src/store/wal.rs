//! Making committed transactions durable without SQLite: a handle of our own on the
//! database's write-ahead log, whose `fdatasync` makes every transaction committed before
//! it durable (see the store's module header for why that holds, checkpoints included).

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file's identity: (device, inode). The WAL keeps its inode for as long as a
/// connection stays open; a different one means it was deleted and made again.
type FileId = (u64, u64);

/// A handle on `<database>-wal` that syncs it. Owned by whoever syncs (the server's
/// syncer thread, or a barrier on the actor's thread); it shares nothing with the
/// connection, since `fdatasync` acts on the file, not on the descriptor.
pub struct WalSync {
    wal_path: PathBuf,
    db_path: PathBuf,
    /// The open WAL, or `None` while there is none (nothing is then only in the WAL).
    wal: Option<(File, FileId)>,
}

impl WalSync {
    /// A handle on the WAL of the database at `db_path`. Opening it syncs the directory
    /// once, so a WAL file created since the directory was last synced is found after a
    /// power cut too.
    pub fn open(db_path: &Path) -> io::Result<WalSync> {
        let mut wal_path = db_path.as_os_str().to_owned();
        wal_path.push("-wal");
        let mut sync = WalSync { wal_path: wal_path.into(), db_path: db_path.to_owned(), wal: None };
        sync.reopen()?;
        Ok(sync)
    }

    /// Makes every transaction committed before this call durable. Costs one
    /// `fdatasync` of the WAL, plus a sync of the database file and the directory in the
    /// rare case the WAL was replaced since the last call.
    pub fn sync(&mut self) -> io::Result<()> {
        let current = file_id(&self.wal_path)?;
        if current.is_none() || current != self.wal.as_ref().map(|(_, id)| *id) {
            // The WAL we held was removed (its last connection closed, which checkpoints
            // it into the database first) or never existed: what it held is in the
            // database file now. Make that durable, then follow the new WAL.
            File::open(&self.db_path)?.sync_all()?;
            self.reopen()?;
        }
        match &self.wal {
            Some((file, _)) => file.sync_data(),
            None => Ok(()),
        }
    }

    /// Opens the WAL as it is now (if there is one) and syncs its directory.
    fn reopen(&mut self) -> io::Result<()> {
        self.wal = match File::open(&self.wal_path) {
            Ok(file) => {
                let meta = file.metadata()?;
                Some((file, (meta.dev(), meta.ino())))
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(err),
        };
        if let Some(dir) = self.db_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// The identity of the WAL this handle syncs, if it holds one (for tests).
    #[cfg(test)]
    pub(crate) fn held_id(&self) -> Option<FileId> {
        self.wal.as_ref().map(|(_, id)| *id)
    }
}

/// The (device, inode) of the file at `path`, or `None` if there is none.
fn file_id(path: &Path) -> io::Result<Option<FileId>> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some((meta.dev(), meta.ino()))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}
