//! What the commands print: aligned text tables and time formats for people, and the
//! stable JSON shapes printed with `--json`. The JSON types here are the contract with
//! scripts: fields are only ever added, never renamed or removed.
//!
//! Text other people wrote (job names, account and node names, messages) reaches the
//! terminal only through [`sanitize`]; JSON keeps it exact, escaped by serde.

use std::borrow::Cow;
use std::fmt::Write as _;

use anyhow::{Context, Result};
use serde::Serialize;
use slotmarket_common::protocol::{DemandClass, JobStatus, JobSummary, NodeSummary, SloStatus, StageStatus};
use slotmarket_common::time::Timestamp;

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text columns.
    Left,
    /// Number columns, so digits line up.
    Right,
}

/// A text table: a header row and rows of cells, columns padded to their widest cell and
/// separated by two spaces.
#[derive(Debug)]
pub(crate) struct Table {
    headers: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub(crate) fn new(headers: &[(&'static str, Align)]) -> Table {
        Table { headers: headers.to_vec(), rows: Vec::new() }
    }

    /// Appends a row, each cell [`sanitize`]d; missing cells print empty, extra cells
    /// are dropped.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let cells = cells.into_iter().map(|cell| sanitize(&cell).into_owned()).collect();
        self.rows.push(cells);
    }

    /// The table as lines, each ending in a newline, with no trailing spaces.
    pub(crate) fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|col| {
                let cells = self.rows.iter().filter_map(|row| row.get(col)).map(|c| columns(c));
                cells.chain([self.headers[col].0.len()]).max().unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let header: Vec<String> = self.headers.iter().map(|(name, _)| (*name).to_string()).collect();
        for cells in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (col, (_, align)) in self.headers.iter().enumerate() {
                let cell = cells.get(col).map(String::as_str).unwrap_or("");
                // Padded by the columns a terminal gives the cell, not by its chars: `{:<w$}`
                // would count a CJK character or an emoji as one column where it takes two.
                let pad = padding(cell, widths[col]);
                let _ = match align {
                    Align::Left => write!(line, "{cell}{pad}  "),
                    Align::Right => write!(line, "{pad}{cell}  "),
                };
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// The terminal columns `text` takes: two for a wide character (CJK, most emoji), none
/// for a combining mark. `text` is expected [`sanitize`]d (no control characters).
pub(crate) fn columns(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// The spaces that fill `text` out to `width` terminal columns.
pub(crate) fn padding(text: &str, width: usize) -> String {
    " ".repeat(width.saturating_sub(columns(text)))
}

/// `text` fit for a terminal: every control character (C0 including newline and ESC, DEL,
/// C1) and every bidirectional-override character is replaced by a visible escape such
/// as `\x1b` or `\u{202e}`, so text from other users cannot move the cursor, recolour,
/// retitle or reorder what the terminal shows, nor break a table row in two.
pub(crate) fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) && u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Control characters, and the bidirectional embeddings, overrides and isolates
/// (U+202A..U+202E, U+2066..U+2069) that reorder how the rest of a line is shown.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("encoding JSON output")?;
    println!("{text}");
    Ok(())
}

/// The wall clock as a [`Timestamp`], comparable with the master's (same machine or
/// synchronised clocks).
pub(crate) fn now() -> Timestamp {
    Timestamp::from(std::time::SystemTime::now())
}

/// Seconds with one decimal, e.g. `3.2`.
pub(crate) fn secs(duration: std::time::Duration) -> String {
    format!("{:.1}", duration.as_secs_f64())
}

/// `later` as seconds after `earlier` (`+3.2s`), or before it (`-180.0s`: a deadline
/// set in the past must not read as met on time), or `-` when it has not happened.
pub(crate) fn relative(later: Option<Timestamp>, earlier: Timestamp) -> String {
    match later {
        Some(t) if t >= earlier => format!("+{}s", secs(t.saturating_since(earlier))),
        Some(t) => format!("-{}s", secs(earlier.saturating_since(t))),
        None => "-".into(),
    }
}

/// Seconds from `earlier` to `later` as a float for JSON.
pub(crate) fn secs_between(later: Timestamp, earlier: Timestamp) -> f64 {
    // Signed on purpose: a clock step between hosts should show, not be hidden as zero.
    (later.as_millis() as f64 - earlier.as_millis() as f64) / 1000.0
}

/// Wall-clock `HH:MM:SS` in the local time zone (UTC if the zone cannot be read).
pub(crate) fn clock(ts: Timestamp) -> String {
    let secs = ts.as_millis() / 1000;
    let seconds_of_day = local_offset_secs(secs)
        .map(|offset| (secs as i64 + offset).rem_euclid(86_400) as u64)
        .unwrap_or(secs % 86_400);
    hms(seconds_of_day)
}

/// `HH:MM:SS` for a number of seconds since midnight.
fn hms(seconds_of_day: u64) -> String {
    let (h, m, s) = (seconds_of_day / 3600, seconds_of_day / 60 % 60, seconds_of_day % 60);
    format!("{h:02}:{m:02}:{s:02}")
}

/// The local zone's offset from UTC at `secs` since the epoch, from the C library (the
/// workspace avoids a time-zone crate for this one column).
fn local_offset_secs(secs: u64) -> Option<i64> {
    // `time_t`, inferred from `localtime_r`: libc marks the alias deprecated on musl.
    let time = secs.try_into().ok()?;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // SAFETY: `time` and `tm` are valid for the call; localtime_r is the thread-safe variant
    // and fully initialises `tm` when it returns non-null.
    let result = unsafe { libc::localtime_r(&time, tm.as_mut_ptr()) };
    if result.is_null() {
        return None;
    }
    // SAFETY: checked non-null above, so `tm` was written.
    let tm = unsafe { tm.assume_init() };
    // `c_long` is 32 or 64 bits depending on the platform, so the conversion is only
    // useless on some of them.
    #[allow(clippy::useless_conversion)]
    let offset = i64::from(tm.tm_gmtoff);
    Some(offset)
}

/// A job in `jobs` and as the head of `status`, for JSON.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct JobJson {
    /// `j7`.
    pub(crate) id: String,
    /// The spec's name.
    pub(crate) name: String,
    /// The account it runs on.
    pub(crate) account: String,
    /// The principal who submitted it.
    pub(crate) owner: String,
    /// `pending`, `running`, `completed`, `failed` or `cancelled`.
    pub(crate) state: &'static str,
    /// Milliseconds since the Unix epoch.
    pub(crate) submitted_ms: u64,
    /// Milliseconds since the Unix epoch, or null.
    pub(crate) started_ms: Option<u64>,
    /// Milliseconds since the Unix epoch, or null.
    pub(crate) finished_ms: Option<u64>,
    /// Tasks over all stages.
    pub(crate) tasks_total: u64,
    /// Tasks completed.
    pub(crate) tasks_completed: u64,
    /// Tasks with a live container.
    pub(crate) tasks_running: u64,
    /// Its deadline in milliseconds since the Unix epoch, or null.
    pub(crate) deadline_ms: Option<u64>,
    /// Under MRM admission: when the master now expects it to finish (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) predicted_finish_ms: Option<u64>,
    /// The price of the deadline it bought, in credits (absent if it bought none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) price: Option<String>,
    /// What its account was charged for it, in credits (absent if it bought none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) paid: Option<String>,
    /// Under `dress`, its demand class, `SD` or `LD`; null otherwise.
    pub(crate) demand_class: Option<&'static str>,
}

impl From<&JobSummary> for JobJson {
    fn from(job: &JobSummary) -> JobJson {
        JobJson {
            id: job.id.to_string(),
            name: job.name.clone(),
            account: job.account.0.clone(),
            owner: job.owner.0.clone(),
            state: job.state.name(),
            submitted_ms: job.submitted.as_millis(),
            started_ms: job.started.map(Timestamp::as_millis),
            finished_ms: job.finished.map(Timestamp::as_millis),
            tasks_total: job.tasks_total,
            tasks_completed: job.tasks_completed,
            tasks_running: job.tasks_running,
            deadline_ms: job.deadline.map(Timestamp::as_millis),
            predicted_finish_ms: job.predicted_finish.map(Timestamp::as_millis),
            price: job.price.map(|c| c.to_string()),
            paid: job.paid.map(|c| c.to_string()),
            demand_class: job.demand_class.map(DemandClass::abbreviation),
        }
    }
}

/// One job in detail, for JSON: the summary's fields plus stages and message.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct JobStatusJson {
    /// The summary's fields, inline.
    #[serde(flatten)]
    pub(crate) job: JobJson,
    /// Per stage counts, in spec order. The wire type's own serde shape (`slot` as `map`
    /// or `reduce`) is the JSON contract; `job_json_has_a_stable_shape` pins it.
    pub(crate) stages: Vec<StageStatus>,
    /// Why it failed or was cancelled, or null.
    pub(crate) message: Option<String>,
    /// Under `jockey`, a deadline job's progress, predicted finish and guaranteed slots
    /// (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) slo: Option<SloStatus>,
}

impl From<&JobStatus> for JobStatusJson {
    fn from(status: &JobStatus) -> JobStatusJson {
        JobStatusJson {
            job: JobJson::from(&status.summary),
            stages: status.stages.clone(),
            message: status.message.clone(),
            slo: status.slo.clone(),
        }
    }
}

/// An agent, for JSON.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct NodeJson {
    /// `n3`.
    pub(crate) agent: String,
    /// The node's name.
    pub(crate) node: String,
    /// Whether its control stream is up.
    pub(crate) connected: bool,
    /// Map slots offered.
    pub(crate) map_slots: u32,
    /// Map slots in use.
    pub(crate) map_used: u32,
    /// Reduce slots offered.
    pub(crate) reduce_slots: u32,
    /// Reduce slots in use.
    pub(crate) reduce_used: u32,
    /// Milliseconds since the Unix epoch.
    pub(crate) last_seen_ms: u64,
    /// Whether it takes new work: `connected`, `draining` (an admin drained it), `leaving`
    /// (its agent is stopping), `quarantined` or `disconnected`.
    pub(crate) state: &'static str,
    /// Why it is quarantined, while it is.
    pub(crate) quarantine_reason: Option<String>,
    /// When its quarantine ends, in milliseconds since the Unix epoch.
    pub(crate) quarantined_until_ms: Option<u64>,
}

