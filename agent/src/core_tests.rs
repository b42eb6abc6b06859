//! Unit tests of `AgentCore`: launches accepted and refused, transitions reported in
//! order, kills, and what `Register` would carry. Nothing is spawned.

use std::collections::BTreeMap;

use slotmarket_common::container::ContainerState::{self, *};
use slotmarket_common::ids::{AttemptId, ContainerId, JobId, StageId, TaskId};
use slotmarket_common::protocol::{ContainerReport, Launch};
use slotmarket_common::spec::{SlotKind, TaskVars};
use slotmarket_common::time::Timestamp;

use super::{AgentAction, AgentCore, AgentEvent, RECENT_FINISHES, TaskExit};

fn launch(container: u64, slot: SlotKind) -> Launch {
    let task = TaskId { job: JobId(1), stage: StageId(0), index: container as u32 };
    Launch {
        container: ContainerId(container),
        task,
        attempt: AttemptId(1),
        slot,
        command: "true".into(),
        vars: TaskVars {
            job: JobId(1),
            stage: "map".into(),
            task: task.index,
            tasks: 10,
            attempt: AttemptId(1),
            input: None,
            stage_tasks: BTreeMap::new().into(),
        },
        account: "alice".into(),
    }
}

/// Drives a core with a clock that advances one second per event, and records actions.
struct Harness {
    core: AgentCore,
    now: Timestamp,
    actions: Vec<AgentAction>,
}

impl Harness {
    fn new(map: u32, reduce: u32) -> Harness {
        Harness { core: AgentCore::new(map, reduce), now: Timestamp::from_secs(100), actions: Vec::new() }
    }

    fn handle(&mut self, event: AgentEvent) {
        self.now = self.now + std::time::Duration::from_secs(1);
        let actions = self.core.handle(self.now, event);
        self.actions.extend(actions);
    }

    fn launch(&mut self, launches: Vec<Launch>) {
        self.handle(AgentEvent::Launch(launches));
    }

    fn started(&mut self, c: u64) {
        self.handle(AgentEvent::Started { container: ContainerId(c), pid: 1000 + c as u32 });
    }

    fn exited(&mut self, c: u64, exit: TaskExit) {
        self.handle(AgentEvent::Exited { container: ContainerId(c), exit, stderr_tail: None });
    }

    /// Takes every recorded action; the test asserts on all of them.
    fn take(&mut self) -> Vec<AgentAction> {
        std::mem::take(&mut self.actions)
    }

    /// Takes the recorded actions, which must all be reports, as (container, state).
    fn take_reports(&mut self) -> Vec<(u64, ContainerState)> {
        self.take()
            .into_iter()
            .map(|a| match a {
                AgentAction::Report(r) => (r.container.0, r.state),
                other => panic!("expected only reports, got {other:?}"),
            })
            .collect()
    }

    fn assert_no_actions(&self) {
        assert!(self.actions.is_empty(), "unexpected actions: {:?}", self.actions);
    }
}

fn report_of(action: &AgentAction) -> &ContainerReport {
    match action {
        AgentAction::Report(r) => r,
        other => panic!("expected a report, got {other:?}"),
    }
}

#[test]
fn an_accepted_launch_is_acquired_then_spawned() {
    let mut h = Harness::new(2, 1);
    h.launch(vec![launch(1, SlotKind::Map)]);
    let actions = h.take();
    assert_eq!(actions.len(), 2);
    let acquired = report_of(&actions[0]);
    assert_eq!((acquired.container, acquired.state), (ContainerId(1), Acquired));
    assert_eq!(acquired.at, Timestamp::from_secs(101));
    assert_eq!(actions[1], AgentAction::Spawn(launch(1, SlotKind::Map)));
    assert_eq!(h.core.slots().pool(SlotKind::Map).used(), 1);
}

