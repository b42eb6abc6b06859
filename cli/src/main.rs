//! `slotmarket`: the user and admin command line. Parses arguments, sets up logging and
//! hands each subcommand to its own module, one command per file like mini-redis's
//! `cmd/`.
//!
//! Layout:
//! - `connection` — connection options (flags, environment, config file) → a `Client`;
//! - `output` — aligned tables for people, stable JSON shapes for scripts;
//! - `fetch` (a job's outputs from the agents), `cleanup` (removes ended jobs' directories);
//! - `submit`, `status` (`--tasks`), `logs` (a task's stdout/stderr), `jobs`, `history`, `profile`, `nodes`, `cancel`, `node` — one request each (`jobs
//!   --all` pages through every job);
//! - `run` (a one-stage job from a command line), `wait` (follows jobs, reconnecting
//!   across a master restart; `submit --wait` uses it too), `queue` (pending work and why
//!   it waits), `completions` and the hidden `man` (scripts/man.sh);
//! - `account`, `budget`, `ledger` — accounts, admins' grants and the ledger;
//! - `pki` — the cluster CA and certificates;
//! - `demo` — a whole local cluster in separate processes running a small workload;
//! - `workload` — a generated trace of jobs submitted at arrival times, with a summary;
//! - `fake_master` (tests only) — an in-process master stand-in over real QUIC + mTLS.
//!
//! Exit codes: 0 success, 1 failure (error printed on stderr), 2 invalid arguments, job
//! spec or workload file; `submit --wait`, `run --wait`, `wait`, `demo` and `workload run`
//! also exit 1 when a job did not complete.

mod account;
mod budget;
mod cancel;
mod cleanup;
mod completions;
mod connection;
mod deadline;
mod demo;
mod estimate;
#[cfg(test)]
mod fake_master;
mod fetch;
mod history;
mod jobs;
mod ledger;
mod logs;
mod man;
mod node;
mod nodes;
mod output;
mod pki;
mod price;
mod profile;
mod progress;
mod queue;
mod quote;
mod rate;
mod reservation;
mod run;
mod status;
mod submit;
mod wait;
mod workload;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use slotmarket_common::report::Report;

use crate::connection::ConnectionArgs;

/// The allocator of a musl build of the CLI (`scripts/build-cli-musl.sh`, which also turns
/// off mimalloc's transparent huge pages: zeroing a 2 MiB page cost more than the run).
/// musl's own malloc mapped and unmapped memory about 80 times per one-spec submit, which
/// took back what a start without glibc's CPU probing saves.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Slotmarket: submit and inspect jobs, manage certificates, run a local demo cluster.
#[derive(Debug, Parser)]
#[command(name = "slotmarket", version, propagate_version = true)]
pub(crate) struct Cli {
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
    /// Show one job with its stages (`--tasks`: every task, where and how it ran).
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
    /// MRM: the estimate, earliest feasible finish and price–deadline curve of a job,
    /// without submitting it (then `submit --earliest | --deadline T | --max-price P`).
    Quote(quote::QuoteArgs),
    /// Submit a one-stage job from a command line: `run --tasks 4 -- ./sim --seed {task}`.
    Run(run::RunArgs),
    /// Follow submitted jobs until they end (reconnecting across a master restart); exit
    /// 0 only if every one completed.
    Wait(wait::WaitArgs),
    /// Show pending work in the policy's order, with why each job waits.
    Queue,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Write man pages into a directory (scripts/man.sh).
    #[command(hide = true)]
    Man(man::ManArgs),
    /// How good runtime estimates are: `--eval` prints R² and prediction-interval
    /// coverage per method on each job name's newest runs held out.
    Estimate(estimate::EstimateArgs),
    /// Show the Jockey profile of a job name: per stage its tasks, barriers, task times
    /// and failures, from the recorded runs you may see.
    Profile(profile::ProfileArgs),
    /// Print a task's stdout (or `--stderr`), read from the agent that ran it;
    /// `--follow` keeps reading until the task ends.
    Logs(logs::LogsArgs),
    /// Copy a job's final outputs from the agents that hold them into a local directory.
    Fetch(fetch::FetchArgs),
    /// Remove ended jobs' directories and logs from the agents now (owner or admin).
    Cleanup(cleanup::CleanupArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Demo(_) | Command::Workload(_)) {
        end_quietly_when_the_reader_leaves();
    }
    init_tracing();
    let runtime = match runtime_for(&cli.command) {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        // What was interrupted said so itself.
        Err(err) if err.is::<wait::Interrupted>() => ExitCode::from(130),
        Err(err) => {
            // The whole context chain on one line, "what we did: why it failed", each cause
            // once (many messages quote their source). The master's messages may quote
            // names other people chose: sanitise.
            eprintln!("error: {}", output::sanitize(&Report::from(err).to_string()));
            ExitCode::FAILURE
        }
    }
}

