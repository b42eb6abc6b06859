use slotmarket_common::protocol::{ErrorKind, Request, Response};

use super::*;
use crate::fake_master::FakeMaster;

fn file(path: &str, len: u64) -> OutputFile {
    OutputFile { path: path.into(), len }
}

/// A fake master whose job 7 has outputs on n1 (`out/part-0`, `out/sub/part-2`) and n2
/// (`out/part-1`, or `out/part-0` again when `overlap`); file contents are their names
/// repeated to 300 KiB-ish for `part-0`, so it takes more than one chunk.
fn fake(overlap: bool) -> FakeMaster {
    let content = |path: &str| -> Vec<u8> {
        let reps = if path.ends_with("part-0") { 40_000 } else { 3 };
        path.repeat(reps).into_bytes()
    };
    FakeMaster::start(move |request| match request {
        Request::OutputNodes { job: JobId(7) } => {
            vec![Response::OutputNodes(vec!["n1".into(), "n2".into()])]
        }
        Request::Output(OutputQuery { node, op: OutputOp::List { dir }, .. }) => {
            assert_eq!(dir, "out");
            let files = match (node.as_str(), overlap) {
                ("n1", _) => {
                    vec![file("out/part-0", content("out/part-0").len() as u64), file("out/sub/part-2", 42)]
                }
                (_, false) => vec![file("out/part-1", 30)],
                (_, true) => vec![file("out/part-0", 1)],
            };
            vec![Response::Output(OutputData::Files(files))]
        }
        Request::Output(OutputQuery { op: OutputOp::Read { path, offset, max }, .. }) => {
            let data = content(&path);
            let start = (offset as usize).min(data.len());
            let end = (start + max as usize).min(data.len());
            vec![Response::Output(OutputData::Bytes(data[start..end].to_vec()))]
        }
        _ => vec![Response::error(ErrorKind::NotFound, "no job j9")],
    })
}

#[tokio::test]
async fn every_nodes_outputs_land_under_the_directory_in_full() {
    let fake = fake(false);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j7-out");
    let args = FetchArgs { job: JobId(7), dir: Some(out.clone()), path: "out".into() };
    assert_eq!(run(&fake.conn_args("alice"), args, true).await.unwrap(), ExitCode::SUCCESS);
    assert_eq!(std::fs::read(out.join("part-0")).unwrap(), "out/part-0".repeat(40_000).into_bytes());
    assert_eq!(std::fs::read(out.join("part-1")).unwrap(), b"out/part-1out/part-1out/part-1");
    assert!(out.join("sub/part-2").is_file());
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // part-0 is 400,000 bytes: two chunks of MAX_OUTPUT_CHUNK and the end.
    let reads = fake
        .requests()
        .into_iter()
        .filter(|r| matches!(r, Request::Output(OutputQuery { op: OutputOp::Read { .. }, .. })))
        .count();
    assert_eq!(reads, (2 + 1) + (1 + 1) + (1 + 1), "chunked reads until an empty answer");
}

#[tokio::test]
async fn the_same_file_on_two_nodes_is_an_error_naming_both() {
    let fake = fake(true);
    let dir = tempfile::tempdir().unwrap();
    let args = FetchArgs { job: JobId(7), dir: Some(dir.path().join("o")), path: "out".into() };
    let err = format!("{:#}", run(&fake.conn_args("alice"), args, false).await.unwrap_err());
    assert!(err.contains("out/part-0 is on both n1 and n2"), "{err}");
    assert!(!dir.path().join("o").exists(), "nothing is written");
}

#[tokio::test]
async fn the_masters_refusal_is_shown_and_nothing_is_written() {
    let fake = fake(false);
    let dir = tempfile::tempdir().unwrap();
    let args = FetchArgs { job: JobId(9), dir: Some(dir.path().join("o")), path: "out".into() };
    let err = format!("{:#}", run(&fake.conn_args("alice"), args, false).await.unwrap_err());
    assert!(err.contains("no job j9"), "{err}");
    assert!(!dir.path().join("o").exists());
}

#[tokio::test]
async fn a_path_leaving_the_job_directory_is_refused_before_connecting() {
    let conn = ConnectionArgs { master: Some("127.0.0.1:1".into()), ..ConnectionArgs::default() };
    let args = FetchArgs { job: JobId(7), dir: None, path: "../j8".into() };
    let err = run(&conn, args, false).await.unwrap_err().to_string();
    assert!(err.contains("--path"), "{err}");
}

#[test]
fn a_listed_path_outside_the_asked_directory_is_refused() {
    let listings = vec![("n1".to_string(), vec![file("outside/x", 1)])];
    let err = plan("out", listings).unwrap_err().to_string();
    assert!(err.contains("not a plain path under out"), "{err}");
    let listings = vec![("n1".to_string(), vec![file("out/../../etc/passwd", 1)])];
    assert!(plan("out", listings).is_err());
}
