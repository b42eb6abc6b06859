//! The shuffle end to end in one process: two agents' shuffle services on 127.0.0.1 with
//! separate data directories, the fetch service with a fake master's answers, resumption,
//! and who is refused.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use slotmarket_common::identity::Role;
use slotmarket_common::ids::JobId;
use slotmarket_common::pki::{self, TlsFiles};
use slotmarket_common::protocol::{
    FetchPart, InputHolder, LocalFetch, LocalFetchReply, SHUFFLE_ALPN, ShuffleReply, ShuffleRequest,
    StageOutputs,
};
use slotmarket_common::transport::{self, read_frame, write_frame};

use super::client::{ShuffleClient, temp_name};
use super::fetch::{FetchService, FetchTokens, read_unix_frame, serve_socket, write_unix_frame};
use super::locate::{LocateFuture, Locator};
use super::server;
use crate::test_support::WAIT;

/// One agent of the test: its data directory and its shuffle service.
struct Node {
    name: String,
    data_dir: PathBuf,
    holder: InputHolder,
    tls: TlsFiles,
}

struct World {
    _dir: tempfile::TempDir,
    pki: PathBuf,
    nodes: Vec<Node>,
}

fn world(names: &[&str]) -> World {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    pki::init(&pki, &[]).unwrap();
    let nodes = names
        .iter()
        .map(|name| {
            let tls = pki::issue(&pki, Role::Agent, name).unwrap();
            let data_dir = dir.path().join(name).join("data");
            std::fs::create_dir_all(data_dir.join("jobs")).unwrap();
            let endpoint = server::bind("127.0.0.1:0".parse().unwrap(), &tls).unwrap();
            let shuffle = endpoint.local_addr().unwrap();
            tokio::spawn(server::serve(endpoint, data_dir.clone(), 4));
            Node {
                name: name.to_string(),
                data_dir,
                holder: InputHolder { node: name.to_string(), shuffle },
                tls,
            }
        })
        .collect();
    World { _dir: dir, pki, nodes }
}

fn write_part(node: &Node, job: JobId, path: &str, bytes: &[u8]) {
    let file = node.data_dir.join("jobs").join(job.to_string()).join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, bytes).unwrap();
}

fn part_in(node: &Node, job: JobId, path: &str) -> PathBuf {
    node.data_dir.join("jobs").join(job.to_string()).join(path)
}

/// Bytes that differ at every offset, so a misplaced resume shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A master that answers from a table and records what it was asked.
#[derive(Default)]
struct FakeLocator {
    answers: Vec<((JobId, String), StageOutputs)>,
    asked: Mutex<Vec<(JobId, String)>>,
}

impl Locator for FakeLocator {
    fn locate(&self, job: JobId, stage: String) -> LocateFuture<'_> {
        self.asked.lock().unwrap().push((job, stage.clone()));
        let found = self.answers.iter().find(|(key, _)| *key == (job, stage.clone())).map(|(_, o)| o.clone());
        Box::pin(async move { found.ok_or_else(|| "unknown job or stage".to_string()) })
    }
}

/// Asks `holder`'s service directly for `path` from `offset`; answers the reply and bytes.
async fn ask(
    files: &TlsFiles,
    holder: &InputHolder,
    job: JobId,
    path: &str,
    offset: u64,
) -> Result<(ShuffleReply, Vec<u8>), String> {
    let endpoint =
        transport::client_endpoint_for(files, holder.shuffle, SHUFFLE_ALPN).map_err(|e| e.to_string())?;
    let conn =
        transport::connect(&endpoint, holder.shuffle, &holder.node).await.map_err(|e| e.to_string())?;
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    let request = ShuffleRequest { job, path: path.into(), offset };
    write_frame(&mut send, &request, 1 << 20).await.map_err(|e| e.to_string())?;
    let reply =
        read_frame::<ShuffleReply>(&mut recv, 1 << 20).await.map_err(|e| e.to_string())?.ok_or("no reply")?;
    let rest = recv.read_to_end(1 << 26).await.map_err(|e| e.to_string())?;
    Ok((reply, rest))
}

