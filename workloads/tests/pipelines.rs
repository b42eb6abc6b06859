//! Whole map → reduce pipelines called through the library: each workload's output equals
//! a plain single-process computation over the same input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use slotmarket_workloads::generate::{records_all, text_all};
use slotmarket_workloads::layout::{map_dir, map_part, out_part};
use slotmarket_workloads::partition::{fnv1a, hash_partition};
use slotmarket_workloads::split::Input;
use slotmarket_workloads::task::MapTask;
use slotmarket_workloads::{grep, pi, sort, wordcount};

fn map_task(
    input: &Path,
    job_dir: &Path,
    task: u32,
    tasks: u32,
    reducers: u32,
    spill_bytes: usize,
) -> MapTask {
    MapTask {
        input: input.to_path_buf(),
        task,
        tasks,
        input_parts: None,
        reducers,
        job_dir: job_dir.to_path_buf(),
        spill_bytes,
    }
}

/// The concatenated bytes of an input directory, in the order the maps read it.
fn input_bytes(input: &Path) -> Vec<u8> {
    Input::open(input).unwrap().files().iter().flat_map(|f| std::fs::read(&f.path).unwrap()).collect()
}

/// Parses `key\tcount` lines, checking they are sorted by key with no repeats.
fn parse_counts(part: &[u8]) -> Vec<(Vec<u8>, u64)> {
    let rows: Vec<(Vec<u8>, u64)> = part
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|line| {
            let tab = line.iter().rposition(|b| *b == b'\t').unwrap();
            (line[..tab].to_vec(), std::str::from_utf8(&line[tab + 1..]).unwrap().parse().unwrap())
        })
        .collect();
    assert!(rows.windows(2).all(|w| w[0].0 < w[1].0), "part not strictly sorted by key");
    rows
}

/// Reads every reducer's output as counts, checking each key sits in its hash partition.
fn reduce_outputs(job_dir: &Path, reducers: u32) -> HashMap<Vec<u8>, u64> {
    let mut all = HashMap::new();
    for r in 0..reducers {
        for (key, count) in parse_counts(&std::fs::read(out_part(job_dir, r)).unwrap()) {
            assert_eq!(hash_partition(fnv1a(&key), reducers), r);
            assert!(all.insert(key, count).is_none(), "a key in two reducers");
        }
    }
    all
}

fn reference_wordcount(text: &[u8]) -> HashMap<Vec<u8>, u64> {
    let mut counts = HashMap::new();
    for word in text.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()) {
        *counts.entry(word.to_vec()).or_insert(0) += 1;
    }
    counts
}

fn run_wordcount(input: &Path, job_dir: &Path, maps: u32, reducers: u32, spill_bytes: usize) {
    for task in 0..maps {
        wordcount::map(&map_task(input, job_dir, task, maps, reducers, spill_bytes)).unwrap();
    }
    for r in 0..reducers {
        wordcount::reduce(job_dir, r, maps).unwrap();
    }
}

#[test]
fn wordcount_equals_a_single_process_count() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    text_all(&input, 3_000_000, 42, 3).unwrap();
    // A hand-written file with odd whitespace, no final newline and a word per line.
    std::fs::write(input.join("zz-extra"), b"  lone\twords\r\nhere  \n\n\x0c lone\nend").unwrap();
    let expected = reference_wordcount(&input_bytes(&input));
    assert!(expected.len() > 1000);
    for (maps, reducers, spill_bytes) in [(1, 1, usize::MAX), (5, 3, usize::MAX), (7, 4, 1 << 10)] {
        let job_dir = dir.path().join(format!("job-{maps}-{reducers}-{spill_bytes}"));
        run_wordcount(&input, &job_dir, maps, reducers, spill_bytes);
        assert_eq!(reduce_outputs(&job_dir, reducers), expected, "{maps} maps, {reducers} reducers");
    }
}

