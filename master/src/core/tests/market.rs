//! Market foundations in the core: deadlines and accounts on jobs, the wider policy view,
//! job history, and ended jobs leaving memory after their retention.

use std::time::Duration;

use slotmarket_common::container::ContainerState::{self, Running};
use slotmarket_common::identity::Role;
use slotmarket_common::ids::{AccountId, ContainerId, JobId};
use slotmarket_common::protocol::{ErrorKind, JobState, Response};
use slotmarket_common::spec::{DeadlineSpec, SlotKind};
use slotmarket_common::time::Timestamp;

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob, caller, root};
use crate::core::policy::SchedView;
use crate::core::{CoreConfig, Event, HistoryLimits, Persist, StoreRecovery};

fn refusal(response: Response) -> (ErrorKind, String) {
    match response {
        Response::Error(e) => (e.kind, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_relative_deadline_is_resolved_at_admission_and_stored() {
    let mut env = TestEnv::new();
    let mut spec = JobBuilder::maps(1).build();
    spec.deadline = Some(DeadlineSpec::In(Duration::from_secs(1800)));
    let job = env.submit(spec);
    let due = env.now + Duration::from_secs(1800);
    let admitted = env.take_persists();
    assert!(
        matches!(&admitted[..], [Persist::JobAdmitted { deadline: Some(d), .. }] if *d == due),
        "{admitted:?}"
    );
    env.advance(60);
    let summary = env.status(job).summary;
    assert_eq!((summary.deadline, summary.owner.0.as_str()), (Some(due), "alice"));
    env.assert_no_commands();
}

#[test]
fn a_deadline_already_passed_is_refused_with_the_time() {
    let mut env = TestEnv::new();
    let mut spec = JobBuilder::maps(1).build();
    spec.deadline = Some(DeadlineSpec::At(Timestamp(env.now.0 - 1)));
    let (kind, message) = refusal(env.submit_as(alice(), spec));
    assert_eq!(kind, ErrorKind::BadRequest);
    assert!(message.starts_with("deadline: 1970-01-12T13:46:39.999Z has already passed"), "{message}");
    assert!(env.take_persists().is_empty());
}

#[test]
fn users_submit_to_accounts_they_belong_to_and_admins_to_created_ones() {
    let mut env = TestEnv::new();
    let mut spec = JobBuilder::maps(1).build();
    spec.account = Some("research".into());
    assert_eq!(refusal(env.submit_as(root(), spec.clone())).0, ErrorKind::Forbidden, "no such account yet");
    let request = env.request();
    let add = Event::AccountAddRequested {
        request,
        caller: root(),
        account: AccountId("research".into()),
        budget: None,
        members: vec![],
    };
    env.handle(add);
    env.take_reply(request);
    let (kind, message) = refusal(env.submit_as(alice(), spec.clone()));
    assert_eq!(kind, ErrorKind::Forbidden);
    assert!(message.contains("may not submit to account research"), "{message}");
    assert!(refusal(env.submit_as(caller(Role::Agent, "n1"), spec.clone())).0 == ErrorKind::Forbidden);

    let Response::Submitted { job } = env.submit_as(root(), spec) else { panic!("admin refused") };
    let summary = env.status(job).summary;
    assert_eq!((summary.account.0.as_str(), summary.owner.0.as_str()), ("research", "root"));
    let mut own = JobBuilder::maps(1).build();
    own.account = Some("alice".into());
    let mine = env.submit(own);
    // Jobs belong to who submitted them: alice sees hers, not the admin's job on research.
    let ids: Vec<JobId> = env.core.view().all_jobs(&alice()).iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![mine]);
    env.take_persists();
}

#[test]
fn the_policy_view_shows_progress_per_kind_and_container_times() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 1);
    let mut spec = JobBuilder::map_reduce(3, 1).name("wc").build();
    spec.deadline = Some(DeadlineSpec::In(Duration::from_secs(600)));
    let job = env.submit(spec);
    let launches = env.take_launches(2);
    env.advance(5);
    env.start(launches[0].container);
    env.advance(2);
    env.report(launches[1].container, ContainerState::Acquired);
    env.take_persists();

    let view = SchedView::new(env.core.state());
    let info = view.job(job).expect("job");
    assert_eq!(
        (info.name(), info.account(), info.submitted()),
        ("wc", &AccountId("alice".into()), super::env::START)
    );
    assert_eq!(info.deadline(), Some(super::env::START + Duration::from_secs(600)));
    assert_eq!(
        (info.tasks(SlotKind::Map), info.running(SlotKind::Map), info.pending(SlotKind::Map)),
        (3, 2, 1)
    );
    assert_eq!(
        (info.tasks(SlotKind::Reduce), info.pending(SlotKind::Reduce), info.completed(SlotKind::Map)),
        (1, 1, 0)
    );
    let released: Vec<bool> = info.stages().map(|s| s.released).collect();
    assert_eq!(released, vec![true, false]);
    let mut live: Vec<_> =
        view.live_unordered().map(|c| (c.container, c.state, c.entered, c.started)).collect();
    live.sort();
    let started = super::env::START + Duration::from_secs(5);
    assert_eq!(
        live,
        vec![
            (launches[0].container, Running, started, Some(started)),
            (launches[1].container, ContainerState::Acquired, started + Duration::from_secs(2), None),
        ]
    );
    env.assert_no_commands();
}