/// Whether a node takes new work, as one word for tables and JSON.
pub(crate) fn node_state(node: &NodeSummary) -> &'static str {
    match (&node.draining, &node.quarantine) {
        _ if !node.connected => "disconnected",
        (Some(cause), _) => cause.name(),
        (None, Some(_)) => "quarantined",
        (None, None) => "connected",
    }
}

impl From<&NodeSummary> for NodeJson {
    fn from(node: &NodeSummary) -> NodeJson {
        NodeJson {
            agent: node.agent.to_string(),
            node: node.node.clone(),
            connected: node.connected,
            map_slots: node.map_slots,
            map_used: node.map_used,
            reduce_slots: node.reduce_slots,
            reduce_used: node.reduce_used,
            last_seen_ms: node.last_seen.as_millis(),
            state: node_state(node),
            quarantine_reason: node.quarantine.as_ref().map(|q| q.reason.clone()),
            quarantined_until_ms: node.quarantine.as_ref().map(|q| q.until.as_millis()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use slotmarket_common::ids::{AccountId, JobId};
    use slotmarket_common::protocol::JobState;
    use slotmarket_common::spec::SlotKind;

    use super::*;

    /// A summary for tests in this crate.
    pub(crate) fn summary(id: u64, state: JobState) -> JobSummary {
        JobSummary {
            id: JobId(id),
            name: "wordcount".into(),
            account: AccountId("demo".into()),
            state,
            submitted: Timestamp(10_000),
            started: Some(Timestamp(10_400)),
            finished: None,
            tasks_total: 11,
            tasks_completed: 4,
            tasks_running: 3,
            owner: AccountId("demo".into()),
            deadline: Some(Timestamp(70_000)),
            predicted_finish: None,
            price: None,
            paid: None,
            demand_class: None,
        }
    }

    #[test]
    fn tables_align_columns_and_trim_line_ends() {
        let mut table = Table::new(&[("job", Align::Left), ("tasks", Align::Right), ("state", Align::Left)]);
        table.row(vec!["j1".into(), "3".into(), "running".into()]);
        table.row(vec!["j10".into(), "120".into(), "ok".into()]);
        assert_eq!(table.render(), "job  tasks  state\nj1       3  running\nj10    120  ok\n");
    }

    #[test]
    fn sanitize_makes_control_characters_visible() {
        assert!(matches!(sanitize("wordcount-2 ütf"), Cow::Borrowed("wordcount-2 ütf")));
        assert_eq!(sanitize("a\x1b[2J\x1b]0;owned\x07b"), "a\\x1b[2J\\x1b]0;owned\\x07b");
        assert_eq!(sanitize("two\nlines\ttab\r"), "two\\nlines\\ttab\\r");
        assert_eq!(sanitize("del\x7f c1\u{9b}31m"), "del\\x7f c1\\u{9b}31m");
        assert_eq!(sanitize("abc\u{202e}fed"), "abc\\u{202e}fed");
    }

    #[test]
    fn table_cells_cannot_break_rows_or_reach_the_terminal_raw() {
        let mut table = Table::new(&[("job", Align::Left), ("name", Align::Left)]);
        table.row(vec!["j1".into(), "evil\x1b[31m\nj2  fake".into()]);
        let text = table.render();
        assert_eq!(text, "job  name\nj1   evil\\x1b[31m\\nj2  fake\n");
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
    }

    #[test]
    fn columns_line_up_under_wide_characters() {
        let mut table = Table::new(&[("job", Align::Left), ("name", Align::Left), ("tasks", Align::Right)]);
        table.row(vec!["j1".into(), "日本語ジョブ🚀".into(), "3".into()]);
        table.row(vec!["j2".into(), "wc".into(), "10".into()]);
        let text = table.render();
        let ends: Vec<usize> = text.lines().map(columns).collect();
        // 3 + 2, then the name's 14 columns (six CJK characters and an emoji) + 2, then 5.
        assert_eq!(ends, [26, 26, 26], "{text}");
        assert_eq!(text.lines().nth(2), Some(format!("j2   wc{}10", " ".repeat(17)).as_str()), "{text}");
    }

    #[test]
    fn short_rows_print_empty_cells() {
        let mut table = Table::new(&[("a", Align::Left), ("b", Align::Left)]);
        table.row(vec!["x".into()]);
        assert_eq!(table.render(), "a  b\nx\n");
    }

    #[test]
    fn times_format_relative_and_as_clock() {
        assert_eq!(relative(Some(Timestamp(13_250)), Timestamp(10_000)), "+3.2s");
        assert_eq!(relative(None, Timestamp(10_000)), "-");
        assert_eq!(relative(Some(Timestamp(10_000)), Timestamp(190_000)), "-180.0s");
        assert_eq!(relative(Some(Timestamp(10_000)), Timestamp(10_000)), "+0.0s");
        assert_eq!(secs_between(Timestamp(1_000), Timestamp(3_500)), -2.5);
        assert_eq!(hms(3 * 3600 + 4 * 60 + 5), "03:04:05");
        let shown = clock(Timestamp::from_secs(86_400 * 365));
        assert_eq!(shown.len(), 8, "{shown}");
    }

    #[test]
    fn job_json_has_a_stable_shape() {
        let status = JobStatus {
            summary: summary(7, JobState::Running),
            stages: vec![StageStatus {
                name: "map".into(),
                slot: SlotKind::Map,
                tasks: 6,
                pending: 1,
                running: 3,
                completed: 2,
                failed_attempts: 0,
            }],
            message: None,
            slo: None,
        };
        let mut status = status;
        status.summary.demand_class = Some(DemandClass::Large);
        let value = serde_json::to_value(JobStatusJson::from(&status)).unwrap();
        let expected = serde_json::json!({
            "id": "j7", "name": "wordcount", "account": "demo", "owner": "demo", "state": "running",
            "submitted_ms": 10000, "started_ms": 10400, "finished_ms": null,
            "tasks_total": 11, "tasks_completed": 4, "tasks_running": 3, "deadline_ms": 70000,
            "demand_class": "LD",
            "stages": [{"name": "map", "slot": "map", "tasks": 6, "pending": 1, "running": 3,
                        "completed": 2, "failed_attempts": 0}],
            "message": null
        });
        assert_eq!(value, expected);
    }
}
