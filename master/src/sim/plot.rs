//! SVG plots of simulator results, drawn from the CSVs `slotmarket-sim run --out` writes:
//! the CDF of completion time, waiting time per class, and slot use over time, each with
//! one series per run so policies can be compared. SVG is written by hand: no plotting
//! crate, no fonts or system libraries; viewers render the text.

use std::fmt::Write;

use slotmarket_common::metrics::{CsvError, JobRecord, parse_csv, spread};

/// Slot use in one time bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlotRow {
    /// Bucket start.
    pub t_s: f64,
    /// Busy share of map slots.
    pub map_util: f64,
    /// Busy share of reduce slots.
    pub reduce_util: f64,
}

/// One run's data, labelled.
#[derive(Clone, Debug, PartialEq)]
pub struct RunData {
    /// Legend label.
    pub label: String,
    /// Its jobs, as [`slotmarket_common::metrics::read_jobs_csv`] reads them from `jobs.csv`.
    pub jobs: Vec<JobRecord>,
    /// Its slot use.
    pub slots: Vec<SlotRow>,
}

/// The columns of `slots.csv` the plots read, in [`SlotRow`] order.
const SLOT_COLUMNS: [&str; 3] = ["t_s", "map_util", "reduce_util"];

/// Reads a slot-use CSV (`slots.csv`); columns are found by name, empty cells read as 0.
pub fn read_slots_csv(text: &str) -> Result<Vec<SlotRow>, CsvError> {
    let mut rows = parse_csv(text)?.into_iter();
    let header = rows.next().map(|(_, h)| h).unwrap_or_default();
    let mut at = [0; SLOT_COLUMNS.len()];
    for (slot, name) in at.iter_mut().zip(SLOT_COLUMNS) {
        *slot = header.iter().position(|h| h == name).ok_or(CsvError::MissingColumn(name))?;
    }
    rows.map(|(line, cells)| {
        let mut values = [0.0; SLOT_COLUMNS.len()];
        for ((value, column), &i) in values.iter_mut().zip(SLOT_COLUMNS).zip(&at) {
            let cell = cells.get(i).map_or("", String::as_str);
            if !cell.is_empty() {
                *value = cell.parse().map_err(|_| CsvError::BadValue {
                    line,
                    column,
                    value: cell.to_string(),
                    expected: "a number",
                })?;
            }
        }
        let [t_s, map_util, reduce_util] = values;
        Ok(SlotRow { t_s, map_util, reduce_util })
    })
    .collect()
}

/// Series colours, one per run.
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;

/// A line: label, colour index, dashed, points.
struct Line<'a> {
    label: String,
    colour: usize,
    dashed: bool,
    points: &'a [(f64, f64)],
}

/// The CDF of each run's completion times, on a log time axis when they span more than
/// two decades.
pub fn completion_cdf(runs: &[RunData]) -> String {
    let cdfs: Vec<Vec<(f64, f64)>> =
        runs.iter().map(|r| cdf(r.jobs.iter().filter_map(JobRecord::completion_s).collect())).collect();
    let lines = runs
        .iter()
        .zip(&cdfs)
        .enumerate()
        .map(|(i, (r, points))| Line { label: r.label.clone(), colour: i, dashed: false, points })
        .collect::<Vec<_>>();
    let (lo, hi) = extent(cdfs.iter().flatten().map(|p| p.0));
    let log = lo > 0.0 && hi / lo > 100.0;
    line_chart("Completion time (CDF)", "completion time (s)", "fraction of completed jobs", &lines, log, 1.0)
}

/// Map (solid) and reduce (dashed) slot utilisation over time, per run.
pub fn slot_use(runs: &[RunData]) -> String {
    // (run, dashed for reduce, points)
    type Series = (usize, bool, Vec<(f64, f64)>);
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            let map = r.slots.iter().map(|s| (s.t_s, s.map_util)).collect();
            let reduce = r.slots.iter().map(|s| (s.t_s, s.reduce_util)).collect();
            [(i, false, map), (i, true, reduce)]
        })
        .collect();
    let lines: Vec<Line<'_>> = series
        .iter()
        .map(|(i, dashed, points)| {
            let kind = if *dashed { "reduce" } else { "map" };
            Line { label: format!("{} {kind}", runs[*i].label), colour: *i, dashed: *dashed, points }
        })
        .collect();
    line_chart("Slot use over time", "time (s)", "busy share of slots", &lines, false, 1.0)
}

