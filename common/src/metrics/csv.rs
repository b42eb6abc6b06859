//! The per-job CSV both tools write (`jobs.csv`), and reading it back into
//! [`JobRecord`]s, so a run can be summarised again from its file alone.
//!
//! One line per job, [`JOB_COLUMNS`] in that order; empty cells for what does not apply
//! or what the tool cannot know. Columns are found by name when reading, so a file with
//! extra columns still reads. Derived columns (`wait_s`, `completion_s`, `met`,
//! `tardiness_s`, `earliness_s`, `slack_s`) are written for people and spreadsheets and
//! recomputed, not read.

use std::borrow::Cow;
use std::io::{self, Write};

use thiserror::Error;

use super::{JobRecord, NO_CLASS, Outcome};
use crate::spec::JobClass;

/// The per-job CSV's header.
pub const JOB_COLUMNS: &str = "id,name,account,class,queue,state,submit_s,start_s,finish_s,deadline_s,\
wait_s,completion_s,met,tardiness_s,earliness_s,slack_s,critical_path_s,tasks,slot_s,attempts,kills,price";

/// A CSV of the tools (`jobs.csv`, and `slots.csv` for the plots) that cannot be read back.
#[derive(Debug, Error, PartialEq)]
pub enum CsvError {
    /// A column the records need is missing from the header.
    #[error(
        "no column \"{0}\" in the header; is this a CSV written by slotmarket-sim or slotmarket workload run?"
    )]
    MissingColumn(&'static str),
    /// A cell is not what its column holds.
    #[error("line {line}: column {column}: \"{value}\" is not {expected}")]
    BadValue {
        /// 1-based line number.
        line: usize,
        /// Column name.
        column: &'static str,
        /// The cell.
        value: String,
        /// What the column holds.
        expected: &'static str,
    },
    /// A quoted cell runs to the end of the file.
    #[error("line {0}: a quoted cell is never closed")]
    UnclosedQuote(usize),
}

/// Writes the header and one line per record.
pub fn write_jobs_csv<'a>(
    records: impl IntoIterator<Item = &'a JobRecord>,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "{JOB_COLUMNS}")?;
    for r in records {
        let count = |v: Option<u32>| v.map_or(String::new(), |v| v.to_string());
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&r.id),
            csv_field(&r.name),
            csv_field(&r.account),
            r.class_key(),
            csv_field(r.queue.as_deref().unwrap_or("")),
            r.outcome.name(),
            secs_cell(r.submit_s),
            secs_cell(r.start_s),
            secs_cell(r.finish_s),
            secs_cell(r.deadline_s),
            secs_cell(r.wait_s()),
            secs_cell(r.completion_s()),
            r.met().map_or(String::new(), |met| met.to_string()),
            secs_cell(r.tardiness_s()),
            secs_cell(r.earliness_s()),
            secs_cell(r.slack_s()),
            secs_cell(r.critical_path_s),
            r.tasks,
            secs_cell(r.slot_s),
            count(r.attempts),
            count(r.kills),
            secs_cell(r.price),
        )?;
    }
    Ok(())
}

/// Reads a per-job CSV written by [`write_jobs_csv`].
pub fn read_jobs_csv(text: &str) -> Result<Vec<JobRecord>, CsvError> {
    let mut rows = parse_csv(text)?.into_iter();
    let Some((_, header)) = rows.next() else { return Ok(Vec::new()) };
    let columns = Columns::locate(&header)?;
    rows.map(|(line, cells)| columns.record(&Row { line, cells: &cells })).collect()
}

/// A CSV cell of seconds: millisecond precision (`12.500`), empty for `None`.
pub fn secs_cell(value: Option<f64>) -> String {
    value.map_or(String::new(), |v| format!("{v:.3}"))
}

/// Quotes a CSV cell if it holds a comma, quote or line break (RFC 4180).
pub fn csv_field(text: &str) -> Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text.into()
    }
}

