//! How a followed job's progress is shown: plain lines when the output is not a
//! terminal (one per change, for logs and scripts), or a live block on a terminal that is
//! redrawn in place: a header line, then per stage done/running/pending with a bar, and
//! the predicted finish once the master has an estimate.
//!
//! Rendering is a pure function of the job view ([`render_live`]); only [`Display`]
//! writes to the terminal. The block is a handful of lines redrawn when the status
//! changes, so it is drawn with two ANSI sequences (cursor up, erase down) rather than a
//! progress-bar crate: indicatif would bring its own terminal layer and tick thread for
//! what is here an event-driven redraw, and its bars would still need this rendering.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use slotmarket_common::protocol::{JobState, JobStatus, StageStatus};
use slotmarket_common::time::Timestamp;

use crate::output;
use crate::submit;

/// Width of a stage's bar in characters.
const BAR_WIDTH: usize = 20;
/// Terminal width assumed when it cannot be read.
const DEFAULT_WIDTH: usize = 80;

/// The task counts the header shows; taken from the stages when there are any, so the
/// header and the stage lines never disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    total: u64,
    done: u64,
    running: u64,
}

impl Counts {
    fn of(status: &JobStatus) -> Counts {
        if status.stages.is_empty() {
            let job = &status.summary;
            return Counts { total: job.tasks_total, done: job.tasks_completed, running: job.tasks_running };
        }
        status.stages.iter().fold(Counts { total: 0, done: 0, running: 0 }, |sum, stage| Counts {
            total: sum.total + u64::from(stage.tasks),
            done: sum.done + u64::from(stage.completed),
            running: sum.running + u64::from(stage.running),
        })
    }
}

/// The word for where the job is, consistent with `counts`: a pending job with placed
/// tasks is "starting", never "pending … 4 running".
fn state_word(state: JobState, counts: Counts) -> &'static str {
    match state {
        JobState::Pending if counts.running > 0 => "starting",
        state => state.name(),
    }
}

/// The master's predicted finish, from MRM admission or the Jockey controller.
fn predicted_finish(status: &JobStatus) -> Option<Timestamp> {
    status.summary.predicted_finish.or_else(|| status.slo.as_ref().and_then(|slo| slo.predicted_finish))
}

/// The live block for `status` at `now` on a terminal `width` columns wide: the header,
/// then one line per stage. Lines are cut to `width` so the redraw can count them.
pub(crate) fn render_live(status: &JobStatus, now: Timestamp, width: usize) -> Vec<String> {
    let job = &status.summary;
    let counts = Counts::of(status);
    let since = job.finished.unwrap_or(now);
    let mut header = format!(
        "{} {} {}: {}/{} tasks done, {} running, {} after submit",
        job.id,
        output::sanitize(&job.name),
        state_word(job.state, counts),
        counts.done,
        counts.total,
        counts.running,
        output::relative(Some(since), job.submitted)
    );
    if let Some(predicted) = predicted_finish(status).filter(|_| !job.state.is_terminal()) {
        let _ = write!(header, "; predicted finish {}", output::relative(Some(predicted), job.submitted));
        if let Some(deadline) = job.deadline {
            let _ = write!(header, " (deadline {})", output::relative(Some(deadline), job.submitted));
        }
    }
    let name_width = status.stages.iter().map(|stage| output::columns(&output::sanitize(&stage.name))).max();
    let mut lines = vec![header];
    lines.extend(status.stages.iter().map(|stage| stage_line(stage, name_width.unwrap_or(0))));
    lines.into_iter().map(|line| cut(line, width)).collect()
}

/// `  map     [#######.............]  done 4/11  running 3  pending 4`.
fn stage_line(stage: &StageStatus, name_width: usize) -> String {
    let filled = if stage.tasks == 0 {
        BAR_WIDTH
    } else {
        (stage.completed as usize * BAR_WIDTH) / stage.tasks as usize
    };
    let running = ((stage.running as usize * BAR_WIDTH).div_ceil(stage.tasks.max(1) as usize))
        .min(BAR_WIDTH - filled.min(BAR_WIDTH));
    let bar: String = std::iter::repeat_n('#', filled.min(BAR_WIDTH))
        .chain(std::iter::repeat_n('>', running))
        .chain(std::iter::repeat('.'))
        .take(BAR_WIDTH)
        .collect();
    let name = output::sanitize(&stage.name);
    let pad = output::padding(&name, name_width);
    let mut line = format!(
        "  {name}{pad}  [{bar}]  done {}/{}  running {}  pending {}",
        stage.completed, stage.tasks, stage.running, stage.pending
    );
    if stage.failed_attempts > 0 {
        let _ = write!(line, "  failed attempts {}", stage.failed_attempts);
    }
    line
}

