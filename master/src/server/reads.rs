//! Read requests that span the core and the store: the core answers for the jobs it holds
//! (every active job and recently ended ones), the store for ended jobs the core has
//! dropped. Listings merge both in id order and stop at a page that fits a frame, so no
//! answer can exceed the frame limit however many jobs there are or however long their
//! names.

use std::ops::ControlFlow;

use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{
    ErrorKind, ErrorReply, HistoryQuery, JobStatus, JobSummary, JobsPage, JobsQuery, Response,
};

use crate::core::CoreView;
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
    Ok(stored.ok_or_else(|| ErrorReply::new(ErrorKind::NotFound, format!("no job {job}"))))
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
    // Jobs admitted in this batch are in the core but not yet in the store.
    for job in held {
        if page.push(job).is_break() {
            break;
        }
    }
    Ok(page.finish())
}

/// The newest recorded runs the caller may see.
pub(super) fn history(view: &CoreView<'_>, caller: &Identity, query: &HistoryQuery) -> Response {
    let limit = query.limit.clamp(1, MAX_PAGE) as usize;
    let mut runs = view.history(caller, query.name.as_deref(), limit);
    let mut bytes = 0;
    let fits = runs.iter().take_while(|run| {
        bytes += encoded_len(run);
        bytes <= PAGE_BYTES
    });
    let keep = fits.count().max(1).min(runs.len());
    runs.truncate(keep);
    Response::History(runs)
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
