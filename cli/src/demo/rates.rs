//! The demo's DP scenario (`demo --rates`): the master runs the `proportional` policy
//! (DP) and two users who bid spending rates 1 and 2 submit the same pi job before the
//! agents start, so neither is first to the slots. Four times a second the market view
//! (what `slotmarket price` shows) is read, and once a second printed: while both have
//! tasks waiting, the market allots the map slots 1 : 2 and the slots each user runs on
//! follow. The report adds each user's mean share and running slots over those samples.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{AccountMarket, JobSummary, MarketInfo};
use slotmarket_common::spec::JobSpec;

use super::cluster::Cluster;
use super::workload;
use crate::connection;
use crate::output::{Align, Table};

/// The users and the rates (credits per slot-hour) they bid.
pub(crate) const USERS: [(&str, u32); 2] = [("alice", 1), ("bob", 2)];

/// The master's policy, with [`USERS`]' rates: DP with one-second intervals so the
/// shares show within the demo's seconds, preemption so a user over its share gives the
/// slots back at once, and no compensation so the split is the rates' alone.
pub(crate) fn master_toml() -> String {
    let rates: String = USERS.iter().map(|(user, rate)| format!("{user} = {rate}\n")).collect();
    format!(
        "[policy]\nname = \"proportional\"\ninterval_s = 1\npreemption = true\ncompensation_s = 0\n\
         [policy.rates]\n{rates}"
    )
}

/// Each user's budget: far more than their rate costs over the demo.
const BUDGET: Credits = Credits::from_credits(1);

/// The job each user submits: many short pi samplers, then their sum.
const JOB: &str = include_str!("jobs/pi-rates.toml");

/// How often the market is read.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);
/// Samples per printed line (one a second).
const SAMPLES_PER_LINE: usize = 4;

/// One user's outcome, over the seconds both users had map tasks waiting.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct UserShare {
    pub(crate) user: String,
    /// The rate bid, credits per slot-hour.
    pub(crate) rate: u32,
    /// Map slots the market allotted it, on average.
    pub(crate) mean_share: f64,
    /// Map slots it ran on, on average.
    pub(crate) mean_running: f64,
}

/// The split while both users had map tasks waiting.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct SharesReport {
    /// Samples (four a second) in which both users had map tasks waiting.
    pub(crate) contended_samples: usize,
    pub(crate) users: Vec<UserShare>,
}

/// One user's map (share, running) in one sample.
type Standing = (u32, u32);

/// The users' job spec, named after its user.
pub(crate) fn spec_for(user: &str) -> Result<JobSpec> {
    let mut spec = JobSpec::from_toml(JOB).context("embedded demo job pi-rates.toml")?;
    spec.name = format!("pi-{user}");
    Ok(spec)
}

/// Admin: creates each user's account with a budget, so charges show in the ledger.
pub(crate) async fn fund(admin: &Client) -> Result<()> {
    for (user, _) in USERS {
        connection::bounded(admin.account_add(AccountId(user.into()), Some(BUDGET), Vec::new()))
            .await
            .with_context(|| format!("creating {user}'s account"))?;
    }
    Ok(())
}

/// Follows the jobs `ids` (as admin, who sees both users') until they end or `timeout`
/// passes, reading the market four times a second and printing each user's share and
/// running slots once a second; answers their last summaries and the split while both
/// had tasks waiting.
pub(crate) async fn follow(
    admin: &Client,
    cluster: &mut Cluster,
    ids: &[JobId],
    started: Instant,
    timeout: Duration,
) -> Result<(Vec<JobSummary>, SharesReport)> {
    let mut samples: Vec<[Standing; 2]> = Vec::new();
    let mut reads = 0;
    loop {
        cluster.check_alive()?;
        let market = connection::bounded(admin.price()).await.context("reading the market")?;
        reads += 1;
        if reads % SAMPLES_PER_LINE == 1 {
            eprintln!("{}", market_line(started.elapsed(), &market));
        }
        let standing = users_standing(&market);
        if standing.iter().all(|s| s.is_some_and(|s| s.pending[0] > 0)) {
            samples.push(standing.map(|s| s.map_or((0, 0), |s| (s.share[0], s.used[0]))));
        }
        let jobs = workload::our_jobs(admin, ids).await?;
        let ended = jobs.len() == ids.len() && jobs.iter().all(|j| j.state.is_terminal());
        if ended || started.elapsed() > timeout {
            if !ended {
                eprintln!("gave up waiting after {}s (raise it with --timeout)", timeout.as_secs());
            }
            return Ok((jobs, shares(&samples)));
        }
        tokio::time::sleep(SAMPLE_INTERVAL).await;
    }
}

