//! The `jockey` policy in the core: a deadline job is guaranteed the slots its model
//! asks for (taken back from best-effort work by preemption), the model is asked for by
//! command and arrives as an event, spare slots go to best-effort work first and then
//! (spare tokens) to deadline jobs beyond their guarantee, and a moved deadline re-sizes
//! the allocation.

use std::time::Duration;

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::protocol::{JobHistory, JobState, Response, StageHistory};
use slotmarket_common::spec::{DeadlineSpec, SlotKind, UtilityCurve};
use slotmarket_common::time::Timestamp;

use super::builders::JobBuilder;
use super::env::{TestEnv, alice, bob};
use crate::core::policy::jockey::build_completion_model;
use crate::core::{CoreConfig, Event, Persist, PolicySettings, StoreRecovery};

/// A past run of "etl": 20 map tasks of 60 s each.
fn etl_run(job: u64) -> JobHistory {
    JobHistory {
        slot_ms: [1_200_000, 0],
        stages: vec![StageHistory {
            name: "map".into(),
            slot: SlotKind::Map,
            run_ms: vec![Some(60_000); 20],
            attempts: vec![1; 20],
        }],
        ..crate::core::completed_run(job, "etl")
    }
}

/// `jockey` with `predictor`, capped at the guarantee (no spare tokens), so that the
/// launches show the guarantee.
fn jockey_settings(predictor: &str) -> PolicySettings {
    let toml = format!("name = \"jockey\"\npredictor = \"{predictor}\"\ninterval_s = 60\nspare = false\n");
    toml::from_str(&toml).expect("jockey settings parse")
}

/// A core running `jockey` with the etl history and one agent of 10 map slots.
fn env_with_history(predictor: &str) -> TestEnv {
    recovered_env(jockey_settings(predictor), vec![etl_run(7), etl_run(8)], 10)
}

/// A core under `policy` that recovered `history` from its store, with one agent of
/// `map_slots` map slots.
fn recovered_env(policy: PolicySettings, history: Vec<JobHistory>, map_slots: u32) -> TestEnv {
    let mut env = TestEnv::with_config(CoreConfig { policy, ..CoreConfig::default() });
    let recovery = StoreRecovery {
        next_job: JobId(100),
        next_container: ContainerId(1),
        history,
        capacity: None,
        local_nodes: vec![],
    };
    env.handle(Event::StoreRecovered(recovery));
    env.join_agent("n1", map_slots, 0);
    env
}

fn etl_due_in(minutes: u64) -> slotmarket_common::spec::JobSpec {
    let mut spec = JobBuilder::maps(20).name("etl").build();
    spec.deadline = Some(DeadlineSpec::In(Duration::from_secs(minutes * 60)));
    spec
}

#[test]
fn a_deadline_job_takes_its_guarantee_back_from_best_effort_work() {
    let mut env = env_with_history("amdahl");
    let filler = env.submit(JobBuilder::maps(30).name("filler").build());
    let filler_launches = env.take_launches(10);
    let etl = env.submit(etl_due_in(10));
    // Amdahl before anything ran: 1.2 × (60 s + 1140 s / a) by 7 minutes (the deadline
    // less the 3-minute dead zone) needs a = 4.
    let kills = env.take_kills(4);
    assert!(
        kills
            .iter()
            .all(|(_, _, why)| why == "preempted by jockey: a deadline job needs its guaranteed slots")
    );
    for (_, container, _) in &kills {
        env.report(*container, ContainerState::Killed);
    }
    let launches = env.take_launches(4);
    assert!(launches.iter().all(|l| l.task.job == etl), "{launches:?}");
    // The guarantee caps the deadline job: a freed slot goes to the best-effort job.
    // The oldest filler task was not preempted (the newest go first).
    env.finish(filler_launches[0].container);
    let next = env.take_launches(1);
    assert_eq!(next[0].task.job, filler);
    assert!(env.take_model_requests().is_empty(), "amdahl builds no model");
}

#[test]
fn the_simulator_model_is_asked_for_once_and_used_once_built() {
    let mut env = env_with_history("simulator");
    let etl = env.submit(etl_due_in(10));
    let requests = env.take_model_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].profile.newest_run, 8);
    assert_eq!(requests[0].allocations, crate::core::policy::jockey::allocation_grid(10));
    // Meanwhile Amdahl sizes the job: 4 slots.
    assert_eq!(env.take_launches(4).len(), 4);
    let model = build_completion_model(&requests[0]);
    env.handle(Event::CompletionModelBuilt(Box::new(model)));
    env.advance(5);
    env.heartbeat("n1");
    env.advance(55);
    env.heartbeat("n1");
    env.tick();
    assert!(env.take_model_requests().is_empty(), "the same profile is not modelled twice");
    // Simulated: 20 tasks of 60 s in waves of 4 end 1 + 1.2 × 5 = 7 minutes in, right at
    // d − 3 min: the raw allocation is 4 and the dead zone holds it. Nothing moves.
    let slo = env.jockey_state(etl);
    assert_eq!(slo.guarantee, 4);
    assert_eq!(slo.predicted_finish, Some(Timestamp(env.now.0 + 360_000)));
    // `status` shows the controller's view.
    let shown = env.status(etl).slo.expect("a deadline job under jockey");
    assert_eq!((shown.guaranteed, shown.progress_permille), (4, 0));
    assert_eq!(shown.predicted_finish, slo.predicted_finish);
    assert!(env.take_all_launches().is_empty());
}

