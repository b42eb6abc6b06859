//! Running a plan against a live master: submits each job at its arrival time and, in
//! the same loop, polls `Jobs` and `Nodes` every [`POLL`] until every job has ended, the
//! timeout passes or Ctrl-C is pressed (then the unfinished jobs are cancelled, so the
//! cluster is left idle for the next run).
//!
//! Slot use is sampled rather than summed from task rows, so a run cut short by its timeout
//! still has it for every job: each poll reads every
//! job's `tasks_running` (containers allocated to ended) and the agents' used slots, and
//! a job's slot-seconds are the trapezoid integral of its samples.
//!
//! With a [`Buyer`] (`--alpha`) each job is quoted and buys its deadline by the §6.3
//! buyer model (`super::buyer`) instead of a plain submit, and every change of its
//! predicted finish is recorded as the polls see it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use slotmarket_common::client::Client;
use slotmarket_common::ids::JobId;
use slotmarket_common::protocol::{JobSummary, JobsQuery, NodeSummary, Request, Response};
use slotmarket_common::time::Timestamp;

use super::buyer::{self, Bought};
use super::file::Estimates;
use super::plan::Plan;
use crate::{connection, output, submit};

/// How often jobs and nodes are polled; short next to the tasks (seconds), so the
/// sampled slot-seconds are close to the true ones.
pub(crate) const POLL: Duration = Duration::from_millis(250);
/// How often a progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Slot counts of the connected agents at one poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slots {
    /// Map slots in use.
    pub(crate) map_used: u32,
    /// Map slots offered.
    pub(crate) map_slots: u32,
    /// Reduce slots in use.
    pub(crate) reduce_used: u32,
    /// Reduce slots offered.
    pub(crate) reduce_slots: u32,
}

impl Slots {
    /// Sums the connected agents.
    pub(crate) fn of(nodes: &[NodeSummary]) -> Slots {
        nodes.iter().filter(|n| n.connected).fold(Slots::default(), |sum, n| Slots {
            map_used: sum.map_used + n.map_used,
            map_slots: sum.map_slots + n.map_slots,
            reduce_used: sum.reduce_used + n.reduce_used,
            reduce_slots: sum.reduce_slots + n.reduce_slots,
        })
    }
}

/// One poll of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UsageSample {
    /// When the answers arrived (this machine's clock).
    pub(crate) at: Timestamp,
    /// The agents' slots, if they could be listed.
    pub(crate) slots: Option<Slots>,
    /// Tasks of this run's jobs holding a slot.
    pub(crate) running: u64,
    /// Jobs submitted so far.
    pub(crate) submitted: usize,
    /// Jobs ended so far.
    pub(crate) ended: usize,
}

/// A submitted job as followed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Followed {
    /// Its position in the plan.
    pub(crate) index: u32,
    /// The master's id.
    pub(crate) id: JobId,
    /// Its latest summary, once `Jobs` has listed it.
    pub(crate) last: Option<JobSummary>,
    /// Sampled slot-seconds so far.
    pub(crate) slot_s: f64,
    /// The previous sample, for the next trapezoid.
    previous: Option<(Timestamp, u64)>,
    /// The deadline it bought, when the run buys deadlines.
    pub(crate) bought: Option<Bought>,
    /// (when seen, predicted finish) at each poll where the prediction changed.
    pub(crate) predictions: Vec<(Timestamp, Timestamp)>,
    /// The run cancelled it at its end (timeout or Ctrl-C): a `cancelled` state then
    /// means unfinished, not a job that failed.
    pub(crate) cancelled_by_run: bool,
}

impl Followed {
    /// Job `id`, submitted as plan job `index`, not listed yet.
    pub(crate) fn new(index: u32, id: JobId) -> Followed {
        Followed {
            index,
            id,
            last: None,
            slot_s: 0.0,
            previous: None,
            bought: None,
            predictions: Vec::new(),
            cancelled_by_run: false,
        }
    }

    /// Whether the job has ended.
    pub(crate) fn ended(&self) -> bool {
        self.last.as_ref().is_some_and(|s| s.state.is_terminal())
    }