#[test]
fn grep_equals_a_plain_line_filter() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    text_all(&input, 1_000_000, 7, 2).unwrap();
    let text = input_bytes(&input);
    let words = slotmarket_workloads::generate::vocabulary();
    for pattern in [words[3].clone(), b"a th".to_vec(), b"\tbr".to_vec(), b"no such text".to_vec()] {
        let mut expected = HashMap::new();
        let trimmed = text.strip_suffix(b"\n").unwrap_or(&text);
        for line in trimmed.split(|b| *b == b'\n') {
            if line.windows(pattern.len()).any(|w| w == pattern.as_slice()) {
                *expected.entry(line.to_vec()).or_insert(0) += 1;
            }
        }
        let job_dir = dir.path().join(format!("job-{}", fnv1a(&pattern)));
        for task in 0..4 {
            grep::map(&map_task(&input, &job_dir, task, 4, 3, 4096), &pattern).unwrap();
        }
        for r in 0..3 {
            grep::reduce(&job_dir, r, 4).unwrap();
        }
        assert_eq!(reduce_outputs(&job_dir, 3), expected, "pattern {:?}", String::from_utf8_lossy(&pattern));
    }
}

fn sorted_lines(text: &[u8]) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    if lines.last().is_some_and(Vec::is_empty) {
        lines.pop();
    }
    lines.sort();
    lines
}

#[test]
fn sort_output_is_a_sorted_permutation_of_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    records_all(&input, 20_000, 5, 3).unwrap();
    let expected = sorted_lines(&input_bytes(&input));
    for (maps, reducers, spill_bytes) in [(1, 1, usize::MAX), (5, 4, usize::MAX), (3, 6, 50_000)] {
        let job_dir = dir.path().join(format!("job-{maps}-{reducers}-{spill_bytes}"));
        for task in 0..maps {
            let stats = sort::map(&map_task(&input, &job_dir, task, maps, reducers, spill_bytes)).unwrap();
            assert_eq!(stats.spills > 0, spill_bytes < usize::MAX);
        }
        let mut concatenated = Vec::new();
        let mut sizes = Vec::new();
        for r in 0..reducers {
            sort::reduce(&job_dir, r, maps).unwrap();
            let part = std::fs::read(out_part(&job_dir, r)).unwrap();
            sizes.push(part.len());
            concatenated.extend(part);
        }
        let lines: Vec<&[u8]> = concatenated.strip_suffix(b"\n").unwrap().split(|b| *b == b'\n').collect();
        assert!(lines.windows(2).all(|w| w[0] <= w[1]), "concatenated output is not sorted");
        assert_eq!(sorted_lines(&concatenated), expected);
        // Sampled cuts split uniform keys evenly: no reducer gets twice its share.
        let share = concatenated.len() / reducers as usize;
        assert!(sizes.iter().all(|&s| s < 2 * share), "unbalanced reducers: {sizes:?}");
    }
}

#[test]
fn sort_handles_arbitrary_lines() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("a"), b"pear\n\napple\nzebra\napple\n").unwrap();
    std::fs::write(input.join("b"), b"\xffbyte\nbanana\n\tTab\nno newline").unwrap();
    let job_dir = dir.path().join("job");
    for task in 0..3 {
        sort::map(&map_task(&input, &job_dir, task, 3, 2, usize::MAX)).unwrap();
    }
    let mut out = Vec::new();
    for r in 0..2 {
        sort::reduce(&job_dir, r, 3).unwrap();
        out.extend(std::fs::read(out_part(&job_dir, r)).unwrap());
    }
    assert_eq!(out, b"\n\tTab\napple\napple\nbanana\nno newline\npear\nzebra\n\xffbyte\n");
}

#[test]
fn pi_error_shrinks_with_samples() {
    // The rotated Halton sequence's error is far below Monte Carlo's; these bounds are
    // about seven times the worst error seen over 200 seeds (6.8e-3 at 1e4 points, 2.9e-4
    // at 1e6), and the seeds used here are among those.
    for (samples_per_map, bound) in [(2_500u64, 0.05), (250_000, 0.002)] {
        for seed in [0, 1, 2] {
            let dir = tempfile::tempdir().unwrap();
            for task in 0..4 {
                pi::map(dir.path(), task, samples_per_map, seed).unwrap();
            }
            let result = pi::reduce(dir.path(), 4).unwrap();
            assert_eq!((result.counts.total, result.maps), (4 * samples_per_map, 4));
            let error = (result.estimate - std::f64::consts::PI).abs();
            assert!(error < bound, "{} samples, seed {seed}: error {error}", 4 * samples_per_map);
            let out = std::fs::read_to_string(out_part(dir.path(), 0)).unwrap();
            assert!(out.starts_with(&format!("pi\t{:.15}\n", result.estimate)), "{out}");
        }
    }
}

