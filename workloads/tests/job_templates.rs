//! Every job template in `configs/jobs/` parses and validates as a Slotmarket job spec,
//! and runs: each stage's commands are rendered as the agent would, pointed at the built
//! `slotmarket-task`, shrunk to test size, and run with `/bin/sh -c` stage by stage.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use slotmarket_common::ids::{AttemptId, JobId};
use slotmarket_common::spec::{JobSpec, TaskVars, render};

fn templates() -> Vec<(PathBuf, JobSpec)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/jobs");
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

#[test]
fn every_job_template_runs() {
    let binary = env!("CARGO_BIN_EXE_slotmarket-task");
    for (path, spec) in templates() {
        let job_dir = tempfile::tempdir().unwrap();
        let stage_tasks: BTreeMap<String, u32> =
            spec.stages.iter().map(|s| (s.name.clone(), s.tasks)).collect();
        for index in stage_order(&spec) {
            let stage = &spec.stages[index];
            let command = stage.command.strip_prefix("slotmarket-task ").unwrap_or_else(|| {
                panic!("{}: stage {} does not run slotmarket-task", path.display(), stage.name)
            });
            let command = format!("'{binary}' {command}");
            let command = shrink(
                &shrink(&shrink(&command, "--bytes", "200000"), "--records", "3000"),
                "--samples",
                "1000",
            );
            for task in 0..stage.tasks {
                let vars = TaskVars {
                    job: JobId(1),
                    stage: stage.name.clone(),
                    task,
                    tasks: stage.tasks,
                    attempt: AttemptId(1),
                    input: spec.input.clone(),
                    stage_tasks: stage_tasks.clone(),
                };
                let rendered = render(&command, &vars, &job_dir.path().display().to_string()).unwrap();
                let output = Command::new("/bin/sh").arg("-c").arg(&rendered).output().unwrap();
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
    }
}
