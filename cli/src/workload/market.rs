//! What a buying run (`workload run --alpha`) adds to the report: `mrm.csv` (per job:
//! quoted earliest finish, bought deadline, price, processing time, first and last
//! predicted finish, actual finish, met), `predictions.csv` (every change of a job's
//! predicted finish as the polls saw it: the predicted-vs-actual plot's input) and the
//! per-class summary (share met, mean earliness, mean slack offered, premium) in
//! `mrm.txt`. Times are seconds after the job's own submission.

use std::fmt::Write as _;

use slotmarket_common::metrics::round;
use slotmarket_common::protocol::{JobState, SLOT_MS_PER_CREDIT};
use slotmarket_common::spec::JobClass;
use slotmarket_common::time::Timestamp;

use super::plan::Plan;
use super::run::{Followed, Outcome};
use crate::output::secs_between;

/// The columns of `mrm.csv`.
pub(crate) const MRM_COLUMNS: &str = "job,name,class,quoted_earliest_s,deadline_s,price,processing,\
     raised_to_cheapest,predicted_first_s,predicted_last_s,finish_s,met,slot_s";

/// One bought job's figures, seconds after its submission.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BoughtJob {
    /// Plan index.
    pub(crate) index: u32,
    /// The master's id, as text.
    pub(crate) id: String,
    /// The spec's name.
    pub(crate) name: String,
    /// Its class (`none` without one).
    pub(crate) class: &'static str,
    /// The quote's earliest feasible finish.
    pub(crate) quoted_earliest_s: f64,
    /// The bought deadline.
    pub(crate) deadline_s: f64,
    /// The price charged, in credits.
    pub(crate) price: f64,
    /// Its processing time in credits (the quote's PI-upper work, its floor).
    pub(crate) processing: f64,
    /// Whether the buyer raised its limit to the cheapest point.
    pub(crate) raised: bool,
    /// The first and the last predicted finish seen while it ran.
    pub(crate) predicted: Option<(f64, f64)>,
    /// When it completed, if it did.
    pub(crate) finish_s: Option<f64>,
    /// Sampled slot-seconds it used.
    pub(crate) slot_s: f64,
}

impl BoughtJob {
    /// Whether it completed by its deadline.
    pub(crate) fn met(&self) -> bool {
        self.finish_s.is_some_and(|f| f <= self.deadline_s)
    }
}

/// The bought jobs of `outcome`, in plan order.
pub(crate) fn bought_jobs(plan: &Plan, outcome: &Outcome) -> Vec<BoughtJob> {
    outcome.jobs.iter().filter_map(|job| bought_job(plan, job)).collect()
}

/// One job's figures, if it bought a deadline.
fn bought_job(plan: &Plan, job: &Followed) -> Option<BoughtJob> {
    let bought = job.bought?;
    let planned = plan.jobs.iter().find(|p| p.index == job.index)?;
    // The master's submission time when listed; the quote's otherwise (same clock).
    let submitted = job.last.as_ref().map_or(bought.quoted_at, |s| s.submitted);
    let after = |t: Timestamp| round(secs_between(t, submitted), 3);
    let completed = job.last.as_ref().filter(|s| s.state == JobState::Completed);
    Some(BoughtJob {
        index: job.index,
        id: job.id.to_string(),
        name: planned.spec.name.clone(),
        class: planned.class.map_or("none", JobClass::name),
        quoted_earliest_s: after(bought.quoted_earliest),
        deadline_s: after(bought.purchase.deadline),
        price: bought.purchase.price.as_f64(),
        processing: bought.decision.processing.as_f64(),
        raised: bought.decision.raised_to_cheapest,
        predicted: job.predictions.first().zip(job.predictions.last()).map(|(a, b)| (after(a.1), after(b.1))),
        finish_s: completed.and_then(|s| s.finished).map(after),
        slot_s: round(job.slot_s, 3),
    })
}

/// `mrm.csv`.
pub(crate) fn mrm_csv(jobs: &[BoughtJob]) -> String {
    let mut out = format!("{MRM_COLUMNS}\n");
    let cell = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for j in jobs {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            j.id,
            j.name,
            j.class,
            j.quoted_earliest_s,
            j.deadline_s,
            j.price,
            j.processing,
            j.raised,
            cell(j.predicted.map(|p| p.0)),
            cell(j.predicted.map(|p| p.1)),
            cell(j.finish_s),
            j.met(),
            j.slot_s
        );
    }
    out
}

/// `predictions.csv`: job, class, seconds after submission seen, predicted finish then.
pub(crate) fn predictions_csv(plan: &Plan, outcome: &Outcome) -> String {
    let mut out = String::from("job,class,seen_s,predicted_s\n");
    for job in outcome.jobs.iter().filter(|j| j.bought.is_some()) {
        let Some(submitted) = job.last.as_ref().map(|s| s.submitted) else { continue };
        let class = plan.jobs.iter().find(|p| p.index == job.index).and_then(|p| p.class);
        let class = class.map_or("none", JobClass::name);
        for &(seen, predicted) in &job.predictions {
            let (seen, predicted) = (secs_between(seen, submitted), secs_between(predicted, submitted));
            let _ = writeln!(out, "{},{class},{},{}", job.id, round(seen, 3), round(predicted, 3));
        }
    }
    out
}

