//! Containment tests: parsing of the kernel's files, and real processes that leave their
//! group (`setsid`) being found and killed, by cgroup where this machine allows it and by
//! the process scan everywhere. Every wait is bounded.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::*;

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn the_cgroup2_mount_and_own_cgroup_are_read_from_the_kernel_files() {
    let mountinfo = "\
24 31 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
35 24 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw
36 24 0:31 / /sys/fs/cgroup/cpu rw shared:11 - cgroup cgroup rw,cpu
";
    assert_eq!(cgroup2_mount(mountinfo), Some(PathBuf::from("/sys/fs/cgroup/unified")));
    assert_eq!(cgroup2_mount("24 31 0:22 / /sys rw - sysfs sysfs rw\n"), None);
    let escaped = "35 24 0:30 / /mnt/my\\040cgroups rw - cgroup2 none rw\n";
    assert_eq!(cgroup2_mount(escaped), Some(PathBuf::from("/mnt/my cgroups")));
    assert_eq!(
        own_cgroup("4:memory:/x\n0::/system.slice/agent.service\n"),
        Some("/system.slice/agent.service")
    );
    assert_eq!(own_cgroup("4:memory:/x\n"), None);
}

#[test]
fn agent_cgroup_names_are_stable_per_work_directory() {
    let a = agent_cgroup_name("n1", Path::new("/var/lib/a"));
    assert_eq!(a, agent_cgroup_name("n1", Path::new("/var/lib/a")));
    assert_ne!(a, agent_cgroup_name("n1", Path::new("/var/lib/b")));
    assert!(a.starts_with("slotmarket-agent-n1-") && a.len() == "slotmarket-agent-n1-".len() + 16, "{a}");
}

#[test]
fn environment_entries_match_exactly() {
    let env = b"PATH=/bin\0SLOTMARKET_CONTAINER=c12\0SLOTMARKET_AGENT_DIR=/w/a\0";
    assert!(has_entry(env, CONTAINER_MARKER, b"c12"));
    assert!(!has_entry(env, CONTAINER_MARKER, b"c1"));
    assert!(has_entry(env, AGENT_MARKER, b"/w/a"));
    assert!(!has_entry(env, AGENT_MARKER, b"/w"));
    assert!(!has_entry(b"XSLOTMARKET_CONTAINER=c12\0", CONTAINER_MARKER, b"c12"));
}

#[test]
fn a_scan_reads_each_environment_whole_small_or_larger_than_its_buffer() {
    // One string may hold at most 128 KiB, so the large one is three.
    let part = "x".repeat(ENVIRON_START);
    let small = Command::new("sleep").arg("30").env("SCAN_TEST", "small").spawn().unwrap();
    let large = Command::new("sleep")
        .arg("30")
        .envs([("SCAN_A", &part), ("SCAN_B", &part), ("SCAN_C", &part)])
        .spawn()
        .unwrap();
    let mut children = [small, large];
    let mut environs = Environs::default();
    for child in &children {
        // `spawn` returns at the exec's point of no return, before the kernel has set the
        // new program's environment: until then it reads as empty.
        let deadline = Instant::now() + WAIT;
        let whole = loop {
            let whole = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap();
            if !whole.is_empty() {
                break whole;
            }
            assert!(Instant::now() < deadline, "no environment");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(environs.read(child.id()), Some(&whole[..]));
    }
    // The buffer grew for the large one; a small one read after it is not padded.
    let first = std::fs::read(format!("/proc/{}/environ", children[0].id())).unwrap();
    assert_eq!(environs.read(children[0].id()), Some(&first[..]));
    for child in &mut children {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert_eq!(environs.read(children[0].id()), None, "a reaped process has none");
}

/// Starts `sh -c SCRIPT` in its own group with the container's markers, joining the
/// container's cgroup first when there is one, as the agent's tasks do.
fn spawn_task(containment: &Containment, container: ContainerId, script: &str) -> Child {
    let procs = containment.prepare(container).unwrap().map(|cgroup| cgroup.procs);
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]).envs(containment.markers(container)).process_group(0);
    // SAFETY: the closure only calls `join_cgroup_in_child` (async-signal-safe).
    unsafe {
        command.pre_exec(move || match &procs {
            Some(procs) => join_cgroup_in_child(procs),
            None => Ok(()),
        });
    }
    command.spawn().unwrap()
}

fn marked(containment: &Containment, container: ContainerId) -> Vec<u32> {
    containment.marked_processes(container)
}