#[test]
fn an_ended_deadline_job_shows_no_guarantee_and_a_completed_one_all_its_progress() {
    let mut env = env_with_history("amdahl");
    let etl = env.submit(etl_due_in(10));
    let cancelled = env.submit(etl_due_in(10));
    let launches = env.take_all_launches();
    let of = |job| launches.iter().filter(move |l| l.task.job == job).map(|l| l.container);
    let mut running: Vec<ContainerId> = of(etl).collect();
    let shown = |env: &TestEnv, job| env.status(job).slo.expect("a deadline job under jockey");
    assert!(shown(&env, cancelled).guaranteed > 0);
    assert_eq!(
        env.cancel_as(alice(), cancelled),
        Response::Cancelled { job: cancelled, state: JobState::Cancelled }
    );
    for (_, container, _) in env.take_kills(of(cancelled).count()) {
        env.report(container, ContainerState::Killed);
    }
    for _ in 0..100 {
        let Some(done) = running.pop() else { break };
        env.finish(done);
        running.extend(env.take_all_launches().iter().filter(|l| l.task.job == etl).map(|l| l.container));
    }
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    assert_eq!(env.status(etl).summary.state, JobState::Completed);
    // The controller keeps the progress its last step measured.
    let last = env.jockey_state(etl);
    assert!(last.progress < 1.0, "{last:?}");
    let (done, gone) = (shown(&env, etl), shown(&env, cancelled));
    assert_eq!((done.guaranteed, done.progress_permille), (0, 1000));
    assert!(done.peak_guaranteed >= 4, "the peak stays: {done:?}");
    assert_eq!(gone.guaranteed, 0);
    assert!(gone.progress_permille < 1000, "{gone:?}");
}

#[test]
fn a_job_whose_deadline_is_cleared_keeps_running_with_no_guarantee() {
    let mut env = env_with_history("amdahl");
    let etl = env.submit(etl_due_in(10));
    for launch in env.take_launches(4) {
        env.start(launch.container);
    }
    assert_eq!(env.status(etl).slo.map(|slo| slo.guaranteed), Some(4));
    let request = env.request();
    env.handle(Event::DeadlineSetRequested { request, caller: alice(), job: etl, deadline: None });
    assert_eq!(env.take_reply(request), Response::DeadlineSet { job: etl, deadline: None });
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    let status = env.status(etl);
    assert_eq!(status.summary.state, JobState::Running);
    let slo = status.slo.expect("its controller's last view is kept");
    assert_eq!((slo.guaranteed, slo.peak_guaranteed), (0, 4));
}

#[test]
fn a_moved_deadline_is_stored_answered_and_followed() {
    let mut env = env_with_history("amdahl");
    let etl = env.submit(etl_due_in(30));
    // 30 minutes: 1.2 × (60 + 1140/a) s by 27 minutes needs one slot.
    assert_eq!(env.take_launches(1).len(), 1);
    env.take_persists();
    let request = env.request();
    let due = Timestamp(env.now.0 + 8 * 60_000);
    env.handle(Event::DeadlineSetRequested { request, caller: alice(), job: etl, deadline: Some(due) });
    assert_eq!(env.take_reply(request), Response::DeadlineSet { job: etl, deadline: Some(due) });
    assert_eq!(env.take_persists()[0], Persist::Deadline { job: etl, deadline: Some(due) });
    assert_eq!(env.status(etl).summary.deadline, Some(due));
    // Now behind: Amdahl's 1.2 × (60 + 1140/a) s by 5 minutes needs 6 slots, and a moved
    // deadline is followed at once, not by hysteresis's share of the gap a minute.
    assert_eq!(env.take_launches(5).len(), 5);
    assert_eq!(env.jockey_state(etl).guarantee, 6);
    env.advance(5);
    env.heartbeat("n1");
    env.advance(55);
    env.heartbeat("n1");
    env.tick();
    // A minute on, predicted inside the dead zone: the allocation holds.
    assert_eq!(env.jockey_state(etl).guarantee, 6);
    assert!(env.take_all_launches().is_empty());
    // Someone else's job is not theirs to move.
    let request = env.request();
    env.handle(Event::DeadlineSetRequested { request, caller: bob(), job: etl, deadline: None });
    assert!(matches!(env.take_reply(request), Response::Error(_)));
}

/// Runs etl (20 tasks profiled at 60 s) due in 10 minutes under Amdahl, its first four
/// tasks taking 180 s, and answers the controller's state at the step a minute later;
/// `extra`: more policy settings.
fn three_times_slower(rescale: bool, extra: &str) -> crate::core::policy::jockey::SloState {
    let toml = format!(
        "name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 60\nrescale = {rescale}\nspare = false\n{extra}"
    );
    let mut env = recovered_env(toml::from_str(&toml).expect("jockey settings parse"), vec![etl_run(7)], 10);
    let etl = env.submit(etl_due_in(10));
    // 1.2 × (60 + 1140/a) s by 7 minutes needs 4 slots.
    let first = env.take_launches(4);
    for launch in &first {
        env.start(launch.container);
    }
    for _ in 0..3 {
        env.advance(60);
        env.heartbeat("n1");
    }
    for launch in &first {
        env.report(launch.container, ContainerState::Completed);
    }
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    env.jockey_state(etl)
}

