//! Read requests that span the core and the store: the core answers for the jobs it holds
//! (every active job and recently ended ones), the store for ended jobs the core has
//! dropped (also when they are cancelled or their deadline moved, which changes nothing).
//! Listings merge both in id order and stop at a page that fits a frame, so no answer can
//! exceed the frame limit however many jobs there are or however long their names.

use std::ops::ControlFlow;

use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{
    ErrorReply, HistoryPage, HistoryQuery, JobState, JobStatus, JobSummary, JobsPage, JobsQuery, Response,
    RunCursor,
};

use crate::core::CoreView;
use crate::core::{deadline_of_ended_job, no_such_job};
use crate::store::{Store, StoreError};

/// Most jobs or history runs in one answer.
pub(super) const MAX_PAGE: u32 = 1_000;

/// Most encoded bytes of the entries of one answer: a quarter of the default frame limit,
/// leaving room for everything around them.
const PAGE_BYTES: usize = 256 << 10;

/// One job in detail, from the core if it holds the job, else from the store. A job the
/// caller may not see answers exactly as an unknown one does.
pub(super) fn job_status(
    view: &CoreView<'_>,
    store: &Store,
    caller: &Identity,
    job: JobId,
) -> Result<Result<JobStatus, ErrorReply>, StoreError> {
    if view.has_job(job) {
        return Ok(view.job_status(job, caller));
    }
    let stored = store.ended_job_status(job)?.filter(|s| caller.may_act_for(&s.summary.owner));
    Ok(stored.ok_or_else(|| no_such_job(job)))
}

/// The answer to cancelling `job` when the core no longer holds it (ended and dropped
/// after its retention, or not reloaded after a restart): the state it ended in, as the
/// core answers for an ended job it still holds.
pub(super) fn cancel_of_stored(store: &Store, caller: &Identity, job: JobId) -> Result<Response, StoreError> {
    let ended = stored_ended_state(store, caller, job)?;
    Ok(ended.map_or_else(Response::Error, |state| Response::Cancelled { job, state }))
}

/// The answer to moving the deadline of `job` when the core no longer holds it: the
/// refusal the core gives for an ended job it still holds.
pub(super) fn deadline_of_stored(
    store: &Store,
    caller: &Identity,
    job: JobId,
) -> Result<Response, StoreError> {
    let ended = stored_ended_state(store, caller, job)?;
    Ok(Response::Error(ended.map_or_else(|no_job| no_job, |state| deadline_of_ended_job(job, state))))
}

/// The state an ended job in the store ended in; a job the caller may not see answers
/// exactly as an unknown one does.
fn stored_ended_state(
    store: &Store,
    caller: &Identity,
    job: JobId,
) -> Result<Result<JobState, ErrorReply>, StoreError> {
    let stored = store.ended_job_status(job)?.map(|s| s.summary).filter(|s| caller.may_act_for(&s.owner));
    Ok(stored.map(|s| s.state).filter(|state| state.is_terminal()).ok_or_else(|| no_such_job(job)))
}

/// One page of the jobs `query` selects: the core's summaries for the jobs it holds,
/// the store's for the rest, in the query's order.
pub(super) fn jobs_page(
    view: &CoreView<'_>,
    store: &Store,
    caller: &Identity,
    query: &JobsQuery,
) -> Result<JobsPage, StoreError> {
    let limit = query.limit.clamp(1, MAX_PAGE) as usize;
    let mut page = Page::new(limit);
    let mut held = view.jobs(caller, query).peekable();
    let before = |a: JobId, b: JobId| if query.newest_first { a > b } else { a < b };
    let owner = (caller.role != Role::Admin).then(|| caller.account());
    store.each_job(query, owner.as_ref(), |stored| {
        while let Some(next) = held.next_if(|h| before(h.id, stored.id) || h.id == stored.id) {
            page.push(next)?;
        }
        if view.has_job(stored.id) { ControlFlow::Continue(()) } else { page.push(stored) }
    })?;
    // Jobs admitted in this batch are in the core but not yet in the store; they come
    // last, so only once the store's jobs are exhausted (a full page stops right there).
    if !page.more {
        for job in held {
            if page.push(job).is_break() {
                break;
            }
        }
    }
    Ok(page.finish())
}

