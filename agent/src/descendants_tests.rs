//! The walk over real child processes of the test binary, and the reaper's rules. The test
//! binary does not adopt orphans (it would become the parent of every other test's
//! orphans): the reaper is given its candidates by hand. Every wait is bounded.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use slotmarket_common::process_group::ProcessGroup;

use super::*;

const WAIT: Duration = Duration::from_secs(10);

/// A child leading its own group, killed with its group when dropped.
struct Group(Child);

impl Group {
    fn start(script: &str) -> Group {
        Group(Command::new("/bin/sh").args(["-c", script]).process_group(0).spawn().expect("spawn sh"))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(group) = ProcessGroup::led_by(self.0.id()) {
            let _ = group.signal(libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// The children of `pid`'s threads.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let _ = Lists::default().children_of(Some(pid), &mut out);
    out
}

/// Waits until `check` holds, or fails with `what`.
fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is a zombie (exited, not reaped).
fn is_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

/// Waits until the child `pid` has exited (a zombie) and returns it.
fn exited(pid: u32) -> u32 {
    wait_for("the child to exit", || is_zombie(pid));
    pid
}

/// A child that exits at once and that nobody waits for, as an adopted orphan would be.
fn unwaited_zombie() -> u32 {
    exited(Command::new("/bin/true").spawn().expect("spawn true").id())
}

#[test]
fn a_walk_finds_children_and_their_children_below_them() {
    let group = Group::start("sleep 30 & sleep 30 & wait");
    wait_for("the shell's two sleeps", || children(group.pid()).len() == 2);
    let sleeps = children(group.pid());
    let walk = walk();
    assert!(walk.children.contains(&group.pid()), "{walk:?}");
    let at = |pid| walk.descendants.iter().position(|&p| p == pid);
    let shell = at(group.pid()).expect("the shell is a descendant");
    for sleep in sleeps {
        assert!(at(sleep).is_some_and(|sleep| sleep > shell), "sleep {sleep} after its shell: {walk:?}");
        assert!(!walk.children.contains(&sleep), "a grandchild is no direct child: {walk:?}");
    }
}

#[test]
fn the_reaper_reaps_a_zombie_child_it_did_not_start() {
    let pid = unwaited_zombie();
    // Other tests start children meanwhile, which holds the reaper back for a moment.
    wait_for("the reaper to reap it", || reap_adopted(&[pid]).left.is_empty());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "pid {pid} was reaped");
}

#[test]
fn the_reaper_leaves_a_registered_child_to_its_waiter() {
    let starting = starting();
    let mut child = Command::new("/bin/true").spawn().expect("spawn true");
    let own = starting.started(child.id());
    let pid = exited(child.id());
    assert!(reap_adopted(&[pid]).left.is_empty(), "registered: not an adopted child");
    assert!(is_zombie(pid), "still there for its waiter");
    assert!(child.wait().expect("its waiter reaps it").success());
    drop(own);
}

#[test]
fn a_registration_lasts_while_any_holder_of_the_pid_lives() {
    // A pid reaped and reused at once is registered twice for a moment; the first
    // registration's end must not unregister the second child.
    let pid = u32::MAX - 7;
    let first = starting().started(pid);
    let second = starting().started(pid);
    drop(first);
    assert!(own().contains_key(&pid));
    drop(second);
    assert!(!own().contains_key(&pid));
}

#[test]
fn the_reaper_waits_while_a_child_is_being_started() {
    let pid = unwaited_zombie();
    let starting = starting();
    let reaping = reap_adopted(&[pid]);
    assert_eq!(
        reaping,
        Reaping { left: vec![pid], deferred: true },
        "a child being started could be this one"
    );
    assert!(is_zombie(pid));
    drop(starting);
    wait_for("the reaper to reap it", || reap_adopted(&[pid]).left.is_empty());
}

#[test]
fn the_children_list_is_not_taken_from_a_read_that_a_reap_may_overlap() {
    let child = Group::start("sleep 30");
    let reap = reaping();
    assert_eq!(own_children_between_reaps(), None, "a reap of ours is under way");
    drop(reap);
    // Other tests reap their children meanwhile: a clean read comes within a few tries.
    wait_for("a read no reap overlapped", || {
        own_children_between_reaps().is_some_and(|children| children.contains(&child.pid()))
    });
}

#[test]
fn a_child_tokio_reaps_leaves_a_reap_under_way_only_if_dropped_unreaped() {
    let reaped = starting().started_reaped_elsewhere(u32::MAX - 9);
    reaped.reaped();
    assert!(!own().contains_key(&(u32::MAX - 9)));
    wait_for("a read no reap overlapped", || own_children_between_reaps().is_some());
    drop(starting().started_reaped_elsewhere(u32::MAX - 11));
    assert_eq!(own_children_between_reaps(), None, "tokio's orphan queue may reap it at any moment");
    // The agent keeps that reap under way for good; the other tests here need the
    // counters even again.
    REAPS_ENDED.fetch_add(1, Ordering::SeqCst);
}
