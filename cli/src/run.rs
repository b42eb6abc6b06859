//! `slotmarket run [--tasks N] [--slot map|reduce] [--name N] [--wait] -- CMD ARGS…`: a
//! one-stage job built in memory from a command line (like `hq submit -- cmd` or
//! `sbatch --wrap`), submitted the way `submit` submits a spec file.
//!
//! The words after `--` are one program and its arguments (argv, not a shell line): each is
//! quoted so the shell that runs the task sees it as one word. Placeholders such as
//! `{task}` stay placeholders (an array job: `--tasks 8 -- ./simulate --seed {task}`);
//! any other brace is literal (`awk '{print $1}'` needs no escaping). For a shell line,
//! run a shell: `-- sh -c 'make -j4 && ./bench {task}'`.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use slotmarket_common::ids::JobId;
use slotmarket_common::spec::{JobSpec, MAX_STAGE_NAME_LEN, SlotKind, StageSpec, TimeLimit, validate};

use crate::connection::ConnectionArgs;
use crate::submit;

/// Exit code for a job that does not validate, as `submit` uses for a bad spec file.
const EXIT_INVALID_SPEC: u8 = 2;
/// The name of the single stage of a `run` job.
pub(crate) const RUN_STAGE: &str = "run";
/// Longest job name taken from the program's name when `--name` is not given.
const DERIVED_NAME_LEN: usize = 64;

/// Arguments of `run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Number of tasks; `{task}` in the command is each one's index, from 0.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) tasks: u32,
    /// The kind of slot each task needs.
    #[arg(long, default_value = "map", value_parser = parse_slot)]
    pub(crate) slot: SlotKind,
    /// The job's name [default: the program's file name].
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Follow the job until it ends (reconnecting if the master restarts); exit 0 only if
    /// it completed.
    #[arg(long)]
    pub(crate) wait: bool,
    /// Start only once these jobs completed (fail if one does not); repeatable.
    #[arg(long, value_name = "JOB", value_parser = crate::connection::parse_job_id)]
    pub(crate) after: Vec<JobId>,
    /// Kill the tasks and fail the job once it has run this long (`10m`, `1h30m`).
    #[arg(long, value_name = "DURATION")]
    pub(crate) time_limit: Option<TimeLimit>,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// Parses `map` or `reduce`.
fn parse_slot(text: &str) -> Result<SlotKind, String> {
    match text {
        "map" => Ok(SlotKind::Map),
        "reduce" => Ok(SlotKind::Reduce),
        _ => Err(format!("\"{text}\" is not a slot kind; use map or reduce")),
    }
}

/// Runs `run`.
pub(crate) async fn run(conn: &ConnectionArgs, args: RunArgs, json: bool) -> Result<ExitCode> {
    if let Err(problem) = check_program(&args.command) {
        eprintln!("error: {problem}");
        return Ok(ExitCode::from(EXIT_INVALID_SPEC));
    }
    let spec = job_spec(&args);
    if let Err(err) = validate(&spec) {
        eprintln!("error: the job `run` built is not valid: {err}");
        return Ok(ExitCode::from(EXIT_INVALID_SPEC));
    }
    submit::submit_spec(conn, spec, None, args.wait, json).await
}

/// Refuses an empty program (`-- ''`): the quoted empty word is a valid command line to
/// the spec, but the shell cannot run it, so every attempt would fail.
fn check_program(command: &[String]) -> Result<(), String> {
    match command.first() {
        Some(program) if !program.trim().is_empty() => Ok(()),
        _ => Err("the program after `--` is empty; name the program to run, as in \
                  `slotmarket run -- ./simulate --seed {task}`"
            .into()),
    }
}

/// The one-stage job `args` describe.
pub(crate) fn job_spec(args: &RunArgs) -> JobSpec {
    let command: Vec<String> = args.command.iter().map(|word| quote_word(word)).collect();
    JobSpec {
        name: args.name.clone().unwrap_or_else(|| derived_name(&args.command)),
        input: None,
        max_attempts: None,
        stages: vec![StageSpec {
            name: RUN_STAGE.into(),
            tasks: args.tasks,
            slot: args.slot,
            command: command.join(" "),
            after: Vec::new(),
        }],
        class: None,
        queue: None,
        deadline: None,
        account: None,
        input_bytes: None,
        estimate: None,
        time_limit: args.time_limit,
        after: args.after.clone(),
        utility: None,
    }
}

/// The program's file name (`./bin/simulate` → `simulate`), shortened, or `run`.
fn derived_name(command: &[String]) -> String {
    let program = command.first().map(String::as_str).unwrap_or_default();
    let base = program.rsplit('/').find(|part| !part.is_empty()).unwrap_or(RUN_STAGE);
    let name: String = base.chars().take(DERIVED_NAME_LEN.min(MAX_STAGE_NAME_LEN)).collect();
    if name.trim().is_empty() { RUN_STAGE.into() } else { name }
}

/// One argv word as template text: placeholders kept, other braces doubled (literal),
/// and the word single-quoted for the shell unless it is plain.
fn quote_word(word: &str) -> String {
    let escaped = escape_braces(word);
    let plain =
        !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_./:=+,@%-{}".contains(c));
    if plain {
        escaped
    } else {
        // Inside '...' only the quote itself is special; a placeholder there is still
        // substituted, quoted for that spot by the template renderer.
        format!("'{}'", escaped.replace('\'', "'\\''"))
    }
}