/// A page of the newest recorded runs the caller may see: at most the limit asked (and
/// [`MAX_PAGE`]) and [`PAGE_BYTES`] (but at least one run), with where the next starts.
pub(super) fn history(view: &CoreView<'_>, caller: &Identity, query: &HistoryQuery) -> Response {
    let limit = query.limit.clamp(1, MAX_PAGE) as usize;
    // One more than the page holds tells whether there is a next page.
    let mut runs = view.history(caller, query.name.as_deref(), query.before, limit + 1);
    let mut bytes = 0;
    let fits = runs.iter().take(limit).take_while(|run| {
        bytes += encoded_len(run);
        bytes <= PAGE_BYTES
    });
    let keep = fits.count().max(1).min(runs.len());
    let next = (runs.len() > keep).then(|| RunCursor::of(&runs[keep - 1]));
    runs.truncate(keep);
    Response::History(HistoryPage { runs, next })
}

/// A page being filled: at most `limit` jobs and `PAGE_BYTES`; one more offered than fits
/// tells that there is a next page.
struct Page {
    jobs: Vec<JobSummary>,
    limit: usize,
    bytes: usize,
    more: bool,
}

impl Page {
    fn new(limit: usize) -> Page {
        Page { jobs: Vec::new(), limit, bytes: 0, more: false }
    }

    fn push(&mut self, job: JobSummary) -> ControlFlow<()> {
        let len = encoded_len(&job);
        if self.jobs.len() >= self.limit || (!self.jobs.is_empty() && self.bytes + len > PAGE_BYTES) {
            self.more = true;
            return ControlFlow::Break(());
        }
        self.bytes += len;
        self.jobs.push(job);
        ControlFlow::Continue(())
    }

    fn finish(self) -> JobsPage {
        let next = if self.more { self.jobs.last().map(|j| j.id) } else { None };
        JobsPage { jobs: self.jobs, next }
    }
}

