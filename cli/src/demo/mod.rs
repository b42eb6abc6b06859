//! `slotmarket demo`: a whole cluster on this machine in one command. Makes certificates
//! in a temporary directory, starts a master and N agents as separate processes on
//! loopback, submits a small real workload, shows progress and a per-job table, and stops
//! every process it started, also on Ctrl-C or SIGTERM.
//!
//! - `cluster` — the temporary directory, the processes and the guard that stops them;
//! - `purchase` — the MRM step: a quote and a bought deadline before the workload;
//! - `workload` — the embedded job specs, submission and progress;
//! - `rates` — `--rates`: DP's market instead, two users' shares following their rates;
//! - `slo` — `--slo`: Jockey instead, a deadline job's guarantee following its progress;
//! - `report` — progress lines, the final table and the JSON document.

mod cluster;
mod purchase;
mod rates;
mod report;
mod slo;
mod workload;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use slotmarket_common::client::Client;
use slotmarket_common::pki::ADMIN_NAME;
use slotmarket_common::protocol::JobSummary;
use slotmarket_common::spec::JobSpec;
use slotmarket_common::time::Timestamp;
use tokio::signal::unix::{SignalKind, signal};

use self::cluster::{Binaries, Cluster, DEMO_USER, SERVER_NAME};
use self::report::DemoReport;
use crate::{connection, output};

/// Exit code after Ctrl-C or SIGTERM, as shells report a SIGINT death.
const EXIT_INTERRUPTED: u8 = 130;

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Leave the master and agents running afterwards, keep the temporary directory and
    /// print how to reach the cluster.
    #[arg(long)]
    pub(crate) keep: bool,
    /// Number of agents (each with 2 map slots and 1 reduce slot).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub(crate) agents: u32,
    /// Give up on the workload after this many seconds.
    #[arg(long, default_value_t = 180, value_name = "SECS")]
    pub(crate) timeout: u64,
    /// Show DP's market instead: under the `proportional` policy, users alice and bob bid
    /// spending rates 1 and 2 and submit the same job at once; while both have tasks
    /// waiting the map slots split in proportion (2 : 4 of the default three agents' six).
    #[arg(long)]
    pub(crate) rates: bool,
    /// Show Jockey instead: under the `jockey` policy a pi job of 12 maps runs alone to
    /// leave its profile, then comes back with a deadline, its maps sleeping three times
    /// as long, behind six best-effort jobs; its guaranteed slots rise as it falls behind
    /// and it meets the deadline (about 30 s).
    #[arg(long, conflicts_with = "rates")]
    pub(crate) slo: bool,
}

/// What a successful run produced.
struct Ran {
    report: DemoReport,
    master: SocketAddr,
}