/// One labelled line of [`series_chart`].
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Colour index (series with one index share a colour).
    pub colour: usize,
    /// Drawn dashed.
    pub dashed: bool,
    /// The (x, y) points, in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart of arbitrary series on linear axes, y from 0 to `y_max` (or to a nice
/// value above the highest point): Jockey's allocation over time (Fig. 6), completion
/// relative to the deadline (Fig. 5) and the like.
pub fn series_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    y_max: Option<f64>,
) -> String {
    let top = y_max.unwrap_or_else(|| {
        nice_ceiling(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max))
    });
    let lines: Vec<Line<'_>> = series
        .iter()
        .map(|s| Line { label: s.label.clone(), colour: s.colour, dashed: s.dashed, points: &s.points })
        .collect();
    line_chart(title, x_label, y_label, &lines, false, if top > 0.0 { top } else { 1.0 })
}

/// Mean (bar) and p95 (tick) waiting time per class, one bar per run in each class.
pub fn wait_by_class(runs: &[RunData]) -> String {
    let mut classes: Vec<&str> = runs.iter().flat_map(|r| r.jobs.iter().map(JobRecord::class_key)).collect();
    classes.sort();
    classes.dedup();
    classes.insert(0, "all");
    let stats: Vec<Vec<(f64, f64)>> =
        classes.iter().map(|c| runs.iter().map(|r| wait_stats(r, c)).collect()).collect();
    let top = nice_ceiling(stats.iter().flatten().map(|s| s.1).fold(0.0, f64::max));
    let mut svg = frame("Waiting time per class (bar: mean, tick: p95)", "class", "waiting time (s)");
    y_axis(&mut svg, 0.0, top, false);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let group_w = plot_w / classes.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / runs.len().max(1) as f64;
    let y = |v: f64| TOP + plot_h * (1.0 - if top > 0.0 { v / top } else { 0.0 });
    for (g, class) in classes.iter().enumerate() {
        let x0 = LEFT + g as f64 * group_w + group_w * 0.1;
        for (i, &(mean, p95)) in stats[g].iter().enumerate() {
            let x = x0 + i as f64 * bar_w;
            let colour = COLOURS[i % COLOURS.len()];
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}" fill-opacity="0.75"/>"#,
                y(mean),
                bar_w * 0.9,
                y(0.0) - y(mean)
            );
            let _ = writeln!(
                svg,
                r#"<line x1="{x:.1}" x2="{:.1}" y1="{p:.1}" y2="{p:.1}" stroke="{colour}" stroke-width="2"/>"#,
                x + bar_w * 0.9,
                p = y(p95)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x0 + group_w * 0.4,
            HEIGHT - BOTTOM + 18.0,
            escape(class)
        );
    }
    legend(&mut svg, runs.iter().enumerate().map(|(i, r)| (r.label.clone(), i, false)));
    svg.push_str("</svg>\n");
    svg
}

/// (mean, p95) waiting time of `run`'s jobs of `class` (`all`: every job).
fn wait_stats(run: &RunData, class: &str) -> (f64, f64) {
    let mut waits: Vec<f64> = run
        .jobs
        .iter()
        .filter(|j| class == "all" || j.class_key() == class)
        .filter_map(JobRecord::wait_s)
        .collect();
    spread(&mut waits).map_or((0.0, 0.0), |s| (s.mean, s.p95))
}

/// Sorted values as (value, cumulative fraction), at most about 400 points.
fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let step = n.div_ceil(400).max(1);
    let mut points: Vec<(f64, f64)> =
        (0..n).step_by(step).map(|i| (values[i], (i + 1) as f64 / n as f64)).collect();
    if let Some(&last) = values.last() {
        points.push((last, 1.0));
    }
    points
}

