//! `slotmarket budget add NAME AMOUNT`: admins grant budget to an account; a negative
//! amount takes budget back (never below a zero balance). Each grant is a ledger entry.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{AccountSummary, LedgerEntry};

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
        println!("{}", describe(&entry, &account));
    }
    Ok(ExitCode::SUCCESS)
}

/// The sentence printed for a grant or a take-back, e.g.
/// `granted 2.50 to lab (ledger entry 4); balance 12.50`.
fn describe(entry: &LedgerEntry, account: &AccountSummary) -> String {
    let (verb, magnitude, preposition) = match entry.amount.checked_neg() {
        Some(taken) if entry.amount.is_negative() => ("took back", taken, "from"),
        _ => ("granted", entry.amount, "to"),
    };
    format!(
        "{verb} {magnitude} {preposition} {} (ledger entry {}); balance {}",
        account.account, entry.seq, account.balance
    )
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::EntryKind;
    use slotmarket_common::time::Timestamp;

    use super::*;
    use crate::account::tests::lab;

    #[test]
    fn grants_and_take_backs_read_as_sentences() {
        let mut entry = LedgerEntry {
            seq: 4,
            account: AccountId("lab".into()),
            at: Timestamp(1),
            amount: Credits(2_500_000),
            kind: EntryKind::Grant { by: "root".into() },
            memo: None,
        };
        assert_eq!(describe(&entry, &lab()), "granted 2.50 to lab (ledger entry 4); balance 10.50");
        entry.amount = Credits(-500_000);
        entry.kind = EntryKind::Charge { job: None, reason: "budget reduced by admin:root".into() };
        assert_eq!(describe(&entry, &lab()), "took back 0.50 from lab (ledger entry 4); balance 10.50");
    }
}
