//! Master lifetimes: container ids that no later master reissues, launches an agent
//! refuses, and containers of jobs a master (that lost its database) never heard of.

use slotmarket_common::container::ContainerState;
use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::protocol::JobState;

use super::builders::{JobBuilder, report, task};
use super::env::{TestEnv, alice};
use crate::core::CoreConfig;

#[test]
fn container_ids_start_at_the_lifetimes_epoch_and_continue_above_recovered_ones() {
    let mut env = TestEnv::with_config(CoreConfig { container_epoch: 7, ..CoreConfig::default() });
    env.join_agent("n1", 2, 0);
    env.submit(JobBuilder::maps(2).build());
    let ids: Vec<ContainerId> = env.take_launches(2).iter().map(|l| l.container).collect();
    assert_eq!(ids, [ContainerId(7 << 20), ContainerId((7 << 20) + 1)]);

    // An earlier lifetime with a later clock (stepped back since) is still stepped over.
    let mut env = TestEnv::with_config(CoreConfig { container_epoch: 7, ..CoreConfig::default() });
    let mut stored = super::builders::recovered(1, JobBuilder::maps(2).build(), JobState::Running);
    let done = report(9 << 20, task(JobId(1), 0, 0), 1, ContainerState::Completed, env.now);
    stored.containers.push(("n1".into(), done));
    env.recover(stored);
    env.join_agent("n1", 1, 0);
    assert_eq!(env.take_launches(1)[0].container, ContainerId((9 << 20) + 1));
}

#[test]
fn ids_an_agent_lists_are_never_handed_out_even_if_the_clock_stepped_back() {
    let mut env = TestEnv::with_config(CoreConfig { container_epoch: 7, ..CoreConfig::default() });
    // Left by a lifetime that started "later" than this one, by a clock since set back.
    let stray = report((8 << 20) + 5, task(JobId(1), 0, 0), 1, ContainerState::Running, env.now);
    let bogus = report(u64::MAX, task(JobId(1), 0, 1), 1, ContainerState::Completed, env.now);
    env.join_agent_with("n1", 2, 1, vec![stray, bogus]);
    env.take_kills(1);
    env.submit(JobBuilder::maps(1).build());
    assert_eq!(env.take_launches(1)[0].container, ContainerId((8 << 20) + 6));
}

#[test]
fn a_launch_the_agent_refuses_frees_the_slot_and_runs_the_task_again_under_a_new_id() {
    let mut env = TestEnv::new();
    env.join_agent("n1", 1, 0);
    let job = env.submit(JobBuilder::maps(1).build());
    let first = env.take_launches(1)[0].clone();
    // The agent already runs another container with this id and says so.
    let mut refused = env.report_of(first.container, ContainerState::Killed);
    refused.message = Some("container id c1 is already in use here by j9.s0.t0 (a1)".into());
    env.report_raw(env.agent("n1"), refused);
    let second = env.take_launches(1)[0].clone();
    assert_eq!(second.task, first.task);
    assert_ne!(second.container, first.container);
    assert_eq!(env.status(job).stages[0].failed_attempts, 1);

    // The retry runs normally, and a cancel reaches it.
    env.start(second.container);
    let cancelled = env.cancel_as(alice(), job);
    assert!(matches!(cancelled, slotmarket_common::protocol::Response::Cancelled { .. }), "{cancelled:?}");
    let kills = env.take_kills(1);
    assert_eq!(kills[0].1, second.container);
    env.report(second.container, ContainerState::Killed);
    assert_eq!(env.core.view().nodes()[0].map_used, 0);
}

#[test]
fn a_container_of_an_unknown_job_holds_a_slot_of_each_kind_until_it_ends() {
    let mut env = TestEnv::new();
    // Left running by a master whose database is gone: job 40 means nothing here.
    let stray = report(3, task(JobId(40), 0, 0), 1, ContainerState::Running, env.now);
    let agent = env.join_agent_with("n1", 1, 1, vec![stray.clone()]);
    let kills = env.take_kills(1);
    assert_eq!((kills[0].0, kills[0].1), (agent, ContainerId(3)));
    let node = &env.core.view().nodes()[0];
    assert_eq!((node.map_used, node.reduce_used), (1, 1));

    // Nothing is sent there to be refused while the kill is under way...
    let job = env.submit(JobBuilder::map_reduce(1, 1).build());
    env.assert_no_commands();
    // ...and once the agent confirms it, the slots serve the new job.
    env.report_raw(
        agent,
        slotmarket_common::protocol::ContainerReport { state: ContainerState::Killed, ..stray },
    );
    let launch = env.take_launches(1);
    assert_eq!(launch[0].task, task(job, 0, 0));
    let node = &env.core.view().nodes()[0];
    assert_eq!((node.map_used, node.reduce_used), (1, 0));
}
