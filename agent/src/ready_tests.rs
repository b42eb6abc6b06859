//! The pools of things made ahead: what is lent, kept, given back and removed.

use std::sync::Arc;

use slotmarket_common::ids::ContainerId;

use super::{CgroupLeases, ReadyDirs};
use crate::containment::agent_cgroup;

#[test]
fn ready_directories_are_made_taken_refilled_and_leftovers_removed() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().join("ready");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(dir.join("7")).unwrap();
    std::fs::write(dir.join("7").join("stdout"), "old").unwrap();
    let ready = ReadyDirs::default();
    ready.keep(&dir, 2);
    let names = |containers: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(containers)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // The previous process's ready directory is gone.
    assert_eq!(names(&dir), ["0", "1"]);
    let taken = ready.take().unwrap();
    assert_eq!(std::fs::read(taken.path.join("stdout")).unwrap(), b"");
    assert!(taken.path.join("stderr").is_file());
    assert!(ready.wants_more());
    ready.refill(&dir);
    assert!(!ready.wants_more());
    assert!(ready.take().is_some() && ready.take().is_some());
    assert!(ready.take().is_none(), "only as many as kept");
}

/// A cgroup of the test's own, or `None` (said on stderr) where this machine gives no
/// usable cgroup v2.
fn test_cgroup(name: &str, dir: &std::path::Path) -> Option<std::path::PathBuf> {
    agent_cgroup(name, dir).inspect_err(|why| eprintln!("skipped, no cgroup to lend: {why}")).ok()
}

#[test]
fn an_empty_cgroup_is_lent_again_up_to_the_number_kept_and_a_forgotten_one_never() {
    // Real cgroups (the lease holds each one's `cgroup.events` open).
    let dir = tempfile::tempdir().unwrap();
    let Some(base) = test_cgroup("ready-test", dir.path()) else { return };
    let leases = CgroupLeases::new(base.clone());
    leases.keep(1);
    let first = leases.lend(ContainerId(1)).unwrap();
    assert!(Arc::ptr_eq(&leases.lend(ContainerId(1)).unwrap(), &first), "a repeated launch keeps its cgroup");
    let second = leases.lend(ContainerId(2)).unwrap();
    assert_ne!(first.path, second.path, "two live containers never share one");
    leases.give_back_empty(ContainerId(1));
    leases.give_back_empty(ContainerId(2));
    assert!(first.path.is_dir(), "kept for the next container");
    assert!(!second.path.exists(), "more than kept: removed");
    assert!(leases.of(ContainerId(1)).is_none());
    assert!(
        Arc::ptr_eq(&leases.lend(ContainerId(3)).unwrap(), &first),
        "the next container gets the emptied one"
    );
    assert_eq!(leases.forget(ContainerId(3)), Some(first.path.clone()));
    assert!(!first.path.exists(), "one that held processes at its end is removed");
    let fourth = leases.lend(ContainerId(4)).unwrap();
    assert_ne!(fourth.path, first.path, "and its name is never lent again");
    let fifth = leases.lend(ContainerId(5)).unwrap();
    leases.give_back_empty(ContainerId(4));
    leases.close();
    assert!(!fourth.path.exists() && !fifth.path.exists(), "at shutdown the kept and the empty lent ones go");
    leases.give_back_empty(ContainerId(5));
    assert_ne!(
        leases.lend(ContainerId(6)).unwrap().path,
        fifth.path,
        "a lease given back after the shutdown is not kept"
    );
    leases.close();
    std::fs::remove_dir(&base).unwrap();
}

#[test]
fn a_cgroup_reads_populated_while_a_process_is_in_it_and_not_once_removed() {
    let dir = tempfile::tempdir().unwrap();
    let Some(base) = test_cgroup("ready-populated-test", dir.path()) else { return };
    let leases = CgroupLeases::new(base.clone());
    let cgroup = leases.lend(ContainerId(1)).unwrap();
    assert!(!cgroup.populated().unwrap(), "new");
    let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(cgroup.path.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    assert!(cgroup.populated().unwrap(), "read again from the start, the same descriptor sees the process");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(!cgroup.populated().unwrap(), "its process reaped");
    leases.forget(ContainerId(1));
    assert!(!cgroup.path.exists());
    assert!(!cgroup.populated().unwrap(), "removed, through the descriptor still open");
    std::fs::remove_dir(&base).unwrap();
}

#[test]
fn a_recycled_directory_is_lent_before_a_new_one_is_made_and_a_written_one_never() {
    use std::os::unix::fs::MetadataExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ready");
    let ready = ReadyDirs::default();
    ready.keep(&dir, 1);
    ready.recycle_into(&dir).unwrap();
    let pool = dir.join(crate::recycle::POOL);
    // Two removed containers' directories, emptied into the pool; one is written after.
    for name in ["c1", "c2"] {
        std::fs::create_dir(pool.join(name)).unwrap();
        std::fs::write(pool.join(name).join("stdout"), b"").unwrap();
        std::fs::write(pool.join(name).join("stderr"), b"").unwrap();
    }
    std::fs::write(pool.join("c1").join("stderr"), b"written after it was emptied").unwrap();
    let c2 = std::fs::metadata(pool.join("c2")).unwrap().ino();
    // A hidden name is a directory still being checked: never lent.
    std::fs::create_dir(pool.join(".c3")).unwrap();

    let first = ready.take().unwrap();
    ready.refill(&dir);
    let lent = ready.take().unwrap();
    assert_eq!(std::fs::metadata(&lent.path).unwrap().ino(), c2, "the clean pooled directory is lent");
    assert_ne!(lent.path, first.path);
    let mut stdout = &lent.stdout;
    std::io::Write::write_all(&mut stdout, b"next task\n").unwrap();
    assert_eq!(std::fs::read(lent.path.join("stdout")).unwrap(), b"next task\n", "its open file is its log");
    assert!(!pool.join("c1").exists(), "the written one was removed, not lent");
    ready.refill(&dir);
    let made = ready.take().unwrap();
    assert!(std::fs::read_dir(&made.path).unwrap().count() == 2, "then a new one is made");
    assert_eq!(std::fs::read_dir(&pool).unwrap().count(), 1, "only the hidden one is left");

    // A restart's sweep removes the pool with the rest of `ready/`.
    ReadyDirs::default().keep(&dir, 0);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}
