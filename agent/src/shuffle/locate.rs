//! Asking the master where a stage's outputs are: the [`Locator`] seam the fetch service
//! uses, and its real implementation over the session ([`SessionLocator`]: a
//! [`LocateCall`] goes to the session, which sends `AgentToMaster::Locate` and routes the
//! matching `Located` back by request id).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{Located, StageOutputs};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

/// How long a fetch waits for the master's answer (including a reconnect).
pub const LOCATE_TIMEOUT: Duration = Duration::from_secs(30);

/// The answer to one question: the holders, or why there are none.
pub type LocateAnswer = Result<StageOutputs, String>;

/// A boxed future of a [`LocateAnswer`].
pub type LocateFuture<'a> = Pin<Box<dyn Future<Output = LocateAnswer> + Send + 'a>>;

/// Where the outputs of `stage` of `job` are.
pub trait Locator: Send + Sync {
    /// Asks once; the answer is final for this request.
    fn locate(&self, job: JobId, stage: String) -> LocateFuture<'_>;
}

/// One question for the session to put to the master.
#[derive(Debug)]
pub struct LocateCall {
    /// The job.
    pub job: JobId,
    /// The producing stage.
    pub stage: String,
    /// Where the answer goes; dropped (an error for the asker) if the connection is lost.
    pub reply: oneshot::Sender<LocateAnswer>,
}

/// Asks through the session's channel.
#[derive(Clone, Debug)]
pub struct SessionLocator {
    calls: mpsc::UnboundedSender<LocateCall>,
}

impl SessionLocator {
    /// A locator and the receiving end the session serves.
    pub fn new() -> (SessionLocator, mpsc::UnboundedReceiver<LocateCall>) {
        let (calls, receiver) = mpsc::unbounded_channel();
        (SessionLocator { calls }, receiver)
    }
}

impl Locator for SessionLocator {
    fn locate(&self, job: JobId, stage: String) -> LocateFuture<'_> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.calls
                .send(LocateCall { job, stage, reply })
                .map_err(|_| "the agent is stopping".to_string())?;
            match tokio::time::timeout(LOCATE_TIMEOUT, answer).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err("the connection to the master was lost before it answered".into()),
                Err(_) => Err(format!("the master did not answer within {LOCATE_TIMEOUT:?}")),
            }
        })
    }
}

/// The questions sent on one connection and not yet answered, by request id; shared by
/// the session's writer (which sends) and its reader (which receives `Located`).
#[derive(Clone, Debug, Default)]
pub struct LocatesInFlight {
    inner: Arc<Mutex<InFlight>>,
}

#[derive(Debug, Default)]
struct InFlight {
    next: u64,
    waiting: HashMap<u64, oneshot::Sender<LocateAnswer>>,
}

impl LocatesInFlight {
    /// Records `reply` under a fresh request id and answers the id.
    pub fn register(&self, reply: oneshot::Sender<LocateAnswer>) -> u64 {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.next += 1;
        let request = inner.next;
        inner.waiting.insert(request, reply);
        request
    }

    /// Hands `located` to whoever asked; an answer nobody waits for is logged and dropped.
    pub fn answer(&self, located: Located) {
        let waiting = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .waiting
            .remove(&located.request);
        match waiting {
            // The asker may have timed out meanwhile.
            Some(reply) => drop(reply.send(located.outcome)),
            None => debug!(request = located.request, "Located for no pending request; ignored"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_reach_the_asker_by_request_id() {
        let in_flight = LocatesInFlight::default();
        let (first_tx, first) = oneshot::channel();
        let (second_tx, second) = oneshot::channel();
        let a = in_flight.register(first_tx);
        let b = in_flight.register(second_tx);
        assert_ne!(a, b);
        let outputs = StageOutputs { holders: vec![], task_holder: vec![None] };
        in_flight.answer(Located { request: b, outcome: Ok(outputs.clone()) });
        in_flight.answer(Located { request: a, outcome: Err("unknown job".into()) });
        in_flight.answer(Located { request: 99, outcome: Err("nobody asked".into()) });
        assert_eq!(second.await.unwrap(), Ok(outputs));
        assert_eq!(first.await.unwrap(), Err("unknown job".into()));
    }
}