fn part_contents(job_dir: &Path, map: u32, reducers: u32) -> Vec<Vec<u8>> {
    (0..reducers).map(|r| std::fs::read(map_part(job_dir, map, r)).unwrap()).collect()
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn a_rerun_map_overwrites_its_parts_and_leftovers_are_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    text_all(&input, 200_000, 1, 1).unwrap();
    let job_dir = dir.path().join("job");
    let task = map_task(&input, &job_dir, 1, 2, 3, 2048);
    wordcount::map(&task).unwrap();
    let first = part_contents(&job_dir, 1, 3);
    // Garble the parts as a confused earlier attempt might have, and leave what a killed
    // attempt leaves: a temporary part and a spill directory.
    for r in 0..3 {
        std::fs::write(map_part(&job_dir, 1, r), b"garbage\n").unwrap();
    }
    std::fs::write(map_dir(&job_dir, 1).join(".part-0.tmp.999999.0"), b"half a pa").unwrap();
    std::fs::create_dir_all(map_dir(&job_dir, 1).join(".spill.999999.0")).unwrap();
    let stats = wordcount::map(&task).unwrap();
    assert!(stats.counts.spills > 0);
    assert_eq!(part_contents(&job_dir, 1, 3), first);
    assert_eq!(
        dir_names(&map_dir(&job_dir, 1)),
        [".part-0.tmp.999999.0", ".spill.999999.0", "part-0", "part-1", "part-2"]
    );
    // The other map and the reducers: the leftovers change nothing.
    wordcount::map(&map_task(&input, &job_dir, 0, 2, 3, 2048)).unwrap();
    for r in 0..3 {
        wordcount::reduce(&job_dir, r, 2).unwrap();
        wordcount::reduce(&job_dir, r, 2).unwrap();
    }
    assert_eq!(reduce_outputs(&job_dir, 3), reference_wordcount(&input_bytes(&input)));
    assert_eq!(dir_names(&job_dir.join("out")), ["part-0", "part-1", "part-2"]);
}

#[test]
fn a_reducer_refuses_a_missing_map_part() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    text_all(&input, 10_000, 1, 1).unwrap();
    wordcount::map(&map_task(&input, dir.path(), 0, 2, 2, usize::MAX)).unwrap();
    std::fs::create_dir_all(map_dir(dir.path(), 1)).unwrap();
    let err = format!("{:#}", wordcount::reduce(dir.path(), 0, 2).unwrap_err());
    assert!(err.contains("1 of 2 map outputs missing") && err.contains(": map-1/part-0."), "{err}");
    // Told there were three maps, it also names the map whose directory does not exist.
    let err = format!("{:#}", wordcount::reduce(dir.path(), 0, 3).unwrap_err());
    assert!(err.contains(": map-1/part-0, map-2/part-0."), "{err}");
    let missing: PathBuf = dir.path().join("nope");
    let err = format!("{:#}", wordcount::map(&map_task(&missing, dir.path(), 0, 1, 1, 1)).unwrap_err());
    assert!(err.contains("cannot read input") && err.contains("nope"), "{err}");
}

#[test]
fn a_map_told_the_input_parts_refuses_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    text_all(&input, 20_000, 1, 3).unwrap();
    std::fs::remove_file(input.join("part-1")).unwrap();
    let mut task = map_task(&input, dir.path(), 0, 2, 2, usize::MAX);
    // Without the count the map would silently read the two parts that are left.
    wordcount::map(&task).unwrap();
    task.input_parts = Some(3);
    let err = format!("{:#}", wordcount::map(&task).unwrap_err());
    assert!(err.contains("1 of 3 input parts missing") && err.contains(": part-1."), "{err}");
    let err = format!("{:#}", sort::map(&task).unwrap_err());
    assert!(err.contains(": part-1."), "{err}");
    let err = format!("{:#}", grep::map(&task, b"x").unwrap_err());
    assert!(err.contains(": part-1."), "{err}");
}
