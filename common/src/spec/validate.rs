//! Validation of a parsed [`JobSpec`]: every error names the field and says how to fix
//! it. The master validates again on submit; it never trusts a client.

use std::collections::BTreeSet;

use thiserror::Error;

use super::{JobSpec, template};

/// Most stages a job may have.
pub const MAX_STAGES: usize = 64;
/// Most tasks one stage may have.
pub const MAX_TASKS_PER_STAGE: u32 = 100_000;
/// Longest job name, queue or command accepted, in bytes.
pub const MAX_TEXT_LEN: usize = 4096;
/// Longest stage name accepted, in bytes. Every launch carries the names of all of its
/// job's stages (for `{tasks.STAGE}`), so they are kept short.
pub const MAX_STAGE_NAME_LEN: usize = 256;
/// Longest `input` accepted, in bytes; it travels in every launch of the job.
pub const MAX_INPUT_LEN: usize = 16 * 1024;
/// Most attempts per task a spec may ask for.
const MAX_ATTEMPTS: u32 = 100;

/// Why a job spec was refused.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum SpecError {
    /// The text is not valid TOML or does not have the spec's shape.
    #[error("invalid job spec: {0}")]
    Toml(String),
    /// A field has a value that is not allowed.
    #[error("{field}: {problem}")]
    Field {
        /// Path of the field, e.g. `stage[1].after`.
        field: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
}

fn field_error(field: impl Into<String>, problem: impl Into<String>) -> SpecError {
    SpecError::Field { field: field.into(), problem: problem.into() }
}

/// Most a spec's `[estimate]` may put on one task: a week, in milliseconds.
const MAX_ESTIMATE_TASK_MS: u64 = 7 * 24 * 3600 * 1000;

/// Checks a submitter's `[estimate]`: task times positive and at most a week, the spread
/// at most 1000 %.
fn check_estimate(estimate: &super::EstimateSpec) -> Result<(), SpecError> {
    for (field, ms) in
        [("estimate.map_task_ms", estimate.map_task_ms), ("estimate.reduce_task_ms", estimate.reduce_task_ms)]
    {
        if let Some(ms) = ms {
            if ms == 0 || ms > MAX_ESTIMATE_TASK_MS {
                return Err(field_error(
                    field,
                    format!("must be between 1 and {MAX_ESTIMATE_TASK_MS} milliseconds, got {ms}"),
                ));
            }
        }
    }
    for (field, pct) in
        [("estimate.spread_pct", estimate.spread_pct), ("estimate.task_spread_pct", estimate.task_spread_pct)]
    {
        if let Some(pct) = pct.filter(|&p| p > 1000) {
            return Err(field_error(field, format!("must be at most 1000, got {pct}")));
        }
    }
    Ok(())
}

/// Most jobs one job may wait for.
pub const MAX_JOB_DEPENDENCIES: usize = 64;

/// Checks the job-level `after`: bounded and without repeats.
fn check_job_after(after: &[crate::ids::JobId]) -> Result<(), SpecError> {
    if after.len() > MAX_JOB_DEPENDENCIES {
        let problem = format!("at most {MAX_JOB_DEPENDENCIES} jobs, got {}", after.len());
        return Err(field_error("after", problem));
    }
    let mut seen = BTreeSet::new();
    if let Some(repeated) = after.iter().find(|&&job| !seen.insert(job)) {
        return Err(field_error("after", format!("{repeated} is listed twice")));
    }
    Ok(())
}

