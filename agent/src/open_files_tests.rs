//! The raised limit, and a task's limit put back.

use std::ffi::{OsStr, OsString};

use super::{TASKS_LIMIT, raise};
use crate::spawn::{SpawnFailure, TaskCommand, spawn};

fn soft_limit() -> libc::rlim_t {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    limit.rlim_cur
}

#[tokio::test]
async fn the_agent_runs_at_its_hard_limit_and_a_task_gets_the_soft_limit_back() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    if limit.rlim_max <= 256 {
        eprintln!("skipped: the hard limit on open files is {}", limit.rlim_max);
        return;
    }
    // As a service manager would start it: a soft limit below the hard one. Lowering it is
    // harmless to the other tests of this process (none holds 200 descriptors).
    let started = libc::rlimit { rlim_cur: 200, rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads the struct given.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &started) }, 0);
    let raised = raise().unwrap();
    assert!(raised > 200 && raised <= limit.rlim_max, "{raised}");
    assert_eq!(soft_limit(), raised);
    assert_eq!(TASKS_LIMIT.get().map(|l| l.rlim_cur), Some(200));

    let dir = tempfile::tempdir().unwrap();
    let outputs = (
        std::fs::File::create(dir.path().join("stdout")).unwrap(),
        std::fs::File::create(dir.path().join("stderr")).unwrap(),
    );
    let argv = [OsStr::new("sh"), OsStr::new("-c"), OsStr::new("ulimit -n")];
    let env: [(OsString, OsString); 0] = [];
    let command =
        TaskCommand::new(OsStr::new("/bin/sh"), &argv, &env, dir.path(), outputs, None, None).unwrap();
    let mut process = match spawn(&command) {
        Ok(process) => process,
        Err(SpawnFailure::Unsupported) => return,
        Err(SpawnFailure::Failed(err)) => panic!("spawn failed: {err}"),
    };
    let status =
        tokio::time::timeout(std::time::Duration::from_secs(10), process.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(dir.path().join("stdout")).unwrap().trim(), "200");
}