    /// Takes a new summary seen at `at`, adding the slot-seconds since the last one.
    fn observe(&mut self, summary: JobSummary, at: Timestamp) {
        let running = summary.tasks_running;
        if let Some((before, was_running)) = self.previous {
            let dt = at.saturating_since(before).as_secs_f64();
            self.slot_s += (was_running + running) as f64 / 2.0 * dt;
        }
        self.previous = Some((at, running));
        if let Some(predicted) = summary.predicted_finish.filter(|_| !summary.state.is_terminal())
            && self.predictions.last().is_none_or(|&(_, before)| before != predicted)
        {
            self.predictions.push((at, predicted));
        }
        self.last = Some(summary);
    }
}

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Every planned job was submitted and ended.
    AllEnded,
    /// The timeout passed first.
    TimedOut,
    /// Ctrl-C.
    Interrupted,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    /// Every submitted job, in plan order.
    pub(crate) jobs: Vec<Followed>,
    /// Every poll.
    pub(crate) usage: Vec<UsageSample>,
    /// How it ended.
    pub(crate) ending: Ending,
    /// Plan indices of the jobs whose deadline purchase the master refused (not submitted).
    pub(crate) refused: Vec<u32>,
}

/// The §6.3 buyer a run buys deadlines with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Buyer {
    /// How many times its processing time a delay-sensitive job pays at most.
    pub(crate) alpha: f64,
    /// The workload file's per-task seconds, the estimate each job is priced by.
    pub(crate) estimates: Estimates,
}

/// The loop's state.
struct Runner<'a> {
    client: &'a Client,
    plan: &'a Plan,
    started: Instant,
    timeout: Duration,
    /// The next plan job to submit.
    next: usize,
    jobs: Vec<Followed>,
    usage: Vec<UsageSample>,
    last_progress: Option<Instant>,
    buyer: Option<Buyer>,
    refused: Vec<u32>,
}

/// Submits `plan` and follows it to the end (or `timeout` after the start).
pub(crate) async fn execute(
    client: &Client,
    plan: &Plan,
    timeout: Duration,
    buyer: Option<Buyer>,
) -> Result<Outcome> {
    let mut runner = Runner {
        client,
        plan,
        started: Instant::now(),
        timeout,
        next: 0,
        jobs: Vec::with_capacity(plan.jobs.len()),
        usage: Vec::new(),
        last_progress: None,
        buyer,
        refused: Vec::new(),
    };
    let ending = match runner.drive().await {
        Ok(ending) => ending,
        Err(err) => {
            runner.cancel_unfinished().await;
            return Err(err);
        }
    };
    match ending {
        Ending::AllEnded => {}
        Ending::TimedOut => eprintln!("gave up after {}s (raise it with --timeout)", timeout.as_secs()),
        Ending::Interrupted => eprintln!("interrupted"),
    }
    if ending != Ending::AllEnded {
        runner.cancel_unfinished().await;
        // The cancelled jobs' final states, for the report.
        if let Err(err) = runner.poll().await {
            eprintln!("warning: could not read the final job states: {err:#}");
        }
    }
    Ok(Outcome { jobs: runner.jobs, usage: runner.usage, ending, refused: runner.refused })
}