/// Runs `demo`.
pub(crate) async fn run(args: DemoArgs, json: bool) -> Result<ExitCode> {
    // Everything that can fail without side effects goes first.
    let specs = workload::specs()?;
    let deadline_job = purchase::deadline_spec()?;
    let slo_specs = slo::specs()?;
    let bins = Binaries::locate()?;
    let mut cluster = Cluster::create(bins)?;
    eprintln!("demo directory: {}", cluster.root().display());
    let outcome = tokio::select! {
        ran = async {
            if args.rates {
                drive_rates(&mut cluster, &args).await
            } else if args.slo {
                drive_slo(&mut cluster, &args, slo_specs).await
            } else {
                drive(&mut cluster, &args, deadline_job, specs).await
            }
        } => ran,
        reason = stop_signal() => {
            eprintln!("{reason}: stopping the cluster");
            cluster.shutdown();
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
    };
    let ran = match outcome {
        Ok(ran) => ran,
        Err(err) => {
            cluster.shutdown();
            cluster.keep_files();
            return Err(err.context(format!("demo failed; logs kept in {}", cluster.logs_dir().display())));
        }
    };
    if json {
        output::print_json(&ran.report)?;
    } else {
        print!("{}", report::render(&ran.report));
        if !args.rates && !args.slo {
            eprintln!(
                "also: `slotmarket demo --rates` shows DP's market, `slotmarket demo --slo` shows Jockey"
            );
        }
    }
    if args.keep {
        print_kept(cluster, ran.master, json);
    } else {
        cluster.shutdown();
        if !ran.report.all_completed {
            cluster.keep_files();
            eprintln!("not every job completed; logs kept in {}", cluster.logs_dir().display());
        }
    }
    Ok(if ran.report.all_completed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Starts the cluster, buys one job's deadline, runs the workload and builds the report.
async fn drive(
    cluster: &mut Cluster,
    args: &DemoArgs,
    deadline_job: JobSpec,
    specs: Vec<JobSpec>,
) -> Result<Ran> {
    let (master, admin) = start_with_agents(cluster, args, purchase::MASTER_TOML, None).await?;
    purchase::fund(&admin).await?;
    connection::close(admin).await;
    eprintln!(
        "{} agents registered; submitting {} jobs as user \"{DEMO_USER}\"",
        args.agents,
        specs.len() + 1
    );

    let client = connect(cluster, master, DEMO_USER).await?;
    let (start, started) = (output::now(), Instant::now());
    let mut ids = vec![purchase::quote_and_buy(&client, deadline_job, started).await?];
    ids.extend(workload::submit_all(&client, specs, started).await?);
    let timeout = Duration::from_secs(args.timeout);
    let jobs = workload::follow(&client, cluster, &ids, started, timeout).await?;
    connection::close(client).await;
    Ok(Ran { report: build_report(&jobs, ids.len(), start, started), master })
}

/// Makes the certificates, starts the master with `master_toml` (`policy`, when not the
/// default, named in the line that says so) and the agents, and waits for them to register; answers the
/// master's address and an admin client (listing nodes is an admin's view; the workloads
/// run as ordinary users).
async fn start_with_agents(
    cluster: &mut Cluster,
    args: &DemoArgs,
    master_toml: &str,
    policy: Option<&str>,
) -> Result<(SocketAddr, Client)> {
    cluster.make_certificates(args.agents, &[DEMO_USER])?;
    let master = cluster.start_master(master_toml).await?;
    let policy = policy.map(|p| format!(", policy {p}")).unwrap_or_default();
    eprintln!("master listening on {master}{policy}; starting {} agents", args.agents);
    cluster.start_agents(args.agents, master)?;
    let admin = connect(cluster, master, ADMIN_NAME).await?;
    workload::wait_for_agents(&admin, cluster, args.agents).await?;
    Ok((master, admin))
}

/// The report of `jobs` (`expected` submitted), their times counted from `start`.
fn build_report(jobs: &[JobSummary], expected: usize, start: Timestamp, started: Instant) -> DemoReport {
    let elapsed = workload_elapsed(jobs, start).unwrap_or_else(|| started.elapsed());
    report::build(jobs, expected, start, elapsed)
}

/// Starts the master under DP, has each of [`rates::USERS`] submit the same job, starts
/// the agents and follows the market until both jobs end.
async fn drive_rates(cluster: &mut Cluster, args: &DemoArgs) -> Result<Ran> {
    let users = rates::USERS.map(|(user, _)| user);
    let specs = users.map(rates::spec_for);
    cluster.make_certificates(args.agents, &users)?;
    let master = cluster.start_master(&rates::master_toml()).await?;
    let admin = connect(cluster, master, ADMIN_NAME).await?;
    rates::fund(&admin).await?;
    let bids: Vec<String> = rates::USERS.iter().map(|(user, rate)| format!("{user} {rate}")).collect();
    eprintln!(
        "master listening on {master}, policy proportional; rates per slot-hour: {}; both users submit \
         the same job, then {} agents start",
        bids.join(", "),
        args.agents
    );
    // Both jobs wait for the agents, so neither user is first to the slots.
    let (start, started) = (output::now(), Instant::now());
    let mut ids = Vec::new();
    for (user, spec) in users.into_iter().zip(specs) {
        let client = connect(cluster, master, user).await?;
        let job = crate::submit::submit(&client, spec?).await?;
        connection::close(client).await;
        eprintln!("[{:.1}s] {user} submitted {job}", started.elapsed().as_secs_f64());
        ids.push(job);
    }
    cluster.start_agents(args.agents, master)?;
    workload::wait_for_agents(&admin, cluster, args.agents).await?;
    let timeout = Duration::from_secs(args.timeout);
    let (jobs, shares) = rates::follow(&admin, cluster, &ids, started, timeout).await?;
    connection::close(admin).await;
    let mut report = build_report(&jobs, ids.len(), start, started);
    report.shares = Some(shares);
    Ok(Ran { report, master })
}

/// Starts the master under Jockey and the agents, then runs [`slo`]'s scenario as the
/// demo user.
async fn drive_slo(cluster: &mut Cluster, args: &DemoArgs, specs: slo::Specs) -> Result<Ran> {
    let policy = Some("jockey (a control step a second)");
    let (master, admin) = start_with_agents(cluster, args, slo::MASTER_TOML, policy).await?;
    connection::close(admin).await;
    let client = connect(cluster, master, DEMO_USER).await?;
    let (start, started) = (output::now(), Instant::now());
    let timeout = Duration::from_secs(args.timeout);
    let (ids, jobs, slo) = slo::run(&client, cluster, specs, started, timeout).await?;
    connection::close(client).await;
    let mut report = build_report(&jobs, ids.len(), start, started);
    report.slo = Some(slo);
    Ok(Ran { report, master })
}

/// From the workload's start to the last job's end on the master's clock, if every job
/// ended (more exact than when the once-a-second poll noticed).
fn workload_elapsed(jobs: &[JobSummary], start: Timestamp) -> Option<Duration> {
    let mut last = start;
    for job in jobs {
        last = last.max(job.finished?);
    }
    Some(last.saturating_since(start))
}

/// Connects to the demo master as `identity`.
async fn connect(cluster: &Cluster, master: SocketAddr, identity: &str) -> Result<Client> {
    let files = cluster.tls_files(identity);
    connection::connect(&master.to_string(), SERVER_NAME, &files)
        .await
        .with_context(|| format!("connecting to the demo master as \"{identity}\""))
}

/// Resolves on Ctrl-C or SIGTERM, saying which; never resolves if neither can be
/// listened for (the demo then still stops its processes on every other path).
async fn stop_signal() -> &'static str {
    let mut term = signal(SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(term) => term.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        Ok(()) = tokio::signal::ctrl_c() => "interrupted",
        _ = sigterm => "terminated",
    }
}

/// Leaves the cluster running and says how to use and stop it (on stderr with `--json`,
/// so stdout stays one JSON document).
fn print_kept(cluster: Cluster, master: SocketAddr, json: bool) {
    let root = cluster.root().to_path_buf();
    let pki = cluster.pki_dir();
    let logs = cluster.logs_dir();
    let running = cluster.detach();
    let groups: Vec<String> = running.iter().map(|(_, pid)| format!("-{pid}")).collect();
    let pids: Vec<String> = running.iter().map(|(name, pid)| format!("{name}={pid}")).collect();
    let text = format!(
        "\nthe cluster is still running ({}); to use it:\n\
         \x20 export SLOTMARKET_MASTER={master}\n\
         \x20 export SLOTMARKET_CERT_DIR={}\n\
         \x20 export SLOTMARKET_IDENTITY=admin\n\
         \x20 slotmarket nodes; slotmarket jobs\n\
         logs: {}\n\
         to stop it and remove its files:\n\
         \x20 kill -TERM -- {} && rm -rf {}\n",
        pids.join(" "),
        pki.display(),
        logs.display(),
        groups.join(" "),
        root.display()
    );
    if json {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::JobState;

    use super::*;
    use crate::output::tests::summary;

    #[test]
    fn elapsed_runs_to_the_last_end_when_every_job_ended() {
        let done = |id, finished| JobSummary {
            finished: Some(Timestamp(finished)),
            ..summary(id, JobState::Completed)
        };
        let jobs = [done(1, 15_000), done(2, 12_000)];
        assert_eq!(workload_elapsed(&jobs, Timestamp(10_000)), Some(Duration::from_secs(5)));
        let unfinished = [done(1, 15_000), summary(2, JobState::Running)];
        assert_eq!(workload_elapsed(&unfinished, Timestamp(10_000)), None);
    }
}
