//! `slotmarket`: the user and admin command line. Parses arguments, sets up logging and
//! hands each subcommand to its own module, one command per file like mini-redis's
//! `cmd/`.
//!
//! Layout:
//! - `connection` — connection options (flags, environment, config file) → a `Client`;
//! - `output` — aligned tables for people, stable JSON shapes for scripts;
//! - `submit`, `status`, `jobs`, `history`, `nodes`, `cancel`, `node` — one request each (`jobs
//!   --all` pages through every job);
//! - `account`, `budget`, `ledger` — accounts, admins' grants and the ledger;
//! - `pki` — the cluster CA and certificates;
//! - `demo` — a whole local cluster in separate processes running a small workload;
//! - `workload` — a generated trace of jobs submitted at arrival times, with a summary;
//! - `fake_master` (tests only) — an in-process master stand-in over real QUIC + mTLS.
//!
//! Exit codes: 0 success, 1 failure (error printed on stderr), 2 invalid arguments, job
//! spec or workload file; `submit --wait`, `demo` and `workload run` also exit 1 when a
//! job did not complete.

mod account;
mod budget;
mod cancel;
mod connection;
mod deadline;
mod demo;
#[cfg(test)]
mod fake_master;
mod history;
mod jobs;
mod ledger;
mod node;
mod nodes;
mod output;
mod pki;
mod price;
mod rate;
mod reservation;
mod status;
mod submit;
mod workload;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::connection::ConnectionArgs;

/// Slotmarket: submit and inspect jobs, manage certificates, run a local demo cluster.
#[derive(Debug, Parser)]
#[command(name = "slotmarket", version, propagate_version = true)]
struct Cli {
    /// Print one JSON document on stdout instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Where and as whom to connect (declared after `json`, whose help stays under
    /// "Options").
    #[command(flatten)]
    connection: ConnectionArgs,
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a job spec locally and submit it; prints the job id.
    Submit(submit::SubmitArgs),
    /// Show one job with its stages.
    Status(status::StatusArgs),
    /// List jobs (yours; every job for admins): the newest by default, or `--all`.
    Jobs(jobs::JobsArgs),
    /// Show recorded runs of ended jobs (yours; every job's for admins).
    History(history::HistoryArgs),
    /// List the agents and their slots.
    Nodes,
    /// Cancel a job, killing its running tasks.
    Cancel(cancel::CancelArgs),
    /// Make the cluster CA and certificates.
    #[command(subcommand)]
    Pki(pki::PkiCommand),
    /// Start a local master and agents as separate processes and run a small workload.
    Demo(demo::DemoArgs),
    /// Run a generated workload (arrivals, size bins, classes) against the cluster.
    #[command(subcommand)]
    Workload(workload::WorkloadCommand),
    /// Show accounts (yours and those listing you; all for admins), or `add` one (admins).
    Account(account::AccountArgs),
    /// Grant budget to an account (admins).
    #[command(subcommand)]
    Budget(budget::BudgetCommand),
    /// Show an account's ledger: every grant and charge, oldest first.
    Ledger(ledger::LedgerArgs),
    /// Drain or undrain a node (admin only).
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// Show the slots the policy reserves (dress: δ for small-demand jobs), with the
    /// predicted releases and the small-demand jobs.
    Reservation,
    /// Show the DP price and the accounts' budget, rate, share, used and pending slots.
    Price,
    /// Set your account's spending rate under the `proportional` policy.
    #[command(subcommand)]
    Rate(rate::RateCommand),
    /// Move a running job's deadline (`set JOB +20m`) or drop it (`clear JOB`).
    #[command(subcommand)]
    Deadline(deadline::DeadlineCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(err) => {
            // `{:#}` prints the whole context chain on one line: "what we did: why it failed".
            // The master's messages may quote names other people chose: sanitise.
            eprintln!("error: {}", output::sanitize(&format!("{err:#}")));
            ExitCode::FAILURE
        }
    }
}

/// Dispatches to the subcommand's module.
async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Submit(args) => submit::run(&cli.connection, args, json).await,
        Command::Status(args) => status::run(&cli.connection, args, json).await,
        Command::Jobs(args) => jobs::run(&cli.connection, args, json).await,
        Command::History(args) => history::run(&cli.connection, args, json).await,
        Command::Nodes => nodes::run(&cli.connection, json).await,
        Command::Reservation => reservation::run(&cli.connection, json).await,
        Command::Cancel(args) => cancel::run(&cli.connection, args, json).await,
        Command::Pki(command) => pki::run(command, json),
        Command::Demo(args) => demo::run(args, json).await,
        Command::Workload(command) => workload::run(&cli.connection, command, json).await,
        Command::Account(args) => account::run(&cli.connection, args, json).await,
        Command::Budget(command) => budget::run(&cli.connection, command, json).await,
        Command::Ledger(args) => ledger::run(&cli.connection, args, json).await,
        Command::Node(command) => node::run(&cli.connection, command, json).await,
        Command::Rate(command) => rate::run(&cli.connection, command, json).await,
        Command::Price => price::run(&cli.connection, json).await,
        Command::Deadline(command) => deadline::run(&cli.connection, command, json).await,
    }
}

