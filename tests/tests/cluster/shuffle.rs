//! Three agents in local data mode, each with its own data directory and no shared one:
//! reducers fetch the map parts other agents hold through their agent's shuffle, and
//! wordcount and sort outputs equal a single-process run of the same tasks, and the
//! wordcount template (whose maps read generated input other agents hold) runs unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{TestCluster, agent, assert_completed, binary, submit, wait_finished};

pub(crate) const MAPS: u32 = 6;
pub(crate) const REDUCES: u32 = 3;

/// Runs `slotmarket-task` with `args`, failing the test if it fails.
fn task(args: &[&str]) {
    let output = Command::new(binary("slotmarket-task")).args(args).output().expect("run slotmarket-task");
    assert!(output.status.success(), "slotmarket-task {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// Input every node can read (the agents run on one machine): `part-0 .. part-3`.
pub(crate) fn generate(dir: &Path, kind: &str, amount: &str) -> PathBuf {
    let input = dir.join(format!("{kind}-input"));
    let input_text = input.to_str().expect("utf-8 path");
    for part in 0..4 {
        let part = part.to_string();
        let flag = if kind == "gen-text" { "--bytes" } else { "--records" };
        task(&[kind, "--output", input_text, flag, amount, "--seed", "5", "--task", &part, "--tasks", "4"]);
    }
    input
}

/// The job: MAPS maps reading `input`, REDUCES reducers; no stage passes files except
/// through the map parts.
fn spec(program: &str, input: &Path) -> String {
    format!(
        r#"
        name = "{program}-local"
        [[stage]]
        name = "map"
        tasks = {MAPS}
        slot = "map"
        command = 'slotmarket-task {program} map --input "{input}" --parts 4 --task {{task}} --tasks {{tasks}} --reducers {{tasks.reduce}} --job-dir "{{job_dir}}"'
        [[stage]]
        name = "reduce"
        tasks = {REDUCES}
        slot = "reduce"
        after = ["map"]
        command = 'slotmarket-task {program} reduce --task {{task}} --maps {{tasks.map}} --job-dir "{{job_dir}}"'
        "#,
        input = input.display()
    )
}

/// The same tasks one after another in one directory: the reference outputs.
pub(crate) fn single_process(program: &str, input: &Path, job_dir: &Path) -> Vec<Vec<u8>> {
    let (input, job) = (input.to_str().expect("utf-8"), job_dir.to_str().expect("utf-8"));
    let (maps, reduces) = (MAPS.to_string(), REDUCES.to_string());
    for map in 0..MAPS {
        let map = map.to_string();
        let args = [
            "map",
            "--input",
            input,
            "--parts",
            "4",
            "--task",
            &map,
            "--tasks",
            &maps,
            "--reducers",
            &reduces,
        ];
        task(&[&[program][..], &args, &["--job-dir", job]].concat());
    }
    (0..REDUCES)
        .map(|r| {
            task(&[program, "reduce", "--task", &r.to_string(), "--maps", &maps, "--job-dir", job]);
            std::fs::read(job_dir.join("out").join(format!("part-{r}"))).expect("reference output")
        })
        .collect()
}

/// Reducer `r`'s output, from whichever agent ran it.
fn cluster_output(cluster: &TestCluster, job: slotmarket_common::ids::JobId, r: u32) -> Vec<u8> {
    let found = ["node-1", "node-2", "node-3"]
        .iter()
        .map(|node| cluster.local_job_dir(node, job).join("out").join(format!("part-{r}")))
        .find(|path| path.is_file());
    std::fs::read(found.unwrap_or_else(|| panic!("no agent holds out/part-{r}"))).expect("read output")
}

/// The whole log of process `name`.
pub(crate) fn log_of(cluster: &TestCluster, name: &str) -> String {
    std::fs::read_to_string(cluster.dir.path().join(format!("{name}.log"))).unwrap_or_default()
}

async fn run_local(cluster: &TestCluster, program: &str, input: &Path) {
    let client = cluster.client("alice").await;
    let job = submit(&client, &spec(program, input)).await;
    let status = wait_finished(&client, job).await;
    assert_completed(cluster, &status);
    let reference = single_process(program, input, &cluster.dir.path().join(format!("{program}-reference")));
    for (r, expected) in reference.iter().enumerate() {
        assert!(!expected.is_empty(), "{program} reducer {r} wrote nothing");
        let got = cluster_output(cluster, job, r as u32);
        assert!(got == *expected, "{program} out/part-{r} differs from the single-process run");
    }
    // No agent shares another's directory, so the reducers' parts came over the shuffle.
    let fetched =
        ["node-1", "node-2", "node-3"].iter().any(|node| log_of(cluster, node).contains("parts fetched"));
    assert!(fetched, "no agent fetched a part");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wordcount_and_sort_on_three_agents_without_a_shared_directory_equal_a_single_process_run() {
    let cluster =
        TestCluster::start_local(&[agent("node-1", 2, 1), agent("node-2", 2, 1), agent("node-3", 2, 1)])
            .await;
    let text = generate(cluster.dir.path(), "gen-text", "1500000");
    run_local(&cluster, "wordcount", &text).await;
    let records = generate(cluster.dir.path(), "gen-records", "40000");
    run_local(&cluster, "sort", &records).await;
}

/// Word counts of the text in `files`.
fn count_words(files: &[Vec<u8>]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for bytes in files {
        for word in String::from_utf8_lossy(bytes).split_ascii_whitespace() {
            *counts.entry(word.to_string()).or_default() += 1;
        }
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wordcount_template_with_generated_input_runs_unchanged_without_a_shared_directory() {
    let cluster =
        TestCluster::start_local(&[agent("node-1", 2, 1), agent("node-2", 2, 1), agent("node-3", 2, 1)])
            .await;
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/jobs/wordcount.toml");
    let text = std::fs::read_to_string(&template).expect("read the wordcount template");
    assert!(text.contains("--bytes 33554432"), "the template's size changed; update this test");
    let client = cluster.client("alice").await;
    let job = submit(&client, &text.replace("--bytes 33554432", "--bytes 1000000")).await;
    let status = wait_finished(&client, job).await;
    assert_completed(&cluster, &status);
    let nodes = ["node-1", "node-2", "node-3"];
    // The generator's parts, from whichever agent holds each (a fetched copy is the same).
    let input: Vec<Vec<u8>> = (0..4)
        .map(|g| {
            let path = nodes
                .iter()
                .map(|node| cluster.local_job_dir(node, job).join(format!("input/part-{g}")))
                .find(|path| path.is_file())
                .unwrap_or_else(|| panic!("no agent holds input/part-{g}"));
            std::fs::read(path).expect("read input")
        })
        .collect();
    let expected = count_words(&input);
    assert!(expected.values().sum::<u64>() > 100_000, "the input holds the words");
    let mut counted = BTreeMap::new();
    for r in 0..2 {
        let out = String::from_utf8(cluster_output(&cluster, job, r)).expect("utf-8 output");
        for line in out.lines() {
            let (word, count) = line.split_once('\t').expect("word<TAB>count");
            assert!(counted.insert(word.to_string(), count.parse::<u64>().expect("count")).is_none());
        }
    }
    assert_eq!(counted, expected, "every word counted once");
    client.close().await;
}
