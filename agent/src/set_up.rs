//! Where a task's file-system set-up runs: on the async worker that then starts the task,
//! or in tokio's blocking pool. With a directory made ahead (see [`crate::ready`]) the
//! set-up is a check of the job directory, a `rename` and an `open` of the cgroup, shorter
//! than the trip to the blocking pool and back (two thread wake-ups on a slot's path). On
//! a network file system any of those calls can wait for a server, which must not stall
//! an async worker; so the set-up runs inline only where both the work directory and the
//! data directory are on file systems known to be local.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Where a task's set-up (directories, output files, cgroup) runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SetUpSite {
    /// On the async worker that starts the task, with no hand-off.
    Inline,
    /// In tokio's blocking pool (a file system that may answer slowly).
    BlockingPool,
}

impl SetUpSite {
    /// `Inline` if every one of `dirs` is on a local file system (see [`is_local_fs`]);
    /// `BlockingPool` if one is not, or cannot be examined.
    pub fn for_dirs<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> SetUpSite {
        let all_local = dirs.into_iter().all(|dir| fs_type(dir).is_some_and(is_local_fs));
        if all_local { SetUpSite::Inline } else { SetUpSite::BlockingPool }
    }
}

/// The `f_type` of the file system holding `dir`, or of its nearest existing ancestor
/// (the agent makes its directories later); `None` if none can be examined.
fn fs_type(dir: &Path) -> Option<i64> {
    dir.ancestors().find_map(|path| {
        let path = CString::new(path.as_os_str().as_bytes()).ok()?;
        let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
        // SAFETY: `path` is a NUL-terminated string and `stat` a buffer of the right type;
        // the kernel fills it in when the call returns 0.
        let done = unsafe { libc::statfs(path.as_ptr(), stat.as_mut_ptr()) };
        // SAFETY: initialised by the successful call. `f_type`'s type differs between
        // architectures (`i64` here, narrower elsewhere), hence the cast.
        #[allow(clippy::unnecessary_cast)]
        (done == 0).then(|| unsafe { stat.assume_init() }.f_type as i64)
    })
}

/// Whether a file system of type `f_type` (`statfs(2)`) is one whose calls never wait for
/// another machine: a short list of local disk and memory file systems. Anything else
/// (NFS, SMB, Ceph, FUSE, ..., or a type not listed) counts as possibly remote.
pub fn is_local_fs(f_type: i64) -> bool {
    const LOCAL: [i64; 9] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x0102_1994, // tmpfs
        0x8584_58F6, // ramfs
        0x794C_7630, // overlayfs (container images)
        0x2FC1_2FC1, // zfs
        0xF2F5_2010, // f2fs
        0xCA45_1A4E, // bcachefs
    ];
    LOCAL.contains(&f_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_disks_and_memory_are_local_and_network_or_unknown_file_systems_are_not() {
        for local in [0xEF53, 0x5846_5342, 0x0102_1994, 0x9123_683E] {
            assert!(is_local_fs(local), "{local:#x}");
        }
        // NFS, SMB (cifs), Ceph, FUSE, 9p, and a made-up type.
        for remote in [0x6969, 0xFF53_4D42, 0x00C3_6400, 0x6573_5546, 0x0102_1997, 0x1234] {
            assert!(!is_local_fs(remote), "{remote:#x}");
        }
    }

    #[test]
    fn a_temporary_directory_is_local_even_before_its_subdirectories_exist() {
        let dir = tempfile::tempdir().unwrap();
        let not_yet = dir.path().join("work/containers");
        assert_eq!(fs_type(&not_yet), fs_type(dir.path()));
        // /proc is neither a disk nor memory: set-up beside it goes to the blocking pool.
        assert_eq!(SetUpSite::for_dirs([Path::new("/proc/self")]), SetUpSite::BlockingPool);
        assert_eq!(SetUpSite::for_dirs([dir.path(), Path::new("/proc/self")]), SetUpSite::BlockingPool);
        let expected = if fs_type(dir.path()).is_some_and(is_local_fs) {
            SetUpSite::Inline
        } else {
            SetUpSite::BlockingPool
        };
        assert_eq!(SetUpSite::for_dirs([dir.path(), not_yet.as_path()]), expected);
    }
}