/// The per-class summary: bought, completed, met, mean earliness of the completed
/// (deadline − finish; negative when late), mean slack offered (deadline − quoted
/// earliest), mean price and premium (price over processing time, and over the sampled
/// slot time used), mean absolute error of the first and the last prediction.
pub(crate) fn summary(jobs: &[BoughtJob], alpha: f64, refused: usize) -> String {
    let mut out =
        format!("MRM buyer model, alpha {alpha}: {} jobs bought a deadline, {refused} refused\n", jobs.len());
    out.push_str(
        "class            bought  met   met%  earliness_s  slack_s  price     premium/work  premium/slot  pred_err_first_s  pred_err_last_s\n",
    );
    for class in ["delay-sensitive", "delay-tolerant", "none"] {
        let of: Vec<&BoughtJob> = jobs.iter().filter(|j| j.class == class).collect();
        if of.is_empty() {
            continue;
        }
        let done: Vec<&BoughtJob> = of.iter().copied().filter(|j| j.finish_s.is_some()).collect();
        let met = of.iter().filter(|j| j.met()).count();
        let earliness = mean(done.iter().filter_map(|j| j.finish_s.map(|f| j.deadline_s - f)));
        let slack = mean(of.iter().map(|j| j.deadline_s - j.quoted_earliest_s));
        let price = mean(of.iter().map(|j| j.price));
        let over_work = mean(of.iter().filter(|j| j.processing > 0.0).map(|j| j.price / j.processing));
        let slot_credits = |j: &BoughtJob| j.slot_s * 1000.0 / SLOT_MS_PER_CREDIT;
        let over_slot = mean(done.iter().filter(|j| j.slot_s > 0.0).map(|j| j.price / slot_credits(j)));
        let error = |pick: fn((f64, f64)) -> f64| {
            mean(done.iter().filter_map(|j| Some((pick(j.predicted?) - j.finish_s?).abs())))
        };
        let _ = writeln!(
            out,
            "{class:<16} {:>6} {met:>4} {:>6.1} {:>12} {:>8} {:>9} {:>13} {:>13} {:>17} {:>16}",
            of.len(),
            100.0 * met as f64 / of.len() as f64,
            fixed(earliness, 2),
            fixed(slack, 2),
            fixed(price, 6),
            fixed(over_work, 2),
            fixed(over_slot, 2),
            fixed(error(|p| p.0), 2),
            fixed(error(|p| p.1), 2),
        );
    }
    out
}

/// The mean, if there is anything to average.
fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (count > 0).then(|| sum / count as f64)
}

/// `v` with `places` decimals, or `-`.
fn fixed(v: Option<f64>, places: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.places$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(class: &'static str, deadline_s: f64, finish_s: Option<f64>, price: f64) -> BoughtJob {
        BoughtJob {
            index: 0,
            id: "j1".into(),
            name: "w".into(),
            class,
            quoted_earliest_s: 10.0,
            deadline_s,
            price,
            processing: 0.01,
            raised: false,
            predicted: Some((12.0, 14.0)),
            finish_s,
            slot_s: 18.0,
        }
    }

    #[test]
    fn the_summary_counts_met_jobs_and_averages_earliness_slack_and_premium_per_class() {
        let jobs = vec![
            job("delay-sensitive", 15.0, Some(13.0), 0.02),
            job("delay-sensitive", 12.0, Some(14.0), 0.02),
            job("delay-tolerant", 30.0, Some(20.0), 0.012),
            job("delay-tolerant", 30.0, None, 0.012),
        ];
        let text = summary(&jobs, 2.0, 1);
        assert!(
            text.starts_with("MRM buyer model, alpha 2: 4 jobs bought a deadline, 1 refused\n"),
            "{text}"
        );
        let row = |class: &str| -> Vec<String> {
            let line = text.lines().find(|l| l.starts_with(class)).unwrap();
            line.split_whitespace().map(str::to_string).collect()
        };
        // Sensitive: 1 of 2 met; earliness (2 + −2) / 2 = 0; slack (5 + 2) / 2; price / work 2;
        // 0.02 credits over 18 slot-seconds (0.005 credits) is 4; the first prediction
        // (12 s) is off by 1 and 2 s, the last (14 s) by 1 and 0 s.
        assert_eq!(
            row("delay-sensitive")[1..],
            ["2", "1", "50.0", "0.00", "3.50", "0.020000", "2.00", "4.00", "1.50", "0.50"]
        );
        // Tolerant: the unfinished job counts as not met and has no earliness.
        assert_eq!(row("delay-tolerant")[1..6], ["2", "1", "50.0", "10.00", "20.00"]);
        assert!(!text.contains("\nnone"));
        let csv = mrm_csv(&jobs[2..]);
        assert_eq!(csv.lines().next(), Some(MRM_COLUMNS));
        assert_eq!(csv.lines().nth(2), Some("j1,w,delay-tolerant,10,30,0.012,0.01,false,12,14,,false,18"));
    }
}
