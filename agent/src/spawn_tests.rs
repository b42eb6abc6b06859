//! Real processes born into a cgroup: where they run, what they get, how they end.
//! Skipped (with a pass) where this machine gives no usable cgroup v2.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::Duration;

use slotmarket_common::ids::ContainerId;

use super::{SpawnFailure, TaskCommand, TaskProcess, spawn};
use crate::containment::{Containment, ContainmentMode};

const WAIT: Duration = Duration::from_secs(10);

/// Starts `sh -c script` in `container`'s new cgroup with output in `dir`.
fn start(containment: &Containment, container: ContainerId, dir: &Path, script: &str) -> TaskProcess {
    containment.prepare(container).unwrap();
    let cgroup = containment.cgroup_dir(container).unwrap().unwrap();
    let outputs = (
        std::fs::File::create(dir.join("stdout")).unwrap(),
        std::fs::File::create(dir.join("stderr")).unwrap(),
    );
    let env = [(OsString::from("SPAWN_TEST"), OsString::from("seen"))];
    let args = [OsStr::new("-c"), OsStr::new(script)];
    let command = TaskCommand::new(OsStr::new("/bin/sh"), &args, &env, dir, outputs, cgroup, None).unwrap();
    match spawn(&command) {
        Ok(process) => process,
        Err(SpawnFailure::Unsupported) => panic!("clone3 refused"),
        Err(SpawnFailure::Failed(err)) => panic!("spawn failed: {err}"),
    }
}

fn cgroups(dir: &Path) -> Option<Containment> {
    Containment::new(ContainmentMode::Cgroup, "spawn-test", dir).ok()
}

#[tokio::test]
async fn a_task_is_born_in_its_cgroup_with_its_environment_and_directory() {
    let dir = tempfile::tempdir().unwrap();
    let Some(containment) = cgroups(&dir.path().join("work")) else { return };
    let script = "grep ^0:: /proc/self/cgroup; echo \"$SPAWN_TEST\"; pwd; echo err >&2; exit 3";
    let mut process = start(&containment, ContainerId(21), dir.path(), script);
    let status = tokio::time::timeout(WAIT, process.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(3));
    let out = std::fs::read_to_string(dir.path().join("stdout")).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("0::/") && lines[0].ends_with("/c21"), "{out}");
    assert_eq!(lines[1], "seen");
    assert_eq!(Path::new(lines[2]).canonicalize().unwrap(), dir.path().canonicalize().unwrap());
    assert_eq!(std::fs::read_to_string(dir.path().join("stderr")).unwrap(), "err\n");
    containment.kill_container(ContainerId(21));
    containment.release();
}

#[tokio::test]
async fn a_killed_task_reports_the_signal_and_a_bad_program_fails_the_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let Some(containment) = cgroups(&dir.path().join("work")) else { return };
    let mut process = start(&containment, ContainerId(22), dir.path(), "sleep 300");
    // SAFETY: getpgid has no memory-safety preconditions.
    let pgid = unsafe { libc::getpgid(process.id() as libc::pid_t) };
    assert_eq!(pgid, process.id() as libc::pid_t, "leads its own process group");
    process.kill();
    let status = tokio::time::timeout(WAIT, process.wait()).await.unwrap().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
    containment.kill_container(ContainerId(22));

    containment.prepare(ContainerId(23)).unwrap();
    let cgroup = containment.cgroup_dir(ContainerId(23)).unwrap().unwrap();
    let outputs = (tempfile::tempfile().unwrap(), tempfile::tempfile().unwrap());
    let missing = dir.path().join("no-such-program");
    let command = TaskCommand::new(missing.as_os_str(), &[], &[], dir.path(), outputs, cgroup, None).unwrap();
    match spawn(&command) {
        Err(SpawnFailure::Failed(err)) => assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}"),
        Err(SpawnFailure::Unsupported) => {}
        Ok(_) => panic!("a missing program started"),
    }
    containment.kill_container(ContainerId(23));
    containment.release();
}
