//! `slotmarket account [NAME]`: the accounts the caller may read (users: their own and
//! those listing them; admins: all), and `slotmarket account add NAME` for admins.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::AccountSummary;
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
    /// Admins: create an account, optionally with a first budget and members.
    Add(AddArgs),
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
        }
    }
}

/// The `--json` document of `account`.
#[derive(Debug, Serialize)]
struct List {
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
        None => run_show(conn, args.name, json).await,
    }
}

async fn run_show(conn: &ConnectionArgs, name: Option<String>, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let what =
        name.as_deref().map_or_else(|| "listing accounts".to_string(), |n| format!("reading account {n}"));
    let accounts = connection::bounded(client.accounts(name.map(AccountId))).await.context(what)?;
    connection::close(client).await;
    if json {
        output::print_json(&List { accounts: accounts.iter().map(AccountJson::from).collect() })?;
    } else if accounts.is_empty() {
        println!("no accounts");
    } else {
        print!("{}", table(&accounts).render());
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_add(conn: &ConnectionArgs, add: AddArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let name = add.name.clone();
    let call = client.account_add(AccountId(add.name), add.budget, add.members);
    let summary = connection::bounded(call).await.with_context(|| format!("creating account {name}"))?;
    connection::close(client).await;
    if json {
        output::print_json(&Added { account: AccountJson::from(&summary) })?;
    } else {
        println!("account {} created with balance {}", summary.account, summary.balance);
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per account; an implicit account shows `-` as its creation time.
fn table(accounts: &[AccountSummary]) -> Table {
    let mut table = Table::new(&[
        ("account", Align::Left),
        ("created", Align::Left),
        ("granted", Align::Right),
        ("charged", Align::Right),
        ("balance", Align::Right),
        ("entries", Align::Right),
        ("members", Align::Left),
    ]);
    for a in accounts {
        table.row(vec![
            a.account.to_string(),
            a.created.map_or_else(|| "-".into(), output::clock),
            a.granted.to_string(),
            a.charged.to_string(),
            a.balance.to_string(),
            a.entries.to_string(),
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
        }
    }

    #[test]
    fn account_json_has_a_stable_shape() {
        let value = serde_json::to_value(AccountJson::from(&lab())).unwrap();
        let expected = serde_json::json!({
            "account": "lab", "created_ms": 10000, "members": ["alice", "bob"],
            "granted": "12.50", "charged": "2.00", "balance": "10.50",
            "granted_micro": 12500000, "charged_micro": 2000000, "balance_micro": 10500000,
            "entries": 3, "last_seq": 9
        });
        assert_eq!(value, expected);
    }

    #[test]
    fn accounts_table_shows_amounts_and_implicit_accounts() {
        let implicit = AccountSummary {
            account: AccountId("alice".into()),
            created: None,
            members: vec![],
            granted: Credits::ZERO,
            charged: Credits::ZERO,
            balance: Credits::ZERO,
            entries: 0,
            last_seq: 0,
        };
        let text = table(&[implicit, lab()]).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("account  created   granted  charged  balance  entries  members"),
            "{text}"
        );
        assert!(lines[1].starts_with("alice    -            0.00     0.00     0.00        0"), "{text}");
        assert!(lines[2].ends_with("12.50     2.00    10.50        3  alice,bob"), "{text}");
    }

    #[test]
    fn bad_amounts_are_named() {
        assert_eq!(parse_credits("12.5"), Ok(Credits(12_500_000)));
        let err = parse_credits("12,5").unwrap_err();
        assert!(err.contains("\"12,5\" is not an amount of credits"), "{err}");
    }
}