fn extent(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// The smallest of 1, 2, 2.5, 5 × 10^k at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * base).find(|&c| c >= v).unwrap_or(10.0 * base)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The SVG header, background, title and axis labels.
fn frame(title: &str, x_label: &str, y_label: &str) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        escape(title)
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        HEIGHT - 12.0,
        escape(x_label)
    );
    let _ = writeln!(
        svg,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        escape(y_label)
    );
    svg
}

/// Axis value → position along an axis of `length` pixels.
fn scale(v: f64, lo: f64, hi: f64, log: bool, length: f64) -> f64 {
    let (v, lo, hi) = if log { (v.max(lo).log10(), lo.log10(), hi.log10()) } else { (v, lo, hi) };
    if hi > lo { (v - lo) / (hi - lo) * length } else { 0.0 }
}

/// Tick values between `lo` and `hi`: decades on a log axis, five nice steps otherwise.
fn ticks(lo: f64, hi: f64, log: bool) -> Vec<f64> {
    if log {
        let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        return (a..=b).map(|e| 10f64.powi(e)).filter(|t| *t >= lo && *t <= hi).collect();
    }
    let step = nice_ceiling((hi - lo) / 5.0);
    let first = (lo / step).ceil() * step;
    // Rounded so 3 × 0.2 prints as 0.6.
    (0..=10)
        .map(|i| ((first + f64::from(i) * step) * 1e9).round() / 1e9)
        .filter(|t| *t <= hi + step * 1e-9)
        .collect()
}

fn label(v: f64) -> String {
    if v.abs() >= 1e5 { format!("{v:.1e}") } else { format!("{}", (v * 1000.0).round() / 1000.0) }
}

/// The y axis with grid lines and labels.
fn y_axis(svg: &mut String, lo: f64, hi: f64, log: bool) {
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    for t in ticks(lo, hi, log) {
        let y = TOP + plot_h - scale(t, lo, hi, log, plot_h);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            label(t)
        );
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="black"/>"#
    );
}

/// Legend entries: label, colour index, dashed.
fn legend(svg: &mut String, entries: impl Iterator<Item = (String, usize, bool)>) {
    let x = WIDTH - RIGHT + 12.0;
    for (n, (text, colour, dashed)) in entries.enumerate() {
        let y = TOP + 10.0 + n as f64 * 18.0;
        let dash = if dashed { r#" stroke-dasharray="5,3""# } else { "" };
        let _ = writeln!(
            svg,
            r#"<line x1="{x:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            x + 22.0,
            COLOURS[colour % COLOURS.len()],
            x + 28.0,
            y + 4.0,
            escape(&text)
        );
    }
}

/// The x axis's grid lines and labels.
fn x_axis(svg: &mut String, lo: f64, hi: f64, log_x: bool) {
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    for t in ticks(lo, hi, log_x) {
        let x = LEFT + scale(t, lo, hi, log_x, plot_w);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 16.0,
            label(t)
        );
    }
}