/// Logs go to stderr (stdout is for results, and must stay pure JSON with `--json`);
/// `RUST_LOG` selects, warnings and errors by default.
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use slotmarket_common::money::Credits;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn json_and_connection_flags_are_global() {
        let cli = Cli::try_parse_from(["slotmarket", "jobs", "--json", "--master", "10.0.0.1:7400"]).unwrap();
        assert!(cli.json);
        assert_eq!(cli.connection.master.as_deref(), Some("10.0.0.1:7400"));
        assert!(matches!(cli.command, Command::Jobs(_)));
    }

    #[test]
    fn account_commands_parse_names_amounts_and_members() {
        let cli = Cli::try_parse_from([
            "slotmarket",
            "account",
            "add",
            "lab",
            "--budget",
            "12.5",
            "--member",
            "alice",
            "--member",
            "bob",
        ])
        .unwrap();
        let Command::Account(account::AccountArgs {
            command: Some(account::AccountCommand::Add(add)),
            name: None,
        }) = cli.command
        else {
            panic!("not account add")
        };
        assert_eq!(
            (add.name.as_str(), add.budget, add.members),
            ("lab", Some(Credits(12_500_000)), vec!["alice".to_string(), "bob".into()])
        );
        let cli = Cli::try_parse_from(["slotmarket", "account", "add", "lab", "--income", "2.5"]).unwrap();
        let Command::Account(account::AccountArgs {
            command: Some(account::AccountCommand::Add(add)), ..
        }) = cli.command
        else {
            panic!("not account add")
        };
        assert_eq!(add.income, Some(Credits(2_500_000)));
        let cli = Cli::try_parse_from(["slotmarket", "account", "income", "lab", "0.5"]).unwrap();
        let Command::Account(account::AccountArgs {
            command: Some(account::AccountCommand::Income(income)),
            ..
        }) = cli.command
        else {
            panic!("not account income")
        };
        assert_eq!((income.name.as_str(), income.income), ("lab", Credits(500_000)));
        let cli = Cli::try_parse_from(["slotmarket", "account", "lab", "--json"]).unwrap();
        let Command::Account(args) = cli.command else { panic!("not account") };
        assert_eq!((args.command.is_none(), args.name.as_deref()), (true, Some("lab")));

        let cli = Cli::try_parse_from(["slotmarket", "budget", "add", "lab", "-5", "--memo", "fix"]).unwrap();
        let Command::Budget(budget::BudgetCommand::Add(add)) = cli.command else { panic!("not budget add") };
        assert_eq!((add.amount, add.memo.as_deref()), (Credits(-5_000_000), Some("fix")));
        let err =
            Cli::try_parse_from(["slotmarket", "budget", "add", "lab", "5.0000001"]).unwrap_err().to_string();
        assert!(err.contains("\"5.0000001\" has more than 6 decimal places"), "{err}");

        let cli = Cli::try_parse_from(["slotmarket", "ledger", "--after", "3", "--limit", "10"]).unwrap();
        let Command::Ledger(args) = cli.command else { panic!("not ledger") };
        assert_eq!((args.name, args.after, args.limit), (None, 3, Some(10)));
        assert!(Cli::try_parse_from(["slotmarket", "ledger", "--limit", "0"]).is_err());
    }

    #[test]
    fn node_drain_and_undrain_take_a_name() {
        let cli = Cli::try_parse_from(["slotmarket", "node", "drain", "node-2"]).unwrap();
        assert!(
            matches!(cli.command, Command::Node(node::NodeCommand::Drain { ref name }) if name == "node-2")
        );
        let cli = Cli::try_parse_from(["slotmarket", "node", "undrain", "node-2"]).unwrap();
        assert!(matches!(cli.command, Command::Node(node::NodeCommand::Undrain { .. })));
        assert!(Cli::try_parse_from(["slotmarket", "node", "drain"]).is_err());
    }

    #[test]
    fn job_ids_parse_with_or_without_prefix() {
        let cli = Cli::try_parse_from(["slotmarket", "status", "j7"]).unwrap();
        let Command::Status(args) = cli.command else { panic!("not status") };
        assert_eq!(args.job.0, 7);
        assert!(Cli::try_parse_from(["slotmarket", "cancel", "x7"]).is_err());
    }
}