#[tokio::test]
async fn a_request_from_an_offset_gets_exactly_the_rest_and_bad_paths_are_refused() {
    let w = world(&["n1", "n2"]);
    let data = pattern(700_000);
    write_part(&w.nodes[0], JobId(3), "map-0/part-1", &data);
    write_part(&w.nodes[0], JobId(3), "map-0/.part-1.fetching", b"hidden");
    let (n1, n2) = (&w.nodes[0], &w.nodes[1]);
    let (reply, bytes) = ask(&n2.tls, &n1.holder, JobId(3), "map-0/part-1", 300_001).await.unwrap();
    assert_eq!(reply, ShuffleReply::Sending { len: data.len() as u64 });
    assert!(bytes == data[300_001..], "the rest differs");
    for bad in ["../../n2/data/x", "/etc/passwd", "map-0/.part-1.fetching", "map-0/part-9"] {
        let (reply, bytes) = ask(&n2.tls, &n1.holder, JobId(3), bad, 0).await.unwrap();
        assert!(matches!(reply, ShuffleReply::Refused { .. }), "{bad}: {reply:?}");
        assert!(bytes.is_empty());
    }
    let (reply, _) = ask(&n2.tls, &n1.holder, JobId(3), "map-0/part-1", 700_001).await.unwrap();
    assert!(matches!(reply, ShuffleReply::Refused { reason } if reason.contains("past the end")));
}

#[tokio::test]
async fn a_user_certificate_is_refused() {
    let w = world(&["n1"]);
    write_part(&w.nodes[0], JobId(1), "map-0/part-0", b"secret");
    let alice = pki::issue(&w.pki, Role::User, "alice").unwrap();
    let answer = ask(&alice, &w.nodes[0].holder, JobId(1), "map-0/part-0", 0).await;
    assert!(answer.is_err(), "a user read an agent's part: {answer:?}");
    // Another agent's certificate presented under the wrong node name fails the TLS check.
    let wrong = InputHolder { node: "n9".into(), ..w.nodes[0].holder.clone() };
    assert!(ask(&w.nodes[0].tls, &wrong, JobId(1), "map-0/part-0", 0).await.is_err());
}

#[tokio::test]
async fn a_broken_fetch_resumes_from_the_bytes_already_written() {
    let w = world(&["n1", "n2"]);
    let data = pattern(1_000_000);
    write_part(&w.nodes[0], JobId(2), "map-3/part-0", &data);
    let dest = part_in(&w.nodes[1], JobId(2), "map-3/part-0");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    // What a first try wrote before its stream broke.
    let temp = temp_name(&dest, 0);
    std::fs::write(&temp, &data[..400_000]).unwrap();
    let file = tokio::fs::OpenOptions::new().append(true).open(&temp).await.unwrap();
    let mut file = tokio::io::BufWriter::new(file);
    let client = ShuffleClient::new(w.nodes[1].tls.clone());
    let sent =
        client.fetch_once(&w.nodes[0].holder, JobId(2), "map-3/part-0", &mut file, &temp).await.unwrap();
    tokio::io::AsyncWriteExt::flush(&mut file).await.unwrap();
    drop(file);
    assert_eq!(sent, 600_000, "only the missing bytes travel");
    assert!(std::fs::read(&temp).unwrap() == data, "the resumed file differs");
    // A whole fetch lands under the part's name and leaves no temporary file.
    std::fs::remove_file(&temp).unwrap();
    assert_eq!(client.fetch(&w.nodes[0].holder, JobId(2), "map-3/part-0", &dest).await.unwrap(), 1_000_000);
    assert!(std::fs::read(&dest).unwrap() == data, "the fetched part differs");
    let leftovers = std::fs::read_dir(dest.parent().unwrap()).unwrap().count();
    assert_eq!(leftovers, 1, "only the part is left");
}

fn fetch_service(w: &World, on: usize, locator: Arc<FakeLocator>) -> (FetchService, FetchTokens) {
    let tokens = FetchTokens::default();
    let node = &w.nodes[on];
    let service = FetchService {
        tokens: tokens.clone(),
        locator,
        client: Arc::new(ShuffleClient::new(node.tls.clone())),
        data_dir: node.data_dir.clone(),
        node: node.name.clone(),
        max_fetches: 2,
    };
    (service, tokens)
}

fn map_part_request(token: &str, maps: u32, reducer: u32) -> LocalFetch {
    let parts = (0..maps)
        .map(|m| FetchPart { stage: "map".into(), task: m, path: format!("map-{m}/part-{reducer}") })
        .collect();
    LocalFetch { token: token.into(), parts }
}