/// `word` with every brace that does not open or close a known placeholder doubled.
fn escape_braces(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&escape_closing(&rest[..at]));
        let tail = &rest[at..];
        if let Some(placeholder) = leading_placeholder(tail) {
            out.push_str(placeholder);
            rest = &tail[placeholder.len()..];
        } else {
            out.push_str(if tail.starts_with('{') { "{{" } else { "}}" });
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

fn escape_closing(text: &str) -> String {
    text.replace('}', "}}")
}

/// The placeholder `text` starts with (`{task}`, `{tasks.run}`, …), if any.
fn leading_placeholder(text: &str) -> Option<&str> {
    let end = text.find('}')?;
    let inner = text.get(1..end)?;
    let known = ["task", "tasks", "stage", "job", "job_dir", "attempt", "input"];
    let is_placeholder = text.starts_with('{')
        && (known.contains(&inner) || inner.strip_prefix("tasks.").is_some_and(|s| !s.is_empty()));
    is_placeholder.then(|| &text[..=end])
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use slotmarket_common::ids::{AttemptId, JobId};
    use slotmarket_common::spec::{TaskVars, render};

    use super::*;

    fn args(words: &[&str]) -> RunArgs {
        RunArgs {
            tasks: 3,
            slot: SlotKind::Map,
            name: None,
            wait: false,
            after: Vec::new(),
            time_limit: None,
            command: words.iter().map(|w| (*w).to_string()).collect(),
        }
    }

    /// The command task `task` of a `run` job would execute.
    fn rendered(spec: &JobSpec, task: u32) -> String {
        let stage = &spec.stages[0];
        let vars = TaskVars {
            job: JobId(4),
            stage: stage.name.as_str().into(),
            task,
            tasks: stage.tasks,
            attempt: AttemptId(1),
            input: None,
            stage_tasks: BTreeMap::from([(stage.name.clone(), stage.tasks)]).into(),
        };
        render(&stage.command, &vars, "/data/j4").unwrap()
    }

    #[test]
    fn words_become_one_stage_with_the_task_index_substituted() {
        let spec = job_spec(&args(&["./bin/simulate", "--seed", "{task}", "--of", "{tasks}"]));
        assert!(validate(&spec).is_ok());
        assert_eq!(spec.name, "simulate");
        assert_eq!((spec.stages.len(), spec.stages[0].tasks), (1, 3));
        assert_eq!(rendered(&spec, 2), "./bin/simulate --seed 2 --of 3");
    }

    #[test]
    fn words_with_spaces_quotes_and_braces_stay_single_words() {
        let spec = job_spec(&args(&["awk", "{print $1}", "it's here", "x{task}y", ""]));
        assert!(validate(&spec).is_ok(), "{:?}", validate(&spec));
        assert_eq!(rendered(&spec, 1), r#"awk '{print $1}' 'it'\''s here' x1y ''"#);
    }

    #[test]
    fn shell_syntax_is_data_unless_a_shell_is_asked_for() {
        let spec = job_spec(&args(&["echo", "a;b", "$(id)", "|", ">out"]));
        assert_eq!(rendered(&spec, 0), "echo 'a;b' '$(id)' '|' '>out'");
        let spec = job_spec(&args(&["sh", "-c", "echo {task} > out-{task}"]));
        assert_eq!(rendered(&spec, 2), "sh -c 'echo 2 > out-2'");
    }

    #[test]
    fn names_come_from_the_flag_or_the_program() {
        let mut given = args(&["true"]);
        given.name = Some("nightly".into());
        assert_eq!(job_spec(&given).name, "nightly");
        assert_eq!(derived_name(&["/usr/bin/".into()]), "bin");
        assert_eq!(derived_name(&["/".into()]), "run");
    }

    #[test]
    fn after_and_time_limit_reach_the_spec() {
        let mut given = args(&["true"]);
        given.after = vec![JobId(3), JobId(3)];
        given.time_limit = Some("90s".parse().unwrap());
        let spec = job_spec(&given);
        assert_eq!((spec.after.len(), spec.time_limit.map(|l| l.millis())), (2, Some(90_000)));
        // The repeat is refused by the same validation a spec file gets.
        assert!(validate(&spec).unwrap_err().to_string().contains("j3 is listed twice"));
    }

    #[tokio::test]
    async fn an_empty_program_is_refused_before_connecting() {
        let conn = ConnectionArgs { master: Some("127.0.0.1:1".into()), ..ConnectionArgs::default() };
        for program in ["", "  "] {
            let exit = run(&conn, args(&[program, "x"]), false).await.unwrap();
            assert_eq!(exit, ExitCode::from(EXIT_INVALID_SPEC), "{program:?}");
        }
        assert!(check_program(&["true".into(), "".into()]).is_ok());
    }

    #[test]
    fn slot_kinds_parse_by_name() {
        assert_eq!(parse_slot("reduce"), Ok(SlotKind::Reduce));
        assert!(parse_slot("gpu").unwrap_err().contains("map or reduce"));
    }
}
