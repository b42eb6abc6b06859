//! `slotmarket price`: the DP market under the `proportional` policy, as the paper's
//! console shows it: the price (the sum of the rates in force of the accounts with work)
//! and, per account you may read, its budget, rate, allotted share, slots used and tasks
//! pending (map/reduce).

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use slotmarket_common::protocol::{AccountMarket, MarketInfo};

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// The `--json` document: amounts as decimal strings, counts as `[map, reduce]`.
#[derive(Debug, Serialize)]
struct MarketJson {
    policy: String,
    price: String,
    accounts: Vec<AccountJson>,
}

#[derive(Debug, Serialize)]
struct AccountJson {
    account: String,
    /// Null for an account nobody created (not metered).
    budget: Option<String>,
    rate: String,
    share: [u32; 2],
    used: [u32; 2],
    pending: [u32; 2],
}

/// Runs `price`.
pub(crate) async fn run(conn: &ConnectionArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let market = connection::bounded(client.price()).await.context("reading the price")?;
    connection::close(client).await;
    if json {
        output::print_json(&to_json(&market))?;
    } else {
        print!("{}", render(&market));
    }
    Ok(ExitCode::SUCCESS)
}

fn to_json(market: &MarketInfo) -> MarketJson {
    let account = |a: &AccountMarket| AccountJson {
        account: a.account.0.clone(),
        budget: a.balance.map(|b| b.to_string()),
        rate: a.rate.to_string(),
        share: a.share,
        used: a.used,
        pending: a.pending,
    };
    MarketJson {
        policy: market.policy.clone(),
        price: market.price.to_string(),
        accounts: market.accounts.iter().map(account).collect(),
    }
}

/// The price line and the accounts' table.
fn render(market: &MarketInfo) -> String {
    let mut text = format!("policy {} · price {} per slot-hour\n", market.policy, market.price);
    if market.accounts.is_empty() {
        text.push_str("no account you may read has work\n");
        return text;
    }
    let mut table = Table::new(&[
        ("ACCOUNT", Align::Left),
        ("BUDGET", Align::Right),
        ("RATE", Align::Right),
        ("SHARE", Align::Right),
        ("USED", Align::Right),
        ("PENDING", Align::Right),
    ]);
    let pair = |p: [u32; 2]| format!("{}/{}", p[0], p[1]);
    for a in &market.accounts {
        table.row(vec![
            a.account.0.clone(),
            a.balance.map_or_else(|| "-".to_string(), |b| b.to_string()),
            a.rate.to_string(),
            pair(a.share),
            pair(a.used),
            pair(a.pending),
        ]);
    }
    text.push_str(&table.render());
    text.push_str("(share, used, pending: map/reduce slots; budget - : not metered)\n");
    text
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::AccountId;
    use slotmarket_common::money::Credits;

    use super::*;

    #[test]
    fn the_console_shows_budget_rate_share_used_and_pending() {
        let market = MarketInfo {
            policy: "proportional".into(),
            price: Credits(7_500_000),
            accounts: vec![AccountMarket {
                account: AccountId("lab".into()),
                balance: Some(Credits(12_000_000)),
                rate: Credits(4_000_000),
                share: [8, 1],
                used: [7, 0],
                pending: [20, 1],
            }],
        };
        let text = render(&market);
        assert!(text.starts_with("policy proportional · price 7.50 per slot-hour\n"), "{text}");
        let row = text.lines().find(|l| l.starts_with("lab")).unwrap_or_default();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells, ["lab", "12.00", "4.00", "8/1", "7/0", "20/1"], "{text}");
        let json = serde_json::to_value(to_json(&market)).unwrap();
        assert_eq!(json["accounts"][0]["share"], serde_json::json!([8, 1]));
        assert_eq!(json["price"], "7.50");
    }
}