impl Runner<'_> {
    /// Submits on schedule and polls until every job ended, the timeout or Ctrl-C.
    async fn drive(&mut self) -> Result<Ending> {
        let mut ticker = tokio::time::interval(POLL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
        let deadline = self.started + self.timeout;
        loop {
            let arrival = self.next_arrival();
            tokio::select! {
                // Arrivals first: their timing is the experiment's input.
                biased;
                _ = &mut interrupt => return Ok(Ending::Interrupted),
                () = sleep_until(arrival), if arrival.is_some_and(|at| at <= deadline) => self.submit_next().await?,
                _ = ticker.tick() => {
                    self.poll().await?;
                    self.progress();
                    let all_submitted = self.next == self.plan.jobs.len();
                    if all_submitted && self.jobs.iter().all(Followed::ended) {
                        return Ok(Ending::AllEnded);
                    }
                    if Instant::now() >= deadline {
                        return Ok(Ending::TimedOut);
                    }
                }
            }
        }
    }

    /// When the next job is due, if any is left.
    fn next_arrival(&self) -> Option<Instant> {
        let job = self.plan.jobs.get(self.next)?;
        Some(self.started + Duration::from_secs_f64(job.arrival_s))
    }

    /// Submits the next job of the plan.
    async fn submit_next(&mut self) -> Result<()> {
        let Some(job) = self.plan.jobs.get(self.next) else { return Ok(()) };
        self.next += 1;
        let class = job.class.map_or("no class", |c| c.name());
        let elapsed = self.started.elapsed().as_secs_f64();
        let followed = match self.buyer {
            None => Followed::new(job.index, submit::submit(self.client, job.spec.clone()).await?),
            Some(buyer) => {
                let spec = buyer::buyer_spec(job.spec.clone(), buyer.estimates.of(job.program));
                match buyer::quote_and_buy(self.client, spec, job.class, buyer.alpha).await? {
                    Ok(bought) => {
                        let mut followed = Followed::new(job.index, bought.purchase.job);
                        followed.bought = Some(bought);
                        followed
                    }
                    Err(refusal) => {
                        let reason = output::sanitize(&refusal.reason);
                        eprintln!("[{elapsed:.1}s] {} ({class}) refused: {reason}", job.spec.name);
                        self.refused.push(job.index);
                        return Ok(());
                    }
                }
            }
        };
        let price = followed.bought.map_or(String::new(), |b| format!(", price {}", b.purchase.price));
        eprintln!(
            "[{elapsed:.1}s] submitted {} {} ({} tasks, {class}{price})",
            followed.id,
            job.spec.name,
            job.spec.total_tasks()
        );
        self.jobs.push(followed);
        Ok(())
    }

    /// Lists jobs and nodes, updates every followed job and records a usage sample.
    async fn poll(&mut self) -> Result<()> {
        let first = self.jobs.first().map(|j| j.id);
        let (jobs, nodes) = tokio::join!(list_jobs(self.client, first), list_nodes(self.client));
        let mut jobs = jobs?;
        let at = output::now();
        for followed in &mut self.jobs {
            if let Some(summary) = jobs.remove(&followed.id) {
                followed.observe(summary, at);
            }
        }
        let running = self.jobs.iter().filter_map(|j| j.last.as_ref()).map(|s| s.tasks_running).sum();
        let ended = self.jobs.iter().filter(|j| j.ended()).count();
        // Slot totals are a nicety (the workload file has them too): a refusal is not fatal.
        let slots = nodes.ok().map(|nodes| Slots::of(&nodes));
        self.usage.push(UsageSample { at, slots, running, submitted: self.jobs.len(), ended });
        Ok(())
    }

    /// Prints a progress line every [`PROGRESS_EVERY`].
    fn progress(&mut self) {
        if self.last_progress.is_some_and(|at| at.elapsed() < PROGRESS_EVERY) {
            return;
        }
        self.last_progress = Some(Instant::now());
        let Some(sample) = self.usage.last() else { return };
        let slots = sample.slots.map_or(String::new(), |s| {
            format!(
                "; slots in use: map {}/{}, reduce {}/{}",
                s.map_used, s.map_slots, s.reduce_used, s.reduce_slots
            )
        });
        eprintln!(
            "[{:.1}s] {}/{} submitted, {} ended, {} tasks running{slots}",
            self.started.elapsed().as_secs_f64(),
            sample.submitted,
            self.plan.jobs.len(),
            sample.ended,
            sample.running
        );
    }

    /// Cancels every submitted job that has not ended, marking it; failures are only
    /// reported.
    async fn cancel_unfinished(&mut self) {
        for job in self.jobs.iter_mut().filter(|j| !j.ended()) {
            match connection::call(self.client, Request::Cancel { job: job.id }).await {
                Ok(_) => {
                    job.cancelled_by_run = true;
                    eprintln!("cancelled {}", job.id)
                }
                Err(err) => eprintln!("warning: could not cancel {}: {err:#}", job.id),
            }
        }
    }
}

/// Sleeps until `at`; never wakes without one (the `select!` guard disables that branch).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Every job the caller may see from `first` on (ids grow with submission), by id.
async fn list_jobs(client: &Client, first: Option<JobId>) -> Result<HashMap<JobId, JobSummary>> {
    let Some(first) = first else { return Ok(HashMap::new()) };
    let query = JobsQuery { newest_first: false, after: Some(JobId(first.0 - 1)), ..JobsQuery::default() };
    let jobs = connection::bounded(client.all_jobs(query)).await.context("listing jobs")?;
    Ok(jobs.into_iter().map(|j| (j.id, j)).collect())
}