#[tokio::test]
async fn a_reduce_gets_every_part_from_two_holders_and_the_master_is_asked_once() {
    let w = world(&["n1", "n2", "n3"]);
    let job = JobId(5);
    // Maps 0 and 1 ran on n1, map 2 on n2, map 3 on n3 itself.
    for (map, node) in [(0, 0), (1, 0), (2, 1), (3, 2)] {
        write_part(
            &w.nodes[node],
            job,
            &format!("map-{map}/part-1"),
            format!("m{map} ").repeat(1000).as_bytes(),
        );
    }
    let holders = w.nodes.iter().map(|n| n.holder.clone()).collect();
    let outputs = StageOutputs { holders, task_holder: vec![Some(0), Some(0), Some(1), Some(2)] };
    let locator =
        Arc::new(FakeLocator { answers: vec![((job, "map".into()), outputs)], ..FakeLocator::default() });
    let (service, tokens) = fetch_service(&w, 2, Arc::clone(&locator));
    let guard = tokens.issue(job).unwrap();
    let reply = service.fetch(map_part_request(guard.token(), 4, 1)).await;
    assert_eq!(reply, LocalFetchReply::Fetched { bytes: 3 * 3000 });
    for map in 0..4 {
        let got = std::fs::read_to_string(part_in(&w.nodes[2], job, &format!("map-{map}/part-1"))).unwrap();
        assert_eq!(got, format!("m{map} ").repeat(1000));
    }
    assert_eq!(locator.asked.lock().unwrap().clone(), [(job, "map".to_string())]);
    // Asked again, everything is local: nothing travels and the master is not asked.
    assert_eq!(
        service.fetch(map_part_request(guard.token(), 4, 1)).await,
        LocalFetchReply::Fetched { bytes: 0 }
    );
    assert_eq!(locator.asked.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn unknown_ended_and_other_jobs_tokens_fetch_nothing_of_this_job() {
    let w = world(&["n1", "n2"]);
    write_part(&w.nodes[0], JobId(5), "map-0/part-0", b"job five");
    let outputs = StageOutputs { holders: vec![w.nodes[0].holder.clone()], task_holder: vec![Some(0)] };
    let locator = Arc::new(FakeLocator {
        answers: vec![((JobId(5), "map".into()), outputs)],
        ..FakeLocator::default()
    });
    let (service, tokens) = fetch_service(&w, 1, Arc::clone(&locator));
    let failed = |reply: LocalFetchReply| match reply {
        LocalFetchReply::Failed { reason } => reason,
        other => panic!("expected a failure, got {other:?}"),
    };
    assert!(failed(service.fetch(map_part_request("0123", 1, 0)).await).contains("unknown fetch token"));
    let ended = tokens.issue(JobId(5)).unwrap();
    let ended_token = ended.token().to_string();
    drop(ended);
    assert!(
        failed(service.fetch(map_part_request(&ended_token, 1, 0)).await).contains("unknown fetch token")
    );
    // Job 6's container can only ask about job 6: the master has nothing for it.
    let other = tokens.issue(JobId(6)).unwrap();
    let reason = failed(service.fetch(map_part_request(other.token(), 1, 0)).await);
    assert!(reason.contains("stage map"), "{reason}");
    assert_eq!(locator.asked.lock().unwrap().clone(), [(JobId(6), "map".to_string())]);
    assert!(!part_in(&w.nodes[1], JobId(6), "map-0/part-0").exists());
    assert!(!part_in(&w.nodes[1], JobId(5), "map-0/part-0").exists());
    // A path that would escape the job directory is refused before anything is asked.
    let escape = LocalFetch {
        token: other.token().into(),
        parts: vec![FetchPart { stage: "map".into(), task: 0, path: "../5/map-0/part-0".into() }],
    };
    assert!(failed(service.fetch(escape).await).contains("../5/map-0/part-0"));
}

#[tokio::test]
async fn a_failure_names_the_part_and_its_holder() {
    let w = world(&["n1", "n2"]);
    let outputs = StageOutputs { holders: vec![w.nodes[0].holder.clone()], task_holder: vec![Some(0), None] };
    let locator = Arc::new(FakeLocator {
        answers: vec![((JobId(1), "map".into()), outputs)],
        ..FakeLocator::default()
    });
    let (service, tokens) = fetch_service(&w, 1, locator);
    let guard = tokens.issue(JobId(1)).unwrap();
    // Map 0's holder has no such file.
    let reply = service.fetch(map_part_request(guard.token(), 1, 0)).await;
    let LocalFetchReply::Failed { reason } = reply else { panic!("{reply:?}") };
    assert!(
        reason.contains("map-0/part-0") && reason.contains("n1") && reason.contains("refused"),
        "{reason}"
    );
    // Map 1 has no holder at all.
    let reply = service.fetch(map_part_request(guard.token(), 2, 0)).await;
    let LocalFetchReply::Failed { reason } = reply else { panic!("{reply:?}") };
    assert!(reason.contains("map-1/part-0") && reason.contains("no agent holds it"), "{reason}");
}

#[tokio::test]
async fn the_fetch_socket_answers_a_framed_request() {
    let w = world(&["n1", "n2"]);
    write_part(&w.nodes[0], JobId(4), "map-0/part-0", b"over the socket");
    let outputs = StageOutputs { holders: vec![w.nodes[0].holder.clone()], task_holder: vec![Some(0)] };
    let locator = Arc::new(FakeLocator {
        answers: vec![((JobId(4), "map".into()), outputs)],
        ..FakeLocator::default()
    });
    let (service, tokens) = fetch_service(&w, 1, locator);
    let guard = tokens.issue(JobId(4)).unwrap();
    let socket = w._dir.path().join("fetch.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(serve_socket(listener, Arc::new(service)));
    let mut stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
    write_unix_frame(&mut stream, &map_part_request(guard.token(), 1, 0)).await.unwrap();
    let reply: LocalFetchReply =
        tokio::time::timeout(WAIT, read_unix_frame(&mut stream)).await.unwrap().unwrap();
    assert_eq!(reply, LocalFetchReply::Fetched { bytes: 15 });
    assert_eq!(std::fs::read(part_in(&w.nodes[1], JobId(4), "map-0/part-0")).unwrap(), b"over the socket");
    let _: &Path = &socket;
    let _: SocketAddr = w.nodes[0].holder.shuffle;
}

/// A holder whose first transfer breaks after `cut` bytes: records each request's offset
/// and serves the rest honestly afterwards.
async fn flaky_holder(tls: &TlsFiles, data: Vec<u8>, cut: usize) -> (InputHolder, Arc<Mutex<Vec<u64>>>) {
    let endpoint = transport::server_endpoint_for("127.0.0.1:0".parse().unwrap(), tls, SHUFFLE_ALPN).unwrap();
    let holder = InputHolder { node: "n1".into(), shuffle: endpoint.local_addr().unwrap() };
    let offsets = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&offsets);
    tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            let Ok(conn) = incoming.await else { continue };
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                let Ok(Some(request)) = read_frame::<ShuffleRequest>(&mut recv, 1 << 20).await else {
                    continue;
                };
                let first = seen.lock().unwrap().is_empty();
                seen.lock().unwrap().push(request.offset);
                let reply = ShuffleReply::Sending { len: data.len() as u64 };
                write_frame(&mut send, &reply, 1 << 20).await.unwrap();
                let from = request.offset as usize;
                let to = if first { cut } else { data.len() };
                send.write_all(&data[from..to]).await.unwrap();
                // The first stream ends early, as a holder that went away would leave it.
                let _ = send.finish();
                let _ = send.stopped().await;
            }
        }
    });
    (holder, offsets)
}

