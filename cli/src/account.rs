//! `slotmarket account [NAME]`: the accounts the caller may read (users: their own and
//! those listing them; admins: all) with the DP console's columns (budget, income, rate,
//! share, slots used, slots pending: the paper's Fig. 2), and for admins
//! `slotmarket account add NAME` and `slotmarket account income NAME I`.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{AccountMarket, AccountSummary, MarketInfo};
use slotmarket_common::time::Timestamp;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// Arguments of `account`: a subcommand, or an optional name to show.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct AccountArgs {
    /// What to do; without one, show accounts.
    #[command(subcommand)]
    pub(crate) command: Option<AccountCommand>,
    /// Show only this account (default: every account you may read).
    #[arg(value_name = "NAME")]
    pub(crate) name: Option<String>,
}

/// Subcommands of `account`.
#[derive(Debug, Subcommand)]
pub(crate) enum AccountCommand {
    /// Admins: create an account, optionally with a first budget, income and members.
    Add(AddArgs),
    /// Admins: set an account's DP income in credits per hour (0 stops it).
    Income(IncomeArgs),
}

/// Arguments of `account income`.
#[derive(Debug, Args)]
pub(crate) struct IncomeArgs {
    /// The account (created with `account add`).
    #[arg(value_name = "NAME")]
    pub(crate) name: String,
    /// Credits per hour, credited every allocation interval, e.g. 10 or 0.5.
    #[arg(value_name = "CREDITS_PER_HOUR", value_parser = parse_credits)]
    pub(crate) income: Credits,
}

/// Arguments of `account add`.
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The account's name (1-64 of A-Z a-z 0-9 . _ -); a user's own account carries
    /// their certificate name.
    #[arg(value_name = "NAME")]
    pub(crate) name: String,
    /// A first budget in credits, e.g. 100 or 12.5.
    #[arg(long, value_name = "CREDITS", value_parser = parse_credits)]
    pub(crate) budget: Option<Credits>,
    /// A user (besides the account's namesake) who may read the account and submit to
    /// it; repeat for several.
    #[arg(long = "member", value_name = "USER")]
    pub(crate) members: Vec<String>,
    /// A DP income in credits per hour, credited every allocation interval.
    #[arg(long, value_name = "CREDITS_PER_HOUR", value_parser = parse_credits)]
    pub(crate) income: Option<Credits>,
}

/// An account, for JSON. Amounts are exact decimal strings; the `_micro` twins are
/// integers in micro-credits for scripts that add them up.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct AccountJson {
    /// Its name.
    pub(crate) account: String,
    /// Milliseconds since the Unix epoch, or null for a user's implicit account.
    pub(crate) created_ms: Option<u64>,
    /// Users besides its namesake who may use it.
    pub(crate) members: Vec<String>,
    /// Sum of grants, e.g. "12.50".
    pub(crate) granted: String,
    /// Sum of charges, positive.
    pub(crate) charged: String,
    /// granted - charged.
    pub(crate) balance: String,
    /// `granted` in micro-credits.
    pub(crate) granted_micro: i64,
    /// `charged` in micro-credits.
    pub(crate) charged_micro: i64,
    /// `balance` in micro-credits.
    pub(crate) balance_micro: i64,
    /// Ledger entries.
    pub(crate) entries: u64,
    /// Sequence number of the latest entry, 0 if none.
    pub(crate) last_seq: u64,
    /// Income per hour an admin set, or null (the policy's settings apply).
    pub(crate) income: Option<String>,
    /// Spending rate per slot-hour its user set, or null (the policy's settings apply).
    pub(crate) rate_set: Option<String>,
    /// The DP market's view of it while it has work: rate in force, share, used,
    /// pending (map/reduce); null when it has no work or the policy is not DP.
    pub(crate) market: Option<MarketJson>,
}

/// An account's standing in the DP market, for JSON.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct MarketJson {
    /// The rate it competes at this interval (0 once its budget is spent).
    pub(crate) rate: String,
    /// Slots allotted, `[map, reduce]`.
    pub(crate) share: [u32; 2],
    /// Slots in use.
    pub(crate) used: [u32; 2],
    /// Tasks waiting.
    pub(crate) pending: [u32; 2],
}

impl From<&AccountMarket> for MarketJson {
    fn from(m: &AccountMarket) -> MarketJson {
        MarketJson { rate: m.rate.to_string(), share: m.share, used: m.used, pending: m.pending }
    }
}