/// A line chart with x and y axes, grid and legend.
fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line<'_>],
    log_x: bool,
    y_max: f64,
) -> String {
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let (mut lo, mut hi) = extent(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
    if !lo.is_finite() || hi <= lo {
        (lo, hi) = (0.0, 1.0);
    }
    if log_x {
        (lo, hi) = (10f64.powf(lo.log10().floor()), 10f64.powf(hi.log10().ceil()));
    } else {
        (lo, hi) = (lo.min(0.0), nice_ceiling(hi));
    }
    let mut svg = frame(title, x_label, y_label);
    y_axis(&mut svg, 0.0, y_max, false);
    x_axis(&mut svg, lo, hi, log_x);
    for line in lines {
        let path: Vec<String> = line
            .points
            .iter()
            .map(|&(x, y)| {
                let px = LEFT + scale(x, lo, hi, log_x, plot_w);
                let py = TOP + plot_h - scale(y, 0.0, y_max, false, plot_h);
                format!("{px:.1},{py:.1}")
            })
            .collect();
        let dash = if line.dashed { r#" stroke-dasharray="5,3""# } else { "" };
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"{dash}/>"#,
            path.join(" "),
            COLOURS[line.colour % COLOURS.len()]
        );
    }
    legend(&mut svg, lines.iter().map(|l| (l.label.clone(), l.colour, l.dashed)));
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use slotmarket_common::metrics::{Outcome, read_jobs_csv, write_jobs_csv};
    use slotmarket_common::spec::JobClass;

    use super::*;

    /// A `jobs.csv` of two jobs: one completed, one unfinished and never started.
    fn jobs_csv() -> String {
        let completed = JobRecord {
            class: Some(JobClass::DelaySensitive),
            outcome: Outcome::Completed,
            submit_s: Some(0.0),
            start_s: Some(0.0),
            finish_s: Some(10.0),
            ..JobRecord::new("a,1")
        };
        let unfinished =
            JobRecord { outcome: Outcome::Unfinished, submit_s: Some(1.0), ..JobRecord::new("b") };
        let mut out = Vec::new();
        write_jobs_csv(&[completed, unfinished], &mut out).expect("writes to memory");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn job_and_slot_csvs_are_read_by_column_name() {
        let jobs = read_jobs_csv(&jobs_csv()).unwrap();
        assert_eq!(
            (jobs[0].class_key(), jobs[0].wait_s(), jobs[0].completion_s()),
            ("delay-sensitive", Some(0.0), Some(10.0))
        );
        assert_eq!((jobs[1].class_key(), jobs[1].wait_s(), jobs[1].completion_s()), ("none", None, None));
        let slots =
            read_slots_csv("t_s,width_s,map_busy,reduce_busy,map_util,reduce_util\n0,1,2,0,0.5,0\n").unwrap();
        assert_eq!(slots, vec![SlotRow { t_s: 0.0, map_util: 0.5, reduce_util: 0.0 }]);
        assert_eq!(read_slots_csv("t_s,reduce_util\n").unwrap_err(), CsvError::MissingColumn("map_util"));
        let bad = read_slots_csv("t_s,map_util,reduce_util\n0,x,0\n").unwrap_err();
        assert_eq!(bad.to_string(), "line 2: column map_util: \"x\" is not a number");
    }

    #[test]
    fn plots_are_svg_documents_with_one_series_per_run() {
        let run = |label: &str| RunData {
            label: label.into(),
            jobs: read_jobs_csv(&jobs_csv()).unwrap(),
            slots: vec![SlotRow { t_s: 0.0, map_util: 0.5, reduce_util: 0.1 }],
        };
        let runs = [run("fifo"), run("fair")];
        for svg in [completion_cdf(&runs), slot_use(&runs), wait_by_class(&runs)] {
            assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"), "{svg}");
            assert!(svg.contains(">fifo") && svg.contains(">fair"), "{svg}");
        }
        assert_eq!(completion_cdf(&runs).matches("<polyline").count(), 2);
        assert_eq!(slot_use(&runs).matches("<polyline").count(), 4);
    }

    #[test]
    fn a_series_chart_draws_every_series_under_its_ceiling() {
        let series = [
            Series {
                label: "guarantee".into(),
                colour: 0,
                dashed: false,
                points: vec![(0.0, 10.0), (60.0, 37.0)],
            },
            Series {
                label: "deadline".into(),
                colour: 1,
                dashed: true,
                points: vec![(90.0, 0.0), (90.0, 37.0)],
            },
        ];
        let svg = series_chart("Allocation", "time (s)", "slots", &series, None);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains(">guarantee<") && svg.contains(">deadline<"), "{svg}");
        // 37 rounds up to a 50 ceiling: the highest point sits below the plot's top.
        assert!(svg.contains(">50<"), "{svg}");
    }

    #[test]
    fn axes_get_nice_ticks() {
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(0.23), 0.25);
        assert_eq!(ticks(0.0, 1.0, false), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(ticks(1.0, 1000.0, true), vec![1.0, 10.0, 100.0, 1000.0]);
    }
}
