//! `slotmarket quote JOB.toml`: what the master's MRM admission would promise the job
//! now, without submitting it: the runtime estimate with its prediction interval, the
//! earliest feasible finish and the price–deadline curve (later deadlines cost less).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use slotmarket_common::protocol::{QuoteInfo, QuotePoint};
use slotmarket_common::spec::{JobSpec, format_rfc3339};

use crate::connection::{self, ConnectionArgs};
use crate::output::{self, Align, Table};

/// Exit code for a job spec that does not validate, like `submit`'s.
const EXIT_INVALID_SPEC: u8 = 2;

/// Arguments of `quote`.
#[derive(Debug, Args)]
pub(crate) struct QuoteArgs {
    /// The job spec (TOML; see configs/jobs/ for examples).
    #[arg(value_name = "JOB.toml")]
    pub(crate) spec: PathBuf,
}

/// The `--json` document: times in milliseconds since the Unix epoch, prices in credits.
#[derive(Debug, Serialize)]
struct QuoteJson {
    quoted_at_ms: u64,
    work_ms: u64,
    work_upper_ms: u64,
    pi_level: f64,
    map_task_ms: [u64; 2],
    reduce_task_ms: [u64; 2],
    admitted: u32,
    earliest: PointJson,
    curve: Vec<PointJson>,
    /// `[map, reduce]` slots assumed from the last known capacity (no agent offers
    /// them yet after a restart); absent when quoted against the connected slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    assumed_slots: Option<[u32; 2]>,
}

#[derive(Debug, Serialize)]
struct PointJson {
    deadline_ms: u64,
    price: String,
}

impl From<&QuotePoint> for PointJson {
    fn from(p: &QuotePoint) -> PointJson {
        PointJson { deadline_ms: p.deadline.as_millis(), price: p.price.to_string() }
    }
}

/// Runs `quote`.
pub(crate) async fn run(conn: &ConnectionArgs, args: QuoteArgs, json: bool) -> Result<ExitCode> {
    let shown = args.spec.display();
    let text = std::fs::read_to_string(&args.spec).with_context(|| format!("reading job spec {shown}"))?;
    let spec = match JobSpec::from_toml(&text) {
        Ok(spec) => spec,
        Err(err) => {
            eprintln!("error: {shown}: {err}");
            return Ok(ExitCode::from(EXIT_INVALID_SPEC));
        }
    };
    let client = connection::connect_from_args(conn).await?;
    let name = spec.name.clone();
    let quote =
        connection::bounded(client.quote(spec)).await.with_context(|| format!("quoting job \"{name}\""))?;
    connection::close(client).await;
    if json {
        output::print_json(&to_json(&quote))?;
    } else {
        print!("{}", render(&quote));
    }
    Ok(ExitCode::SUCCESS)
}

fn to_json(quote: &QuoteInfo) -> QuoteJson {
    QuoteJson {
        quoted_at_ms: quote.at.as_millis(),
        work_ms: quote.work_ms,
        work_upper_ms: quote.work_upper_ms,
        pi_level: quote.pi_level,
        map_task_ms: [quote.map_task_ms.0, quote.map_task_ms.1],
        reduce_task_ms: [quote.reduce_task_ms.0, quote.reduce_task_ms.1],
        admitted: quote.admitted,
        earliest: PointJson::from(&quote.earliest),
        curve: quote.curve.iter().map(PointJson::from).collect(),
        assumed_slots: quote.assumed_slots.map(|(map, reduce)| [map, reduce]),
    }
}

