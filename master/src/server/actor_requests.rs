//! The actor's answers to clients: each request read from the core's view or the store
//! and answered at once, or turned into the core event that decides it; watches of a
//! job's progress; log reads and `Locate`s forwarded to agents.

use std::collections::HashMap;

use slotmarket_common::identity::Identity;
use slotmarket_common::ids::{AgentId, JobId};
use slotmarket_common::protocol::{
    ErrorKind, JobSummary, Locate, Located, LogQuery, LogRead, MAX_LOG_CHUNK, MasterToAgent, Request,
    Response,
};
use slotmarket_common::time::Timestamp;
use tokio::sync::oneshot;
use tracing::{error, warn};

use super::durable::Ack;
use super::{Actor, WatchSender, Watcher};
use crate::core::{AdmissionMode, Command, Event, RequestId, check_deadline_ahead};
use crate::server::reads;
use crate::server::task_reads::{self, PendingLogRead};
use crate::store::StoreError;

impl Actor {
    /// Sends the read of the log `query` names to the agent holding it; the answer comes
    /// back as `Input::LogRead`.
    pub(super) fn start_log_read(
        &mut self,
        caller: &Identity,
        query: &LogQuery,
        reply: oneshot::Sender<Response>,
    ) {
        let target = task_reads::log_target(&self.core.view(), &self.store, caller, query);
        let target = match target {
            Ok(Ok(target)) => target,
            Ok(Err(err)) => return drop(reply.send(Response::Error(err))),
            Err(err) => return drop(reply.send(stored_read::<Response>(Err(err)))),
        };
        let Some(outbound) = self.agents.get(&target.agent) else {
            let message = format!("the agent holding {}'s log is not connected", target.container);
            return drop(reply.send(Response::error(ErrorKind::NotFound, message)));
        };
        let request = self.next_log_read;
        self.next_log_read += 1;
        let read = LogRead {
            request,
            container: target.container,
            stderr: query.stderr,
            offset: query.offset,
            max: query.max.min(MAX_LOG_CHUNK),
        };
        if outbound.send(MasterToAgent::ReadLog(read)).is_err() {
            let message = format!("the agent holding {}'s log is not connected", target.container);
            return drop(reply.send(Response::error(ErrorKind::NotFound, message)));
        }
        let (agent, container, ended, offset) = (target.agent, target.container, target.ended, query.offset);
        self.log_reads.insert(request, PendingLogRead { agent, reply, container, ended, offset });
    }

    /// Answers an agent's `Locate` from the core's view at once (a read: nothing to
    /// decide or store). A refusal is logged here and its reason sent back.
    pub(super) fn answer_locate(&self, agent: AgentId, locate: Locate) {
        let outcome = self.core.view().stage_outputs(agent, locate.job, &locate.stage);
        if let Err(reason) = &outcome {
            warn!(%agent, job = %locate.job, reason, "Locate refused");
        }
        self.send(agent, MasterToAgent::Located(Located { request: locate.request, outcome }));
    }

    /// Fails the log reads waiting on `agent`, which disconnected.
    pub(super) fn fail_log_reads(&mut self, agent: AgentId) {
        let lost: Vec<u64> =
            self.log_reads.iter().filter(|(_, p)| p.agent == agent).map(|(&r, _)| r).collect();
        for request in lost {
            if let Some(pending) = self.log_reads.remove(&request) {
                pending.lost();
            }
        }
    }

