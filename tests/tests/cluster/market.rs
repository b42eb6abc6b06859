//! Market foundations across a master restart: a job's deadline and account go through
//! submit, the store and a `kill -9` of the master, and come back in `status`; ended jobs
//! the master no longer holds in memory are listed and shown from its database.

use std::time::Duration;

use slotmarket_common::ids::AccountId;
use slotmarket_common::protocol::{JobState, JobsQuery};
use slotmarket_common::spec::JobSpec;

use crate::support::{TestCluster, agent, status, wait_finished};

const SPEC: &str = r#"
name = "deadlined"
deadline = "+2h"
account = "research"
[[stage]]
name = "sleep"
tasks = 1
slot = "map"
command = "sleep 30"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_and_account_survive_a_master_kill() {
    let mut cluster = TestCluster::start(&[agent("node-1", 1, 1)]).await;
    let admin = cluster.client("admin").await;
    let research = AccountId("research".into());
    admin.account_add(research, None, vec![]).await.expect("create research");
    let spec = JobSpec::from_toml(SPEC).expect("spec");
    let before = std::time::SystemTime::now();
    let job = admin.submit(spec.clone()).await.expect("admin submits to research");
    let admitted = status(&admin, job).await.summary;
    let deadline = admitted.deadline.expect("a deadline");
    let expected = slotmarket_common::time::Timestamp::from(before + Duration::from_secs(7200));
    assert!(deadline.0.abs_diff(expected.0) < 5_000, "{deadline:?} vs {expected:?}");
    assert_eq!((admitted.account.0.as_str(), admitted.owner.0.as_str()), ("research", "admin"));

    // alice may not run on an account that is not hers.
    let alice = cluster.client("alice").await;
    let refused = alice.submit(spec).await.expect_err("alice is refused");
    assert!(refused.to_string().contains("may not submit to account research"), "{refused}");
    alice.close().await;
    admin.close().await;

    cluster.restart_master().await;
    let admin = cluster.client("admin").await;
    let recovered = status(&admin, job).await.summary;
    assert_eq!(
        (recovered.deadline, recovered.account, recovered.owner),
        (Some(deadline), admitted.account, admitted.owner)
    );
    admin.cancel(job).await.expect("cancel");
    assert_eq!(wait_finished(&admin, job).await.summary.state, JobState::Cancelled);
    admin.close().await;

    // After another restart the ended job is served from the store: listed and shown.
    cluster.restart_master().await;
    let admin = cluster.client("admin").await;
    let listed = admin.all_jobs(JobsQuery::default()).await.expect("list");
    assert_eq!(listed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![job]);
    let stored = status(&admin, job).await;
    assert_eq!((stored.summary.state, stored.summary.deadline), (JobState::Cancelled, Some(deadline)));
    let history = admin
        .history(slotmarket_common::protocol::HistoryQuery {
            name: Some("deadlined".into()),
            before: None,
            limit: 10,
        })
        .await
        .expect("history");
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(
        (history[0].job, history[0].deadline, history[0].state),
        (job, Some(deadline), JobState::Cancelled)
    );
    admin.close().await;
}