/// `line` cut to `width` terminal columns (a wrapped line would break the redraw); a wide
/// character that would straddle the edge is left out.
fn cut(line: String, width: usize) -> String {
    let mut used = 0;
    for (at, c) in line.char_indices() {
        used += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used > width.max(1) {
            return line[..at].to_string();
        }
    }
    line
}

/// How progress is shown, chosen once per command.
#[derive(Debug)]
pub(crate) enum Display {
    /// One line on stderr per change, progress at most every [`PLAIN_EVERY_MS`]
    /// (stdout or stderr is not a terminal).
    Plain(PlainLines),
    /// A block on stderr redrawn in place.
    Live {
        /// Lines of the block drawn last (erased before the next draw).
        drawn: usize,
        /// The block drawn last, so an unchanged status draws nothing.
        last: Vec<String>,
    },
}

impl Display {
    /// Live when both stdout and stderr are terminals (and `TERM` is not `dumb`), plain
    /// otherwise: what scripts and tests read stays the plain lines.
    pub(crate) fn for_this_terminal() -> Display {
        let dumb = std::env::var("TERM").is_ok_and(|term| term == "dumb");
        if std::io::stdout().is_terminal() && std::io::stderr().is_terminal() && !dumb {
            Display::Live { drawn: 0, last: Vec::new() }
        } else {
            Display::Plain(PlainLines::default())
        }
    }

    /// Shows `status` if it changed what would be shown.
    pub(crate) fn show(&mut self, status: &JobStatus) {
        let now = output::now();
        match self {
            Display::Plain(plain) => {
                if let Some(line) = plain.change(status, now) {
                    eprintln!("{line}");
                }
            }
            Display::Live { drawn, last } => {
                let lines = render_live(status, now, terminal_width());
                if lines != *last {
                    let mut err = std::io::stderr().lock();
                    // Failing to draw progress must not fail the wait.
                    let _ = err.write_all(redraw(*drawn, &lines).as_bytes());
                    let _ = err.flush();
                    *drawn = lines.len();
                    *last = lines;
                }
            }
        }
    }

    /// Before printing something else on stderr (a reconnect notice, the next job): the
    /// live block stays as it was drawn, and the next one starts below it.
    pub(crate) fn detach(&mut self) {
        if let Display::Live { drawn, last } = self {
            *drawn = 0;
            last.clear();
        }
    }
}

/// Least time between two plain lines of a job in the same state: a job of thousands of
/// short tasks changes hundreds of times a second, and a log wants its progress, not
/// every step of it.
const PLAIN_EVERY_MS: u64 = 1_000;

/// What the plain display printed last.
#[derive(Debug, Default)]
pub(crate) struct PlainLines {
    /// The last line printed, without its clock, so an unchanged status prints nothing.
    last: String,
    /// The job's state then, so a change of state prints at once.
    state: Option<JobState>,
    /// When it was printed.
    at: Timestamp,
}

impl PlainLines {
    /// The plain line to print for `status` at `now`, or `None` if the job has not
    /// changed since the last line, or only made progress less than [`PLAIN_EVERY_MS`]
    /// after it. The progress held back shows with the next change or status probe.
    fn change(&mut self, status: &JobStatus, now: Timestamp) -> Option<String> {
        // The time since submit moves on every status probe, so it is left out of the
        // comparison: rendered at the submit time, a running job's line reads +0.0s
        // whenever it is drawn, and an ended job's shows its fixed length.
        let unclocked = submit::progress_line(status, status.summary.submitted);
        if unclocked == self.last {
            return None;
        }
        let state = status.summary.state;
        if self.state == Some(state) && now.0 < self.at.0.saturating_add(PLAIN_EVERY_MS) {
            return None;
        }
        *self = PlainLines { last: unclocked, state: Some(state), at: now };
        Some(submit::progress_line(status, now))
    }
}