/// Checks names, counts, templates and that `after` forms a DAG over existing stages.
pub fn validate(spec: &JobSpec) -> Result<(), SpecError> {
    check_text(&spec.name).map_err(|p| field_error("name", p))?;
    if let Some(attempts) = spec.max_attempts {
        if attempts == 0 || attempts > MAX_ATTEMPTS {
            return Err(field_error(
                "max_attempts",
                format!("must be between 1 and {MAX_ATTEMPTS}, got {attempts}"),
            ));
        }
    }
    if let Some(queue) = &spec.queue {
        check_text(queue).map_err(|p| field_error("queue", p))?;
    }
    if let Some(account) = &spec.account {
        check_text(account).map_err(|p| field_error("account", p))?;
    }
    if let Some(input) = &spec.input {
        if input.len() > MAX_INPUT_LEN {
            return Err(field_error(
                "input",
                format!(
                    "longer than {MAX_INPUT_LEN} bytes ({} given); pass a path to the data instead of the data",
                    input.len()
                ),
            ));
        }
        // `{input}` puts it into the command line.
        check_no_nul(input).map_err(|p| field_error("input", p))?;
    }
    if let Some(estimate) = &spec.estimate {
        check_estimate(estimate)?;
    }
    check_job_after(&spec.after)?;
    if let Some(problem) = spec.utility.as_ref().and_then(|u| u.problem(spec.deadline.is_some())) {
        return Err(field_error("utility", problem));
    }
    if spec.stages.is_empty() {
        return Err(field_error("stage", "a job needs at least one [[stage]] table"));
    }
    if spec.stages.len() > MAX_STAGES {
        return Err(field_error("stage", format!("at most {MAX_STAGES} stages, got {}", spec.stages.len())));
    }
    let names: Vec<&str> = spec.stages.iter().map(|s| s.name.as_str()).collect();
    let mut seen = BTreeSet::new();
    for (i, stage) in spec.stages.iter().enumerate() {
        // Named only on the way to an error: most specs have none, and the simulator
        // checks half a million of them.
        let at = |f: &str| format!("stage[{i}].{f}");
        check_text(&stage.name).map_err(|p| field_error(at("name"), p))?;
        if stage.name.len() > MAX_STAGE_NAME_LEN {
            return Err(field_error(
                at("name"),
                format!("longer than {MAX_STAGE_NAME_LEN} bytes; use a shorter stage name"),
            ));
        }
        if !seen.insert(stage.name.as_str()) {
            return Err(field_error(
                at("name"),
                format!("\"{}\" is used by another stage; stage names must be unique", stage.name),
            ));
        }
        if stage.tasks == 0 || stage.tasks > MAX_TASKS_PER_STAGE {
            return Err(field_error(
                at("tasks"),
                format!("must be between 1 and {MAX_TASKS_PER_STAGE}, got {}", stage.tasks),
            ));
        }
        check_text(&stage.command).map_err(|p| field_error(at("command"), p))?;
        template::check(&stage.command, &names, spec.input.is_some())
            .map_err(|e| field_error(at("command"), e.to_string()))?;
        if stage.after.len() > MAX_STAGES {
            return Err(field_error(
                at("after"),
                format!("at most {MAX_STAGES} entries, got {}", stage.after.len()),
            ));
        }
        for dep in &stage.after {
            if !names.contains(&dep.as_str()) {
                return Err(field_error(
                    at("after"),
                    format!("unknown stage \"{dep}\"; name one of: {}", names.join(", ")),
                ));
            }
            if dep == &stage.name {
                return Err(field_error(at("after"), "a stage cannot wait for itself"));
            }
        }
    }
    check_acyclic(spec)
}

/// What is wrong with a text field's `value`, if anything.
fn check_text(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("must not be empty".to_string());
    }
    if value.len() > MAX_TEXT_LEN {
        return Err(format!("longer than {MAX_TEXT_LEN} bytes"));
    }
    check_no_nul(value)
}

/// Refuses a NUL character. A C string (argv, a path, an environment variable) ends at
/// NUL, so the task could never be started; refusing here saves every attempt failing
/// the same way.
fn check_no_nul(value: &str) -> Result<(), String> {
    if value.contains('\0') {
        return Err(
            "contains a NUL character (\\0), which no command line or name can hold; remove it".to_string()
        );
    }
    Ok(())
}

