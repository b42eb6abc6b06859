//! Command templates: `{name}` placeholders substituted per task; `{{` and `}}` are
//! literal braces. The result runs under `/bin/sh -c`, so every value is inserted quoted
//! for the spot it stands in (bare, `'...'` or `"..."`): a value is always data, one word.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::shell::{self, Context, Lexer};
use crate::ids::{AttemptId, JobId};

/// The placeholders a command template may use, with what each becomes.
///
/// Numbers and job ids are inserted as they are. Text (`{stage}`, `{job_dir}`,
/// `{input}`) is shell-quoted for where it stands: bare it becomes one single-quoted word
/// (`'it'\''s'`), inside `'...'` or `"..."` it is escaped for those quotes, and a value of
/// only `A-Z a-z 0-9 _ . / : = + , @ % -` is inserted unchanged. Text placeholders are
/// refused inside `$(...)`, backquotes, `${...}`, `$'...'`, here-documents and comments,
/// and right after a backslash or `$`, where no quoting is safe.
pub const PLACEHOLDERS: &[(&str, &str)] = &[
    ("{task}", "the task's index within its stage, from 0"),
    ("{tasks}", "the number of tasks in this stage"),
    ("{tasks.STAGE}", "the number of tasks in stage STAGE (e.g. {tasks.reduce})"),
    ("{stage}", "this stage's name (quoted)"),
    ("{job}", "the job id, e.g. j7"),
    ("{job_dir}", "the job's directory under the agents' shared data directory (quoted)"),
    ("{attempt}", "the attempt number, from 1"),
    ("{input}", "the job's `input` field (quoted)"),
];

/// The placeholders whose values are free text, and so need quoting.
const TEXT_PLACEHOLDERS: &[&str] = &["stage", "job_dir", "input"];

/// What a template is rendered with, apart from `{job_dir}` (the agent knows where its
/// data directory is).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TaskVars {
    /// The job id.
    pub job: JobId,
    /// This stage's name (shared by every launch of the stage; encodes as a string).
    pub stage: Arc<str>,
    /// The task's index within its stage.
    pub task: u32,
    /// The number of tasks in this stage.
    pub tasks: u32,
    /// The attempt being launched.
    pub attempt: AttemptId,
    /// The job's `input` field, if any.
    pub input: Option<String>,
    /// Task counts of every stage of the job, by name, for `{tasks.STAGE}` (shared by
    /// every launch of the job; encodes as the map).
    pub stage_tasks: Arc<BTreeMap<String, u32>>,
}

/// A template that cannot be rendered.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum TemplateError {
    /// A `{` without its `}`.
    #[error("unclosed '{{' at byte {0}; write '{{{{' for a literal brace")]
    Unclosed(usize),
    /// A `}` with no `{` before it.
    #[error("stray '}}' at byte {0}; write '}}}}' for a literal brace")]
    Stray(usize),
    /// A placeholder that is not in [`PLACEHOLDERS`].
    #[error(
        "unknown placeholder {{{0}}}; known: {{task}} {{tasks}} {{tasks.STAGE}} {{stage}} {{job}} {{job_dir}} {{attempt}} {{input}}"
    )]
    Unknown(String),
    /// `{tasks.X}` where the job has no stage X.
    #[error("{{tasks.{0}}} names no stage of this job")]
    UnknownStage(String),
    /// `{input}` in a job without an `input` field.
    #[error("{{input}} is used but the job has no `input` field")]
    NoInput,
    /// A text placeholder where no shell quoting is safe.
    #[error(
        "{{{0}}} stands inside $(...), backquotes, ${{...}}, $'...', a here-document or a comment, \
         or right after a backslash or '$', where its value cannot be quoted; set a variable \
         first (v={{{0}}}; ... \"$v\")"
    )]
    Unquotable(String),
}