#[test]
fn transitions_are_reported_in_order_through_completed() {
    let mut h = Harness::new(1, 1);
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.take();
    h.started(1);
    h.exited(1, TaskExit::Code(0));
    let actions = h.take();
    let states: Vec<_> = actions.iter().map(|a| report_of(a).state).collect();
    assert_eq!(states, [Running, Completed]);
    assert_eq!(report_of(&actions[1]).exit_code, Some(0));
    assert_eq!(h.core.live_count(), 0);
    assert_eq!(h.core.slots().pool(SlotKind::Map).used(), 0);
}

#[test]
fn a_nonzero_exit_or_a_signal_is_failed_with_a_message() {
    let mut h = Harness::new(2, 0);
    h.launch(vec![launch(1, SlotKind::Map), launch(2, SlotKind::Map)]);
    h.started(1);
    h.started(2);
    h.take();
    h.exited(1, TaskExit::Code(3));
    h.exited(2, TaskExit::Signal(9));
    let actions = h.take();
    let failed = report_of(&actions[0]);
    assert_eq!((failed.state, failed.exit_code), (Failed, Some(3)));
    assert_eq!(failed.message.as_deref(), Some("exited with code 3"));
    let signalled = report_of(&actions[1]);
    assert_eq!((signalled.state, signalled.exit_code), (Failed, None));
    assert_eq!(signalled.message.as_deref(), Some("terminated by signal 9"));
}

#[test]
fn a_failure_carries_the_tail_of_its_stderr() {
    let mut h = Harness::new(2, 0);
    h.launch(vec![launch(1, SlotKind::Map), launch(2, SlotKind::Map)]);
    h.started(1);
    h.started(2);
    h.take();
    let tail = Some("sh: 1: slotmarket-task: not found".to_string());
    h.handle(AgentEvent::Exited {
        container: ContainerId(1),
        exit: TaskExit::Code(127),
        stderr_tail: tail.clone(),
    });
    h.handle(AgentEvent::Exited { container: ContainerId(2), exit: TaskExit::Signal(6), stderr_tail: tail });
    let actions = h.take();
    let failed = report_of(&actions[0]);
    assert_eq!((failed.state, failed.exit_code), (Failed, Some(127)));
    assert_eq!(failed.message.as_deref(), Some("stderr: sh: 1: slotmarket-task: not found"));
    let signalled = report_of(&actions[1]);
    assert_eq!(
        signalled.message.as_deref(),
        Some("terminated by signal 6; stderr: sh: 1: slotmarket-task: not found")
    );
}

