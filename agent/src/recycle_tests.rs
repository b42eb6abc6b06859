//! Which removed container directories are recycled, and what is left of them.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

struct Fixture {
    root: tempfile::TempDir,
    pool: PathBuf,
}

impl Fixture {
    /// A pool, and container `c1`'s directory with output in both logs.
    fn new() -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let containers = root.path().join("containers");
        let pool = pool_of(&containers).unwrap();
        fs::create_dir_all(&pool).unwrap();
        let fx = Fixture { root, pool };
        fs::create_dir_all(fx.dir()).unwrap();
        fs::write(fx.dir().join("stdout"), b"secret out\n").unwrap();
        fs::write(fx.dir().join("stderr"), b"secret err\n").unwrap();
        fx
    }

    fn dir(&self) -> PathBuf {
        self.root.path().join("containers").join("c1")
    }

    fn recycle(&self) -> Recycled {
        recycle(&self.dir(), &self.pool, OsStr::new("c1"))
    }

    fn pooled(&self) -> PathBuf {
        self.pool.join("c1")
    }

    fn staged(&self) -> PathBuf {
        self.pool.join(".c1")
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_removed_container_directory_is_emptied_of_the_tasks_files_and_pooled() {
    let fx = Fixture::new();
    let outside = fx.root.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), b"not the task's").unwrap();
    fs::write(fx.dir().join("made-by-task"), b"x").unwrap();
    fs::create_dir_all(fx.dir().join("sub/deeper")).unwrap();
    fs::write(fx.dir().join("sub/deeper/file"), b"y").unwrap();
    std::os::unix::fs::symlink(&outside, fx.dir().join("link-out")).unwrap();

    assert_eq!(fx.recycle(), Recycled::Pooled);
    assert!(!fx.dir().exists(), "its old path no longer leads to it");
    assert_eq!(names(&fx.pooled()), ["stderr", "stdout"], "only the two logs are left");
    for log in LOG_FILES {
        assert_eq!(fs::read(fx.pooled().join(log)).unwrap(), b"", "{log} truncated");
    }
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"not the task's", "a symlink's target is untouched");
    assert_eq!(names(&fx.pool), ["c1"], "no staged name is left behind");
}

#[test]
fn owner_and_mode_are_reset_to_what_a_new_directory_gets() {
    let fx = Fixture::new();
    fs::set_permissions(fx.dir(), fs::Permissions::from_mode(0o2700)).unwrap();
    fs::set_permissions(fx.dir().join("stdout"), fs::Permissions::from_mode(0o4606)).unwrap();
    // SAFETY: geteuid takes nothing and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        // As root the test can hand the directory to another user, as `run_as` does.
        for path in [fx.dir(), fx.dir().join("stdout"), fx.dir().join("stderr")] {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        }
    }
    assert_eq!(fx.recycle(), Recycled::Pooled);
    let fresh = fx.root.path().join("fresh");
    fs::create_dir(&fresh).unwrap();
    fs::write(fresh.join("stdout"), b"").unwrap();
    let (dir, log) = (fs::metadata(fx.pooled()).unwrap(), fs::metadata(fx.pooled().join("stdout")).unwrap());
    let (new_dir, new_log) = (fs::metadata(&fresh).unwrap(), fs::metadata(fresh.join("stdout")).unwrap());
    assert_eq!(dir.mode() & 0o7777, new_dir.mode() & 0o7777);
    assert_eq!(log.mode() & 0o7777, new_log.mode() & 0o7777);
    assert_eq!((dir.uid(), dir.gid()), (new_dir.uid(), new_dir.gid()));
    assert_eq!((log.uid(), log.gid()), (new_log.uid(), new_log.gid()));
}

#[test]
fn a_log_file_open_anywhere_keeps_the_directory_out_of_the_pool_untruncated() {
    let fx = Fixture::new();
    // A log read in flight, or a reader the task left behind.
    let reader = File::open(fx.dir().join("stdout")).unwrap();
    assert_eq!(fx.recycle(), Recycled::Remove(fx.staged()));
    assert_eq!(
        fs::read(fx.staged().join("stdout")).unwrap(),
        b"secret out\n",
        "not truncated under a reader"
    );
    drop(reader);
}

