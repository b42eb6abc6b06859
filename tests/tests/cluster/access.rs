//! What one user learns about another's work through a real master: status, watch and
//! cancel of someone else's job answer exactly as an id that was never used, while the
//! node list is shared (README "Who sees what").

use slotmarket_common::client::{Client, ClientError};
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{ErrorKind, ErrorReply, JobState};

use crate::support::{TestCluster, agent, sleepers, status, submit, wait_running, wait_until};

/// The server's refusal in a request's answer, as `(kind, message)`.
fn refusal<T: std::fmt::Debug>(answer: Result<T, ClientError>) -> (ErrorKind, String) {
    match answer {
        Err(ClientError::Server(ErrorReply { kind, message })) => (kind, message),
        other => panic!("expected a refusal from the master, got {other:?}"),
    }
}

/// What `client` hears back for `job` from status, watch and cancel.
async fn answers(client: &Client, job: JobId) -> Vec<(ErrorKind, String)> {
    let watched = match client.watch(job).await {
        Ok(mut watch) => watch.next().await.map(|_| ()),
        Err(err) => Err(err),
    };
    vec![refusal(client.status(job).await), refusal(watched), refusal(client.cancel(job).await)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_job_is_indistinguishable_from_no_job() {
    let cluster = TestCluster::start(&[agent("node-1", 1, 0)]).await;
    let alice = cluster.client("alice").await;
    let job = submit(&alice, &sleepers("private", 1, 60.0)).await;
    wait_running(&alice, job, 1).await;
    // A live container counts as running from its allocation; the job is Running once
    // the agent reports the process started.
    wait_until(|| async { status(&alice, job).await.summary.state == JobState::Running }, "the job to run")
        .await;

    let bob = cluster.client("bob").await;
    let unknown = JobId(job.0 + 1000);
    let expected = |id: JobId| vec![(ErrorKind::NotFound, format!("no job {id}")); 3];
    assert_eq!(answers(&bob, job).await, expected(job));
    assert_eq!(answers(&bob, unknown).await, expected(unknown));
    // Bob's cancel did nothing.
    assert_eq!(status(&alice, job).await.summary.state, JobState::Running);

    // The node list is shared with every user.
    let nodes = bob.nodes().await.expect("users may list nodes");
    assert_eq!(nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["node-1"]);
    assert_eq!((nodes[0].map_slots, nodes[0].map_used), (1, 1));

    assert_eq!(alice.cancel(job).await.expect("own job"), JobState::Cancelled);
    alice.close().await;
    bob.close().await;
}