#[test]
fn a_run_slower_than_its_profile_is_given_more_slots_at_once() {
    // Profiled, the job is on time: four tasks done in 4 minutes predict a finish inside
    // the dead zone, and the allocation holds.
    let trusting = three_times_slower(false, "");
    assert_eq!((trusting.guarantee, trusting.slowdown), (4, 1.0));
    // Its tasks took three times their profiled 60 s: (4 × 180 + 10 × 60) / (4 × 60 +
    // 10 × 60) = 1.57 times the profile, which puts the finish past the deadline; the
    // raw allocation is the whole agent (10) and hysteresis (α = 0.5) moves half the way.
    let rescaled = three_times_slower(true, "");
    assert!((rescaled.slowdown - 1320.0 / 840.0).abs() < 1e-9, "{}", rescaled.slowdown);
    assert_eq!(rescaled.guarantee, 7);
}

#[test]
fn a_job_late_even_on_the_most_it_can_use_is_given_it_at_once() {
    // Four minutes in, 4 of 20 done at a slowdown of 1320 / 840: on all 10 slots
    // 1.2 × 1.571 × (48 s + 912 s / 10) = 262 s are left, a finish at 502 s against a
    // deadline at 600 s. Within 180 s of the deadline counts as late: the whole agent at
    // once, where hysteresis (α = 0.5) moves half the way from 4.
    let all_in = three_times_slower(true, "all_in_within_s = 180\n");
    assert_eq!((all_in.raw, all_in.guarantee, all_in.all_in), (10, 10, true));
    assert_eq!(all_in.smoothed, Some(10.0));
    // Keeping the control law's smoothing beside it: the same guarantee, but the next
    // step smooths from the law's 7.
    let kept = three_times_slower(true, "all_in_within_s = 180\nall_in_keep_smoothed = true\n");
    assert_eq!((kept.guarantee, kept.all_in, kept.smoothed), (10, true, Some(7.0)));
    // Within 60 s it is on time at the most it can use: the control law's step, as
    // without the setting.
    let smoothed = three_times_slower(true, "all_in_within_s = 60\n");
    assert_eq!((smoothed.raw, smoothed.guarantee, smoothed.all_in), (10, 7, false));
    let default = three_times_slower(true, "");
    assert_eq!((default.raw, default.guarantee, default.all_in), (10, 7, false));
    // Only a job heavier than profiled by more than `all_in_slowdown`: this one's
    // 1.57 is above 1.5, not above 2.
    let heavier = three_times_slower(true, "all_in_within_s = 180\nall_in_slowdown = 1.5\n");
    assert_eq!((heavier.guarantee, heavier.all_in), (10, true));
    let not_heavy_enough = three_times_slower(true, "all_in_within_s = 180\nall_in_slowdown = 2\n");
    assert_eq!((not_heavy_enough.guarantee, not_heavy_enough.all_in), (7, false));
    // Unscaled (a slowdown of 1) it ends at 240 s + 1.2 × 139 s = 407 s on all 10
    // slots, within 300 s of the deadline (the first step's 209 s was not), but it is
    // not heavier than profiled.
    let trusting = three_times_slower(false, "all_in_within_s = 300\nall_in_slowdown = 1\n");
    assert_eq!((trusting.guarantee, trusting.all_in), (4, false));
    let any = three_times_slower(false, "all_in_within_s = 300\n");
    assert_eq!((any.guarantee, any.all_in), (10, true));
}

/// etl (20 tasks profiled at 60 s) submitted under Amdahl due in 5 minutes, with no
/// dead zone and no task completed yet: the controller's state at submission; `extra`:
/// more settings.
fn etl_due_in_five_unread(extra: &str) -> crate::core::policy::jockey::SloState {
    let toml = format!(
        "name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 60\ndead_zone_s = 0\nspare = false\n{extra}"
    );
    let mut env = recovered_env(toml::from_str(&toml).expect("jockey settings parse"), vec![etl_run(7)], 10);
    let etl = env.submit(etl_due_in(5));
    env.jockey_state(etl)
}

#[test]
fn a_job_late_at_the_most_it_can_use_were_it_heavier_starts_there_until_its_slowdown_is_read() {
    // Profiled, 1.2 × (60 + 1140 / a) s fits 300 s from 6 slots on; on all 10, 174 s.
    // Unread, the slowdown is 1, not above 1.3: the all-in test alone waits.
    let law = etl_due_in_five_unread("all_in_within_s = 180\nall_in_slowdown = 1.3\n");
    assert_eq!((law.guarantee, law.all_in), (6, false));
    // Twice slower than profiled, 348 s on all 10: past the deadline, so all 10 at once.
    let unread = etl_due_in_five_unread("all_in_within_s = 180\nall_in_slowdown = 1.3\nall_in_unread = 2\n");
    assert_eq!((unread.guarantee, unread.all_in), (10, true));
    // One and a half times slower, 261 s: on time at the most it can use; the law's 6.
    let milder =
        etl_due_in_five_unread("all_in_within_s = 180\nall_in_slowdown = 1.3\nall_in_unread = 1.5\n");
    assert_eq!((milder.guarantee, milder.all_in), (6, false));
    // Four tasks completed are fewer than a reading needs (the slowdown's prior of ten):
    // the test reads the job at least twice as slow as profiled, not the 1.57 read so
    // far on top of it, and at 240 s + 2 × 139 s it is on time on all 10 slots.
    let read = three_times_slower(true, "all_in_within_s = 180\nall_in_slowdown = 2\nall_in_unread = 2\n");
    assert_eq!((read.guarantee, read.all_in), (7, false));
}