/// A reader that leaves early (`slotmarket jobs --json | head -1`) ends the CLI at its
/// next write, quietly, as it ends `cat` or `ls`. Rust ignores SIGPIPE, which turns that
/// write into a panic ("failed printing to stdout: Broken pipe"). The demo and the
/// workload runner keep ignoring it: a signal would end them without stopping the
/// master and agents they started.
fn end_quietly_when_the_reader_leaves() {
    // SAFETY: restores a signal's default disposition on the main thread before any
    // other thread (tokio's, tracing's) exists; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The async runtime a command runs on. Commands that talk to the master over one
/// connection run on the calling thread: starting worker threads, and handing every packet
/// between them, was a measurable share of a one-request CLI run's CPU. The demo and the
/// workload runner keep the multi-thread runtime: they drive local clusters and many
/// requests at once, and sleep between polls.
fn runtime_for(command: &Command) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match command {
        Command::Demo(_) | Command::Workload(_) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    builder.enable_all().build()
}

/// Dispatches to the subcommand's module.
async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Submit(args) => submit::run(&cli.connection, args, json).await,
        Command::Status(args) => status::run(&cli.connection, args, json).await,
        Command::Logs(args) => logs::run(&cli.connection, args, json).await,
        Command::Jobs(args) => jobs::run(&cli.connection, args, json).await,
        Command::History(args) => history::run(&cli.connection, args, json).await,
        Command::Estimate(args) => estimate::run(&cli.connection, args, json).await,
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
        Command::Quote(args) => quote::run(&cli.connection, args, json).await,
        Command::Run(args) => run::run(&cli.connection, args, json).await,
        Command::Wait(args) => wait::run(&cli.connection, args, json).await,
        Command::Queue => queue::run(&cli.connection, json).await,
        Command::Completions(args) => completions::run(Cli::command(), &args),
        Command::Man(args) => man::run(Cli::command(), &args),
        Command::Profile(args) => profile::run(&cli.connection, args, json).await,
        Command::Fetch(args) => fetch::run(&cli.connection, args, json).await,
        Command::Cleanup(args) => cleanup::run(&cli.connection, args, json).await,
    }
}

/// Logs go to stderr (stdout is for results, and must stay pure JSON with `--json`);
/// `RUST_LOG` selects, warnings and errors by default.
fn init_tracing() {
    slotmarket_common::logging::init(tracing::Level::WARN);
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use slotmarket_common::money::Credits;
    use slotmarket_common::protocol::JobState;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn submit_takes_at_most_one_deadline_choice() {
        let parse = |extra: &[&str]| {
            let args = [&["slotmarket", "submit", "job.toml"][..], extra].concat();
            Cli::try_parse_from(args)
        };
        for ok in [&[][..], &["--earliest"], &["--deadline", "+20m"], &["--max-price", "0.5"]] {
            let Command::Submit(_) = parse(ok).unwrap().command else { panic!("not submit") };
        }
        let Command::Submit(args) = parse(&["--max-price", "0.5", "--wait"]).unwrap().command else {
            panic!("not submit")
        };
        assert_eq!(args.max_price, Some("0.5".parse::<Credits>().unwrap()));
        for clash in [
            &["--earliest", "--max-price", "1"][..],
            &["--deadline", "+1m", "--max-price", "1"],
            &["--earliest", "--deadline", "+1m"],
        ] {
            let err = parse(clash).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict, "{clash:?}");
        }
        assert!(parse(&["--max-price", "lots"]).is_err());
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
    fn every_limit_refuses_zero_alike() {
        for command in ["jobs", "history", "ledger"] {
            let err = Cli::try_parse_from(["slotmarket", command, "--limit", "0"]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{command}");
            assert!(err.to_string().contains("0 is not in 1.."), "{command}: {err}");
            assert!(Cli::try_parse_from(["slotmarket", command, "--limit", "1"]).is_ok(), "{command}");
        }
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
    fn cancel_state_takes_only_live_states_and_only_with_all() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["slotmarket", "cancel"][..], args].concat());
        let Command::Cancel(args) =
            parse(&["--all", "--state", "pending", "--state", "running"]).unwrap().command
        else {
            panic!("not cancel")
        };
        assert_eq!(args.state, [JobState::Pending, JobState::Running]);
        let ended = parse(&["--all", "--state", "completed"]).unwrap_err();
        assert!(ended.to_string().contains("completed jobs have ended"), "{ended}");
        let alone = parse(&["--state", "pending"]).unwrap_err();
        assert_eq!(alone.kind(), clap::error::ErrorKind::MissingRequiredArgument, "{alone}");
        assert!(alone.to_string().contains("--all"), "{alone}");
    }

    #[test]
    fn job_ids_parse_with_or_without_prefix() {
        let cli = Cli::try_parse_from(["slotmarket", "status", "j7"]).unwrap();
        let Command::Status(args) = cli.command else { panic!("not status") };
        assert_eq!(args.job.0, 7);
        assert!(Cli::try_parse_from(["slotmarket", "cancel", "x7"]).is_err());
    }
}