/// The bytes that erase the `drawn` lines above the cursor and draw `lines`.
fn redraw(drawn: usize, lines: &[String]) -> String {
    let mut out = String::new();
    if drawn > 0 {
        // Cursor up to the block's first line, then erase to the end of the screen.
        let _ = write!(out, "\x1b[{drawn}A\r\x1b[J");
    }
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Columns of the terminal on stderr, or [`DEFAULT_WIDTH`].
fn terminal_width() -> usize {
    // SAFETY: TIOCGWINSZ writes a winsize into the struct we pass and reads nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 { usize::from(size.ws_col) } else { DEFAULT_WIDTH }
}

#[cfg(test)]
mod tests {
    use slotmarket_common::ids::JobId;
    use slotmarket_common::protocol::SloStatus;
    use slotmarket_common::spec::SlotKind;

    use super::*;
    use crate::fake_master::status;

    fn stage(name: &str, tasks: u32, pending: u32, running: u32, completed: u32) -> StageStatus {
        StageStatus {
            name: name.into(),
            slot: SlotKind::Map,
            tasks,
            pending,
            running,
            completed,
            failed_attempts: 0,
        }
    }

    fn map_reduce(state: JobState, map: (u32, u32, u32), reduce: (u32, u32, u32)) -> JobStatus {
        let mut job = status(JobId(7), "wc", state);
        job.stages =
            vec![stage("map", 8, map.0, map.1, map.2), stage("reduce", 2, reduce.0, reduce.1, reduce.2)];
        job
    }

    #[test]
    fn the_live_block_shows_each_stage_done_running_and_pending() {
        let job = map_reduce(JobState::Running, (1, 3, 4), (2, 0, 0));
        let lines = render_live(&job, Timestamp(3_500), 120);
        assert_eq!(
            lines,
            vec![
                "j7 wc running: 4/10 tasks done, 3 running, +2.5s after submit",
                "  map     [##########>>>>>>>>..]  done 4/8  running 3  pending 1",
                "  reduce  [....................]  done 0/2  running 0  pending 2",
            ]
        );
    }

    #[test]
    fn the_header_never_says_pending_with_tasks_running() {
        // Tasks are placed before the first reports running: the job is still pending.
        let job = map_reduce(JobState::Pending, (5, 3, 0), (2, 0, 0));
        let header = &render_live(&job, Timestamp(1_200), 120)[0];
        assert!(header.starts_with("j7 wc starting: 0/10 tasks done, 3 running"), "{header}");
        let idle = map_reduce(JobState::Pending, (8, 0, 0), (2, 0, 0));
        assert!(render_live(&idle, Timestamp(1_200), 120)[0].starts_with("j7 wc pending: 0/10"));
    }

    #[test]
    fn the_header_counts_come_from_the_stages_it_shows() {
        // The summary lags the stage counts by a report: the header follows the stages.
        let mut job = map_reduce(JobState::Running, (0, 2, 6), (2, 0, 0));
        job.summary.tasks_completed = 5;
        job.summary.tasks_running = 3;
        let header = &render_live(&job, Timestamp(2_000), 120)[0];
        assert!(header.contains("6/10 tasks done, 2 running"), "{header}");
    }

    #[test]
    fn the_predicted_finish_shows_once_the_master_has_an_estimate() {
        let mut job = map_reduce(JobState::Running, (0, 4, 4), (2, 0, 0));
        assert!(!render_live(&job, Timestamp(3_000), 200)[0].contains("predicted"));
        job.slo = Some(SloStatus {
            progress_permille: 400,
            predicted_finish: Some(Timestamp(31_000)),
            guaranteed: 4,
            peak_guaranteed: 4,
            finish_interval: None,
            slowdown_permille: 1000,
            utility_from_spec: false,
        });
        assert!(render_live(&job, Timestamp(3_000), 200)[0].ends_with("; predicted finish +30.0s"));
        job.summary.predicted_finish = Some(Timestamp(41_000));
        job.summary.deadline = Some(Timestamp(61_000));
        let header = &render_live(&job, Timestamp(3_000), 200)[0];
        assert!(header.ends_with("; predicted finish +40.0s (deadline +60.0s)"), "{header}");
        // An ended job has no prediction left to show.
        let mut ended = job.clone();
        ended.summary.state = JobState::Completed;
        assert!(!render_live(&ended, Timestamp(3_000), 200)[0].contains("predicted"));
    }

    #[test]
    fn lines_are_cut_to_the_terminal_and_untrusted_names_escaped() {
        let mut job = map_reduce(JobState::Running, (8, 0, 0), (2, 0, 0));
        job.summary.name = "evil\x1b[2Jname".into();
        let lines = render_live(&job, Timestamp(1_000), 30);
        assert!(lines.iter().all(|line| line.chars().count() <= 30), "{lines:?}");
        assert!(lines[0].starts_with("j7 evil\\x1b[2Jname"), "{}", lines[0]);
    }

    #[test]
    fn wide_characters_count_as_the_two_columns_they_take() {
        let mut job = map_reduce(JobState::Running, (8, 0, 0), (2, 0, 0));
        job.summary.name = "漢".repeat(70);
        job.stages[0].name = "段段段".into();
        let lines = render_live(&job, Timestamp(1_000), 30);
        assert!(lines.iter().all(|line| output::columns(line) <= 30), "{lines:?}");
        // "j7 " and 13 of the 70 (26 columns); a 14th would end past column 30.
        assert_eq!(lines[0], format!("j7 {}", "漢".repeat(13)));
        // The bars line up: six columns of name either way.
        let wide = render_live(&job, Timestamp(1_000), 120);
        let bar_at = |line: &str| output::columns(&line[..line.find('[').unwrap()]);
        assert_eq!(bar_at(&wide[1]), bar_at(&wide[2]), "{wide:?}");
    }

    #[test]
    fn a_plain_line_is_printed_only_when_the_job_changed() {
        let mut plain = PlainLines::default();
        let running = status(JobId(7), "wc", JobState::Running);
        let first = plain.change(&running, Timestamp(2_000));
        assert_eq!(first.as_deref(), Some("j7 running: 0/2 tasks done, 1 running (+1.0s after submit)"));
        // Probes every 5 s find the job as it was: only the clock moved.
        assert_eq!(plain.change(&running, Timestamp(7_000)), None);
        assert_eq!(plain.change(&running, Timestamp(12_000)), None);
        let mut progressed = running.clone();
        progressed.summary.tasks_completed = 1;
        let next = plain.change(&progressed, Timestamp(13_000));
        assert_eq!(next.as_deref(), Some("j7 running: 1/2 tasks done, 1 running (+12.0s after submit)"));
        let ended = status(JobId(7), "wc", JobState::Completed);
        let end = plain.change(&ended, Timestamp(14_000));
        assert_eq!(end.as_deref(), Some("j7 completed: 2/2 tasks done, 0 running (+3.0s after submit)"));
        assert_eq!(plain.change(&ended, Timestamp(19_000)), None);
    }

    #[test]
    fn plain_progress_prints_at_most_once_a_second_but_a_new_state_at_once() {
        let mut plain = PlainLines::default();
        let mut job = status(JobId(7), "wc", JobState::Running);
        job.summary.tasks_total = 1_000;
        let done = |job: &JobStatus, n: u64| {
            let mut job = job.clone();
            job.summary.tasks_completed = n;
            job
        };
        assert!(plain.change(&done(&job, 1), Timestamp(2_000)).is_some());
        // Hundreds of tasks end within the second: none of it is printed yet.
        for n in 2..=400 {
            assert_eq!(plain.change(&done(&job, n), Timestamp(2_000 + n)), None, "task {n}");
        }
        // The next change (or the next probe) a second on shows where the job is.
        let later = plain.change(&done(&job, 401), Timestamp(3_000));
        assert!(later.unwrap().contains("401/1000 tasks done"));
        // The end is printed at once, however soon.
        job.summary.state = JobState::Completed;
        assert!(plain.change(&done(&job, 1_000), Timestamp(3_010)).unwrap().contains("completed"));
    }

    #[test]
    fn a_redraw_erases_exactly_the_lines_drawn_before() {
        let lines = vec!["a".to_string(), "b".to_string()];
        assert_eq!(redraw(0, &lines), "a\nb\n");
        assert_eq!(redraw(3, &lines), "\x1b[3A\r\x1b[Ja\nb\n");
    }

    #[test]
    fn a_stage_with_failed_attempts_says_so() {
        let mut failing = stage("map", 4, 1, 1, 2);
        failing.failed_attempts = 2;
        assert!(stage_line(&failing, 3).ends_with("pending 1  failed attempts 2"));
    }
}
