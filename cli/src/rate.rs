//! `slotmarket rate set RATE [--account NAME]`: set a DP spending rate, in credits per
//! slot-hour. A user sets their own account's; an admin any account's. The new rate
//! counts from the next allocation interval of the `proportional` policy.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde::Serialize;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;

use crate::account::parse_credits;
use crate::connection::{self, ConnectionArgs};
use crate::output;

/// Subcommands of `rate`.
#[derive(Debug, Subcommand)]
pub(crate) enum RateCommand {
    /// Set the spending rate (credits per slot-hour) of your account.
    Set(SetArgs),
}

/// Arguments of `rate set`.
#[derive(Debug, Args)]
pub(crate) struct SetArgs {
    /// Credits per slot-hour, e.g. 2 or 0.5; 0 runs only on spare slots.
    #[arg(value_name = "RATE", value_parser = parse_credits)]
    pub(crate) rate: Credits,
    /// The account (admins: any; users: only their own). Default: your own.
    #[arg(long, value_name = "NAME")]
    pub(crate) account: Option<String>,
}

/// The `--json` document.
#[derive(Debug, Serialize)]
struct RateJson {
    /// The account.
    account: String,
    /// Its rate, credits per slot-hour, as a decimal string.
    rate: String,
}

/// Runs `rate set`.
pub(crate) async fn run(conn: &ConnectionArgs, command: RateCommand, json: bool) -> Result<ExitCode> {
    let RateCommand::Set(set) = command;
    if set.rate.is_negative() {
        bail!("a spending rate must not be negative, got {}", set.rate);
    }
    let client = connection::connect_from_args(conn).await?;
    let call = client.rate_set(set.account.map(AccountId), set.rate);
    let (account, rate) = connection::bounded(call)
        .await
        .with_context(|| format!("setting the spending rate to {}", set.rate))?;
    connection::close(client).await;
    if json {
        output::print_json(&RateJson { account: account.0, rate: rate.to_string() })?;
    } else {
        println!("{}", describe(&account, rate));
    }
    Ok(ExitCode::SUCCESS)
}

/// The sentence printed, e.g. `spending rate of lab is now 2.00 per slot-hour`.
fn describe(account: &AccountId, rate: Credits) -> String {
    format!("spending rate of {account} is now {rate} per slot-hour (from the next allocation interval)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_rate_reads_as_a_sentence() {
        let text = describe(&AccountId("lab".into()), Credits(2_500_000));
        assert_eq!(
            text,
            "spending rate of lab is now 2.50 per slot-hour (from the next allocation interval)"
        );
    }
}