/// The non-blank rows of `text` with the line each starts on, quoting undone (RFC 4180:
/// a quoted cell may hold commas, doubled quotes and line breaks).
pub fn parse_csv(text: &str) -> Result<Vec<(usize, Vec<String>)>, CsvError> {
    let (mut rows, mut cells, mut cell) = (Vec::new(), Vec::new(), String::new());
    let (mut quoted, mut line, mut start) = (false, 1, 1);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            ('\n', false) => {
                cells.push(std::mem::take(&mut cell));
                rows.push((start, std::mem::take(&mut cells)));
                line += 1;
                start = line;
            }
            ('\r', false) if chars.peek() == Some(&'\n') => {}
            _ => {
                line += usize::from(c == '\n');
                cell.push(c);
            }
        }
    }
    if quoted {
        return Err(CsvError::UnclosedQuote(start));
    }
    cells.push(cell);
    rows.push((start, cells));
    rows.retain(|(_, cells)| cells.iter().any(|c| !c.trim().is_empty()));
    Ok(rows)
}

/// One data row being read.
struct Row<'a> {
    line: usize,
    cells: &'a [String],
}

/// Positions of the columns a record is read from.
struct Columns {
    at: [usize; READ.len()],
}

/// The columns read, in the order of [`Columns::at`].
const READ: [&str; 16] = [
    "id",
    "name",
    "account",
    "class",
    "queue",
    "state",
    "submit_s",
    "start_s",
    "finish_s",
    "deadline_s",
    "critical_path_s",
    "tasks",
    "slot_s",
    "attempts",
    "kills",
    "price",
];

impl Columns {
    fn locate(header: &[String]) -> Result<Columns, CsvError> {
        let mut at = [0; READ.len()];
        for (slot, name) in at.iter_mut().zip(READ) {
            *slot = header.iter().position(|h| h == name).ok_or(CsvError::MissingColumn(name))?;
        }
        Ok(Columns { at })
    }

    /// The cell of column `READ[i]`, empty when the row is short.
    fn cell<'r>(&self, row: &'r Row<'_>, i: usize) -> (&'static str, &'r str) {
        (READ[i], row.cells.get(self.at[i]).map_or("", String::as_str))
    }

    fn record(&self, row: &Row<'_>) -> Result<JobRecord, CsvError> {
        let text = |i| self.cell(row, i).1.to_string();
        let secs = |i| parse::<f64>(row.line, self.cell(row, i), "a number of seconds");
        let count = |i| parse::<u32>(row.line, self.cell(row, i), "a count");
        Ok(JobRecord {
            id: text(0),
            name: text(1),
            account: text(2),
            class: class(row.line, self.cell(row, 3))?,
            queue: Some(text(4)).filter(|q| !q.is_empty()),
            outcome: outcome(row.line, self.cell(row, 5))?,
            submit_s: secs(6)?,
            start_s: secs(7)?,
            finish_s: secs(8)?,
            deadline_s: secs(9)?,
            critical_path_s: secs(10)?,
            tasks: parse::<u64>(row.line, self.cell(row, 11), "a count")?.unwrap_or(0),
            slot_s: secs(12)?,
            attempts: count(13)?,
            kills: count(14)?,
            price: secs(15)?,
        })
    }
}

