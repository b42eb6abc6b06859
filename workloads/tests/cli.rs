//! The `slotmarket-task` binary end to end: a wordcount through real processes, and the
//! exit codes for bad arguments (2) and runtime errors (1).

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

fn task(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slotmarket-task")).args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = task(args);
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn wordcount_runs_end_to_end_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (input, job) = (dir.path().join("input"), dir.path().join("job"));
    for t in ["0", "1"] {
        let printed = ok(&[
            "gen-text",
            "--output",
            s(&input),
            "--bytes",
            "400000",
            "--seed",
            "5",
            "--task",
            t,
            "--tasks",
            "2",
        ]);
        assert!(printed.starts_with("gen-text"), "{printed}");
    }
    for t in ["0", "1", "2"] {
        let printed = ok(&[
            "wordcount",
            "map",
            "--input",
            s(&input),
            "--task",
            t,
            "--tasks",
            "3",
            "--reducers",
            "2",
            "--job-dir",
            s(&job),
        ]);
        assert!(printed.starts_with(&format!("wordcount map {t}/3:")), "{printed}");
    }
    for r in ["0", "1"] {
        ok(&["wordcount", "reduce", "--task", r, "--maps", "3", "--job-dir", s(&job)]);
    }
    let mut text = Vec::new();
    for part in ["part-0", "part-1"] {
        text.extend(std::fs::read(input.join(part)).unwrap());
    }
    let mut expected: HashMap<String, u64> = HashMap::new();
    for word in String::from_utf8(text).unwrap().split_ascii_whitespace() {
        *expected.entry(word.to_string()).or_default() += 1;
    }
    let mut got = HashMap::new();
    for r in 0..2 {
        let out = std::fs::read_to_string(job.join(format!("out/part-{r}"))).unwrap();
        let words: Vec<&str> = out.lines().map(|l| l.split_once('\t').unwrap().0).collect();
        assert!(words.windows(2).all(|w| w[0] < w[1]), "reduce output not sorted by word");
        for line in out.lines() {
            let (word, count) = line.split_once('\t').unwrap();
            got.insert(word.to_string(), count.parse::<u64>().unwrap());
        }
    }
    assert_eq!(got, expected);
}

#[test]
fn pi_prints_its_estimate() {
    let dir = tempfile::tempdir().unwrap();
    for t in ["0", "1"] {
        ok(&["pi", "map", "--samples", "20000", "--task", t, "--job-dir", s(dir.path())]);
    }
    let printed = ok(&["pi", "reduce", "--maps", "2", "--job-dir", s(dir.path())]);
    assert!(printed.starts_with("Estimated value of Pi is 3.1"), "{printed}");
}