#[test]
fn a_first_wave_all_in_is_checked_again_soon_and_ends_with_the_first_reading() {
    // Control steps 4 minutes apart, so the step due a quarter of that on is the recheck.
    let toml = "name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 240\ndead_zone_s = 0\nspare = false\n\
                all_in_within_s = 180\nall_in_slowdown = 1.3\nall_in_unread = 2\n";
    let mut env = recovered_env(toml::from_str(toml).expect("jockey settings parse"), vec![etl_run(7)], 10);
    let etl = env.submit(etl_due_in(5));
    let submitted = env.now;
    env.tick();
    let first = env.jockey_state(etl);
    assert_eq!((first.guarantee, first.all_in), (10, true));
    let recheck = Timestamp(submitted.0 + 60_000);
    assert_eq!(first.recheck_at, Some(recheck));
    assert!(env.core.next_wakeup().is_some_and(|at| at <= recheck));
    // Its first ten tasks complete at their profiled minute: a reading of 1, on ten
    // tasks. The recheck finds the job on time at the law's allocation and leaves the
    // whole agent.
    let wave = env.take_launches(10);
    for launch in &wave {
        env.start(launch.container);
    }
    env.advance(60);
    env.heartbeat("n1");
    for launch in &wave {
        env.report(launch.container, ContainerState::Completed);
    }
    env.tick();
    let read = env.jockey_state(etl);
    assert_eq!((read.slowdown, read.all_in, read.recheck_at), (1.0, false, None));
    assert!(read.guarantee < 10, "{read:?}");
}

#[test]
fn the_all_in_test_can_take_its_own_slack() {
    // On all 10 slots 1.571 × 139.2 s = 218.7 s are left four minutes in: with the
    // control's slack 1.2 a finish at 502 s, past the 480 s that a margin of 120 s
    // leaves; with a slack of 1 at 459 s, before it.
    let with_control_slack = three_times_slower(true, "all_in_within_s = 120\n");
    assert_eq!((with_control_slack.guarantee, with_control_slack.all_in), (10, true));
    let own = three_times_slower(true, "all_in_within_s = 120\nall_in_slack = 1.0\n");
    assert_eq!((own.guarantee, own.all_in), (7, false));
    // The control law itself keeps the control's slack.
    assert_eq!(own.predicted_finish, three_times_slower(true, "").predicted_finish);
}

#[test]
fn the_slack_can_fall_with_progress() {
    // Four minutes in, 4 of etl's 20 equal tasks done: progress 0.2, and a slack running
    // from 1.2 at progress 0 to 1.0 at 1 is 1.16 there. The first step (progress 0)
    // sized 4 slots as with the control's slack; this one predicts the finish under
    // the guarantee 1.16 / 1.2 as far ahead.
    let ahead_of = |slo: crate::core::policy::jockey::SloState| {
        let (finish, at) = (slo.predicted_finish.unwrap(), slo.stepped_at.unwrap());
        finish.0.saturating_sub(at.0) as f64
    };
    let constant = three_times_slower(true, "");
    let falling = three_times_slower(true, "slack_at_end = 1.0\n");
    assert!((falling.progress - 0.2).abs() < 1e-9, "{}", falling.progress);
    assert_eq!((constant.guarantee, falling.guarantee), (7, 7));
    let ratio = ahead_of(falling) / ahead_of(constant);
    assert!((ratio - 1.16 / 1.2).abs() < 1e-3, "{ratio}");
}

#[test]
fn a_hopeless_job_is_not_raised_beyond_the_tasks_it_has_left() {
    // etl's 20 tasks of 60 s due in a minute on 40 slots: no allocation makes it (the
    // largest loses least utility), but more than 20 slots cannot help either.
    let mut env = recovered_env(jockey_settings("amdahl"), vec![etl_run(7)], 40);
    let etl = env.submit(etl_due_in(1));
    let first = env.take_launches(20);
    assert!(first.iter().all(|l| l.task.job == etl));
    let slo = env.jockey_state(etl);
    assert_eq!((slo.raw, slo.guarantee), (20, 20));
    // Five done, a minute on: fifteen left, and the guarantee follows them down.
    for launch in &first[..5] {
        env.start(launch.container);
        env.report(launch.container, ContainerState::Completed);
    }
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    let slo = env.jockey_state(etl);
    assert_eq!((slo.raw, slo.guarantee), (15, 15));
    assert!(env.take_all_launches().is_empty(), "nothing left to launch");
}

/// A core under Amdahl-sized `jockey` with spare tokens on or off, the etl history and
/// one agent of 10 map slots.
fn spare_env(spare: bool) -> TestEnv {
    let toml = format!("name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 60\nspare = {spare}\n");
    recovered_env(toml::from_str(&toml).expect("jockey settings parse"), vec![etl_run(7)], 10)
}

#[test]
fn with_spare_tokens_a_deadline_job_at_its_guarantee_takes_the_idle_slots() {
    // Guaranteed 4 (1.2 × (60 + 1140/a) s by 7 minutes) either way; without spare tokens
    // the other 6 slots stay idle, with them the job runs on all 10.
    let mut capped = spare_env(false);
    let etl = capped.submit(etl_due_in(10));
    assert_eq!(capped.take_all_launches().len(), 4);
    assert_eq!(capped.jockey_state(etl).guarantee, 4);
    let mut spare = spare_env(true);
    let etl = spare.submit(etl_due_in(10));
    let launches = spare.take_launches(10);
    assert!(launches.iter().all(|l| l.task.job == etl), "{launches:?}");
    // What the policy requests (and is measured by) stays the guarantee.
    assert_eq!(spare.jockey_state(etl).guarantee, 4);
    // Time above the guarantee is counted as spare: 6 slots for a minute.
    spare.advance(60);
    spare.heartbeat("n1");
    let slo = spare.jockey_state(etl);
    assert_eq!((slo.guaranteed_slot_ms, slo.spare_slot_ms), (4 * 60_000, 6 * 60_000));
}