    pub(super) fn on_request(
        &mut self,
        now: Timestamp,
        caller: Identity,
        request: Request,
        reply: oneshot::Sender<Response>,
    ) -> Vec<Command> {
        let view = self.core.view();
        let id = RequestId(self.next_request);
        let event = match request {
            Request::Status { job } => {
                let status = reads::job_status(&view, &self.store, &caller, job);
                let mut response = stored_read(status.map(|s| s.map_or_else(Response::Error, Response::Job)));
                self.predict(now, &mut response);
                return answer(reply, response);
            }
            Request::Tasks { job } => {
                let list = task_reads::task_list(&view, &self.store, &caller, job);
                return answer(
                    reply,
                    stored_read(list.map(|l| l.map_or_else(Response::Error, Response::Tasks))),
                );
            }
            Request::Logs(query) => {
                self.start_log_read(&caller, &query, reply);
                return Vec::new();
            }
            Request::OutputNodes { job } => {
                self.answer_output_nodes(&caller, job, reply);
                return Vec::new();
            }
            Request::Output(query) => {
                self.start_output_read(&caller, query, reply);
                return Vec::new();
            }
            Request::Cleanup { jobs } => {
                self.cleanup_now(&caller, jobs, now, reply);
                return Vec::new();
            }
            Request::Jobs(query) => {
                let page = reads::jobs_page(&view, &self.store, &caller, &query);
                let mut response = stored_read(page.map(Response::Jobs));
                self.predict(now, &mut response);
                return answer(reply, response);
            }
            Request::Quote { spec } => {
                let quote = self.core.quote_info(now, &spec);
                return answer(reply, quote.map_or_else(Response::Error, Response::Quote));
            }
            Request::SubmitChoosing { spec, choice } => {
                Event::ChoiceSubmitted { request: id, caller, spec, choice }
            }
            Request::History(query) => return answer(reply, reads::history(&view, &caller, &query)),
            Request::Nodes => return answer(reply, Response::Nodes(view.nodes())),
            Request::Profile { name } => {
                let response = match view.profile(&caller, &name) {
                    Some(profile) => Response::Profile(profile),
                    None => Response::error(
                        ErrorKind::NotFound,
                        format!("no recorded run of a job named {name:?} that you may see"),
                    ),
                };
                return answer(reply, response);
            }
            Request::Reservation => {
                return answer(reply, Response::Reservation(self.core.reservation(&caller)));
            }
            Request::Price => return answer(reply, Response::Price(self.core.market(&caller))),
            Request::Queue => return answer(reply, Response::Queue(self.core.queue(&caller))),
            Request::EstimateEval(query) => {
                let report = self.core.estimate_eval(&caller, &query);
                let response = report.map_or_else(
                    |err| Response::error(ErrorKind::BadRequest, err.to_string()),
                    Response::EstimateEval,
                );
                return answer(reply, response);
            }
            Request::Watch { .. } | Request::SubmitWatch { .. } => {
                let response = Response::error(ErrorKind::BadRequest, "watch is a streaming request");
                return answer(reply, response);
            }
            Request::Submit { spec }
                if spec.deadline.is_some() && self.core.admission().mode == AdmissionMode::Mrm =>
            {
                // Under MRM a deadline is bought, so that it is priced and kept feasible; a
                // spec's own deadline would bypass both. (The simulator's buyers submit
                // the deadline they were offered straight into the core.)
                let message = "this master sells deadlines ([admission] mode = \"mrm\"): remove `deadline` \
                               from the spec and buy one with `slotmarket submit --deadline T` (or --earliest, \
                               --max-price P), or submit without one to run best-effort";
                return answer(reply, Response::error(ErrorKind::BadRequest, message));
            }
            Request::Submit { spec } => Event::JobSubmitted { request: id, caller, spec },
            Request::Cancel { job } if !view.has_job(job) => {
                return answer(reply, stored_read(reads::cancel_of_stored(&self.store, &caller, job)));
            }
            Request::Cancel { job } => Event::JobCancelRequested { request: id, caller, job },
            Request::Account { account } => {
                let accounts = view.accounts(&caller, account.as_ref());
                return answer(reply, accounts.map_or_else(Response::Error, Response::Accounts));
            }
            Request::Ledger { account, after_seq, limit } => {
                let page = view.ledger(&caller, &account, after_seq, limit);
                return answer(reply, page.map_or_else(Response::Error, Response::Ledger));
            }
            Request::AccountAdd { account, budget, members } => {
                Event::AccountAddRequested { request: id, caller, account, budget, members }
            }
            Request::BudgetAdd { account, amount, memo } => {
                Event::BudgetAddRequested { request: id, caller, account, amount, memo }
            }
            Request::Drain { node } => Event::NodeDrainRequested { request: id, caller, node, drain: true },
            Request::Undrain { node } => {
                Event::NodeDrainRequested { request: id, caller, node, drain: false }
            }
            Request::RateSet { account, rate } => {
                Event::RateSetRequested { request: id, caller, account, rate }
            }
            Request::SetDeadline { .. } if self.core.admission().mode == AdmissionMode::Mrm => {
                // A bought deadline is priced and kept feasible for every admitted job;
                // moving it by hand would do neither.
                let message = "this master sells deadlines ([admission] mode = \"mrm\"): a deadline cannot \
                               be moved or dropped by hand; cancel the job and buy another with `slotmarket \
                               submit --deadline T`";
                return answer(reply, Response::error(ErrorKind::BadRequest, message));
            }
            Request::SetDeadline { job, deadline } => {
                // Checked here rather than in the core: the simulator replays a trace's
                // deadline moves, some into the past, and must keep doing so.
                if let Some(Err(refusal)) = deadline.map(|at| check_deadline_ahead(at, now)) {
                    return answer(reply, Response::Error(refusal));
                }
                if !view.has_job(job) {
                    return answer(reply, stored_read(reads::deadline_of_stored(&self.store, &caller, job)));
                }
                Event::DeadlineSetRequested { request: id, caller, job, deadline }
            }
            Request::IncomeSet { account, income } => {
                Event::IncomeSetRequested { request: id, caller, account, income }
            }
        };
        self.next_request += 1;
        self.replies.insert(id, reply);
        self.core.handle(now, event)
    }