#[test]
fn bad_arguments_exit_2_and_failures_exit_1_with_context() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["wordcount", "map", "--input", "x", "--task", "0", "--tasks", "1", "--job-dir", "j"][..],
        &[
            "wordcount",
            "map",
            "--input",
            "x",
            "--task",
            "3",
            "--tasks",
            "2",
            "--reducers",
            "1",
            "--job-dir",
            "j",
        ],
        &["gen-text", "--output", "d", "--bytes", "ten"],
        &["pi", "reduce"],
        &["frobnicate"],
    ] {
        assert_eq!(task(args).status.code(), Some(2), "{args:?}");
    }
    let missing = dir.path().join("no-such-input");
    let out = task(&[
        "grep",
        "map",
        "--input",
        s(&missing),
        "--pattern",
        "x",
        "--task",
        "0",
        "--tasks",
        "1",
        "--reducers",
        "1",
        "--job-dir",
        s(dir.path()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: cannot read input") && stderr.contains("no-such-input"), "{stderr}");
    let out = task(&["sort", "reduce", "--task", "0", "--maps", "2", "--job-dir", s(dir.path())]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("2 of 2 map outputs missing") && stderr.contains("map-0/part-0, map-1/part-0"),
        "{stderr}"
    );
}

#[test]
fn a_killed_attempt_leaves_no_part_and_a_rerun_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("input");
    let mut child = Command::new(env!("CARGO_BIN_EXE_slotmarket-task"))
        .args(["gen-text", "--output", s(&output), "--bytes", "20000000000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until it is writing, then kill it as a preempting agent would (SIGKILL).
    let started = std::time::Instant::now();
    while std::fs::read_dir(&output).map_or(0, |d| d.count()) == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the generator never started writing"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!output.join("part-0").exists(), "a killed generator published its part");
    // The temporary file it left is hidden, so no map reads it.
    let input = slotmarket_workloads::split::Input::open(&output).unwrap();
    assert_eq!(input.total_bytes(), 0);
    ok(&["gen-text", "--output", s(&output), "--bytes", "1000"]);
    assert!(std::fs::metadata(output.join("part-0")).unwrap().len() >= 1000);
}

/// A local agent's fetch socket answering one request per connection: writes each asked
/// part under `job_dir` (`word\t1`) and answers how many bytes it "fetched".
fn fake_agent(socket: &Path, job_dir: &Path, requests: usize) -> std::thread::JoinHandle<Vec<Vec<String>>> {
    use slotmarket_common::protocol::frame::{LENGTH_PREFIX, decode_payload, payload_len};
    use slotmarket_common::protocol::{DEFAULT_MAX_FRAME, LocalFetch, LocalFetchReply, encode_frame};
    use std::io::{Read, Write};
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    let job_dir = job_dir.to_path_buf();
    std::thread::spawn(move || {
        let mut asked = Vec::new();
        for _ in 0..requests {
            let (mut stream, _) = listener.accept().unwrap();
            let mut prefix = [0u8; LENGTH_PREFIX];
            stream.read_exact(&mut prefix).unwrap();
            let mut payload = vec![0u8; payload_len(prefix, DEFAULT_MAX_FRAME).unwrap()];
            stream.read_exact(&mut payload).unwrap();
            let request: LocalFetch = decode_payload(&payload).unwrap();
            assert_eq!(request.token, "secret");
            for part in &request.parts {
                let file = job_dir.join(&part.path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(file, format!("w{}\t1\n", part.task)).unwrap();
            }
            asked.push(request.parts.iter().map(|p| format!("{}:{}:{}", p.stage, p.task, p.path)).collect());
            let reply = LocalFetchReply::Fetched { bytes: 5 * request.parts.len() as u64 };
            stream.write_all(&encode_frame(&reply, DEFAULT_MAX_FRAME).unwrap()).unwrap();
        }
        asked
    })
}

#[test]
fn a_reducer_and_fetch_get_missing_parts_through_the_local_agent() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::create_dir_all(job.join("map-1")).unwrap();
    std::fs::write(job.join("map-1/part-0"), "w1\t1\n").unwrap();
    let socket = dir.path().join("fetch.sock");
    let agent = fake_agent(&socket, &job, 2);
    let with_agent = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_slotmarket-task"))
            .args(args)
            .env("SLOTMARKET_FETCH_SOCKET", &socket)
            .env("SLOTMARKET_FETCH_TOKEN", "secret")
            .output()
            .unwrap()
    };
    // The reducer asks once for the two parts it lacks, then reduces all three.
    let out = with_agent(&["wordcount", "reduce", "--task", "0", "--maps", "3", "--job-dir", s(&job)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(job.join("out/part-0")).unwrap(), "w0\t1\nw1\t1\nw2\t1\n");
    let out = with_agent(&["fetch", "--stage", "gen", "--task", "3", "--path", "input/part-3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("fetched 5 bytes"));
    let asked = agent.join().unwrap();
    assert_eq!(asked, [vec!["map:0:map-0/part-0", "map:2:map-2/part-0"], vec!["gen:3:input/part-3"]]);
    // Outside a local-mode task, fetch says why it cannot work.
    let out = task(&["fetch", "--task", "0", "--path", "map-0/part-0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SLOTMARKET_FETCH_SOCKET is not set"));
    let out = task(&["fetch", "--task", "0", "--task", "1", "--path", "map-0/part-0"]);
    assert_eq!(out.status.code(), Some(2), "a --task without its --path is an argument error");
}