#[test]
fn a_best_effort_jobs_ready_task_is_served_before_a_spare_one() {
    let mut env = spare_env(true);
    let etl = env.submit(etl_due_in(10));
    let etl_launches = env.take_launches(10);
    assert!(etl_launches.iter().all(|l| l.task.job == etl));
    // A best-effort job arrives to a full cluster: it waits (nothing of etl's is killed
    // for it), and the first slot that frees is its, though etl has 10 tasks ready.
    let filler = env.submit(JobBuilder::maps(5).name("filler").build());
    assert!(env.take_all_launches().is_empty());
    env.finish(etl_launches[0].container);
    let next = env.take_launches(1);
    assert_eq!(next[0].task.job, filler);
}

#[test]
fn a_guarantee_owed_to_another_deadline_job_preempts_spare_tasks_first() {
    let mut env = spare_env(true);
    let first = env.submit(etl_due_in(10));
    let first_launches = env.take_launches(10);
    let filler = env.submit(JobBuilder::maps(5).name("filler").build());
    for launch in &first_launches[..2] {
        env.finish(launch.container);
    }
    let filler_launches = env.take_launches(2);
    assert!(filler_launches.iter().all(|l| l.task.job == filler));
    // `first` runs 8 on a guarantee of 4. A second deadline job is owed 4: the four
    // spare tasks go (the newest), not the best-effort job's two.
    let second = env.submit(etl_due_in(10));
    assert_eq!(env.jockey_state(second).guarantee, 4);
    let kills = env.take_kills(4);
    let spare: Vec<ContainerId> = first_launches[6..].iter().map(|l| l.container).collect();
    for (_, container, _) in &kills {
        assert!(spare.contains(container), "{container:?} is not one of the newest of {first:?}");
        env.report(*container, ContainerState::Killed);
    }
    let launches = env.take_launches(4);
    assert!(launches.iter().all(|l| l.task.job == second), "{launches:?}");
}

/// etl (20 maps, guaranteed 4 of 10 slots, no spare tokens) beside a 30-task filler, run
/// until two of its tasks are left running and none ready; then a minute passes. Answers
/// the controller's state and every launch after the first ten, in order.
fn etl_tail(demand_cap: bool) -> (crate::core::policy::jockey::SloState, Vec<JobId>) {
    let toml = format!(
        "name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 60\nspare = false\ndemand_cap = {demand_cap}\n"
    );
    let mut env = recovered_env(toml::from_str(&toml).expect("jockey settings parse"), vec![etl_run(7)], 10);
    let etl = env.submit(etl_due_in(10));
    let mut running: std::collections::VecDeque<ContainerId> =
        env.take_launches(4).iter().map(|l| l.container).collect();
    env.submit(JobBuilder::maps(30).name("filler").build());
    assert_eq!(env.take_launches(6).len(), 6);
    let mut later = Vec::new();
    // 18 of etl's tasks finish one by one: each freed slot is its own until it has no
    // task left to start, then the filler's.
    for _ in 0..18 {
        let Some(done) = running.pop_front() else { break };
        env.finish(done);
        for launch in env.take_all_launches() {
            if launch.task.job == etl {
                running.push_back(launch.container);
            }
            later.push(launch.task.job);
        }
    }
    assert_eq!(running.len(), 2);
    let before = env.jockey_state(etl);
    env.advance(60);
    env.heartbeat("n1");
    let after = env.jockey_state(etl);
    assert_eq!(after.idle_slot_ms - before.idle_slot_ms, if demand_cap { 0 } else { 2 * 60_000 });
    assert_eq!(after.used_slot_ms - before.used_slot_ms, 2 * 60_000);
    (after, later)
}

#[test]
fn a_demand_capped_guarantee_follows_what_the_job_can_run_and_changes_no_launch() {
    let (held, held_launches) = etl_tail(false);
    let (capped, capped_launches) = etl_tail(true);
    // Both run the same tasks in the same order: unused guaranteed slots were already
    // lent to other work; the cap changes what the job requests, not what runs.
    assert_eq!(held_launches, capped_launches);
    assert_eq!(held_launches.iter().filter(|&&j| j == held_launches[0]).count(), 16);
    // Two tasks running, none ready: the capped guarantee is 2, the target stays 4.
    assert_eq!((held.guarantee, held.target), (4, 4));
    assert_eq!((capped.guarantee, capped.target), (2, 4));
    // The sized target is accounted alike; the requested guarantee is 2 slots lower in
    // the last minute.
    assert_eq!(held.target_slot_ms, capped.target_slot_ms);
    assert_eq!(held.guaranteed_slot_ms - capped.guaranteed_slot_ms, 2 * 60_000);
}