#[test]
fn a_hard_linked_log_file_keeps_the_directory_out_of_the_pool() {
    let fx = Fixture::new();
    let link = fx.root.path().join("kept-by-task");
    fs::hard_link(fx.dir().join("stderr"), &link).unwrap();
    assert_eq!(fx.recycle(), Recycled::Remove(fx.staged()));
    assert_eq!(fs::read(&link).unwrap(), b"secret err\n");
}

#[test]
fn a_log_file_replaced_by_a_symlink_or_a_fifo_or_missing_keeps_it_out() {
    let target = tempfile::NamedTempFile::new().unwrap();
    fs::write(target.path(), b"elsewhere").unwrap();
    let symlinked = Fixture::new();
    fs::remove_file(symlinked.dir().join("stdout")).unwrap();
    std::os::unix::fs::symlink(target.path(), symlinked.dir().join("stdout")).unwrap();
    assert_eq!(symlinked.recycle(), Recycled::Remove(symlinked.staged()));
    assert_eq!(fs::read(target.path()).unwrap(), b"elsewhere", "a symlink's target is never truncated");

    let fifo = Fixture::new();
    fs::remove_file(fifo.dir().join("stderr")).unwrap();
    let path =
        std::ffi::CString::new(fifo.dir().join("stderr").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    assert_eq!(fifo.recycle(), Recycled::Remove(fifo.staged()), "no wait for a reader either");

    let missing = Fixture::new();
    fs::remove_file(missing.dir().join("stdout")).unwrap();
    assert_eq!(missing.recycle(), Recycled::Remove(missing.staged()));
}

#[test]
fn a_directory_with_extended_attributes_keeps_it_out() {
    let fx = Fixture::new();
    let path = std::ffi::CString::new(fx.dir().into_os_string().into_encoded_bytes()).unwrap();
    let value = b"x";
    // SAFETY: valid NUL-terminated path and name, a live value buffer.
    let set = unsafe { libc::setxattr(path.as_ptr(), c"user.test".as_ptr(), value.as_ptr().cast(), 1, 0) };
    if set != 0 {
        // A file system without user attributes cannot carry the doubt either.
        return;
    }
    assert_eq!(fx.recycle(), Recycled::Remove(fx.staged()));
}

#[test]
fn without_a_pool_or_with_a_full_one_the_directory_is_removed_where_it_is() {
    let fx = Fixture::new();
    fs::remove_dir(&fx.pool).unwrap();
    assert_eq!(fx.recycle(), Recycled::Remove(fx.dir()), "no pool: recycling is off");
    assert_eq!(fs::read(fx.dir().join("stdout")).unwrap(), b"secret out\n");

    fs::create_dir(&fx.pool).unwrap();
    for n in 0..POOL_CAP {
        fs::create_dir(fx.pool.join(n.to_string())).unwrap();
    }
    assert_eq!(fx.recycle(), Recycled::Remove(fx.dir()), "the pool is full");
    fs::remove_dir(fx.pool.join("0")).unwrap();
    assert_eq!(fx.recycle(), Recycled::Pooled, "room again");
}

#[test]
fn a_container_directory_already_gone_or_a_symlink_in_its_place() {
    let fx = Fixture::new();
    fs::remove_dir_all(fx.dir()).unwrap();
    assert_eq!(fx.recycle(), Recycled::Gone);

    let elsewhere = fx.root.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("stdout"), b"x").unwrap();
    fs::write(elsewhere.join("stderr"), b"y").unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.dir()).unwrap();
    assert_eq!(fx.recycle(), Recycled::Remove(fx.staged()), "the symlink itself is moved, then removed");
    assert!(fs::symlink_metadata(fx.staged()).unwrap().file_type().is_symlink());
    assert_eq!(fs::read(elsewhere.join("stdout")).unwrap(), b"x", "what it points to is untouched");
}
