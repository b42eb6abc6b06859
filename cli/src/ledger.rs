//! `slotmarket ledger [NAME]`: an account's ledger entries, oldest first, fetched page by
//! page (the master caps each answer) so a long ledger never needs one huge frame.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::client::Client;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{EntryKind, LedgerEntry, MAX_LEDGER_PAGE};
use slotmarket_common::spec::format_rfc3339;

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// Arguments of `ledger`.
#[derive(Debug, Args)]
pub(crate) struct LedgerArgs {
    /// The account (default: the one named after your certificate).
    #[arg(value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// Only entries with a larger sequence number.
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub(crate) after: u64,
    /// At most this many entries (default: all).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) limit: Option<u64>,
}

/// A ledger entry, for JSON; amounts as in `AccountJson`.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct EntryJson {
    /// Position in the master's ledger.
    pub(crate) seq: u64,
    /// The account.
    pub(crate) account: String,
    /// Milliseconds since the Unix epoch.
    pub(crate) at_ms: u64,
    /// `grant` or `charge`.
    pub(crate) kind: &'static str,
    /// Signed change, e.g. "-1.25".
    pub(crate) amount: String,
    /// `amount` in micro-credits.
    pub(crate) amount_micro: i64,
    /// The job charged for, e.g. "j7", or null.
    pub(crate) job: Option<String>,
    /// Granting principal, or why a charge was made.
    pub(crate) detail: String,
    /// The memo given, or null.
    pub(crate) memo: Option<String>,
}

impl From<&LedgerEntry> for EntryJson {
    fn from(e: &LedgerEntry) -> EntryJson {
        let (job, detail) = match &e.kind {
            EntryKind::Grant { by } => (None, by.clone()),
            EntryKind::Charge { job, reason } => (job.map(|j| j.to_string()), reason.clone()),
            EntryKind::Income { reason } => (None, reason.clone()),
            EntryKind::DeadlinePurchase { job, deadline } => {
                (Some(job.to_string()), format!("deadline {}", format_rfc3339(*deadline)))
            }
        };
        EntryJson {
            seq: e.seq,
            account: e.account.0.clone(),
            at_ms: e.at.as_millis(),
            kind: e.kind.name(),
            amount: e.amount.to_string(),
            amount_micro: e.amount.micros(),
            job,
            detail,
            memo: e.memo.clone(),
        }
    }
}

/// The `--json` document.
#[derive(Debug, Serialize)]
struct Listing {
    /// The account.
    account: String,
    /// The entries fetched, oldest first.
    entries: Vec<EntryJson>,
    /// Sum of the amounts listed (the balance when listing from the start).
    sum: String,
    /// `sum` in micro-credits.
    sum_micro: i64,
    /// The `--after` that continues the listing when `--limit` cut it short, or null.
    next_after: Option<u64>,
}