#[test]
fn a_jobs_own_utility_curve_sizes_it_instead_of_the_policys() {
    let mut env = env_with_history("amdahl");
    let strict = env.submit(etl_due_in(10));
    env.take_launches(4);
    // The same job, due at the same time and at the same progress, but to its
    // submitter finishing up to ten hours late is worth as much as on time.
    let mut spec = etl_due_in(10);
    spec.utility = Some(UtilityCurve(vec![(0.0, 1.0), (600.0, 1.0), (610.0, -1.0)]));
    let relaxed = env.submit(spec);
    env.take_launches(1);
    // The policy's curve: 1.2 × (60 + 1140/a) s by 7 minutes needs 4 slots. Its own:
    // one slot's 1.2 × 1200 s = 24 minutes is still worth 1, so one slot is enough.
    let (strict_slo, relaxed_slo) = (env.jockey_state(strict), env.jockey_state(relaxed));
    assert_eq!((strict_slo.progress, relaxed_slo.progress), (0.0, 0.0));
    assert_eq!((strict_slo.raw, strict_slo.guarantee), (4, 4));
    assert_eq!((relaxed_slo.raw, relaxed_slo.guarantee), (1, 1));
    // `status` says which curve is in force.
    let shown = |env: &TestEnv, job| env.status(job).slo.expect("a deadline job under jockey");
    assert!(!shown(&env, strict).utility_from_spec);
    assert!(shown(&env, relaxed).utility_from_spec);
    // A minute on, nothing done: the policy's curve now needs 5 slots (1.2 × (60 +
    // 1140/5) s = 5.8 minutes by 6), the job's own still one.
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    assert_eq!((env.jockey_state(strict).raw, env.jockey_state(relaxed).raw), (5, 1));
}

/// etl due in 20 minutes on 10 slots under the simulator's model (the median of 200
/// simulated runs per allocation), from two profiled runs of which one had a 600 s
/// straggler: the controller's state once the model is in, with `tail_quantile`.
fn etl_with_a_rare_straggler(tail_quantile: f64) -> crate::core::policy::jockey::SloState {
    let toml = format!(
        "name = \"jockey\"\ninterval_s = 60\nspare = false\nquantile = 0.5\nmodel_runs = 200\ntail_quantile = {tail_quantile}\n"
    );
    let mut straggled = etl_run(8);
    straggled.stages[0].run_ms[19] = Some(600_000);
    let history = vec![etl_run(7), straggled];
    let env = recovered_env(toml::from_str(&toml).expect("jockey settings parse"), history, 10);
    state_once_modelled(env, etl_due_in(20))
}

/// Submits `spec`, builds the completion model the policy asks for, and answers the job's
/// controller state after the first control step a minute later.
fn state_once_modelled(
    mut env: TestEnv,
    spec: slotmarket_common::spec::JobSpec,
) -> crate::core::policy::jockey::SloState {
    let job = env.submit(spec);
    let requests = env.take_model_requests();
    assert_eq!(requests.len(), 1);
    env.handle(Event::CompletionModelBuilt(Box::new(build_completion_model(&requests[0]))));
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    env.jockey_state(job)
}

#[test]
fn a_tail_reserve_keeps_time_in_hand_for_a_straggler_the_median_leaves_out() {
    // One task in 40 profiled is a straggler: most simulated runs of 20 draws have none,
    // so the median finishes in ⌈20 / a⌉ minutes, and two slots (1.2 × 10 minutes)
    // meet the deadline less the dead zone (17 minutes in, 16 left).
    let plain = etl_with_a_rare_straggler(0.0);
    assert_eq!(plain.guarantee, 2);
    // The 0.99 quantile under all 10 slots runs a straggler: 600 s where the median
    // takes 120 s. With those 8 minutes kept in hand the job needs its maps done in
    // about 5 minutes: four slots (1.2 × (5 + 8) = 15.6 minutes).
    let reserved = etl_with_a_rare_straggler(0.99);
    assert_eq!(reserved.guarantee, 4);
    assert!(reserved.predicted_finish > plain.predicted_finish);
}

/// etl due in 20 minutes, then a last stage of two 60 s tasks after its maps, on 10
/// slots under the simulator's model (median of 200 runs per allocation, no tail
/// reserve), from two profiled runs of which one had a 600 s map straggler (8.2 × the
/// maps' mean): the controller's state once the model is in, under `settings`.
fn etl_with_a_last_stage(settings: &str) -> crate::core::policy::jockey::SloState {
    let (env, spec) = etl_and_a_last_stage(settings);
    state_once_modelled(env, spec)
}

/// The core and the job of [`etl_with_a_last_stage`], before the job is submitted.
fn etl_and_a_last_stage(settings: &str) -> (TestEnv, slotmarket_common::spec::JobSpec) {
    let toml = format!(
        "name = \"jockey\"\ninterval_s = 60\nspare = false\nquantile = 0.5\nmodel_runs = 200\ntail_quantile = 0\n{settings}"
    );
    let with_reduce = |job: u64, straggler: Option<u64>| {
        let mut run = etl_run(job);
        run.stages[0].run_ms[19] = straggler.or(run.stages[0].run_ms[19]);
        run.stages.push(StageHistory {
            name: "reduce".into(),
            slot: SlotKind::Map,
            run_ms: vec![Some(60_000); 2],
            attempts: vec![1; 2],
        });
        run
    };
    let history = vec![with_reduce(7, None), with_reduce(8, Some(600_000))];
    let env = recovered_env(toml::from_str(&toml).expect("jockey settings parse"), history, 10);
    let mut spec = etl_due_in(20);
    let mut reduce = spec.stages[0].clone();
    (reduce.name, reduce.tasks, reduce.after) = ("reduce".into(), 2, vec!["map".into()]);
    spec.stages.push(reduce);
    (env, spec)
}

