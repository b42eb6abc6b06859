//! The pipeline seen from the actor: launches go out before their batch is durable,
//! replies and the watch update announcing a job's end only after the syncer reported
//! it; after a power cut that lost a suffix, a task launched in it is killed, never
//! adopted, and its job id is never issued again.

use std::path::Path;

use slotmarket_common::container::ContainerState;
use slotmarket_common::identity::Role;
use slotmarket_common::spec::JobSpec;

use super::test_support::{register_node, report_input};
use super::*;
use crate::core::CoreConfig;
use crate::server::DEFAULT_HEARTBEAT_INTERVAL;
use crate::server::launches::launch_budget;
use crate::store::DATABASE_FILE;
use slotmarket_common::protocol::DEFAULT_MAX_FRAME;

const SPEC: &str =
    "name = \"one\"\n[[stage]]\nname = \"map\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"\n";

fn actor_on(dir: &Path, container_epoch: u64) -> Actor {
    let store = Store::open(dir).unwrap();
    let core = Core::new(CoreConfig { container_epoch, ..CoreConfig::default() });
    let mut actor =
        Actor::new(core, store, DEFAULT_HEARTBEAT_INTERVAL, launch_budget(DEFAULT_MAX_FRAME)).unwrap();
    actor.recover().unwrap();
    actor
}

/// A fresh actor on `dir` with one registered one-slot node, its `Registered` read.
fn actor_with_a_node(dir: &Path) -> (Actor, AgentId, mpsc::UnboundedReceiver<MasterToAgent>) {
    let mut actor = actor_on(dir, 0);
    let (agent, mut outbound) = register_node(&mut actor, 1, Vec::new());
    assert!(matches!(outbound.try_recv(), Ok(MasterToAgent::Registered { .. })));
    (actor, agent, outbound)
}

fn alice() -> Identity {
    Identity { role: Role::User, principal: "alice".into() }
}

/// Submits one `true` task without waiting for durability; returns the reply's receiver.
fn submit(actor: &mut Actor) -> oneshot::Receiver<Response> {
    let (reply, reply_rx) = oneshot::channel();
    let request = Request::Submit { spec: JobSpec::from_toml(SPEC).unwrap() };
    let commands = actor.on_input(Input::Request { caller: alice(), request, reply });
    actor.execute(commands).unwrap();
    reply_rx
}

fn report(actor: &mut Actor, agent: AgentId, launch: &Launch, state: ContainerState) {
    let commands = actor.on_input(report_input(actor, agent, launch, state));
    actor.execute(commands).unwrap();
}

fn launched(outbound: &mut mpsc::UnboundedReceiver<MasterToAgent>) -> Launch {
    let next = outbound.try_recv();
    let Ok(MasterToAgent::Launch(launches)) = next else { panic!("no launch: {next:?}") };
    launches[0].clone()
}

fn state_of(update: &Option<Response>) -> Option<JobState> {
    match update {
        Some(Response::Job(status)) => Some(status.summary.state),
        _ => None,
    }
}

#[test]
fn a_submits_launch_goes_out_at_once_and_its_reply_and_the_jobs_end_wait_for_the_syncer() {
    let dir = tempfile::tempdir().unwrap();
    let (mut actor, agent, mut outbound) = actor_with_a_node(dir.path());

    let mut reply = submit(&mut actor);
    let launch = launched(&mut outbound);
    assert!(reply.try_recv().is_err(), "the reply waits for the batch's sync");
    assert!(!actor.all_durable());
    assert!(actor.pipeline.lazy_at.is_none(), "a held reply asks the syncer at once");
    actor.await_syncer();
    let Ok(Response::Submitted { job }) = reply.try_recv() else { panic!("not submitted") };
    assert_eq!(job, launch.task.job);

    let (updates, mut reader) = watch::channel(None);
    let commands = actor.on_input(Input::Watch { caller: alice(), job, updates });
    actor.execute(commands).unwrap();
    report(&mut actor, agent, &launch, ContainerState::Acquired);
    assert!(actor.pipeline.lazy_at.is_some(), "a step acknowledging nothing is synced later");
    report(&mut actor, agent, &launch, ContainerState::Running);
    assert_eq!(state_of(&reader.borrow_and_update()), Some(JobState::Running), "progress goes out at once");
    report(&mut actor, agent, &launch, ContainerState::Completed);
    assert_eq!(actor.core.view().job_state(job), Some(JobState::Completed));
    assert!(actor.pipeline.lazy_at.is_none(), "a job's end is synced at once");
    assert!(!reader.has_changed().unwrap(), "the job's end waits for its batch's sync");
    // A watch opened now sees the ended job: that, too, waits for the sync.
    let (updates, mut late) = watch::channel(None);
    let commands = actor.on_input(Input::Watch { caller: alice(), job, updates });
    actor.execute(commands).unwrap();
    assert!(!late.has_changed().unwrap(), "a new watch's first update announces the end: held");
    actor.await_syncer();
    assert_eq!(state_of(&reader.borrow_and_update()), Some(JobState::Completed));
    assert_eq!(state_of(&late.borrow_and_update()), Some(JobState::Completed));
    assert!(!actor.watchers.contains_key(&job), "the ended job's watcher is gone");
}

