//! The demo's MRM step: the demo user's account gets a budget, one job is quoted (its
//! estimate, earliest feasible finish and a few points of its price–deadline curve are
//! printed) and its earliest deadline is bought before the rest of the workload arrives,
//! so the final table can show the deadline met and the price paid.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use slotmarket_common::client::Client;
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{DeadlineChoice, QuoteInfo};
use slotmarket_common::spec::JobSpec;

use super::cluster::DEMO_USER;
use crate::connection;
use crate::output::secs_between;

/// The job whose deadline the demo buys.
pub(crate) const DEADLINE_JOB: (&str, &str) = ("pi-deadline.toml", include_str!("jobs/pi-deadline.toml"));

/// The demo user's budget: far more than the deadline costs (a few hundredths).
const BUDGET: Credits = Credits::from_credits(1);

/// The master.toml the demo master runs with: MRM admission in front of `edf`.
pub(crate) const MASTER_TOML: &str = "[admission]\nmode = \"mrm\"\n[policy]\nname = \"edf\"\n";

/// The deadline job's spec; a failure here is a bug in the demo.
pub(crate) fn deadline_spec() -> Result<JobSpec> {
    let (file, text) = DEADLINE_JOB;
    JobSpec::from_toml(text).with_context(|| format!("embedded demo job {file}"))
}

/// Admin: gives the demo user's account its budget.
pub(crate) async fn fund(admin: &Client) -> Result<()> {
    let account = AccountId(DEMO_USER.into());
    connection::bounded(admin.account_add(account, Some(BUDGET), Vec::new()))
        .await
        .context("creating the demo user's account")?;
    Ok(())
}

/// Quotes `spec`, prints the quote, buys its earliest deadline; answers the job.
pub(crate) async fn quote_and_buy(client: &Client, spec: JobSpec, started: Instant) -> Result<JobId> {
    let name = spec.name.clone();
    let quote =
        connection::bounded(client.quote(spec.clone())).await.with_context(|| format!("quoting {name}"))?;
    eprintln!("{}", quote_lines(&name, &quote));
    let answer = connection::bounded(client.submit_choosing(spec, DeadlineChoice::Earliest))
        .await
        .with_context(|| format!("buying the earliest deadline of {name}"))?;
    let bought = match answer {
        Ok(bought) => bought,
        Err(refusal) => bail!("the demo master refused the deadline of {name}: {}", refusal.reason),
    };
    eprintln!(
        "[{:.1}s] bought {} {name}: deadline +{:.1}s for {} credits",
        started.elapsed().as_secs_f64(),
        bought.job,
        secs_between(bought.deadline, quote.at),
        bought.price
    );
    Ok(bought.job)
}

/// `quote pi-deadline: estimate 26.0 slot-s (≤ 26.0 at 95 %); earliest +10.0s for 0.014446;
/// +20.0s 0.009, ...`: the estimate, the earliest and up to three later points.
fn quote_lines(name: &str, quote: &QuoteInfo) -> String {
    let points: Vec<String> = quote
        .curve
        .iter()
        .skip(1)
        .step_by((quote.curve.len() / 3).max(1))
        .take(3)
        .map(|p| format!("+{:.1}s {}", secs_between(p.deadline, quote.at), p.price))
        .collect();
    format!(
        "quote {name}: estimate {:.1} slot-s (≤ {:.1} at {:.0} %); earliest +{:.1}s for {} credits; later: {}",
        quote.work_ms as f64 / 1000.0,
        quote.work_upper_ms as f64 / 1000.0,
        quote.pi_level * 100.0,
        secs_between(quote.earliest.deadline, quote.at),
        quote.earliest.price,
        points.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::QuotePoint;
    use slotmarket_common::time::Timestamp;

    use super::*;

    #[test]
    fn the_deadline_job_parses_with_an_estimate() {
        let spec = deadline_spec().unwrap();
        let estimate = spec.estimate.expect("a never-run job needs an estimate to be quoted");
        assert_eq!((estimate.map_task_ms, estimate.reduce_task_ms), (Some(8_000), Some(2_000)));
        assert!(spec.stages.iter().all(|s| s.command.starts_with("slotmarket-task ")));
    }

    #[test]
    fn the_quote_line_names_the_estimate_the_earliest_and_later_points() {
        let point = |s: u64, micros| QuotePoint { deadline: Timestamp(s * 1000), price: Credits(micros) };
        let quote = QuoteInfo {
            at: Timestamp(0),
            work_ms: 26_000,
            work_upper_ms: 26_000,
            pi_level: 0.95,
            map_task_ms: (8_000, 8_000),
            reduce_task_ms: (2_000, 2_000),
            earliest: point(10, 14_446),
            curve: vec![point(10, 14_446), point(20, 9_000), point(40, 7_223)],
            admitted: 0,
            assumed_slots: None,
        };
        let line = quote_lines("pi-deadline", &quote);
        assert_eq!(
            line,
            "quote pi-deadline: estimate 26.0 slot-s (≤ 26.0 at 95 %); earliest +10.0s for 0.014446 credits; \
             later: +20.0s 0.009, +40.0s 0.007223"
        );
    }
}