#[test]
fn a_stage_reserve_keeps_time_in_hand_for_a_straggler_in_the_last_stage() {
    let plain = etl_with_a_last_stage("");
    // The reduce's two 60 s tasks never straggled, but the job's maps did (8.2 × their
    // mean): kept in hand, one such reduce task is 7.2 minutes more than the model's,
    // so the maps must be done that much sooner: more slots now.
    let reserved = etl_with_a_last_stage("stage_reserve = 1.0");
    assert!(reserved.guarantee > plain.guarantee, "{} {}", reserved.guarantee, plain.guarantee);
    assert!(reserved.predicted_finish > plain.predicted_finish);
    // At a quantile that one or two tasks' longest rarely reaches, nothing is kept.
    let likely = etl_with_a_last_stage("stage_reserve = 1.0\nstage_reserve_quantile = 0.5");
    assert_eq!((likely.guarantee, likely.predicted_finish), (plain.guarantee, plain.predicted_finish));
}

#[test]
fn a_stage_profiled_from_enough_tasks_keeps_no_stage_reserve() {
    let plain = etl_with_a_last_stage("");
    let reserved = etl_with_a_last_stage("stage_reserve = 1.0");
    // The reduce has 4 profiled task times (two runs of two), the maps 40. Below 5 the
    // reduce still counts, and the reserve is the same...
    let five = etl_with_a_last_stage("stage_reserve = 1.0\nstage_reserve_below = 5");
    assert_eq!((five.guarantee, five.predicted_finish), (reserved.guarantee, reserved.predicted_finish));
    // ...from 4 neither stage does: no reserve is kept.
    let four = etl_with_a_last_stage("stage_reserve = 1.0\nstage_reserve_below = 4");
    assert_eq!((four.guarantee, four.predicted_finish), (plain.guarantee, plain.predicted_finish));
}

#[test]
fn an_expected_utility_sizes_the_job_from_the_spread_of_its_model() {
    let point = etl_with_a_last_stage("");
    // Every sampled run on time (no tolerance): the runs that draw the 600 s map
    // straggler must fit too, which the median leaves out.
    let every = etl_with_a_last_stage("expected_utility = 0.0");
    assert!(every.guarantee > point.guarantee, "{} {}", every.guarantee, point.guarantee);
    // A tolerance as wide as the utility's range takes the smallest allocation.
    let any = etl_with_a_last_stage("expected_utility = 2000.0");
    assert_eq!(any.raw, 1);
}

#[test]
fn raising_early_acts_on_a_job_predicted_inside_the_dead_zone() {
    let state = |raise_early: bool| {
        let toml = format!(
            "name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 60\nspare = false\nraise_early = {raise_early}\n"
        );
        let mut env = recovered_env(
            toml::from_str(&toml).expect("jockey settings parse"),
            vec![etl_run(7), etl_run(8)],
            10,
        );
        let etl = env.submit(etl_due_in(10));
        env.take_launches(4);
        // A minute on, nothing done: 60 s + 1.2 × (60 + 1140 / 4) s = 7.9 minutes, past
        // d − D (7) but before d (10); the raw allocation is 5.
        env.advance(60);
        env.heartbeat("n1");
        env.tick();
        env.jockey_state(etl)
    };
    let (held, raised) = (state(false), state(true));
    assert_eq!((held.raw, held.guarantee), (5, 4));
    // Half the gap (α = 0.5): 4.5, rounded up.
    assert_eq!((raised.raw, raised.guarantee), (5, 5));
}

#[test]
fn a_carried_rounding_guarantees_the_smoothed_allocation_on_average() {
    let toml = "name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 60\nspare = false\nraise_early = true\ncarry_rounding = true\n";
    let mut env =
        recovered_env(toml::from_str(toml).expect("jockey settings parse"), vec![etl_run(7), etl_run(8)], 10);
    let etl = env.submit(etl_due_in(10));
    env.take_launches(4);
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    // As in `raising_early_acts_on_a_job_predicted_inside_the_dead_zone`: raw 5, smoothed
    // 4.5; rounded to 5 (as rounding up would), half a slot over is carried.
    let state = env.jockey_state(etl);
    assert_eq!((state.raw, state.smoothed, state.guarantee), (5, Some(4.5), 5));
    assert!((state.rounding_carry + 0.5).abs() < 1e-9, "{}", state.rounding_carry);
    // Every later step rounds the smoothed allocation plus what was carried.
    let mut carry = state.rounding_carry;
    for _ in 0..3 {
        env.advance(60);
        env.heartbeat("n1");
        env.tick();
        let state = env.jockey_state(etl);
        let smoothed = state.smoothed.expect("a model-based step");
        assert_eq!(f64::from(state.guarantee), (smoothed + carry).round().clamp(1.0, 20.0));
        assert!((state.rounding_carry - (carry + smoothed - f64::from(state.guarantee))).abs() < 1e-9);
        carry = state.rounding_carry;
    }
}