#[test]
fn after_a_lost_suffix_its_launched_task_is_killed_and_its_job_id_is_never_issued_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = actor_on(dir.path(), 0);
    let (agent, mut outbound) = register_node(&mut first, 1, Vec::new());
    assert!(matches!(outbound.try_recv(), Ok(MasterToAgent::Registered { .. })));
    let mut reply = submit(&mut first);
    let done = launched(&mut outbound);
    for state in [ContainerState::Acquired, ContainerState::Running, ContainerState::Completed] {
        report(&mut first, agent, &done, state);
    }
    first.sync_now().unwrap();
    assert!(matches!(reply.try_recv(), Ok(Response::Submitted { .. })));

    // The disk as a power cut would leave it: everything up to here was synced.
    let image = tempfile::tempdir().unwrap();
    for name in [DATABASE_FILE.to_string(), format!("{DATABASE_FILE}-wal")] {
        std::fs::copy(dir.path().join(&name), image.path().join(&name)).unwrap();
    }
    // A submit whose batch the power cut takes: its task was launched, its reply held.
    let mut lost_reply = submit(&mut first);
    let lost = launched(&mut outbound);
    assert!(lost_reply.try_recv().is_err(), "never acknowledged");
    assert!(lost.task.job > done.task.job);
    std::mem::forget(first);

    // The next lifetime (a later container epoch, as the start time gives) on that disk.
    let mut second = actor_on(image.path(), 1);
    assert_eq!(second.core.view().job_state(lost.task.job), None, "the lost job is not in the store");
    let running = ContainerReport {
        container: lost.container,
        task: lost.task,
        attempt: lost.attempt,
        state: ContainerState::Running,
        at: second.clock.now(),
        exit_code: None,
        message: None,
    };
    let (_, mut outbound) = register_node(&mut second, 1, vec![running]);
    assert!(matches!(outbound.try_recv(), Ok(MasterToAgent::Registered { .. })));
    let Ok(MasterToAgent::Kill { container, .. }) = outbound.try_recv() else { panic!("not killed") };
    assert_eq!(container, lost.container, "the unknown container is killed, not adopted");

    let mut reply = submit(&mut second);
    second.await_syncer();
    let Ok(Response::Submitted { job }) = reply.try_recv() else { panic!("not submitted") };
    assert!(job.0 > durable::JOB_ID_BLOCK, "{job} is above every id the first lifetime reserved");
    assert_ne!(job, lost.task.job);
}

/// Submits one `true` task as `submit --wait` does (`SubmitWatch`); returns the reply's
/// receiver and the watch's.
fn submit_watch(actor: &mut Actor) -> (oneshot::Receiver<Response>, watch::Receiver<Option<Response>>) {
    let (reply, reply_rx) = oneshot::channel();
    let (updates, updates_rx) = watch::channel(None);
    let spec = JobSpec::from_toml(SPEC).unwrap();
    let commands = actor.on_input(Input::SubmitWatch { caller: alice(), spec, reply, updates });
    actor.execute(commands).unwrap();
    (reply_rx, updates_rx)
}