#[test]
fn a_launch_without_a_free_slot_of_its_kind_is_failed() {
    let mut h = Harness::new(1, 1);
    h.launch(vec![launch(1, SlotKind::Map), launch(2, SlotKind::Map), launch(3, SlotKind::Reduce)]);
    let actions = h.take();
    let kinds: Vec<_> = actions
        .iter()
        .map(|a| match a {
            AgentAction::Report(r) => (r.container.0, Some(r.state)),
            AgentAction::Spawn(l) => (l.container.0, None),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(kinds, [(1, Some(Acquired)), (1, None), (2, Some(Killed)), (3, Some(Acquired)), (3, None)]);
    let refused = report_of(&actions[2]);
    assert_eq!(refused.message.as_deref(), Some("no free map slot: 1 of 1 in use"));
    assert_eq!(h.core.live_count(), 2);
}

#[test]
fn a_duplicate_container_id_is_refused_and_its_real_state_re_reported() {
    let mut h = Harness::new(4, 0);
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.started(1);
    h.take();
    h.launch(vec![launch(1, SlotKind::Map)]);
    assert_eq!(h.take_reports(), [(1, Running)]);
    assert_eq!(h.core.slots().pool(SlotKind::Map).used(), 1);

    // Once finished it is still recognised: it is never run a second time.
    h.exited(1, TaskExit::Code(0));
    h.take();
    h.launch(vec![launch(1, SlotKind::Map)]);
    assert_eq!(h.take_reports(), [(1, Completed)]);
    assert_eq!(h.core.live_count(), 0);
}

#[test]
fn a_container_id_reused_for_another_task_is_refused_as_that_tasks_ended_attempt() {
    let mut h = Harness::new(4, 0);
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.started(1);
    h.take();
    // A master that lost its state hands out c1 again, for a task of a job of its own.
    let mut reused = launch(1, SlotKind::Map);
    reused.task = TaskId { job: JobId(7), stage: StageId(0), index: 0 };
    h.launch(vec![reused.clone()]);
    let actions = h.take();
    assert_eq!(actions.len(), 1, "{actions:?}");
    let refused = report_of(&actions[0]);
    assert_eq!(
        (refused.container, refused.task, refused.attempt),
        (ContainerId(1), reused.task, AttemptId(1))
    );
    assert_eq!(refused.state, Killed, "refused, not failed: the task runs again under a new id");
    assert_eq!(refused.message.as_deref(), Some("container id c1 is already in use here by j1.s0.t1 (a1)"));
    // The container that holds the id runs on untouched, and is still re-reported as its own.
    assert_eq!(h.core.live_count(), 1);
    assert_eq!(h.core.slots().pool(SlotKind::Map).used(), 1);
    assert_eq!(h.core.live_containers()[0].task, launch(1, SlotKind::Map).task);
    h.exited(1, TaskExit::Code(0));
    assert_eq!(h.take_reports(), [(1, Completed)]);
    // A finished one is protected the same way.
    reused.attempt = AttemptId(2);
    h.launch(vec![reused]);
    assert_eq!(h.take_reports(), [(1, Killed)]);
    assert_eq!(h.core.live_count(), 0);
}

#[test]
fn killing_a_running_container_reports_killed_with_the_reason() {
    let mut h = Harness::new(1, 0);
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.started(1);
    h.take();
    h.handle(AgentEvent::Kill { container: ContainerId(1), reason: "preempted: over share".into() });
    assert_eq!(h.take(), [AgentAction::KillGroup { container: ContainerId(1) }]);
    // A second kill while the sequence runs changes nothing.
    h.handle(AgentEvent::Kill { container: ContainerId(1), reason: "again".into() });
    h.assert_no_actions();
    // The group died of SIGTERM; that is the kill, not a failure.
    h.exited(1, TaskExit::Signal(15));
    let actions = h.take();
    let killed = report_of(&actions[0]);
    assert_eq!(killed.state, Killed);
    assert_eq!(killed.message.as_deref(), Some("preempted: over share"));
    assert_eq!(h.core.slots().pool(SlotKind::Map).used(), 0);
}

#[test]
fn a_container_killed_before_it_started_goes_straight_to_killed() {
    let mut h = Harness::new(1, 0);
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.take();
    h.handle(AgentEvent::Kill { container: ContainerId(1), reason: "cancelled".into() });
    assert_eq!(h.take(), [AgentAction::KillGroup { container: ContainerId(1) }]);
    h.started(1);
    h.assert_no_actions();
    h.exited(1, TaskExit::Signal(9));
    assert_eq!(h.take_reports(), [(1, Killed)]);

    // If the spawn is abandoned instead, the outcome is still the kill.
    h.launch(vec![launch(2, SlotKind::Map)]);
    h.handle(AgentEvent::Kill { container: ContainerId(2), reason: "cancelled".into() });
    h.take();
    h.handle(AgentEvent::SpawnFailed { container: ContainerId(2), error: "killed before start".into() });
    assert_eq!(h.take_reports(), [(2, Killed)]);
}

#[test]
fn kills_of_unknown_or_finished_containers_are_ignored() {
    let mut h = Harness::new(1, 0);
    h.handle(AgentEvent::Kill { container: ContainerId(9), reason: "x".into() });
    h.assert_no_actions();
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.started(1);
    h.exited(1, TaskExit::Code(0));
    h.take();
    h.handle(AgentEvent::Kill { container: ContainerId(1), reason: "late".into() });
    h.assert_no_actions();
}

#[test]
fn a_spawn_failure_is_failed_and_frees_the_slot() {
    let mut h = Harness::new(1, 0);
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.take();
    h.handle(AgentEvent::SpawnFailed { container: ContainerId(1), error: "unknown placeholder {x}".into() });
    let actions = h.take();
    assert_eq!(report_of(&actions[0]).state, Failed);
    assert_eq!(report_of(&actions[0]).message.as_deref(), Some("unknown placeholder {x}"));
    assert_eq!(h.core.slots().pool(SlotKind::Map).free(), 1);
}

#[test]
fn a_registration_lists_recent_finishes_too() {
    let mut h = Harness::new(2, 0);
    h.launch(vec![launch(1, SlotKind::Map), launch(2, SlotKind::Map)]);
    h.started(1);
    h.started(2);
    h.exited(2, TaskExit::Code(0));
    let listed = |h: &Harness, at| -> Vec<_> {
        h.core.registration_reports(at).iter().map(|r| (r.container.0, r.state)).collect()
    };
    // The finish may not have reached the master; the next Register says so.
    assert_eq!(listed(&h, h.now), [(1, Running), (2, Completed)]);
    let much_later = h.now + RECENT_FINISHES + std::time::Duration::from_secs(1);
    assert_eq!(listed(&h, much_later), [(1, Running)]);
}

#[test]
fn live_containers_carry_the_last_report_of_each_live_container() {
    let mut h = Harness::new(3, 0);
    h.launch(vec![launch(1, SlotKind::Map), launch(2, SlotKind::Map), launch(3, SlotKind::Map)]);
    h.started(1);
    h.started(3);
    h.exited(3, TaskExit::Code(0));
    let live: Vec<_> = h.core.live_containers().iter().map(|r| (r.container.0, r.state)).collect();
    assert_eq!(live, [(1, Running), (2, Acquired)]);
    assert_eq!(h.core.live_count(), 2);
}

#[test]
fn shutdown_kills_everything_and_refuses_new_launches() {
    let mut h = Harness::new(2, 0);
    h.launch(vec![launch(1, SlotKind::Map), launch(2, SlotKind::Map)]);
    h.started(1);
    h.take();
    h.handle(AgentEvent::Shutdown);
    assert_eq!(
        h.take(),
        [
            AgentAction::KillGroup { container: ContainerId(1) },
            AgentAction::KillGroup { container: ContainerId(2) }
        ]
    );
    h.launch(vec![launch(3, SlotKind::Map)]);
    let actions = h.take();
    assert_eq!(report_of(&actions[0]).state, Killed);
    assert_eq!(report_of(&actions[0]).message.as_deref(), Some("agent is shutting down"));
    h.exited(1, TaskExit::Signal(15));
    h.handle(AgentEvent::SpawnFailed { container: ContainerId(2), error: "killed before start".into() });
    assert_eq!(h.take_reports(), [(1, Killed), (2, Killed)]);
    assert_eq!(h.core.live_count(), 0);
}

#[test]
fn events_for_unknown_containers_change_nothing() {
    let mut h = Harness::new(1, 0);
    h.started(7);
    h.exited(7, TaskExit::Code(0));
    h.handle(AgentEvent::SpawnFailed { container: ContainerId(7), error: "x".into() });
    h.assert_no_actions();
    assert_eq!(h.core.slots().used(), 0);
}

#[test]
fn every_report_is_an_allowed_transition_from_the_previous_one() {
    let mut h = Harness::new(1, 0);
    h.launch(vec![launch(1, SlotKind::Map)]);
    h.started(1);
    h.handle(AgentEvent::Kill { container: ContainerId(1), reason: "r".into() });
    h.exited(1, TaskExit::Code(143));
    let states: Vec<_> = h
        .take()
        .iter()
        .filter_map(|a| match a {
            AgentAction::Report(r) => Some(r.state),
            _ => None,
        })
        .collect();
    assert_eq!(states, [Acquired, Running, Killed]);
    let mut previous = Allocated;
    for state in states {
        assert!(previous.can_become(state), "{previous} -> {state}");
        previous = state;
    }
}

#[test]
fn the_core_stays_pure() {
    // The light enforcement from STYLE: the core must not reach for I/O or the clock.
    let source = include_str!("core.rs");
    for forbidden in ["tokio", "quinn", "std::fs", "Instant::now", "SystemTime::now", "thread_rng"] {
        assert!(!source.contains(forbidden), "core.rs mentions {forbidden}");
    }
}