fn encoded_len(value: &impl serde::Serialize) -> usize {
    postcard::experimental::serialized_size(value).unwrap_or(usize::MAX / 4)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use slotmarket_common::identity::Role;
    use slotmarket_common::ids::{AccountId, ContainerId};
    use slotmarket_common::protocol::{DEFAULT_MAX_FRAME, JobState};
    use slotmarket_common::spec::JobSpec;
    use slotmarket_common::time::Timestamp;

    use super::*;
    use crate::core::{Core, CoreConfig, Event, Persist, RequestId, StoreRecovery};

    const ENDED: u64 = 50_000;

    fn spec(name: &str) -> JobSpec {
        let toml = format!(
            "name = \"{name}\"\n[[stage]]\nname = \"m\"\ntasks = 1\nslot = \"map\"\ncommand = \"true\"\n"
        );
        JobSpec::from_toml(&toml).unwrap()
    }

    fn user(name: &str) -> Identity {
        Identity { role: Role::User, principal: name.into() }
    }

    /// Walks every page of `query` and checks each answer fits a frame.
    fn walk(view: &CoreView<'_>, store: &Store, caller: &Identity, mut query: JobsQuery) -> Vec<JobId> {
        let mut ids = Vec::new();
        loop {
            let page = jobs_page(view, store, caller, &query).unwrap();
            let frame = postcard::to_allocvec(&Response::Jobs(page.clone())).unwrap();
            assert!(frame.len() < DEFAULT_MAX_FRAME, "a page of {} bytes", frame.len());
            assert!(!page.jobs.is_empty() || page.next.is_none());
            ids.extend(page.jobs.iter().map(|j| j.id));
            match page.next {
                Some(next) => query.after = Some(next),
                None => return ids,
            }
        }
    }

    /// 50,000 ended jobs with 4 KB names in the store, plus jobs only the core holds
    /// (admitted in a batch whose write is not committed yet): every job is listed once.
    #[test]
    fn paging_lists_every_job_exactly_once_within_the_frame_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let long = |i: u64| format!("{i:06}-{}", "x".repeat(4089));
        for chunk in (1..=ENDED).collect::<Vec<_>>().chunks(5_000) {
            let ops: Vec<Persist> = chunk
                .iter()
                .flat_map(|&i| {
                    let owner = AccountId(if i % 2 == 0 { "alice" } else { "bob" }.into());
                    let job = JobId(i);
                    [
                        Persist::JobAdmitted {
                            job,
                            account: owner.clone(),
                            owner,
                            spec: spec(&long(i)).into(),
                            submitted: Timestamp(i),
                            deadline: None,
                        },
                        Persist::JobState {
                            job,
                            state: JobState::Completed,
                            at: Timestamp(i + 1),
                            message: None,
                            tasks_completed: 1,
                        },
                    ]
                })
                .collect();
            store.apply(&ops).unwrap();
        }
        let mut core = Core::new(CoreConfig::default());
        let recovery = StoreRecovery {
            next_job: JobId(ENDED + 1),
            next_container: ContainerId(1),
            history: vec![],
            capacity: None,
            local_nodes: vec![],
        };
        let _ = core.handle(Timestamp(0), Event::StoreRecovered(recovery));
        for request in 0..3 {
            let event =
                Event::JobSubmitted { request: RequestId(request), caller: user("alice"), spec: spec("new") };
            let _ = core.handle(Timestamp(ENDED + 10), event);
        }
        let view = core.view();
        let admin = Identity { role: Role::Admin, principal: "root".into() };

        let oldest =
            JobsQuery { newest_first: false, after: None, limit: MAX_PAGE, states: vec![], account: None };
        let all = walk(&view, &store, &admin, oldest.clone());
        assert_eq!(all.len() as u64, ENDED + 3);
        assert!(all.windows(2).all(|w| w[0] < w[1]), "oldest first, no repeats");
        assert_eq!(all.iter().copied().collect::<BTreeSet<_>>().len() as u64, ENDED + 3);

        let newest = JobsQuery { newest_first: true, ..oldest.clone() };
        let alice = walk(&view, &store, &user("alice"), newest);
        assert_eq!(alice.len() as u64, ENDED / 2 + 3);
        assert!(alice.windows(2).all(|w| w[0] > w[1]), "newest first, no repeats");
        assert_eq!(alice[..4], [JobId(ENDED + 3), JobId(ENDED + 2), JobId(ENDED + 1), JobId(ENDED)]);

        let pending = JobsQuery { states: vec![JobState::Pending], limit: 2, ..oldest };
        let ids = walk(&view, &store, &admin, pending);
        assert_eq!(ids, vec![JobId(ENDED + 1), JobId(ENDED + 2), JobId(ENDED + 3)]);
    }

    #[test]
    fn the_status_of_a_dropped_job_comes_from_the_store_and_hides_others_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let owner = AccountId("alice".into());
        let job = JobId(7);
        store
            .apply(&[
                Persist::JobAdmitted {
                    job,
                    account: owner.clone(),
                    owner,
                    spec: spec("wc").into(),
                    submitted: Timestamp(1),
                    deadline: Some(Timestamp(60_000)),
                },
                Persist::JobState {
                    job,
                    state: JobState::Failed,
                    at: Timestamp(9),
                    message: None,
                    tasks_completed: 0,
                },
            ])
            .unwrap();
        let core = Core::new(CoreConfig::default());
        let view = core.view();
        let status = job_status(&view, &store, &user("alice"), job).unwrap().unwrap();
        assert_eq!(
            (status.summary.state, status.summary.deadline),
            (JobState::Failed, Some(Timestamp(60_000)))
        );
        let hidden = job_status(&view, &store, &user("bob"), job).unwrap().unwrap_err();
        let unknown = job_status(&view, &store, &user("bob"), JobId(8)).unwrap().unwrap_err();
        assert_eq!((hidden.kind, hidden.message), (unknown.kind, "no job j7".to_string()));
    }
}
