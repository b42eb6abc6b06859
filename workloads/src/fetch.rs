//! Reading parts that another agent holds (an agent in local data mode, without a shared
//! directory): ask the local agent over its fetch socket to copy them into this job
//! directory first. The socket and the container's token come from the environment
//! (`SLOTMARKET_FETCH_SOCKET`, `SLOTMARKET_FETCH_TOKEN`); without them (a shared data
//! directory) nothing is fetched and the readers find the parts in place, or fail
//! naming them.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use slotmarket_common::protocol::frame::{LENGTH_PREFIX, decode_payload, payload_len};
use slotmarket_common::protocol::{
    DEFAULT_MAX_FRAME, ENV_FETCH_SOCKET, ENV_FETCH_TOKEN, FetchPart, LocalFetch, LocalFetchReply,
    encode_frame,
};

use crate::layout::{generated_part, map_part};

/// How long a task waits for its agent to fetch everything it asked for.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(3600);

/// The local agent's fetch socket and this container's token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSocket {
    /// The Unix socket's path.
    pub socket: PathBuf,
    /// The container's token.
    pub token: String,
}

impl FetchSocket {
    /// From the environment the agent sets; `None` when the socket is not set (shared
    /// data directory). A socket without a token is an error.
    pub fn from_env() -> Result<Option<FetchSocket>> {
        let Some(socket) = std::env::var_os(ENV_FETCH_SOCKET) else { return Ok(None) };
        let token = std::env::var(ENV_FETCH_TOKEN)
            .with_context(|| format!("{ENV_FETCH_SOCKET} is set but {ENV_FETCH_TOKEN} is not"))?;
        Ok(Some(FetchSocket { socket: PathBuf::from(socket), token }))
    }

    /// Asks the agent for `parts` (it skips those already here); answers the bytes
    /// copied over the network, or the agent's reason for failing.
    pub fn fetch(&self, parts: Vec<FetchPart>) -> Result<u64> {
        let request = LocalFetch { token: self.token.clone(), parts };
        let frame = encode_frame(&request, DEFAULT_MAX_FRAME).context("fetch request too large")?;
        let mut stream = UnixStream::connect(&self.socket).with_context(|| {
            format!("cannot connect to the agent's fetch socket {}", self.socket.display())
        })?;
        stream.set_read_timeout(Some(FETCH_TIMEOUT))?;
        stream.write_all(&frame).context("cannot send the fetch request")?;
        let mut prefix = [0u8; LENGTH_PREFIX];
        stream.read_exact(&mut prefix).context("the agent closed the fetch socket without answering")?;
        let len = payload_len(prefix, DEFAULT_MAX_FRAME)?;
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).context("truncated fetch reply")?;
        match decode_payload::<LocalFetchReply>(&payload)? {
            LocalFetchReply::Fetched { bytes } => Ok(bytes),
            LocalFetchReply::Failed { reason } => bail!("the agent could not fetch the inputs: {reason}"),
        }
    }
}

/// Fetches every `map-{i}/part-{reducer}` (`i < maps`, produced by stage `map_stage`)
/// missing under `job_dir`, in one request; does nothing without a fetch socket.
pub fn fetch_map_parts(job_dir: &Path, reducer: u32, maps: u32, map_stage: &str) -> Result<u64> {
    match FetchSocket::from_env()? {
        Some(socket) => fetch_missing_map_parts(&socket, job_dir, reducer, maps, map_stage),
        None => Ok(0),
    }
}

/// [`fetch_map_parts`] through `socket`.
pub fn fetch_missing_map_parts(
    socket: &FetchSocket,
    job_dir: &Path,
    reducer: u32,
    maps: u32,
    map_stage: &str,
) -> Result<u64> {
    let parts = (0..maps).map(|map| (map, map_part(job_dir, map, reducer)));
    fetch_missing(socket, job_dir, map_stage, parts)
}

/// Fetches the generated input parts `{input}/part-{g}` (`g < parts`, written by task `g`
/// of stage `input_stage`) missing under `job_dir`, when `input` is inside the job
/// directory; an input elsewhere must be readable on every node and is left alone. Does
/// nothing without a fetch socket.
pub fn fetch_input_parts(job_dir: &Path, input: &Path, parts: u32, input_stage: &str) -> Result<u64> {
    match FetchSocket::from_env()? {
        Some(socket) => fetch_missing_input_parts(&socket, job_dir, input, parts, input_stage),
        None => Ok(0),
    }
}

/// [`fetch_input_parts`] through `socket`.
pub fn fetch_missing_input_parts(
    socket: &FetchSocket,
    job_dir: &Path,
    input: &Path,
    parts: u32,
    input_stage: &str,
) -> Result<u64> {
    if !input.starts_with(job_dir) {
        return Ok(0);
    }
    let parts = (0..parts).map(|part| (part, generated_part(input, part)));
    fetch_missing(socket, job_dir, input_stage, parts)
}