/// Kahn's algorithm: if some stages can never become ready, `after` has a cycle.
fn check_acyclic(spec: &JobSpec) -> Result<(), SpecError> {
    let mut done: BTreeSet<&str> = BTreeSet::new();
    loop {
        let ready: Vec<&str> = spec
            .stages
            .iter()
            .filter(|s| !done.contains(s.name.as_str()))
            .filter(|s| s.after.iter().all(|d| done.contains(d.as_str())))
            .map(|s| s.name.as_str())
            .collect();
        if ready.is_empty() {
            break;
        }
        done.extend(ready);
    }
    match spec.stages.iter().position(|s| !done.contains(s.name.as_str())) {
        None => Ok(()),
        Some(i) => Err(field_error(
            format!("stage[{i}].after"),
            "the `after` lists form a cycle; stages must form a DAG",
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::JobSpec;

    fn refused(toml: &str) -> String {
        JobSpec::from_toml(toml).unwrap_err().to_string()
    }

    const ONE_STAGE: &str = "name = \"j\"\n[[stage]]\nname = \"a\"\nslot = \"map\"\ncommand = \"true\"\n";

    #[test]
    fn an_estimate_section_parses_and_its_values_are_checked() {
        let spec = JobSpec::from_toml(&format!(
            "{ONE_STAGE}tasks = 2\n[estimate]\nmap_task_ms = 1500\nspread_pct = 10\n"
        ))
        .unwrap();
        let estimate = spec.estimate.unwrap();
        assert_eq!(estimate.task_ms(crate::spec::SlotKind::Map), Some(1500));
        assert_eq!(estimate.task_ms(crate::spec::SlotKind::Reduce), None);
        assert!((estimate.spread() - 0.1).abs() < 1e-12);
        let zero = refused(&format!("{ONE_STAGE}tasks = 2\n[estimate]\nmap_task_ms = 0\n"));
        assert!(zero.starts_with("estimate.map_task_ms: must be between 1"), "{zero}");
        let wide = refused(&format!("{ONE_STAGE}tasks = 2\n[estimate]\nspread_pct = 5000\n"));
        assert_eq!(wide, "estimate.spread_pct: must be at most 1000, got 5000");
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            refused(&format!("{ONE_STAGE}tasks = 0")),
            "stage[0].tasks: must be between 1 and 100000, got 0"
        );
        assert!(refused("name = \"\"\nstage = []").starts_with("name: must not be empty"));
        assert!(refused("name = \"j\"\nstage = []").starts_with("stage: a job needs at least one"));
        let bad_dep = format!("{ONE_STAGE}tasks = 1\nafter = [\"b\"]");
        assert_eq!(refused(&bad_dep), "stage[0].after: unknown stage \"b\"; name one of: a");
        let bad_placeholder =
            "name = \"j\"\n[[stage]]\nname = \"a\"\nslot = \"map\"\ntasks = 1\ncommand = \"echo {tsk}\"";
        assert!(refused(bad_placeholder).starts_with("stage[0].command: unknown placeholder {tsk}"));
        assert!(refused(&format!("max_attempts = 0\n{ONE_STAGE}tasks = 1")).starts_with("max_attempts:"));
        assert!(refused(&format!("{ONE_STAGE}tasks = 1\nslot = \"gpu\"")).contains("invalid job spec"));
    }

    #[test]
    fn oversized_input_names_and_after_lists_are_refused_with_the_limit() {
        let input = "x".repeat(super::MAX_INPUT_LEN + 1);
        let err = refused(&format!("input = \"{input}\"\n{ONE_STAGE}tasks = 1"));
        assert!(err.starts_with("input: longer than 16384 bytes (16385 given)"), "{err}");
        let just_fits = "x".repeat(super::MAX_INPUT_LEN);
        JobSpec::from_toml(&format!("input = \"{just_fits}\"\n{ONE_STAGE}tasks = 1")).unwrap();

        let long_name = "s".repeat(super::MAX_STAGE_NAME_LEN + 1);
        let spec = format!(
            "name = \"j\"\n[[stage]]\nname = \"{long_name}\"\nslot = \"map\"\ntasks = 1\ncommand = \"true\""
        );
        assert!(refused(&spec).starts_with("stage[0].name: longer than 256 bytes"), "{}", refused(&spec));

        let after = vec!["\"a\""; super::MAX_STAGES + 1].join(", ");
        let spec = format!(
            "{ONE_STAGE}tasks = 1\n[[stage]]\nname = \"b\"\nslot = \"map\"\ntasks = 1\ncommand = \"true\"\nafter = [{after}]"
        );
        assert_eq!(refused(&spec), "stage[1].after: at most 64 entries, got 65");
    }

    #[test]
    fn a_nul_in_a_command_or_name_is_refused() {
        let command = refused(
            "name = \"j\"\n[[stage]]\nname = \"a\"\nslot = \"map\"\ntasks = 1\ncommand = \"echo a\\u0000b\"",
        );
        assert!(command.starts_with("stage[0].command: contains a NUL character"), "{command}");
        let stage = refused(
            "name = \"j\"\n[[stage]]\nname = \"a\\u0000\"\nslot = \"map\"\ntasks = 1\ncommand = \"true\"",
        );
        assert!(stage.starts_with("stage[0].name: contains a NUL character"), "{stage}");
        let job = refused(&format!("{}tasks = 1", ONE_STAGE.replacen("\"j\"", "\"j\\u0000\"", 1)));
        assert!(job.starts_with("name: contains a NUL character"), "{job}");
        let input = refused(&format!("input = \"a\\u0000\"\n{ONE_STAGE}tasks = 1"));
        assert!(input.starts_with("input: contains a NUL character"), "{input}");
    }

    #[test]
    fn duplicate_stage_names_are_refused() {
        let spec = format!(
            "{ONE_STAGE}tasks = 1\n[[stage]]\nname = \"a\"\nslot = \"map\"\ntasks = 1\ncommand = \"true\""
        );
        assert!(refused(&spec).starts_with("stage[1].name: \"a\" is used by another stage"));
    }

    #[test]
    fn cycles_are_refused() {
        let spec = "name = \"j\"
            [[stage]]
            name = \"a\"
            slot = \"map\"
            tasks = 1
            command = \"true\"
            after = [\"b\"]
            [[stage]]
            name = \"b\"
            slot = \"reduce\"
            tasks = 1
            command = \"true\"
            after = [\"a\"]";
        assert!(refused(spec).contains("form a cycle"));
    }
}