/// Runs `ledger`.
pub(crate) async fn run(conn: &ConnectionArgs, args: LedgerArgs, json: bool) -> Result<ExitCode> {
    let client = connection::connect_from_args(conn).await?;
    let account = AccountId(args.name.unwrap_or_else(|| client.identity().principal.clone()));
    let fetched = fetch(&client, &account, args.after, args.limit).await;
    connection::close(client).await;
    let (entries, next_after) = fetched.with_context(|| format!("reading the ledger of {account}"))?;
    let sum = entries.iter().try_fold(Credits::ZERO, |sum, e| sum.checked_add(e.amount));
    let sum = sum.context("the listed amounts overflow when added")?;
    if json {
        let entries = entries.iter().map(EntryJson::from).collect();
        let (sum_micro, sum) = (sum.micros(), sum.to_string());
        output::print_json(&Listing { account: account.0, entries, sum, sum_micro, next_after })?;
    } else if entries.is_empty() {
        println!("no ledger entries for {account}");
    } else {
        print!("{}", table(&entries).render());
        if let Some(after) = next_after {
            println!("(more entries follow; continue with --after {after})");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Fetches entries after `after`, page by page, up to `limit` (all if `None`); answers
/// them with the `after` that continues where the limit stopped.
async fn fetch(
    client: &Client,
    account: &AccountId,
    mut after: u64,
    limit: Option<u64>,
) -> Result<(Vec<LedgerEntry>, Option<u64>)> {
    let mut entries = Vec::new();
    loop {
        let wanted = limit.map_or(u64::MAX, |l| l.saturating_sub(entries.len() as u64));
        let page_size = u32::try_from(wanted).unwrap_or(MAX_LEDGER_PAGE).min(MAX_LEDGER_PAGE);
        let page = connection::bounded(client.ledger_page(account.clone(), after, page_size)).await?;
        entries.extend(page.entries);
        match page.next_after {
            // A next_after that does not move forward would loop for ever: stop instead.
            Some(next) if next > after => after = next,
            _ => return Ok((entries, None)),
        }
        if limit.is_some_and(|l| entries.len() as u64 >= l) {
            return Ok((entries, Some(after)));
        }
    }
}

/// One row per entry.
fn table(entries: &[LedgerEntry]) -> Table {
    let mut table = Table::new(&[
        ("seq", Align::Right),
        ("time", Align::Left),
        ("kind", Align::Left),
        ("amount", Align::Right),
        ("job", Align::Left),
        ("detail", Align::Left),
        ("memo", Align::Left),
    ]);
    for e in entries {
        let json = EntryJson::from(e);
        table.row(vec![
            e.seq.to_string(),
            output::clock(e.at),
            json.kind.to_string(),
            json.amount,
            json.job.unwrap_or_else(|| "-".into()),
            printable(&json.detail),
            json.memo.as_deref().map_or_else(String::new, printable),
        ]);
    }
    table
}

/// Text safe for a terminal: control characters (which the master refuses anyway)
/// become `?`.
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::JobId;
    use slotmarket_common::protocol::{LedgerPage, Request, Response};
    use slotmarket_common::time::Timestamp;

    use super::*;
    use crate::fake_master::FakeMaster;

    fn charge() -> LedgerEntry {
        LedgerEntry {
            seq: 4,
            account: AccountId("lab".into()),
            at: Timestamp(10_000),
            amount: Credits(-1_250_000),
            kind: EntryKind::Charge { job: Some(JobId(7)), reason: "price".into() },
            memo: Some("a\u{1b}[2Jb".into()),
        }
    }

    /// A fake master holding entries 1..=n of `lab`, answering pages of at most 2.
    fn paging_master(n: u64) -> FakeMaster {
        FakeMaster::start(move |request| {
            let Request::Ledger { account, after_seq, limit } = request else { return vec![] };
            let last = (after_seq + u64::from(limit.min(2))).min(n);
            let entries = (after_seq + 1..=last)
                .map(|seq| LedgerEntry {
                    seq,
                    amount: Credits(1),
                    kind: EntryKind::Grant { by: "root".into() },
                    ..charge()
                })
                .collect();
            vec![Response::Ledger(LedgerPage { account, entries, next_after: (last < n).then_some(last) })]
        })
    }

    #[tokio::test]
    async fn fetch_follows_pages_to_the_end_or_the_limit() {
        let fake = paging_master(5);
        let client = fake.options("alice").connect().await.unwrap();
        let lab = AccountId("lab".into());
        let seqs = |entries: &[LedgerEntry]| entries.iter().map(|e| e.seq).collect::<Vec<_>>();
        let (all, next) = fetch(&client, &lab, 0, None).await.unwrap();
        assert_eq!((seqs(&all), next), (vec![1, 2, 3, 4, 5], None));
        let (some, next) = fetch(&client, &lab, 1, Some(3)).await.unwrap();
        assert_eq!((seqs(&some), next), (vec![2, 3, 4], Some(4)));
        // A limit that ends exactly at the last entry does not promise more.
        let (rest, next) = fetch(&client, &lab, 3, Some(2)).await.unwrap();
        assert_eq!((seqs(&rest), next), (vec![4, 5], None));
        client.close().await;
        let asked: Vec<(u64, u32)> = fake
            .requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::Ledger { after_seq, limit, .. } => Some((after_seq, limit)),
                _ => None,
            })
            .collect();
        assert_eq!(
            asked,
            [(0, MAX_LEDGER_PAGE), (2, MAX_LEDGER_PAGE), (4, MAX_LEDGER_PAGE), (1, 3), (3, 1), (3, 2)]
        );
    }

    #[test]
    fn entry_json_has_a_stable_shape() {
        let value = serde_json::to_value(EntryJson::from(&charge())).unwrap();
        let expected = serde_json::json!({
            "seq": 4, "account": "lab", "at_ms": 10000, "kind": "charge",
            "amount": "-1.25", "amount_micro": -1250000, "job": "j7", "detail": "price",
            "memo": "a\u{1b}[2Jb"
        });
        assert_eq!(value, expected);
    }

    #[test]
    fn ledger_table_shows_entries_and_defuses_control_characters() {
        let grant = LedgerEntry {
            seq: 1,
            account: AccountId("lab".into()),
            at: Timestamp(5_000),
            amount: Credits(10_000_000),
            kind: EntryKind::Grant { by: "root".into() },
            memo: None,
        };
        let text = table(&[grant, charge()]).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].ends_with("grant    10.00  -    root"), "{text}");
        assert!(lines[2].ends_with("charge   -1.25  j7   price   a?[2Jb"), "{text}");
    }
}