fn wait_for_count(containment: &Containment, container: ContainerId, at_least: usize) {
    let deadline = Instant::now() + WAIT;
    while marked(containment, container).len() < at_least {
        assert!(Instant::now() < deadline, "the task's processes did not appear");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until one of `container`'s processes is in a session other than `leader`'s.
pub(crate) fn wait_for_escape(containment: &Containment, container: ContainerId, leader: u32) {
    let deadline = Instant::now() + WAIT;
    let session = session_of(leader);
    let escaped = || {
        let pids = marked(containment, container);
        pids.into_iter().any(|pid| session_of(pid).is_some_and(|s| Some(s) != session))
    };
    while !escaped() {
        assert!(Instant::now() < deadline, "no process of the task left its session");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A task whose child escaped its group with `setsid`, whose leader has already been
/// killed: ending the container leaves nothing.
fn escaped_processes_are_killed(containment: &Containment, container: ContainerId) {
    let mut leader = spawn_task(containment, container, "setsid sleep 300 & sleep 300 & wait");
    wait_for_escape(containment, container, leader.id());
    // Only the leader's group is reachable by signal: as the agent's kill sequence does.
    let _ =
        slotmarket_common::process_group::ProcessGroup::led_by(leader.id()).unwrap().signal(libc::SIGKILL);
    let _ = leader.wait();
    assert!(
        !marked(containment, container).is_empty(),
        "the setsid child should have survived the group kill"
    );
    containment.kill_container(container);
    assert_eq!(marked(containment, container), Vec::<u32>::new());
}

#[test]
fn containers_ending_at_once_share_scans_and_each_loses_what_left_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let containment = Containment::scan_only(dir.path());
    let containers: Vec<ContainerId> = (40..46).map(ContainerId).collect();
    for &container in &containers {
        let mut leader = spawn_task(&containment, container, "setsid sleep 300 & sleep 300 & wait");
        wait_for_escape(&containment, container, leader.id());
        let _ = slotmarket_common::process_group::ProcessGroup::led_by(leader.id())
            .unwrap()
            .signal(libc::SIGKILL);
        let _ = leader.wait();
    }
    std::thread::scope(|scope| {
        for &container in &containers {
            let containment = &containment;
            scope.spawn(move || {
                containment.kill_container(container);
                // Returned only once a scan holding this container has ended.
                assert_eq!(marked(containment, container), Vec::<u32>::new(), "{container}");
            });
        }
    });
    let state = containment.scans.lock();
    assert!(!state.scanning && state.waiting.is_empty());
    assert!(
        state.done <= containers.len() as u64,
        "{} scans for {} containers",
        state.done,
        containers.len()
    );
}

#[test]
fn the_scan_kills_what_left_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let containment = Containment::scan_only(dir.path());
    escaped_processes_are_killed(&containment, ContainerId(7));
}

#[test]
fn a_cgroup_kill_takes_what_left_the_group_or_cgroups_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    match Containment::new(ContainmentMode::Cgroup, "unit", dir.path()) {
        Ok(containment) => {
            assert!(containment.uses_cgroups());
            let base = containment.cgroups.as_ref().unwrap().base().to_path_buf();
            containment.prepare(ContainerId(8)).unwrap();
            let cgroup = containment.cgroup_of(ContainerId(8)).unwrap();
            escaped_processes_are_killed(&containment, ContainerId(8));
            assert!(!cgroup.exists(), "the container's cgroup is removed");
            containment.release();
            assert!(!base.exists(), "the agent's empty cgroup is removed");
        }
        Err(err) => assert!(err.to_string().contains("cgroup v2 is not usable"), "{err}"),
    }
}

#[test]
fn only_an_empty_cgroup_is_released_without_the_kill() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!Containment::scan_only(dir.path()).release_if_empty(ContainerId(1)), "the scan must run");
    let Ok(containment) = Containment::new(ContainmentMode::Cgroup, "release", dir.path()) else {
        return; // No usable cgroup v2 here; the test above checks the refusal.
    };
    // A task that exited and left nothing: released at once, cgroup gone (none is kept).
    let mut done = spawn_task(&containment, ContainerId(3), "true");
    let cgroup = containment.cgroup_of(ContainerId(3)).unwrap();
    let _ = done.wait();
    assert!(containment.release_if_empty(ContainerId(3)));
    assert!(!cgroup.exists());
    assert!(containment.release_if_empty(ContainerId(3)), "an absent cgroup holds nothing");
    // A leader that exited leaving a child in the cgroup: not released, the kill runs.
    let mut leader = spawn_task(&containment, ContainerId(4), "setsid sleep 300 &");
    let cgroup = containment.cgroup_of(ContainerId(4)).unwrap();
    let _ = leader.wait();
    wait_for_count(&containment, ContainerId(4), 1);
    assert!(!containment.release_if_empty(ContainerId(4)));
    assert!(cgroup.exists());
    // Polled, not read once: while the child execs (`sh` -> `setsid` -> `sleep`), its
    // `/proc/PID/environ` reads empty for a moment, so one scan can miss it under load.
    wait_for_count(&containment, ContainerId(4), 1);
    containment.kill_container(ContainerId(4));
    assert_eq!(marked(&containment, ContainerId(4)), Vec::<u32>::new());
    assert!(!cgroup.exists());
    containment.release();
}