#[test]
fn an_ended_job_is_recorded_with_its_task_times_and_slot_time() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 1);
    let job = env.submit(JobBuilder::maps(2).name("wc").build());
    let launches = env.take_launches(2);
    env.advance(1);
    env.start(launches[0].container);
    env.start(launches[1].container);
    env.advance(4);
    env.report(launches[0].container, ContainerState::Completed);
    env.advance(2);
    env.report(launches[1].container, ContainerState::Failed);
    let retry = env.take_launches(1);
    env.advance(1);
    env.start(retry[0].container);
    env.advance(3);
    env.report(retry[0].container, ContainerState::Completed);

    let persists = env.take_persists();
    let Some(Persist::History { record, keep_per_name: 20 }) = persists.last() else {
        panic!("{persists:?}")
    };
    assert_eq!((record.job, record.name.as_str(), record.state), (job, "wc", JobState::Completed));
    assert_eq!(record.stages[0].run_ms, vec![Some(4_000), Some(3_000)]);
    assert_eq!(record.stages[0].attempts, vec![1, 2]);
    // Slots held: 5 s and 7 s by the first attempts, 4 s by the retry.
    assert_eq!(record.slot_ms, [16_000, 0]);
    assert_eq!((record.wait_ms(), record.completion_ms()), (Some(1_000), 11_000));
    let runs = env.core.view().history(&alice(), Some("wc"), None, 10);
    assert_eq!(runs, vec![(**record).clone()]);
    assert!(env.core.view().history(&bob(), None, None, 10).is_empty(), "bob sees no run of alice's");
    assert_eq!(env.core.view().history(&root(), None, None, 10).len(), 1);
    env.take_changed();
    env.assert_no_commands();
}

#[test]
fn history_and_id_counters_come_back_from_the_store() {
    let mut env = TestEnv::with_config(CoreConfig {
        history: HistoryLimits { per_name: 1, names: 10 },
        ..CoreConfig::default()
    });
    let mut older = sample_run(3);
    older.name = "wc".into();
    let newer = sample_run(7);
    let recovery = StoreRecovery {
        next_job: JobId(40),
        next_container: ContainerId(900),
        history: vec![older, newer.clone()],
        capacity: None,
        local_nodes: vec![],
    };
    env.handle(Event::StoreRecovered(recovery));
    assert_eq!(env.core.view().history(&root(), Some("wc"), None, 10), vec![newer]);
    env.join_agent("n1", 1, 1);
    assert_eq!(env.submit(JobBuilder::maps(1).build()), JobId(40));
    assert_eq!(env.take_launches(1)[0].container, ContainerId(900));
    env.take_persists();
    env.assert_no_commands();
}

#[test]
fn ended_jobs_leave_memory_after_their_retention() {
    let retention = Duration::from_secs(30);
    let mut env =
        TestEnv::with_config(CoreConfig { ended_job_retention: retention, ..CoreConfig::default() });
    let job = env.submit(JobBuilder::maps(1).build());
    assert_eq!(env.core.next_wakeup(), None);
    let ended_at = env.now;
    assert!(matches!(env.cancel_as(alice(), job), Response::Cancelled { .. }));
    assert_eq!(env.core.next_wakeup(), Some(ended_at + retention));
    env.advance(29);
    env.tick();
    assert!(env.core.view().has_job(job));
    env.advance(1);
    env.tick();
    assert!(!env.core.view().has_job(job), "dropped once the retention passed");
    assert_eq!(env.core.next_wakeup(), None);
    env.take_persists();
    env.take_changed();
    env.assert_no_commands();

    let mut at_once =
        TestEnv::with_config(CoreConfig { ended_job_retention: Duration::ZERO, ..CoreConfig::default() });
    let job = at_once.submit(JobBuilder::maps(1).build());
    at_once.cancel_as(alice(), job);
    assert!(!at_once.core.view().has_job(job));
    at_once.take_persists();
}

fn sample_run(job: u64) -> slotmarket_common::protocol::JobHistory {
    let run = crate::core::completed_run(job, "wc");
    slotmarket_common::protocol::JobHistory { submitted: Timestamp(1), finished: Timestamp(job), ..run }
}

#[test]
fn the_policy_view_of_a_retained_ended_job_keeps_its_task_counts() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 1);
    let job = env.submit(JobBuilder::maps(2).build());
    for launch in env.take_launches(2) {
        env.finish(launch.container);
    }
    assert!(env.core.view().has_job(job), "kept for its retention");
    let view = SchedView::new(env.core.state());
    let info = view.job(job).expect("retained");
    // Its per-task records are freed; the counts come from the spec.
    assert_eq!(
        (info.tasks(SlotKind::Map), info.completed(SlotKind::Map), info.pending(SlotKind::Map)),
        (2, 2, 0)
    );
    env.take_persists();
    env.take_changed();
    env.assert_no_commands();
}