/// Asks for each `(task, part)` whose part is not a file yet, named relative to
/// `job_dir` (where the holder keeps it too), in one request.
fn fetch_missing(
    socket: &FetchSocket,
    job_dir: &Path,
    stage: &str,
    parts: impl Iterator<Item = (u32, PathBuf)>,
) -> Result<u64> {
    let mut missing = Vec::new();
    for (task, part) in parts.filter(|(_, part)| !part.is_file()) {
        let relative = part.strip_prefix(job_dir).context("a part outside the job directory")?;
        let path = relative.to_str().context("a part's path is not UTF-8")?.to_string();
        missing.push(FetchPart { stage: stage.to_string(), task, path });
    }
    if missing.is_empty() {
        return Ok(0);
    }
    socket.fetch(missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// An agent that answers one request: writes the asked parts into `job_dir` (or fails)
    /// and hands the request back to the test.
    fn fake_agent(
        dir: &Path,
        job_dir: PathBuf,
        fail: bool,
    ) -> (FetchSocket, std::thread::JoinHandle<LocalFetch>) {
        let path = dir.join("fetch.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let agent = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut prefix = [0u8; LENGTH_PREFIX];
            stream.read_exact(&mut prefix).unwrap();
            let mut payload = vec![0u8; payload_len(prefix, DEFAULT_MAX_FRAME).unwrap()];
            stream.read_exact(&mut payload).unwrap();
            let request: LocalFetch = decode_payload(&payload).unwrap();
            let reply = if fail {
                LocalFetchReply::Failed { reason: "map-1/part-0 from node2: refused".into() }
            } else {
                for part in &request.parts {
                    let file = job_dir.join(&part.path);
                    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                    std::fs::write(file, format!("from {}\n", part.task)).unwrap();
                }
                LocalFetchReply::Fetched { bytes: 7 * request.parts.len() as u64 }
            };
            stream.write_all(&encode_frame(&reply, DEFAULT_MAX_FRAME).unwrap()).unwrap();
            request
        });
        (FetchSocket { socket: path, token: "tok".into() }, agent)
    }

    #[test]
    fn only_the_missing_parts_are_asked_for_in_one_request() {
        let dir = tempfile::tempdir().unwrap();
        let job_dir = dir.path().join("j1");
        std::fs::create_dir_all(job_dir.join("map-1")).unwrap();
        std::fs::write(map_part(&job_dir, 1, 2), "here\n").unwrap();
        let (socket, agent) = fake_agent(dir.path(), job_dir.clone(), false);
        let bytes = fetch_missing_map_parts(&socket, &job_dir, 2, 3, "count").unwrap();
        let request = agent.join().unwrap();
        assert_eq!(request.token, "tok");
        let asked: Vec<(String, u32, String)> =
            request.parts.into_iter().map(|p| (p.stage, p.task, p.path)).collect();
        assert_eq!(
            asked,
            [
                ("count".to_string(), 0, "map-0/part-2".to_string()),
                ("count".to_string(), 2, "map-2/part-2".to_string())
            ]
        );
        assert_eq!(bytes, 14);
        assert_eq!(std::fs::read_to_string(map_part(&job_dir, 2, 2)).unwrap(), "from 2\n");
        // Nothing missing: the agent is not even asked (nobody listens any more).
        assert_eq!(fetch_missing_map_parts(&socket, &job_dir, 2, 3, "count").unwrap(), 0);
    }

    #[test]
    fn generated_input_parts_in_the_job_dir_are_fetched_and_other_inputs_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let job_dir = dir.path().join("j1");
        let input = job_dir.join("input");
        std::fs::create_dir_all(&input).unwrap();
        std::fs::write(input.join("part-1"), "here\n").unwrap();
        let (socket, agent) = fake_agent(dir.path(), job_dir.clone(), false);
        fetch_missing_input_parts(&socket, &job_dir, &input, 3, "gen").unwrap();
        let asked: Vec<(String, u32, String)> =
            agent.join().unwrap().parts.into_iter().map(|p| (p.stage, p.task, p.path)).collect();
        assert_eq!(
            asked,
            [
                ("gen".to_string(), 0, "input/part-0".to_string()),
                ("gen".to_string(), 2, "input/part-2".to_string())
            ]
        );
        assert!(input.join("part-2").is_file());
        // Outside the job directory nothing is asked (nobody listens any more).
        let elsewhere = dir.path().join("shared-input");
        assert_eq!(fetch_missing_input_parts(&socket, &job_dir, &elsewhere, 3, "gen").unwrap(), 0);
    }

    #[test]
    fn the_agents_reason_is_the_tasks_error() {
        let dir = tempfile::tempdir().unwrap();
        let job_dir = dir.path().join("j1");
        let (socket, agent) = fake_agent(dir.path(), job_dir.clone(), true);
        let err = fetch_missing_map_parts(&socket, &job_dir, 0, 2, "map").unwrap_err().to_string();
        agent.join().unwrap();
        assert!(err.contains("map-1/part-0 from node2: refused"), "{err}");
    }
}