/// Seconds with one decimal, e.g. `12.5s`.
fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// The human form: the estimate, the earliest finish, then the curve as a table.
fn render(quote: &QuoteInfo) -> String {
    let level = quote.pi_level * 100.0;
    let task = |(mean, upper): (u64, u64)| format!("{} (≤ {} at {level:.0} %)", secs(mean), secs(upper));
    let mut out = format!(
        "estimate   {} slot-time, ≤ {} at {level:.0} % (the price floor)\n",
        secs(quote.work_ms),
        secs(quote.work_upper_ms)
    );
    if quote.map_task_ms != (0, 0) {
        out.push_str(&format!("map task   {}\n", task(quote.map_task_ms)));
    }
    if quote.reduce_task_ms != (0, 0) {
        out.push_str(&format!("reduce     {}\n", task(quote.reduce_task_ms)));
    }
    out.push_str(&format!(
        "earliest   {} ({} from now) at {}\n",
        format_rfc3339(quote.earliest.deadline),
        output::relative(Some(quote.earliest.deadline), quote.at),
        quote.earliest.price
    ));
    out.push_str(&format!("admitted   {} deadline jobs ahead of the quote\n", quote.admitted));
    if let Some((map, reduce)) = quote.assumed_slots {
        out.push_str(&format!(
            "capacity   assumed: {map} map and {reduce} reduce slots, the last known (agents have not reconnected)\n"
        ));
    }
    out.push('\n');
    let mut table =
        Table::new(&[("deadline", Align::Left), ("from now", Align::Right), ("price", Align::Right)]);
    for point in &quote.curve {
        table.row(vec![
            format_rfc3339(point.deadline),
            output::relative(Some(point.deadline), quote.at),
            point.price.to_string(),
        ]);
    }
    out.push_str(&table.render());
    out
}

#[cfg(test)]
mod tests {
    use slotmarket_common::money::Credits;
    use slotmarket_common::protocol::{Request, Response};
    use slotmarket_common::time::Timestamp;

    use super::*;
    use crate::fake_master::FakeMaster;

    fn quote() -> QuoteInfo {
        let point = |s: u64, micros: i64| QuotePoint {
            deadline: Timestamp(1_800_000_000_000 + s * 1000),
            price: Credits(micros),
        };
        QuoteInfo {
            at: Timestamp(1_800_000_000_000),
            work_ms: 40_000,
            work_upper_ms: 44_000,
            pi_level: 0.95,
            map_task_ms: (10_000, 11_000),
            reduce_task_ms: (0, 0),
            earliest: point(22, 24_445),
            curve: vec![point(22, 24_445), point(40, 16_000), point(80, 12_223)],
            admitted: 2,
            assumed_slots: None,
        }
    }

    #[test]
    fn the_table_shows_the_estimate_the_earliest_and_the_curve() {
        let text = render(&quote());
        assert!(!text.contains("capacity"), "{text}");
        let assumed = render(&QuoteInfo { assumed_slots: Some((6, 3)), ..quote() });
        assert!(
            assumed.contains("capacity   assumed: 6 map and 3 reduce slots, the last known"),
            "{assumed}"
        );
        assert!(text.contains("estimate   40.0s slot-time, ≤ 44.0s at 95 % (the price floor)\n"), "{text}");
        assert!(text.contains("map task   10.0s (≤ 11.0s at 95 %)\n"), "{text}");
        assert!(!text.contains("reduce "), "{text}");
        assert!(text.contains("earliest   2027-01-15T08:00:22Z (+22.0s from now) at 0.024445\n"), "{text}");
        assert!(text.contains("2027-01-15T08:01:20Z    +80.0s  0.012223\n"), "{text}");
    }

    #[tokio::test]
    async fn quote_asks_the_master_and_prints_json() {
        let fake = FakeMaster::start(|request| match request {
            Request::Quote { .. } => vec![Response::Quote(quote())],
            _ => vec![],
        });
        let file = fake.certs.path().join("job.toml");
        std::fs::write(
            &file,
            "name = \"x\"\n[[stage]]\nname = \"a\"\ntasks = 2\nslot = \"map\"\ncommand = \"true\"\n",
        )
        .unwrap();
        let conn = fake.conn_args("alice");
        let code = run(&conn, QuoteArgs { spec: file }, true).await.unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        assert!(matches!(fake.requests()[..], [Request::Quote { .. }]), "{:?}", fake.requests());
        let json = serde_json::to_value(to_json(&quote())).unwrap();
        assert_eq!(json["earliest"]["price"], "0.024445");
        assert_eq!(json["curve"].as_array().unwrap().len(), 3);
    }
}