impl AccountJson {
    /// `a` with its market standing, if it has one.
    fn with_market(a: &AccountSummary, market: Option<&AccountMarket>) -> AccountJson {
        AccountJson { market: market.map(MarketJson::from), ..AccountJson::from(a) }
    }
}

impl From<&AccountSummary> for AccountJson {
    fn from(a: &AccountSummary) -> AccountJson {
        AccountJson {
            account: a.account.0.clone(),
            created_ms: a.created.map(Timestamp::as_millis),
            members: a.members.clone(),
            granted: a.granted.to_string(),
            charged: a.charged.to_string(),
            balance: a.balance.to_string(),
            granted_micro: a.granted.micros(),
            charged_micro: a.charged.micros(),
            balance_micro: a.balance.micros(),
            entries: a.entries,
            last_seq: a.last_seq,
            income: a.income.map(|i| i.to_string()),
            rate_set: a.rate.map(|r| r.to_string()),
            market: None,
        }
    }
}

/// The `--json` document of `account`.
#[derive(Debug, Serialize)]
struct List {
    /// The DP price (credits per slot-hour), or null when the policy is not DP.
    price: Option<String>,
    /// One entry per account, by name.
    accounts: Vec<AccountJson>,
}

/// The `--json` document of `account add`.
#[derive(Debug, Serialize)]
struct Added {
    /// The new account.
    account: AccountJson,
}

/// Runs `account` or `account add`.
pub(crate) async fn run(conn: &ConnectionArgs, args: AccountArgs, json: bool) -> Result<ExitCode> {
    match args.command {
        Some(AccountCommand::Add(add)) => run_add(conn, add, json).await,
        Some(AccountCommand::Income(income)) => run_income(conn, income, json).await,
        None => run_show(conn, args.name, json).await,
    }
}

