//! Scheduling scenarios: FIFO order, barriers, spreading over agents, scale.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{AttemptId, JobId, StageId};
use slotmarket_common::protocol::JobState;
use slotmarket_common::spec::SlotKind;

use super::builders::JobBuilder;
use super::env::TestEnv;
use crate::core::{Command, Event, Persist};

#[test]
fn fifo_gives_each_free_slot_to_the_earliest_job() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    let a = env.submit(JobBuilder::maps(3).build());
    let first = env.take_launches(2);
    assert!(first.iter().all(|l| l.task.job == a));
    let b = env.submit(JobBuilder::maps(2).build());
    env.assert_no_commands();

    // A's third task goes before any of B's, though B is waiting too.
    env.finish(first[0].container);
    let next = env.take_launches(1);
    assert_eq!((next[0].task.job, next[0].task.index), (a, 2));
    env.finish(first[1].container);
    let then = env.take_launches(1);
    assert_eq!((then[0].task.job, then[0].task.index), (b, 0));
    env.finish(next[0].container);
    assert_eq!(env.take_launches(1)[0].task.job, b);
    assert_eq!(env.core.view().job_state(a), Some(JobState::Completed));
    env.assert_no_commands();
}

#[test]
fn a_later_job_uses_map_slots_while_the_earlier_one_waits_on_its_barrier() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 1);
    let a = env.submit(JobBuilder::map_reduce(2, 1).build());
    let maps = env.take_launches(2);
    let b = env.submit(JobBuilder::maps(3).build());
    env.assert_no_commands();

    env.finish(maps[0].container);
    // A has no ready map task left; its reduce waits on the barrier, so B gets the slot.
    let l = env.take_launches(1);
    assert_eq!(l[0].task.job, b);
    env.finish(maps[1].container);
    let l = env.take_launches_on(2);
    let reduce = l.iter().find(|(_, l)| l.slot == SlotKind::Reduce).expect("A's reduce");
    assert_eq!(reduce.1.task.job, a);
    assert!(l.iter().any(|(_, l)| l.slot == SlotKind::Map && l.task.job == b));
    env.assert_no_commands();
}

#[test]
fn reduce_tasks_start_only_after_every_map_task_completed() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 3, 2);
    let job = env.submit(JobBuilder::map_reduce(3, 2).build());
    let maps = env.take_launches(3);
    assert!(maps.iter().all(|l| l.slot == SlotKind::Map));
    env.finish(maps[0].container);
    env.finish(maps[1].container);
    env.assert_no_commands();
    assert_eq!(env.status(job).stages[1].pending, 2);

    env.finish(maps[2].container);
    let reduces = env.take_launches(2);
    let r = &reduces[1];
    assert_eq!(r.task.stage, StageId(1));
    assert_eq!((&*r.vars.stage, r.vars.task, r.vars.tasks), ("reduce", 1, 2));
    assert_eq!(r.vars.stage_tasks.get("map"), Some(&3));
    assert_eq!(r.vars.attempt, AttemptId(1));
    assert_eq!(&*r.command, "task reduce {task}/{tasks} in={input} a={attempt} dir={job_dir}");
    assert_eq!(r.vars.input.as_deref(), Some("/data/in"));

    env.take_persists();
    env.finish(reduces[0].container);
    env.take_changed();
    env.finish(reduces[1].container);
    let persists = env.take_persists();
    let [.., ended, Persist::History { record, .. }] = &persists[..] else { panic!("{persists:?}") };
    assert!(
        matches!(ended, Persist::JobState { job: j, state: JobState::Completed, tasks_completed: 5, .. } if *j == job)
    );
    assert_eq!((record.job, record.state, record.tasks()), (job, JobState::Completed, 5));
    assert_eq!(env.take_changed(), vec![job]);
    let status = env.status(job);
    assert_eq!((status.summary.tasks_completed, status.summary.tasks_running), (5, 0));
    assert!(status.summary.finished.is_some());
    env.assert_no_commands();
}

#[test]
fn the_first_running_report_marks_the_job_started() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(1).build());
    let l = env.take_launches(1);
    assert_eq!(env.core.view().job_state(job), Some(JobState::Pending));
    env.take_persists();
    env.report(l[0].container, ContainerState::Acquired);
    env.report(l[0].container, ContainerState::Running);
    let persists = env.take_persists();
    assert!(persists.iter().any(|p| matches!(p, Persist::JobState { state: JobState::Running, .. })));
    assert_eq!(persists.len(), 3, "two container transitions and the job start: {persists:#?}");
    assert_eq!(env.status(job).summary.started, Some(env.now));
    env.assert_no_commands();
}