    pub(super) fn on_watch(&mut self, caller: Identity, job: JobId, updates: WatchSender) {
        let status = match reads::job_status(&self.core.view(), &self.store, &caller, job) {
            Ok(status) => status,
            Err(err) => {
                let _ = updates.send(Some(stored_read::<Response>(Err(err))));
                return;
            }
        };
        match status {
            Ok(mut status) => {
                fill_predictions(&self.core.predicted_finishes(self.clock.now()), &mut status.summary);
                if status.summary.state.is_terminal() {
                    // The end may not be durable yet: it goes out with this step's replies.
                    self.hold_for_this_step(Ack::WatchEnd { updates, response: Response::Job(status) });
                } else if updates.send(Some(Response::Job(status))).is_ok() {
                    self.watchers.entry(job).or_default().push(Watcher { caller, updates });
                }
            }
            Err(reply) => {
                let _ = updates.send(Some(Response::Error(reply)));
            }
        }
    }

    /// Answers a `SubmitWatch`'s submit with `response` once `batch` is durable, and if
    /// the job was admitted starts watching it. The id waits for the batch *lazily*: it
    /// asks for no sync of its own, so a short job's end, synced at once, makes both
    /// durable in one sync, and a long job's id goes out with the next sync (at most
    /// [`durable::LAZY_SYNC`] later). The watch's updates reach the client only after
    /// the id (the stream writes the answer first).
    pub(super) fn admitted_for_watch(
        &mut self,
        batch: u64,
        reply: oneshot::Sender<Response>,
        response: Response,
        watcher: Watcher,
    ) {
        let Response::Submitted { job } = response else {
            return self.acknowledge(batch, Ack::Reply { reply, response });
        };
        self.acknowledge_lazily(batch, Ack::Reply { reply, response });
        let Ok(mut status) = self.core.view().job_status(job, &watcher.caller) else { return };
        fill_predictions(&self.core.predicted_finishes(self.clock.now()), &mut status.summary);
        if status.summary.state.is_terminal() {
            self.acknowledge(
                batch,
                Ack::WatchEnd { updates: watcher.updates, response: Response::Job(status) },
            );
        } else if watcher.updates.send(Some(Response::Job(status))).is_ok() {
            self.watchers.entry(job).or_default().push(watcher);
        }
    }

    /// Fills in the MRM predicted finish of the deadline jobs a `Job` or `Jobs` answer
    /// shows (it depends on the clock, so the core's view leaves it empty).
    pub(super) fn predict(&mut self, now: Timestamp, response: &mut Response) {
        let summaries: Vec<&mut JobSummary> = match response {
            Response::Job(status) => vec![&mut status.summary],
            Response::Jobs(page) => page.jobs.iter_mut().collect(),
            _ => return,
        };
        if !summaries.iter().any(|s| s.deadline.is_some() && !s.state.is_terminal()) {
            return;
        }
        let predictions = self.core.predicted_finishes(now);
        for summary in summaries {
            fill_predictions(&predictions, summary);
        }
    }
}

/// Sets `summary`'s predicted finish from `predictions`, if it has one.
pub(super) fn fill_predictions(predictions: &HashMap<JobId, Timestamp>, summary: &mut JobSummary) {
    if let Some(&at) = predictions.get(&summary.id) {
        summary.predicted_finish = Some(at);
    }
}

/// Answers a request the core need not decide (a read of its view).
pub(super) fn answer(reply: oneshot::Sender<Response>, response: Response) -> Vec<Command> {
    // A client that hung up needs no answer.
    let _ = reply.send(response);
    Vec::new()
}

/// The answer to a read that needed the store: a store failure is reported to the
/// client (and logged) rather than stopping the master, since nothing was written.
pub(super) fn stored_read<T: Into<Response>>(read: Result<T, StoreError>) -> Response {
    match read {
        Ok(response) => response.into(),
        Err(err) => {
            error!(error = %err, "store read failed");
            Response::error(ErrorKind::Internal, format!("the master could not read its store: {err}"))
        }
    }
}
