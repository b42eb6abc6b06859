//! `slotmarket budget add NAME AMOUNT`: admins grant budget to an account; a negative
//! amount takes budget back (never below a zero balance). Each grant is a ledger entry.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;

use crate::account::{AccountJson, parse_credits};
use crate::connection::{self, ConnectionArgs};
use crate::ledger::EntryJson;
use crate::output;

/// Subcommands of `budget`.
#[derive(Debug, Subcommand)]
pub(crate) enum BudgetCommand {
    /// Admins: grant AMOUNT credits to an account (negative: take them back).
    Add(AddArgs),
}

/// Arguments of `budget add`.
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The account, created beforehand with `slotmarket account add`.
    #[arg(value_name = "NAME")]
    pub(crate) name: String,
    /// Credits to grant, e.g. 100, 12.5 or -5.
    #[arg(value_name = "AMOUNT", value_parser = parse_credits, allow_negative_numbers = true)]
    pub(crate) amount: Credits,
    /// Why, kept on the ledger entry (printable text, at most 200 bytes).
    #[arg(long, value_name = "TEXT")]
    pub(crate) memo: Option<String>,
}

/// The `--json` document.
#[derive(Debug, Serialize)]
struct Granted {
    /// The ledger entry written.
    entry: EntryJson,
    /// The account after it.
    account: AccountJson,
}

/// Runs `budget add`.
pub(crate) async fn run(conn: &ConnectionArgs, command: BudgetCommand, json: bool) -> Result<ExitCode> {
    let BudgetCommand::Add(add) = command;
    let client = connection::connect_from_args(conn).await?;
    let (name, amount) = (add.name.clone(), add.amount);
    let call = client.budget_add(AccountId(add.name), add.amount, add.memo);
    let (entry, account) = connection::bounded(call)
        .await
        .with_context(|| format!("adding {amount} to the budget of {name}"))?;
    connection::close(client).await;
    if json {
        output::print_json(&Granted {
            entry: EntryJson::from(&entry),
            account: AccountJson::from(&account),
        })?;
    } else {
        let verb = if entry.amount.is_negative() { "took back" } else { "granted" };
        let shown = entry.amount.checked_neg().filter(|_| entry.amount.is_negative()).unwrap_or(entry.amount);
        println!(
            "{verb} {shown} {} {} (ledger entry {}); balance {}",
            if entry.amount.is_negative() { "from" } else { "to" },
            account.account,
            entry.seq,
            account.balance
        );
    }
    Ok(ExitCode::SUCCESS)
}