/// An optional number: `None` for an empty cell.
fn parse<T: std::str::FromStr>(
    line: usize,
    (column, value): (&'static str, &str),
    expected: &'static str,
) -> Result<Option<T>, CsvError> {
    if value.is_empty() {
        return Ok(None);
    }
    let bad = || CsvError::BadValue { line, column, value: value.to_string(), expected };
    value.parse().map(Some).map_err(|_| bad())
}

fn class(line: usize, (column, value): (&'static str, &str)) -> Result<Option<JobClass>, CsvError> {
    match value {
        "" | NO_CLASS => Ok(None),
        "delay-sensitive" => Ok(Some(JobClass::DelaySensitive)),
        "delay-tolerant" => Ok(Some(JobClass::DelayTolerant)),
        _ => Err(CsvError::BadValue { line, column, value: value.into(), expected: "a class" }),
    }
}

fn outcome(line: usize, (column, value): (&'static str, &str)) -> Result<Outcome, CsvError> {
    Outcome::from_name(value).ok_or_else(|| CsvError::BadValue {
        line,
        column,
        value: value.into(),
        expected: "a state (completed, failed, cancelled, rejected, unfinished, not-submitted)",
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{hand_made, record};
    use super::super::{RunFacts, summarise};
    use super::*;

    fn csv(records: &[JobRecord]) -> String {
        let mut out = Vec::new();
        write_jobs_csv(records, &mut out).expect("writes to memory");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn the_job_csv_has_the_shared_columns_and_empty_cells() {
        let mut records = hand_made();
        records[0].name = "a,b".into();
        records[0].critical_path_s = Some(2.5);
        records[1].attempts = Some(4);
        records[1].kills = Some(1);
        let text = csv(&records);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), records.len() + 1);
        assert_eq!(lines[0], JOB_COLUMNS);
        let columns = JOB_COLUMNS.split(',').count();
        assert_eq!(columns, 22);
        assert_eq!(
            lines[1],
            "j1,\"a,b\",demo,delay-sensitive,,completed,0.000,1.000,5.000,6.000,1.000,5.000,true,\
             0.000,1.000,3.500,2.500,3,10.000,,,"
        );
        assert_eq!(
            lines[2],
            "j2,w002,demo,delay-sensitive,,completed,2.000,5.000,12.000,10.000,3.000,10.000,false,\
             2.000,0.000,,,3,10.000,4,1,"
        );
        // A failed job without class: its end, but no deadline, verdict or completion.
        assert_eq!(lines[4], "j4,w004,demo,none,,failed,4.000,8.000,9.000,,4.000,,,,,,,3,2.000,,,");
        for line in &lines[2..] {
            assert_eq!(line.split(',').count(), columns, "{line}");
        }
    }

    #[test]
    fn a_csv_read_back_gives_the_same_records_and_summary() {
        let mut records = hand_made();
        records[0].name = "say \"hi\",\ntwice".into();
        records[1] = JobRecord {
            queue: Some("q1".into()),
            critical_path_s: Some(1.25),
            attempts: Some(3),
            kills: Some(0),
            ..records[1].clone()
        };
        records.push(JobRecord {
            outcome: Outcome::Unfinished,
            finish_s: None,
            ..record(5, None, (6.0, 7.0, 0.0))
        });
        records.push(JobRecord::new("never"));
        let back = read_jobs_csv(&csv(&records)).expect("reads");
        assert_eq!(back, records);
        let facts = RunFacts { slots: Some(4), stopped_s: Some(25.0) };
        assert_eq!(summarise(&back, facts).to_string(), summarise(&records, facts).to_string());
    }

    #[test]
    fn bad_csvs_are_refused_naming_the_line_and_column() {
        assert_eq!(read_jobs_csv("id,class\n").unwrap_err(), CsvError::MissingColumn("name"));
        let mut text = csv(&hand_made()[..1]);
        text.push_str(&text.lines().nth(1).expect("a row").replace(",completed,", ",done,"));
        let err = read_jobs_csv(&text).unwrap_err();
        assert!(err.to_string().starts_with("line 3: column state: \"done\" is not a state"), "{err}");
        let text = csv(&hand_made()[..1]).replace(",0.000,1.000,5.000,", ",0.000,soon,5.000,");
        let err = read_jobs_csv(&text).unwrap_err();
        assert_eq!(err.to_string(), "line 2: column start_s: \"soon\" is not a number of seconds");
        assert_eq!(read_jobs_csv("id\n\"open").unwrap_err(), CsvError::UnclosedQuote(2));
        assert_eq!(read_jobs_csv("").unwrap(), vec![]);
    }

    #[test]
    fn cells_are_quoted_only_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        let rows = parse_csv("a,\"b,c\",\"d\"\"e\",,f\r\n\n\"x\ny\",z\n").expect("parses");
        assert_eq!(rows[0], (1, vec!["a", "b,c", "d\"e", "", "f"].into_iter().map(String::from).collect()));
        assert_eq!(rows[1], (3, vec!["x\ny".to_string(), "z".to_string()]));
    }
}