/// Each demo user's entry in the market view, in [`USERS`] order.
fn users_standing(market: &MarketInfo) -> [Option<&AccountMarket>; 2] {
    USERS.map(|(user, _)| market.accounts.iter().find(|a| a.account.0 == user))
}

/// `[3.0s] price 3.00/slot-h; alice rate 1.00: share 2, running 2, waiting 30; bob ...`
fn market_line(elapsed: Duration, market: &MarketInfo) -> String {
    let mut line = format!("[{:.1}s] price {}/slot-h", elapsed.as_secs_f64(), market.price);
    for ((user, _), standing) in USERS.iter().zip(users_standing(market)) {
        match standing {
            Some(s) => line.push_str(&format!(
                "; {user} rate {}: share {}, running {}, waiting {}",
                s.rate, s.share[0], s.used[0], s.pending[0]
            )),
            None => line.push_str(&format!("; {user}: no work")),
        }
    }
    line
}

/// Each user's mean share and running map slots over `samples` (those in which both had
/// tasks waiting), to a tenth.
fn shares(samples: &[[Standing; 2]]) -> SharesReport {
    let mean = |of: &dyn Fn(&[Standing; 2]) -> u32| {
        let sum: u32 = samples.iter().map(of).sum();
        if samples.is_empty() { 0.0 } else { (f64::from(sum) / samples.len() as f64 * 10.0).round() / 10.0 }
    };
    let users = USERS
        .iter()
        .enumerate()
        .map(|(k, (user, rate))| UserShare {
            user: (*user).into(),
            rate: *rate,
            mean_share: mean(&|s| s[k].0),
            mean_running: mean(&|s| s[k].1),
        })
        .collect();
    SharesReport { contended_samples: samples.len(), users }
}

/// The split as a table with a one-line reading.
pub(crate) fn render(report: &SharesReport) -> String {
    let mut table = Table::new(&[
        ("user", Align::Left),
        ("rate", Align::Right),
        ("share", Align::Right),
        ("running", Align::Right),
    ]);
    for user in &report.users {
        let tenths = |v: f64| format!("{v:.1}");
        table.row(vec![
            user.user.clone(),
            user.rate.to_string(),
            tenths(user.mean_share),
            tenths(user.mean_running),
        ]);
    }
    format!(
        "while both users had map tasks waiting ({} samples over {:.1} s), their map slots on average:\n{}",
        report.contended_samples,
        report.contended_samples as f64 * SAMPLE_INTERVAL.as_secs_f64(),
        table.render()
    )
}

#[cfg(test)]
mod tests {
    use slotmarket_common::spec::SlotKind;

    use super::*;

    fn standing(user: &str, used: u32, pending: u32) -> AccountMarket {
        AccountMarket {
            account: AccountId(user.into()),
            balance: Some(BUDGET),
            rate: Credits::from_credits(1),
            share: [used, 0],
            used: [used, 0],
            pending: [pending, 0],
        }
    }

    #[test]
    fn the_embedded_job_is_many_pi_samplers_and_their_sum() {
        let spec = spec_for("alice").unwrap();
        assert_eq!(spec.name, "pi-alice");
        let (map, reduce) = (&spec.stages[0], &spec.stages[1]);
        assert_eq!(
            (map.slot, reduce.slot, reduce.after.clone()),
            (SlotKind::Map, SlotKind::Reduce, vec!["map".to_string()])
        );
        assert!(map.tasks >= 24, "enough tasks to keep both users busy for several seconds");
    }

    #[test]
    fn the_split_averages_share_and_running_slots_per_user() {
        let report = shares(&[[(2, 5), (4, 1)], [(2, 2), (4, 4)], [(2, 2), (4, 4)]]);
        assert_eq!(report.contended_samples, 3);
        let means: Vec<(f64, f64)> = report.users.iter().map(|u| (u.mean_share, u.mean_running)).collect();
        assert_eq!(means, [(2.0, 3.0), (4.0, 3.0)]);
        assert_eq!(shares(&[]).users[0].mean_running, 0.0);
        let text = render(&report);
        assert!(text.contains("alice     1    2.0      3.0\n"), "{text}");
    }

    #[test]
    fn a_market_line_names_each_users_share_and_slots() {
        let market = MarketInfo {
            policy: "proportional".into(),
            price: Credits::from_credits(3),
            accounts: vec![standing("bob", 4, 20), standing("carol", 1, 0)],
        };
        let line = market_line(Duration::from_secs(3), &market);
        assert!(line.starts_with("[3.0s] price 3"), "{line}");
        assert!(line.ends_with("; alice: no work; bob rate 1.00: share 4, running 4, waiting 20"), "{line}");
        assert_eq!(users_standing(&market)[1].map(|s| s.used[0]), Some(4));
    }
}
