//! Every job template in `configs/jobs/` parses and validates as a Slotmarket job spec,
//! and runs: each stage's commands are rendered as the agent would, pointed at the built
//! `slotmarket-task`, shrunk to test size, and run with `/bin/sh -c` stage by stage. The
//! demo's jobs (`cli/src/demo/jobs/`) are run the same way, and every template's reducers
//! are told the map count: a missing map output fails them, naming it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use slotmarket_common::ids::{AttemptId, JobId};
use slotmarket_common::spec::{JobSpec, TaskVars, render};

fn templates() -> Vec<(PathBuf, JobSpec)> {
    templates_in("../configs/jobs")
}

/// The example templates and the demo's.
fn all_templates() -> Vec<(PathBuf, JobSpec)> {
    let mut all = templates();
    all.extend(templates_in("../cli/src/demo/jobs"));
    all
}

fn templates_in(relative: &str) -> Vec<(PathBuf, JobSpec)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let mut specs = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let spec = JobSpec::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            specs.push((path, spec));
        }
    }
    specs.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    specs
}

#[test]
fn every_job_template_parses() {
    let names: Vec<String> = templates().into_iter().map(|(_, spec)| spec.name).collect();
    assert_eq!(names, ["grep", "pi", "sort", "wordcount"]);
}

/// Replaces the number after `flag` with `value`, so a template runs at test size.
fn shrink(command: &str, flag: &str, value: &str) -> String {
    let mut words: Vec<String> = command.split(' ').map(str::to_string).collect();
    for i in 1..words.len() {
        if words[i - 1] == flag {
            words[i] = value.to_string();
        }
    }
    words.join(" ")
}

/// The stages in an order that respects `after`.
fn stage_order(spec: &JobSpec) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::new();
    while order.len() < spec.stages.len() {
        let before = order.len();
        for (i, stage) in spec.stages.iter().enumerate() {
            let ready = stage.after.iter().all(|dep| order.iter().any(|&j| &spec.stages[j].name == dep));
            if !order.contains(&i) && ready {
                order.push(i);
            }
        }
        assert!(order.len() > before, "{}: stages form a cycle", spec.name);
    }
    order
}

/// Renders task `task` of `stage` as the agent would, with the built binary and test sizes.
/// A leading `sleep N && ` (`demo --slo`'s jobs pause so that their tasks take the same
/// time on any machine) is left out: the test runs the work.
fn render_task(spec: &JobSpec, stage: usize, task: u32, job_dir: &Path) -> String {
    let binary = env!("CARGO_BIN_EXE_slotmarket-task");
    let stage = &spec.stages[stage];
    let command = without_pause(&stage.command)
        .strip_prefix("slotmarket-task ")
        .unwrap_or_else(|| panic!("{}: stage {} does not run slotmarket-task", spec.name, stage.name));
    let command = format!("'{binary}' {command}");
    let command =
        shrink(&shrink(&shrink(&command, "--bytes", "200000"), "--records", "3000"), "--samples", "1000");
    let vars = TaskVars {
        job: JobId(1),
        stage: stage.name.as_str().into(),
        task,
        tasks: stage.tasks,
        attempt: AttemptId(1),
        input: spec.input.clone(),
        stage_tasks: spec.stages.iter().map(|s| (s.name.clone(), s.tasks)).collect::<BTreeMap<_, _>>().into(),
    };
    render(&command, &vars, &job_dir.display().to_string()).unwrap()
}

/// `command` without a leading `sleep N && `.
fn without_pause(command: &str) -> &str {
    match command.strip_prefix("sleep ").and_then(|rest| rest.split_once(" && ")) {
        Some((secs, rest)) if secs.parse::<f64>().is_ok() => rest,
        _ => command,
    }
}

fn run_shell(command: &str) -> std::process::Output {
    Command::new("/bin/sh").arg("-c").arg(command).output().unwrap()
}

#[test]
fn every_job_template_runs() {
    for (path, spec) in all_templates() {
        let job_dir = tempfile::tempdir().unwrap();
        for index in stage_order(&spec) {
            for task in 0..spec.stages[index].tasks {
                let rendered = render_task(&spec, index, task, job_dir.path());
                let output = run_shell(&rendered);
                assert!(
                    output.status.success(),
                    "{}: `{rendered}` failed: {}",
                    path.display(),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
        let last = spec.stages.iter().find(|s| s.name == "reduce").unwrap();
        for r in 0..last.tasks {
            let part = job_dir.path().join("out").join(format!("part-{r}"));
            assert!(part.is_file(), "{}: {} was not written", path.display(), part.display());
        }
        let total_out: u64 = (0..last.tasks)
            .map(|r| std::fs::metadata(job_dir.path().join(format!("out/part-{r}"))).unwrap().len())
            .sum();
        assert!(total_out > 0, "{}: the job wrote nothing", path.display());
        every_reader_names_a_missing_part(&path, &spec, job_dir.path());
    }
}

/// After a full run: with the last map's output for reducer 0 gone, reduce task 0 fails
/// naming it; with a generated input part gone, map task 0 fails naming it.
fn every_reader_names_a_missing_part(path: &Path, spec: &JobSpec, job_dir: &Path) {
    let stage_index = |name: &str| spec.stages.iter().position(|s| s.name == name);
    let (Some(map), Some(reduce)) = (stage_index("map"), stage_index("reduce")) else {
        panic!("{}: no map and reduce stages", path.display());
    };
    let last_map = spec.stages[map].tasks - 1;
    let part = format!("map-{last_map}/part-0");
    std::fs::remove_file(job_dir.join(&part)).unwrap();
    let output = run_shell(&render_task(spec, reduce, 0, job_dir));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{}: the reduce ran without {part}", path.display());
    assert!(stderr.contains(&format!(": {part}.")), "{}: {stderr}", path.display());
    if let Some(generator) = stage_index("gen") {
        let last_part = format!("part-{}", spec.stages[generator].tasks - 1);
        std::fs::remove_file(job_dir.join("input").join(&last_part)).unwrap();
        let output = run_shell(&render_task(spec, map, 0, job_dir));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{}: the map ran without input {last_part}", path.display());
        assert!(stderr.contains(&format!(": {last_part}.")), "{}: {stderr}", path.display());
    }
}
