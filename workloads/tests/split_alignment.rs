//! Every line of an input is processed by exactly one map, for many split counts, with
//! random line lengths (some longer than a split), empty lines, several files, and files
//! that end without a newline.

use slotmarket_workloads::rng::SplitMix64;
use slotmarket_workloads::split::{Input, LineChunks, for_each_line};

/// Writes `files` files of random lines; returns every line in input order.
fn random_input(dir: &std::path::Path, seed: u64, files: usize) -> Vec<Vec<u8>> {
    let mut rng = SplitMix64::new(seed);
    let mut all = Vec::new();
    for f in 0..files {
        let mut content = Vec::new();
        for l in 0..rng.below(40) {
            let len = match rng.below(10) {
                0 => 0,
                1 => rng.between(500, 3000),
                _ => rng.below(30),
            };
            let line: Vec<u8> = (0..len).map(|i| b'a' + ((l + i + f as u64) % 26) as u8).collect();
            content.extend_from_slice(&line);
            content.push(b'\n');
            all.push(line);
        }
        if rng.below(2) == 0 {
            let tail: Vec<u8> = (0..rng.between(1, 50)).map(|_| b'T').collect();
            content.extend_from_slice(&tail);
            all.push(tail);
        }
        std::fs::write(dir.join(format!("part-{f:03}")), content).unwrap();
    }
    all
}

#[test]
fn every_line_is_read_by_exactly_one_split() {
    for seed in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let expected = random_input(dir.path(), seed, 1 + seed as usize % 4);
        let input = Input::open(dir.path()).unwrap();
        for tasks in [1, 2, 3, 4, 7, 10, 33, 100, 257] {
            let mut got = Vec::new();
            for task in 0..tasks {
                let ranges = input.split(task, tasks).unwrap();
                // Ranges start at line starts and are in input order.
                assert!(ranges.iter().all(|r| !r.is_empty()));
                let mut chunks = LineChunks::with_capacity(ranges, 64);
                while let Some(chunk) = chunks.next_chunk().unwrap() {
                    for_each_line(chunk, |line| got.push(line.to_vec()));
                }
            }
            assert_eq!(got.len(), expected.len(), "seed {seed}, {tasks} splits");
            assert_eq!(got, expected, "seed {seed}, {tasks} splits");
        }
    }
}

#[test]
fn an_empty_input_gives_empty_splits() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty"), b"").unwrap();
    let input = Input::open(dir.path()).unwrap();
    assert!((0..3).all(|t| input.split(t, 3).unwrap().is_empty()));
    let nothing = tempfile::tempdir().unwrap();
    assert_eq!(Input::open(nothing.path()).unwrap().total_bytes(), 0);
}