#[test]
fn a_submit_watchs_id_waits_for_its_batch_without_a_sync_of_its_own_and_its_end_for_the_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (mut actor, agent, mut outbound) = actor_with_a_node(dir.path());
    let (before, _) = actor.committed_and_requested();

    let (mut reply, mut updates) = submit_watch(&mut actor);
    let launch = launched(&mut outbound);
    let (admitted, requested) = actor.committed_and_requested();
    assert_eq!(admitted, before + 1);
    assert!(reply.try_recv().is_err(), "the id waits for the admission's batch");
    assert_eq!(requested, before, "the id asks for no sync of its own");
    assert!(actor.pipeline.lazy_at.is_some(), "it goes out with the lazy sync at the latest");
    actor.on_durable(Ok(before)).unwrap();
    assert!(reply.try_recv().is_err(), "an earlier batch's sync does not release it");

    // The lazy sync comes due (a long job): the id goes out, the job still runs.
    actor.request_sync();
    actor.await_syncer();
    assert_eq!(actor.syncs(), 1);
    let Ok(Response::Submitted { job }) = reply.try_recv() else { panic!("not submitted") };
    assert_eq!(job, launch.task.job);
    assert_eq!(state_of(&updates.borrow_and_update()), Some(JobState::Pending), "the first update");

    report(&mut actor, agent, &launch, ContainerState::Acquired);
    report(&mut actor, agent, &launch, ContainerState::Running);
    assert_eq!(state_of(&updates.borrow_and_update()), Some(JobState::Running), "progress goes out at once");
    report(&mut actor, agent, &launch, ContainerState::Completed);
    assert!(!updates.has_changed().unwrap(), "the job's end waits for its batch's sync");
    assert!(actor.pipeline.lazy_at.is_none(), "a job's end is synced at once");
    actor.await_syncer();
    assert_eq!(actor.syncs(), 2);
    assert_eq!(state_of(&updates.borrow_and_update()), Some(JobState::Completed));
    assert!(updates.has_changed().is_err(), "the stream ends after the job's end");
}

#[test]
fn a_short_jobs_submit_watch_is_answered_in_full_after_one_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (mut actor, agent, mut outbound) = actor_with_a_node(dir.path());

    let (mut reply, mut updates) = submit_watch(&mut actor);
    let launch = launched(&mut outbound);
    for state in [ContainerState::Acquired, ContainerState::Running, ContainerState::Completed] {
        report(&mut actor, agent, &launch, state);
        assert!(reply.try_recv().is_err(), "the id waits for a sync ({state})");
    }
    let job = launch.task.job;
    assert_eq!(actor.core.view().job_state(job), Some(JobState::Completed));
    let (committed, requested) = actor.committed_and_requested();
    assert_eq!(requested, committed, "the end asked for every batch at once");
    actor.await_syncer();
    assert_eq!(actor.syncs(), 1, "one sync covered the admission and the end");
    assert!(matches!(reply.try_recv(), Ok(Response::Submitted { job: j }) if j == job));
    assert_eq!(state_of(&updates.borrow_and_update()), Some(JobState::Completed));
    assert!(!actor.watchers.contains_key(&job), "the ended job's watcher is gone");
    assert!(actor.submit_watches.is_empty());
}

#[test]
fn a_refused_submit_watch_is_answered_and_watches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut actor = actor_on(dir.path(), 0);
    let (reply, reply_rx) = oneshot::channel();
    let (updates, updates_rx) = watch::channel(None);
    let mut spec = JobSpec::from_toml(SPEC).unwrap();
    spec.after.push(JobId(999));
    let commands = actor.on_input(Input::SubmitWatch { caller: alice(), spec, reply, updates });
    actor.execute(commands).unwrap();
    actor.await_syncer();
    let mut reply_rx = reply_rx;
    assert!(matches!(reply_rx.try_recv(), Ok(Response::Error(_))), "refused: after an unknown job");
    assert!(actor.submit_watches.is_empty() && actor.watchers.is_empty());
    assert!(updates_rx.has_changed().is_err(), "the watch's sender is dropped: the stream ends");
}