#[test]
fn a_job_running_ahead_of_its_model_is_cut_to_its_raw_allocation_at_once() {
    let state = |ahead_steps: u32| {
        let toml = format!(
            "name = \"jockey\"\npredictor = \"amdahl\"\ninterval_s = 60\nspare = false\nahead_steps = {ahead_steps}\n"
        );
        let mut env = recovered_env(
            toml::from_str(&toml).expect("jockey settings parse"),
            vec![etl_run(7), etl_run(8)],
            10,
        );
        let etl = env.submit(etl_due_in(10));
        // Its tasks take 10 s where the profiled ones took 60: two waves of 4 done in
        // the first 20 s, a third running.
        let mut launches = env.take_launches(4);
        for _ in 0..2 {
            launches.iter().for_each(|l| env.start(l.container));
            env.advance(10);
            for l in &launches {
                env.report(l.container, ContainerState::Completed);
            }
            launches = env.take_launches(4);
        }
        launches.iter().for_each(|l| env.start(l.container));
        env.advance(40);
        env.heartbeat("n1");
        env.tick();
        env.jockey_state(etl)
    };
    // A minute in, 8 of 20 done at a slowdown of 0.63: 0.63 × (36 s + 684 s / 4) = 130 s
    // left on its 4 slots, where the first step's 345 s less the minute leaves 285. The
    // raw allocation is 2 (1.2 × 0.63 × (36 + 684 / 2) s ends before d − D).
    let smoothed = state(0);
    assert_eq!((smoothed.raw, smoothed.guarantee, smoothed.ahead_steps), (2, 3, 0));
    // Ahead for one step, as asked: the whole gap at once.
    let cut = state(1);
    assert_eq!((cut.raw, cut.guarantee, cut.ahead_steps), (2, 2, 1));
    // Two steps asked for, one seen: smoothed as ever.
    let waiting = state(2);
    assert_eq!((waiting.raw, waiting.guarantee, waiting.ahead_steps), (2, 3, 1));
}

#[test]
fn a_stage_reserve_priced_by_its_chance_holds_less_than_the_worst_case() {
    let plain = etl_with_a_last_stage("");
    let reserved = etl_with_a_last_stage("stage_reserve = 1.0");
    // The reduce's two tasks draw the maps' 600 s straggler (8.2 × their mean, 7.2
    // minutes more than the model's 60 s) one time in 1 − (43 / 44)² = 4.5 %. Without
    // tolerance the straggler must fit whatever its chance: the worst case.
    let certain = etl_with_a_last_stage("stage_reserve = 1.0\nstage_reserve_chance = 0.0");
    assert_eq!(certain.raw, reserved.raw);
    // Priced by its chance, the minutes it would make the job late cost U's penalty
    // one time in 22: fewer slots than the worst case, more than none.
    let chance = etl_with_a_last_stage("stage_reserve = 1.0\nstage_reserve_chance = 0.02");
    assert_eq!((plain.raw, reserved.raw, chance.raw), (2, 4, 3));
    // What `status` shows is the finish the allocation is sized for, no straggler past
    // the profile; the ahead test keeps the reserve. Added in full, the two are one.
    assert!(chance.predicted_finish < chance.reserved_finish);
    assert_eq!(reserved.predicted_finish, reserved.reserved_finish);
    let shown = |slo: crate::core::policy::jockey::SloState| {
        slo.predicted_finish.unwrap().0 - slo.stepped_at.unwrap().0
    };
    let reserved_ms = |slo: crate::core::policy::jockey::SloState| {
        slo.reserved_finish.unwrap().0 - slo.stepped_at.unwrap().0
    };
    // 7.2 minutes of reserve with slack 1.2, less the model's own tail reserve that
    // the straggler's replaces: a little under 8.64 minutes apart.
    let apart = reserved_ms(chance) - shown(chance);
    assert!((500_000..518_400).contains(&apart), "{apart}");
}

/// [`etl_and_a_last_stage`] run until both reduce tasks are running (every map task
/// takes its profiled 60 s), and the controller's state at the step a minute later.
fn etl_with_its_reduce_running(settings: &str) -> (crate::core::policy::jockey::SloState, Timestamp) {
    let (mut env, spec) = etl_and_a_last_stage(settings);
    let job = env.submit(spec);
    let requests = env.take_model_requests();
    env.handle(Event::CompletionModelBuilt(Box::new(build_completion_model(&requests[0]))));
    let (mut maps, mut reduces) = (Vec::new(), 0);
    for _ in 0..40 {
        for launch in env.take_all_launches() {
            env.start(launch.container);
            if launch.task.stage.0 == 1 {
                reduces += 1;
            } else {
                maps.push(launch.container);
            }
        }
        if reduces == 2 {
            break;
        }
        env.advance(60);
        for container in maps.drain(..) {
            env.report(container, ContainerState::Completed);
        }
        env.heartbeat("n1");
        env.tick();
    }
    assert_eq!(reduces, 2, "both reduce tasks running");
    env.advance(60);
    env.heartbeat("n1");
    env.tick();
    (env.jockey_state(job), env.now)
}

#[test]
fn a_stage_whose_tasks_have_all_started_can_keep_no_stage_reserve() {
    // Only the reduce counts for the reserve (the maps have 40 profiled task times):
    // 7.2 minutes kept in hand for a straggler among its two tasks, 8.6 with slack,
    // even once both run and no allocation can change how long they take.
    let reserve = "stage_reserve = 1.0\nstage_reserve_below = 5";
    let (held, at) = etl_with_its_reduce_running(reserve);
    let minutes_left = |state: &crate::core::policy::jockey::SloState| {
        state.predicted_finish.expect("a model-based step").0.saturating_sub(at.0) as f64 / 60_000.0
    };
    assert!(minutes_left(&held) > 8.0, "{}", minutes_left(&held));
    // Kept out once all its tasks have started: what is left is the model's minute.
    let (dropped, at_too) =
        etl_with_its_reduce_running(&format!("{reserve}\nstage_reserve_until_started = true"));
    assert_eq!(at, at_too);
    assert!(minutes_left(&dropped) < 2.0, "{}", minutes_left(&dropped));
}