#[test]
fn the_sweep_at_start_kills_a_previous_agents_tasks_only() {
    let dir = tempfile::tempdir().unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let previous = Containment::new(ContainmentMode::Auto, "sweep", dir.path()).unwrap();
    let other = Containment::scan_only(other_dir.path());
    let mut leaders = vec![
        spawn_task(&previous, ContainerId(1), "setsid sleep 300 & sleep 300"),
        spawn_task(&previous, ContainerId(2), "sleep 300"),
        spawn_task(&other, ContainerId(1), "sleep 300"),
    ];
    wait_for_escape(&previous, ContainerId(1), leaders[0].id());
    wait_for_count(&other, ContainerId(1), 1);
    // A new agent process on the same work directory.
    let restarted = Containment::new(ContainmentMode::Auto, "sweep", dir.path()).unwrap();
    restarted.sweep_leftovers();
    for container in [ContainerId(1), ContainerId(2)] {
        assert_eq!(marked(&restarted, container), Vec::<u32>::new());
    }
    assert!(!marked(&other, ContainerId(1)).is_empty(), "another agent's task is left alone");
    other.kill_container(ContainerId(1));
    for leader in &mut leaders {
        let _ = leader.kill();
        let _ = leader.wait();
    }
    restarted.release();
}

/// The pids in `cgroup`'s `cgroup.procs`.
fn cgroup_procs(cgroup: &Path) -> Vec<u32> {
    let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
    procs.lines().filter_map(|line| line.parse().ok()).collect()
}

#[test]
fn a_slots_next_task_reuses_the_emptied_cgroup_and_a_late_kill_of_the_first_spares_it() {
    let dir = tempfile::tempdir().unwrap();
    let Ok(containment) = Containment::new(ContainmentMode::Cgroup, "reuse", dir.path()) else {
        return; // No usable cgroup v2 here.
    };
    containment.keep_ready(1);
    let mut first = spawn_task(&containment, ContainerId(1), "true");
    let cgroup = containment.cgroup_of(ContainerId(1)).unwrap();
    let _ = first.wait();
    assert!(containment.is_empty(ContainerId(1)));
    containment.give_back_empty(ContainerId(1));
    let mut second = spawn_task(&containment, ContainerId(2), "exec sleep 300");
    assert_eq!(
        containment.cgroup_of(ContainerId(2)),
        Some(cgroup.clone()),
        "the emptied cgroup is lent again"
    );
    wait_for_count(&containment, ContainerId(2), 1);
    assert_eq!(cgroup_procs(&cgroup), vec![second.id()], "only the new task is in it");
    // A kill of the first container arriving late finds no cgroup of its own any more.
    containment.kill_container(ContainerId(1));
    assert_eq!(second.try_wait().unwrap(), None, "the next task runs on");
    assert!(!containment.is_empty(ContainerId(2)));
    containment.kill_container(ContainerId(2));
    let _ = second.wait();
    assert!(!cgroup.exists(), "a cgroup that held processes at its end is not kept");
    containment.release();
}

#[test]
fn a_cgroup_left_holding_processes_is_never_lent_again() {
    let dir = tempfile::tempdir().unwrap();
    let Ok(containment) = Containment::new(ContainmentMode::Cgroup, "no-reuse", dir.path()) else {
        return;
    };
    containment.keep_ready(1);
    let mut leader = spawn_task(&containment, ContainerId(1), "setsid sleep 300 &");
    let cgroup = containment.cgroup_of(ContainerId(1)).unwrap();
    let _ = leader.wait();
    wait_for_count(&containment, ContainerId(1), 1);
    assert!(!containment.is_empty(ContainerId(1)));
    containment.kill_container(ContainerId(1));
    assert_eq!(marked(&containment, ContainerId(1)), Vec::<u32>::new());
    let mut next = spawn_task(&containment, ContainerId(2), "true");
    assert_ne!(containment.cgroup_of(ContainerId(2)), Some(cgroup.clone()));
    assert!(!cgroup.exists());
    let _ = next.wait();
    containment.kill_container(ContainerId(2));
    containment.release();
}

#[test]
fn a_restarted_agent_removes_the_kept_and_the_lent_cgroups_and_their_processes() {
    let dir = tempfile::tempdir().unwrap();
    let Ok(previous) = Containment::new(ContainmentMode::Cgroup, "restart", dir.path()) else {
        return;
    };
    previous.keep_ready(2);
    let mut running = spawn_task(&previous, ContainerId(1), "sleep 300");
    wait_for_count(&previous, ContainerId(1), 1);
    let base = previous.cgroups.as_ref().unwrap().base().to_path_buf();
    assert_eq!(std::fs::read_dir(&base).unwrap().filter(|e| e.as_ref().unwrap().path().is_dir()).count(), 2);
    // The previous agent is SIGKILLed: nothing of it runs its shutdown.
    let restarted = Containment::new(ContainmentMode::Cgroup, "restart", dir.path()).unwrap();
    restarted.sweep_leftovers();
    assert_eq!(marked(&restarted, ContainerId(1)), Vec::<u32>::new());
    let _ = running.wait();
    let left = std::fs::read_dir(&base).unwrap().filter(|e| e.as_ref().unwrap().path().is_dir()).count();
    assert_eq!(left, 0, "every container cgroup of the previous agent is removed");
    restarted.keep_ready(1);
    let mut next = spawn_task(&restarted, ContainerId(1), "true");
    let _ = next.wait();
    assert!(restarted.release_if_empty(ContainerId(1)));
    restarted.release();
    assert!(!base.exists());
}
