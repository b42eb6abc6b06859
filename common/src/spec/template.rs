//! Command templates: `{name}` placeholders substituted per task; `{{` and `}}` are
//! literal braces.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ids::{AttemptId, JobId};

/// The placeholders a command template may use, with what each becomes.
pub const PLACEHOLDERS: &[(&str, &str)] = &[
    ("{task}", "the task's index within its stage, from 0"),
    ("{tasks}", "the number of tasks in this stage"),
    ("{tasks.STAGE}", "the number of tasks in stage STAGE (e.g. {tasks.reduce})"),
    ("{stage}", "this stage's name"),
    ("{job}", "the job id, e.g. j7"),
    ("{job_dir}", "the job's directory under the agents' shared data directory"),
    ("{attempt}", "the attempt number, from 1"),
    ("{input}", "the job's `input` field"),
];

/// What a template is rendered with, apart from `{job_dir}` (the agent knows where its
/// data directory is).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TaskVars {
    /// The job id.
    pub job: JobId,
    /// This stage's name.
    pub stage: String,
    /// The task's index within its stage.
    pub task: u32,
    /// The number of tasks in this stage.
    pub tasks: u32,
    /// The attempt being launched.
    pub attempt: AttemptId,
    /// The job's `input` field, if any.
    pub input: Option<String>,
    /// Task counts of every stage of the job, by name, for `{tasks.STAGE}`.
    pub stage_tasks: BTreeMap<String, u32>,
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
}

/// Renders `template` for one task attempt.
pub fn render(template: &str, vars: &TaskVars, job_dir: &str) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len() + 64);
    walk(template, |piece| {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Placeholder(name) => out.push_str(&value_of(name, vars, job_dir)?),
        }
        Ok(())
    })?;
    Ok(out)
}

/// Checks every placeholder in `template` against the stages and fields the job has.
pub(super) fn check(template: &str, stage_names: &[&str], has_input: bool) -> Result<(), TemplateError> {
    walk(template, |piece| match piece {
        Piece::Text(_) => Ok(()),
        Piece::Placeholder(name) => match name {
            "task" | "tasks" | "stage" | "job" | "job_dir" | "attempt" => Ok(()),
            "input" if has_input => Ok(()),
            "input" => Err(TemplateError::NoInput),
            _ => match name.strip_prefix("tasks.") {
                Some(stage) if stage_names.contains(&stage) => Ok(()),
                Some(stage) => Err(TemplateError::UnknownStage(stage.to_string())),
                None => Err(TemplateError::Unknown(name.to_string())),
            },
        },
    })
}

fn value_of(name: &str, vars: &TaskVars, job_dir: &str) -> Result<String, TemplateError> {
    Ok(match name {
        "task" => vars.task.to_string(),
        "tasks" => vars.tasks.to_string(),
        "stage" => vars.stage.clone(),
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
            stage_tasks: [("map".to_string(), 10), ("reduce".to_string(), 2)].into(),
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
    }
}