#[tokio::test]
async fn a_stream_that_ends_early_is_resumed_from_the_bytes_already_written() {
    let w = world(&["n1", "n2"]);
    let data = pattern(500_000);
    let (holder, offsets) = flaky_holder(&w.nodes[0].tls, data.clone(), 123_456).await;
    let dest = part_in(&w.nodes[1], JobId(9), "map-0/part-0");
    let client = ShuffleClient::new(w.nodes[1].tls.clone());
    let sent = client.fetch(&holder, JobId(9), "map-0/part-0", &dest).await.unwrap();
    assert_eq!(
        offsets.lock().unwrap().clone(),
        [0, 123_456],
        "the second try asks from where the first broke"
    );
    assert_eq!(sent, 500_000, "every byte crossed the network once");
    assert!(std::fs::read(&dest).unwrap() == data, "the resumed part differs");
}

#[tokio::test]
async fn a_part_is_never_written_through_a_symlink_out_of_the_job_dir() {
    let w = world(&["n1", "n2"]);
    write_part(&w.nodes[0], JobId(8), "map-0/part-0", b"payload");
    let outputs = StageOutputs { holders: vec![w.nodes[0].holder.clone()], task_holder: vec![Some(0)] };
    let locator = Arc::new(FakeLocator {
        answers: vec![((JobId(8), "map".into()), outputs)],
        ..FakeLocator::default()
    });
    let (service, tokens) = fetch_service(&w, 1, locator);
    // The task made `map-0` in its job directory a link to a directory it may not write.
    let job_dir = w.nodes[1].data_dir.join("jobs/j8");
    let elsewhere = w._dir.path().join("elsewhere");
    std::fs::create_dir_all(&job_dir).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, job_dir.join("map-0")).unwrap();
    let guard = tokens.issue(JobId(8)).unwrap();
    let reply = service.fetch(map_part_request(guard.token(), 1, 0)).await;
    let LocalFetchReply::Failed { reason } = reply else { panic!("{reply:?}") };
    assert!(reason.contains("outside the job directory"), "{reason}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through the link");
}