async fn run_show(conn: &ConnectionArgs, name: Option<String>, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let what =
        name.as_deref().map_or_else(|| "listing accounts".to_string(), |n| format!("reading account {n}"));
    let accounts = connection::bounded(client.accounts(name.map(AccountId))).await.context(what)?;
    let market = connection::bounded(client.price()).await.context("reading the DP market")?;
    connection::close(client).await;
    let dp = market.policy == "proportional";
    let standing = |a: &AccountSummary| market.accounts.iter().find(|m| m.account == a.account);
    if json {
        let accounts = accounts.iter().map(|a| AccountJson::with_market(a, standing(a))).collect();
        output::print_json(&List { price: dp.then(|| market.price.to_string()), accounts })?;
    } else if accounts.is_empty() {
        println!("no accounts");
    } else {
        print!("{}", table(&accounts, &market).render());
        if dp {
            println!("price {} per slot-hour (share, used, pending: map/reduce slots)", market.price);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_add(conn: &ConnectionArgs, add: AddArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let name = add.name.clone();
    let call = client.account_add(AccountId(add.name), add.budget, add.members);
    let mut summary = connection::bounded(call).await.with_context(|| format!("creating account {name}"))?;
    if let Some(income) = add.income {
        let call = client.income_set(summary.account.clone(), income);
        summary = connection::bounded(call)
            .await
            .with_context(|| format!("account {name} was created; setting its income failed"))?;
    }
    connection::close(client).await;
    if json {
        output::print_json(&Added { account: AccountJson::from(&summary) })?;
    } else {
        println!("account {} created with balance {}", summary.account, summary.balance);
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_income(conn: &ConnectionArgs, args: IncomeArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let name = args.name.clone();
    let call = client.income_set(AccountId(args.name), args.income);
    let summary = connection::bounded(call).await.with_context(|| format!("setting the income of {name}"))?;
    connection::close(client).await;
    if json {
        output::print_json(&Added { account: AccountJson::from(&summary) })?;
    } else {
        println!("account {} earns {} per hour", summary.account, args.income);
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per account: its budget (balance), income, rate, and while it has work under
/// DP its share, slots used and tasks pending (map/reduce), then its ledger totals. The
/// rate is the one in force when it has work, else the one its user set; `-` where
/// nothing is set (the policy's settings apply) or it has no work.
fn table(accounts: &[AccountSummary], market: &MarketInfo) -> Table {
    let mut table = Table::new(&[
        ("account", Align::Left),
        ("budget", Align::Right),
        ("income", Align::Right),
        ("rate", Align::Right),
        ("share", Align::Right),
        ("used", Align::Right),
        ("pending", Align::Right),
        ("granted", Align::Right),
        ("charged", Align::Right),
        ("created", Align::Left),
        ("members", Align::Left),
    ]);
    let dash = || "-".to_string();
    let pair = |p: [u32; 2]| format!("{}/{}", p[0], p[1]);
    for a in accounts {
        let m = market.accounts.iter().find(|m| m.account == a.account);
        let rate = m.map(|m| m.rate).or(a.rate);
        table.row(vec![
            a.account.to_string(),
            a.balance.to_string(),
            a.income.map_or_else(dash, |i| i.to_string()),
            rate.map_or_else(dash, |r| r.to_string()),
            m.map_or_else(dash, |m| pair(m.share)),
            m.map_or_else(dash, |m| pair(m.used)),
            m.map_or_else(dash, |m| pair(m.pending)),
            a.granted.to_string(),
            a.charged.to_string(),
            a.created.map_or_else(dash, output::clock),
            a.members.join(","),
        ]);
    }
    table
}

/// Parses an amount of credits for clap; the error names the bad value.
pub(crate) fn parse_credits(text: &str) -> Result<Credits, String> {
    text.parse::<Credits>().map_err(|e| e.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A created account for tests in this crate: granted 12.5, charged 2.
    pub(crate) fn lab() -> AccountSummary {
        AccountSummary {
            account: AccountId("lab".into()),
            created: Some(Timestamp(10_000)),
            members: vec!["alice".into(), "bob".into()],
            granted: Credits(12_500_000),
            charged: Credits(2_000_000),
            balance: Credits(10_500_000),
            entries: 3,
            last_seq: 9,
            rate: Some(Credits(4_000_000)),
            income: Some(Credits(1_500_000)),
        }
    }

    fn market() -> MarketInfo {
        MarketInfo {
            policy: "proportional".into(),
            price: Credits(7_500_000),
            accounts: vec![AccountMarket {
                account: AccountId("lab".into()),
                balance: Some(Credits(10_500_000)),
                rate: Credits(4_000_000),
                share: [8, 1],
                used: [7, 0],
                pending: [20, 1],
            }],
        }
    }

    #[test]
    fn account_json_has_a_stable_shape() {
        let value =
            serde_json::to_value(AccountJson::with_market(&lab(), market().accounts.first())).unwrap();
        let expected = serde_json::json!({
            "account": "lab", "created_ms": 10000, "members": ["alice", "bob"],
            "granted": "12.50", "charged": "2.00", "balance": "10.50",
            "granted_micro": 12500000, "charged_micro": 2000000, "balance_micro": 10500000,
            "entries": 3, "last_seq": 9, "income": "1.50", "rate_set": "4.00",
            "market": {"rate": "4.00", "share": [8, 1], "used": [7, 0], "pending": [20, 1]}
        });
        assert_eq!(value, expected);
    }

    #[test]
    fn accounts_table_shows_the_console_columns_and_implicit_accounts() {
        let implicit = AccountSummary {
            account: AccountId("alice".into()),
            created: None,
            members: vec![],
            granted: Credits::ZERO,
            charged: Credits::ZERO,
            balance: Credits::ZERO,
            entries: 0,
            last_seq: 0,
            rate: None,
            income: None,
        };
        let text = table(&[implicit, lab()], &market()).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        let columns = [
            "account", "budget", "income", "rate", "share", "used", "pending", "granted", "charged",
            "created", "members",
        ];
        assert_eq!(header, columns, "{text}");
        let alice: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(alice, ["alice", "0.00", "-", "-", "-", "-", "-", "0.00", "0.00", "-"], "{text}");
        let lab: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            lab[..9],
            ["lab", "10.50", "1.50", "4.00", "8/1", "7/0", "20/1", "12.50", "2.00"],
            "{text}"
        );
        assert_eq!(lab.last(), Some(&"alice,bob"), "{text}");
    }

    #[test]
    fn bad_amounts_are_named() {
        assert_eq!(parse_credits("12.5"), Ok(Credits(12_500_000)));
        let err = parse_credits("12,5").unwrap_err();
        assert!(err.contains("\"12,5\" is not an amount of credits"), "{err}");
    }
}