/// The agents.
pub(crate) async fn list_nodes(client: &Client) -> Result<Vec<NodeSummary>> {
    match connection::call(client, Request::Nodes).await.context("listing nodes")? {
        Response::Nodes(nodes) => Ok(nodes),
        other => Err(connection::unexpected("Nodes", &other)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use slotmarket_common::ids::AgentId;
    use slotmarket_common::protocol::{JobState, JobsPage};

    use super::*;
    use crate::fake_master::{FakeMaster, status};
    use crate::workload::file::WorkloadFile;
    use crate::workload::file::tests::SMALL;
    use crate::workload::plan;

    fn node(map_used: u32) -> NodeSummary {
        NodeSummary {
            agent: AgentId(1),
            node: "node-1".into(),
            connected: true,
            map_slots: 2,
            map_used,
            reduce_slots: 1,
            reduce_used: 0,
            last_seen: Timestamp(0),
            draining: None,
            quarantine: None,
        }
    }

    #[test]
    fn slot_seconds_are_the_trapezoid_of_the_samples() {
        let mut job = Followed::new(0, JobId(1));
        let seen = |running| JobSummary {
            tasks_running: running,
            ..status(JobId(1), "x", JobState::Running).summary
        };
        job.observe(seen(2), Timestamp(1_000));
        job.observe(seen(2), Timestamp(2_000));
        job.observe(seen(0), Timestamp(3_000));
        assert_eq!(job.slot_s, 2.0 + 1.0);
        assert!(!job.ended());
        assert_eq!(Slots::of(&[node(1), NodeSummary { connected: false, ..node(2) }]).map_used, 1);
    }

    #[tokio::test]
    async fn a_plan_is_submitted_followed_to_the_end_and_sampled() {
        let next_id = Arc::new(AtomicU64::new(1));
        let submitted: Arc<Mutex<Vec<JobId>>> = Arc::default();
        let (ids, list) = (next_id.clone(), submitted.clone());
        let fake = FakeMaster::start(move |request| match request {
            Request::Submit { .. } => {
                let job = JobId(ids.fetch_add(1, Ordering::SeqCst));
                list.lock().unwrap().push(job);
                vec![Response::Submitted { job }]
            }
            // Every job is done by the time it is listed.
            Request::Jobs(_) => {
                let done = list
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|&j| status(j, "x", JobState::Completed).summary)
                    .collect();
                vec![Response::Jobs(JobsPage { jobs: done, next: None })]
            }
            Request::Nodes => vec![Response::Nodes(vec![node(1)])],
            _ => vec![],
        });
        let text = SMALL
            .replace("jobs = 8", "jobs = 3")
            .replace("mean_interarrival_s = 2.0", "mean_interarrival_s = 0.05");
        let plan = plan::generate(&WorkloadFile::parse(&text).unwrap(), 1).unwrap();
        let client = fake.options("alice").connect().await.unwrap();
        let outcome = execute(&client, &plan, Duration::from_secs(20), None).await.unwrap();
        assert_eq!(outcome.ending, Ending::AllEnded);
        let ids: Vec<JobId> = outcome.jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![JobId(1), JobId(2), JobId(3)]);
        assert!(outcome.jobs.iter().all(Followed::ended));
        let last = outcome.usage.last().unwrap();
        assert_eq!((last.submitted, last.ended, last.slots.map(|s| s.map_slots)), (3, 3, Some(2)));
        let specs: Vec<String> = fake
            .requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::Submit { spec } => Some(spec.name),
                _ => None,
            })
            .collect();
        let planned: Vec<String> = plan.jobs.iter().map(|j| j.spec.name.clone()).collect();
        assert_eq!(specs, planned, "submitted in plan order");
    }

    #[tokio::test]
    async fn jobs_still_running_at_the_timeout_are_cancelled() {
        let fake = FakeMaster::start(|request| match request {
            Request::Submit { .. } => vec![Response::Submitted { job: JobId(9) }],
            Request::Jobs(_) => vec![Response::Jobs(JobsPage {
                jobs: vec![status(JobId(9), "x", JobState::Running).summary],
                next: None,
            })],
            Request::Nodes => vec![Response::Nodes(vec![])],
            Request::Cancel { job } => vec![Response::Cancelled { job, state: JobState::Cancelled }],
            _ => vec![],
        });
        let text = SMALL.replace("jobs = 8", "jobs = 1");
        let plan = plan::generate(&WorkloadFile::parse(&text).unwrap(), 1).unwrap();
        let client = fake.options("alice").connect().await.unwrap();
        let outcome = execute(&client, &plan, Duration::from_millis(600), None).await.unwrap();
        assert_eq!(outcome.ending, Ending::TimedOut);
        assert!(fake.requests().contains(&Request::Cancel { job: JobId(9) }));
    }

    #[tokio::test]
    async fn a_buying_run_quotes_buys_by_class_records_predictions_and_skips_refusals() {
        use slotmarket_common::money::Credits;
        use slotmarket_common::protocol::{ChoiceRefusal, DeadlineChoice, Purchase, QuoteInfo, QuotePoint};
        use slotmarket_common::spec::JobClass;

        let point =
            |s: u64, micros: i64| QuotePoint { deadline: Timestamp(s * 1000), price: Credits(micros) };
        let quote = QuoteInfo {
            at: Timestamp(1_000),
            work_ms: 36_000,
            work_upper_ms: 43_200,
            pi_level: 0.95,
            map_task_ms: (3_000, 3_600),
            reduce_task_ms: (0, 0),
            earliest: point(20, 40_000),
            curve: vec![point(20, 40_000), point(30, 15_000), point(60, 12_000)],
            admitted: 0,
            assumed_slots: None,
        };
        let bought: Arc<Mutex<Vec<JobId>>> = Arc::default();
        let polls = Arc::new(AtomicU64::new(0));
        let (list, seen) = (bought.clone(), polls.clone());
        let fake = FakeMaster::start(move |request| match request {
            Request::Quote { .. } => vec![Response::Quote(quote.clone())],
            // Plan job 2 is refused; the others get the point their maximum buys.
            Request::SubmitChoosing { spec, .. } if spec.name.starts_with("w002") => {
                vec![Response::ChoiceRefused(ChoiceRefusal {
                    reason: "no".into(),
                    earliest: None,
                    affordable: None,
                })]
            }
            Request::SubmitChoosing { choice: DeadlineChoice::MaxPrice(max), .. } => {
                let mut list = list.lock().unwrap();
                let job = JobId(list.len() as u64 + 1);
                list.push(job);
                let deadline = if max >= Credits(15_000) { 30_000 } else { 60_000 };
                let (deadline, price) = (Timestamp(deadline), max.min(Credits(15_000)));
                vec![Response::Purchased(Purchase { job, deadline, price, earliest: Timestamp(20_000) })]
            }
            // Running with a prediction of 9 s for two polls, then 11 s, then done.
            Request::Jobs(_) => {
                let poll = seen.fetch_add(1, Ordering::SeqCst);
                let jobs = list
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|&j| match poll {
                        0..2 => JobSummary {
                            predicted_finish: Some(Timestamp(9_000)),
                            ..status(j, "x", JobState::Running).summary
                        },
                        2..4 => JobSummary {
                            predicted_finish: Some(Timestamp(11_000)),
                            ..status(j, "x", JobState::Running).summary
                        },
                        _ => status(j, "x", JobState::Completed).summary,
                    })
                    .collect();
                vec![Response::Jobs(JobsPage { jobs, next: None })]
            }
            Request::Nodes => vec![Response::Nodes(vec![node(1)])],
            _ => vec![],
        });
        let text = SMALL
            .replace("jobs = 8", "jobs = 4")
            .replace("mean_interarrival_s = 2.0", "mean_interarrival_s = 0.0");
        let file = WorkloadFile::parse(&text).unwrap();
        let plan = plan::generate(&file, 1).unwrap();
        let client = fake.options("alice").connect().await.unwrap();
        let buyer = Buyer { alpha: 2.0, estimates: file.estimate };
        let outcome = execute(&client, &plan, Duration::from_secs(20), Some(buyer)).await.unwrap();
        assert_eq!((outcome.ending, outcome.refused.clone()), (Ending::AllEnded, vec![2]));
        assert_eq!(outcome.jobs.iter().map(|j| j.index).collect::<Vec<_>>(), vec![0, 1, 3]);
        for job in &outcome.jobs {
            let predicted: Vec<Timestamp> = job.predictions.iter().map(|p| p.1).collect();
            assert_eq!(predicted, vec![Timestamp(9_000), Timestamp(11_000)], "only changes are kept");
            assert!(job.bought.is_some_and(|b| b.quoted_earliest == Timestamp(20_000)));
        }
        let mut classes = std::collections::BTreeSet::new();
        for request in fake.requests() {
            let Request::SubmitChoosing { spec, choice } = request else { continue };
            classes.insert(spec.class);
            assert_eq!(spec.deadline, None, "the deadline is bought, not asked");
            assert!(spec.estimate.is_some_and(|e| e.map_task_ms.is_some()));
            // The PI-upper 43.2 slot-s is 0.012 credits, the cheapest point: α × that for
            // delay-sensitive jobs, that for the others.
            let max = if spec.class == Some(JobClass::DelaySensitive) { 24_000 } else { 12_000 };
            assert_eq!(choice, DeadlineChoice::MaxPrice(Credits(max)), "{}", spec.name);
        }
        assert_eq!(classes.len(), 2, "the plan mixes both classes: {classes:?}");
    }
}