#[test]
fn tasks_spread_over_agents_least_loaded_first() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 2, 0);
    env.join_agent("n2", 2, 0);
    env.join_agent("n3", 4, 0);
    env.submit(JobBuilder::maps(4).build());
    let mut agents: Vec<_> = env.take_launches_on(4).into_iter().map(|(a, _)| a).collect();
    agents.sort();
    // One each, then the big agent (1/4 used) before a small one (1/2 used).
    assert_eq!(agents, vec![env.agent("n1"), env.agent("n2"), env.agent("n3"), env.agent("n3")]);
    env.assert_no_commands();
}

#[test]
fn launches_are_persisted_as_allocated_before_they_are_sent() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    env.submit(JobBuilder::maps(1).build());
    let launch_at = env.last.iter().position(|c| matches!(c, Command::Launch { .. })).expect("launch");
    let persist_at = env.last.iter().position(|c| {
        matches!(c, Command::Persist(Persist::Container { report, .. }) if report.state == ContainerState::Allocated)
    });
    assert_eq!(persist_at, Some(launch_at - 1));
    env.take_launches(1);
}

#[test]
fn thousands_of_tasks_with_a_report_each_run_to_completion() {
    let mut env = TestEnv::new();
    for i in 0..10 {
        env.join_agent(&format!("n{i}"), 4, 2);
    }
    let jobs: Vec<JobId> = (0..3).map(|_| env.submit(JobBuilder::map_reduce(600, 20).build())).collect();
    let mut running = env.take_launches(40);
    let mut steps = 0;
    while let Some(launch) = running.pop() {
        env.finish(launch.container);
        running.extend(env.take_all_launches());
        steps += 1;
    }
    assert_eq!(steps, 3 * 620);
    for job in jobs {
        assert_eq!(env.core.view().job_state(job), Some(JobState::Completed));
    }
    assert!(env.core.view().nodes().iter().all(|n| n.map_used == 0 && n.reduce_used == 0));
    env.assert_no_commands();
}

#[test]
fn launches_of_one_job_share_its_stage_texts_and_task_counts() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 3, 1);
    env.submit(JobBuilder::map_reduce(3, 1).build());
    let maps = env.take_launches(3);
    // One copy per job, not per launch: the simulator launches millions of tasks.
    assert!(std::sync::Arc::ptr_eq(&maps[0].command, &maps[2].command));
    assert!(std::sync::Arc::ptr_eq(&maps[0].vars.stage, &maps[1].vars.stage));
    assert!(std::sync::Arc::ptr_eq(&maps[0].vars.stage_tasks, &maps[2].vars.stage_tasks));
    assert_eq!((&*maps[1].vars.stage, maps[1].vars.tasks), ("map", 3));
}

#[test]
fn the_one_agent_with_free_slots_takes_them_all_in_job_order() {
    let mut env = TestEnv::new();
    // More than four agents: the free slots are found through the free-agent index.
    for n in 1..=6 {
        env.join_agent(&format!("n{n}"), 2, 0);
    }
    let a = env.submit(JobBuilder::maps(13).build());
    let first = env.take_launches_on(12);
    let b = env.submit(JobBuilder::maps(3).build());
    env.assert_no_commands();

    // Both of one agent's containers end in one batch: that agent alone has free slots,
    // two of them; A's last map takes the first, B's first map the second.
    let agent = first[0].0;
    let ended: Vec<_> = first.iter().filter(|(on, _)| *on == agent).map(|(_, l)| l.container).collect();
    assert_eq!(ended.len(), 2);
    let reports = ended
        .iter()
        .flat_map(|&c| {
            [ContainerState::Acquired, ContainerState::Running, ContainerState::Completed]
                .map(|s| env.report_of(c, s))
        })
        .collect();
    env.handle(Event::ContainerReports { agent, reports });
    let next = env.take_launches_on(2);
    assert!(next.iter().all(|(on, _)| *on == agent));
    let picked: Vec<_> = next.iter().map(|(_, l)| (l.task.job, l.task.index)).collect();
    assert_eq!(picked, [(a, 12), (b, 0)]);
    env.assert_no_commands();
}