/// Renders `template` for one task attempt, each value quoted for where it stands (see
/// [`PLACEHOLDERS`]).
pub fn render(template: &str, vars: &TaskVars, job_dir: &str) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len() + 64);
    let mut lexer = Lexer::default();
    walk(template, |piece| {
        match piece {
            Piece::Text(text) => {
                lexer.feed(text);
                out.push_str(text);
            }
            Piece::Placeholder(name) => {
                let value = value_of(name, vars, job_dir)?;
                let quoted = shell::quote(&value, lexer.context())
                    .ok_or_else(|| TemplateError::Unquotable(name.to_string()))?;
                out.push_str(&quoted);
                lexer.value_inserted();
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// Checks every placeholder in `template` against the stages and fields the job has, and
/// that every text placeholder stands where it can be quoted.
pub(super) fn check(template: &str, stage_names: &[&str], has_input: bool) -> Result<(), TemplateError> {
    let mut lexer = Lexer::default();
    walk(template, |piece| match piece {
        Piece::Text(text) => {
            lexer.feed(text);
            Ok(())
        }
        Piece::Placeholder(name) => {
            check_name(name, stage_names, has_input)?;
            if TEXT_PLACEHOLDERS.contains(&name) && lexer.context() == Context::Nested {
                return Err(TemplateError::Unquotable(name.to_string()));
            }
            lexer.value_inserted();
            Ok(())
        }
    })
}

/// Whether `name` is a placeholder this job can fill.
fn check_name(name: &str, stage_names: &[&str], has_input: bool) -> Result<(), TemplateError> {
    match name {
        "task" | "tasks" | "stage" | "job" | "job_dir" | "attempt" => Ok(()),
        "input" if has_input => Ok(()),
        "input" => Err(TemplateError::NoInput),
        _ => match name.strip_prefix("tasks.") {
            Some(stage) if stage_names.contains(&stage) => Ok(()),
            Some(stage) => Err(TemplateError::UnknownStage(stage.to_string())),
            None => Err(TemplateError::Unknown(name.to_string())),
        },
    }
}

fn value_of(name: &str, vars: &TaskVars, job_dir: &str) -> Result<String, TemplateError> {
    Ok(match name {
        "task" => vars.task.to_string(),
        "tasks" => vars.tasks.to_string(),
        "stage" => vars.stage.to_string(),
        "job" => vars.job.to_string(),
        "job_dir" => job_dir.to_string(),
        "attempt" => vars.attempt.0.to_string(),
        "input" => vars.input.clone().ok_or(TemplateError::NoInput)?,
        _ => match name.strip_prefix("tasks.") {
            Some(stage) => match vars.stage_tasks.get(stage) {
                Some(count) => count.to_string(),
                None => return Err(TemplateError::UnknownStage(stage.to_string())),
            },
            None => return Err(TemplateError::Unknown(name.to_string())),
        },
    })
}

enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// Splits a template into literal text and placeholders, handling `{{`/`}}` escapes.
fn walk<'a>(
    template: &'a str,
    mut visit: impl FnMut(Piece<'a>) -> Result<(), TemplateError>,
) -> Result<(), TemplateError> {
    let bytes = template.as_bytes();
    let (mut i, mut text_start) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'}' if bytes.get(i + 1) == Some(&bytes[i]) => {
                visit(Piece::Text(&template[text_start..=i]))?;
                i += 2;
                text_start = i;
            }
            b'{' => {
                visit(Piece::Text(&template[text_start..i]))?;
                let close = template[i..].find('}').ok_or(TemplateError::Unclosed(i))? + i;
                visit(Piece::Placeholder(&template[i + 1..close]))?;
                i = close + 1;
                text_start = i;
            }
            b'}' => return Err(TemplateError::Stray(i)),
            _ => i += 1,
        }
    }
    visit(Piece::Text(&template[text_start..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> TaskVars {
        TaskVars {
            job: JobId(7),
            stage: "map".into(),
            task: 3,
            tasks: 10,
            attempt: AttemptId(2),
            input: Some("/data/in".into()),
            stage_tasks: Arc::new([("map".to_string(), 10), ("reduce".to_string(), 2)].into()),
        }
    }

    #[test]
    fn every_placeholder_is_substituted() {
        let out = render(
            "run {job} {stage} {task}/{tasks} r={tasks.reduce} a={attempt} in={input} dir={job_dir}",
            &vars(),
            "/jobs/j7",
        )
        .unwrap();
        assert_eq!(out, "run j7 map 3/10 r=2 a=2 in=/data/in dir=/jobs/j7");
    }

    #[test]
    fn doubled_braces_are_literal() {
        assert_eq!(render("awk '{{print $1}}' {task}", &vars(), "").unwrap(), "awk '{print $1}' 3");
    }

    #[test]
    fn bad_templates_are_refused() {
        assert_eq!(check("echo {tsk}", &["map"], false), Err(TemplateError::Unknown("tsk".into())));
        assert_eq!(check("echo {task", &["map"], false), Err(TemplateError::Unclosed(5)));
        assert_eq!(check("echo }", &["map"], false), Err(TemplateError::Stray(5)));
        assert_eq!(check("{tasks.red}", &["map"], false), Err(TemplateError::UnknownStage("red".into())));
        assert_eq!(check("{input}", &["map"], false), Err(TemplateError::NoInput));
        assert_eq!(check("{tasks.map} {input}", &["map"], true), Ok(()));
        assert_eq!(
            check("cat $(ls {job_dir})", &["map"], false),
            Err(TemplateError::Unquotable("job_dir".into()))
        );
        assert_eq!(
            check("echo x # {stage}", &["map"], false),
            Err(TemplateError::Unquotable("stage".into()))
        );
        // Numbers are safe anywhere.
        assert_eq!(check("echo $(seq {task} {tasks})", &["map"], false), Ok(()));
    }

    /// Runs `command` under `sh -c` in `dir`; answers its stdout.
    fn run_sh(command: &str, dir: &std::path::Path) -> String {
        let output =
            std::process::Command::new("/bin/sh").arg("-c").arg(command).current_dir(dir).output().unwrap();
        assert!(output.status.success(), "`{command}`: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    #[test]
    fn hostile_text_stays_one_argument_in_every_quoting_context() {
        let dir = tempfile::tempdir().unwrap();
        let hostile = [
            "x; touch pwned",
            "$(touch pwned)",
            "`touch pwned`",
            "a'b\"c\\d $HOME *",
            "' ; touch pwned ; '",
            "\" ; touch pwned ; \"",
            "line\nbreak",
            "",
            "-n",
        ];
        for input in hostile {
            let mut vars = vars();
            vars.input = Some(input.to_string());
            vars.stage = input.into();
            for template in ["printf '%s|\\n' {input} {stage}", "printf '%s|\\n' \"{input}\" '{stage}'"] {
                let command = render(template, &vars, "/jobs/j7").unwrap();
                let printed = run_sh(&command, dir.path());
                assert_eq!(
                    printed,
                    format!("{input}|\n{input}|\n"),
                    "{template} with {input:?}: `{command}`"
                );
            }
            let inside = render("printf '%s|' \"in={input}/x\" 'st={stage}/x'", &vars, "").unwrap();
            assert_eq!(
                run_sh(&inside, dir.path()),
                format!("in={input}/x|st={input}/x|"),
                "{input:?}: `{inside}`"
            );
        }
        assert!(!dir.path().join("pwned").exists(), "a value ran as code");
    }

    #[test]
    fn plain_values_render_unchanged_and_nested_text_is_refused() {
        let mut vars = vars();
        assert_eq!(
            render("a {input} \"{job_dir}/x\" '{stage}'", &vars, "/j/7").unwrap(),
            "a /data/in \"/j/7/x\" 'map'"
        );
        vars.input = Some("a b".into());
        assert_eq!(render("{input}", &vars, "").unwrap(), "'a b'");
        assert_eq!(render("echo `cat {input}`", &vars, ""), Err(TemplateError::Unquotable("input".into())));
    }

    #[test]
    fn shared_values_encode_exactly_as_owned_ones() {
        // The wire format predates the `Arc`s: a peer built with owned strings and maps
        // must read and write the same bytes.
        #[derive(Serialize)]
        struct Owned {
            job: JobId,
            stage: String,
            task: u32,
            tasks: u32,
            attempt: AttemptId,
            input: Option<String>,
            stage_tasks: BTreeMap<String, u32>,
        }
        let counts: BTreeMap<String, u32> = [("map".to_string(), 10), ("reduce".to_string(), 2)].into();
        let shared = TaskVars {
            job: JobId(7),
            stage: "reduce".into(),
            task: 1,
            tasks: 2,
            attempt: AttemptId(3),
            input: Some("/in".into()),
            stage_tasks: Arc::new(counts.clone()),
        };
        let owned = Owned {
            job: JobId(7),
            stage: "reduce".into(),
            task: 1,
            tasks: 2,
            attempt: AttemptId(3),
            input: Some("/in".into()),
            stage_tasks: counts,
        };
        let bytes = postcard::to_allocvec(&shared).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&owned).unwrap());
        assert_eq!(postcard::from_bytes::<TaskVars>(&bytes).unwrap(), shared);
    }
}
