//! Agent sessions: one long-lived control stream per agent connection. Checks the
//! `Register` message (including that a shared-mode agent shares the registered
//! shared-mode agents' data directory and that local-mode agents do not share one, see
//! [`DataDirs`]), then decodes heartbeats and reports into core events and
//! writes the actor's launches and kills back. Never touches scheduling state itself.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use slotmarket_common::identity::Identity;
use slotmarket_common::ids::AgentId;
use slotmarket_common::protocol::frame::decode_payload;
use slotmarket_common::protocol::version::register_version;
use slotmarket_common::protocol::{AgentToMaster, DataMode, MasterToAgent, PROTOCOL_VERSION, Register};
use slotmarket_common::transport::{FRAME_ERROR_CODE, StreamError, read_frame, read_payload, write_frame};
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, debug, info, info_span, warn};

use super::Input;
use crate::core::Event;

/// How long a new agent connection may take to open its stream and register.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

/// QUIC application error code for a protocol violation by the agent.
const PROTOCOL_ERROR: u32 = 2;

/// The data directories of the registered agents, by node. Agents in
/// [`DataMode::Shared`] pass a job's data through their one shared directory, so each must
/// see the same one: a shared-mode agent whose directory id differs from the registered
/// shared-mode agents' is refused, with how to fix it (while none is registered, the
/// next one's directory is accepted). Agents in [`DataMode::Local`] each keep their own
/// directory: two of them reporting the same id share it, which would mix their outputs,
/// so the second is refused.
#[derive(Clone, Debug, Default)]
pub(super) struct DataDirs(Arc<Mutex<Claims>>);

/// The claims, and the number of the next session to claim.
#[derive(Debug, Default)]
struct Claims {
    by_node: BTreeMap<String, DataDirClaim>,
    next_session: u64,
}

/// One registered agent's data directory.
#[derive(Clone, Debug)]
struct DataDirClaim {
    /// Its `.slotmarket-shared-id`.
    id: String,
    /// Whether the agent keeps its own directory ([`DataMode::Local`]).
    local: bool,
    /// The path the agent uses, for messages.
    path: String,
    /// The session that made the claim, so an older session of the same node ending
    /// later does not remove a newer one's.
    session: u64,
}

impl DataDirs {
    /// Records `register`'s directory for its node and returns the claiming session's
    /// number, or says why the agent cannot join: a shared-mode agent's directory is not
    /// the registered shared-mode agents' one, or a local-mode agent's directory is
    /// another registered local-mode agent's.
    fn claim(&self, register: &Register) -> Result<u64, String> {
        let mut claims = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let local = matches!(register.data_mode, DataMode::Local { .. });
        let mut others =
            claims.by_node.iter().filter(|(node, claim)| **node != register.node && claim.local == local);
        let conflict = if local {
            others.find(|(_, claim)| claim.id == register.data_dir_id)
        } else {
            others.find(|(_, claim)| claim.id != register.data_dir_id)
        };
        if let Some((node, claim)) = conflict {
            return Err(if local {
                same_local_dir_message(register, node, &claim.path)
            } else {
                unshared_dir_message(register, node, &claim.path)
            });
        }
        let session = claims.next_session;
        claims.next_session += 1;
        let claim = DataDirClaim {
            id: register.data_dir_id.clone(),
            local,
            path: register.data_dir.clone(),
            session,
        };
        claims.by_node.insert(register.node.clone(), claim);
        Ok(session)
    }

    /// Forgets `node`'s directory when its session `session` ends (unless a newer session
    /// of the node has claimed since).
    fn release(&self, node: &str, session: u64) {
        let mut claims = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if claims.by_node.get(node).is_some_and(|claim| claim.session == session) {
            claims.by_node.remove(node);
        }
    }
}

/// Why an agent whose data directory is not the others' is refused, and how to fix it.
fn unshared_dir_message(register: &Register, other_node: &str, other_path: &str) -> String {
    format!(
        "data directory {} of agent {} is not the directory the registered agents share \
         (agent {other_node} uses {other_path}; each directory names itself in its \
         .slotmarket-shared-id). A job's stages read what earlier stages wrote there, so every \
         agent must see the same directory: point data_dir at one directory on a shared file \
         system (e.g. the same NFS export on every node), or run a single agent",
        register.data_dir, register.node
    )
}

/// Why a local-mode agent whose directory another local-mode agent already uses is
/// refused, and how to fix it.
fn same_local_dir_message(register: &Register, other_node: &str, other_path: &str) -> String {
    format!(
        "data directory {} of agent {} is the directory agent {other_node} already uses \
         ({other_path}; both name the same .slotmarket-shared-id). Agents in local data mode \
         keep their own outputs and serve them to the others, so two sharing a directory \
         would overwrite each other's: give each agent a data_dir of its own on its own \
         disk, or set both to shared mode",
        register.data_dir, register.node
    )
}

/// Serves one agent connection until it closes or the actor drops it.
pub(super) async fn serve(
    conn: quinn::Connection,
    identity: Identity,
    inbox: mpsc::UnboundedSender<Input>,
    max_frame: usize,
    data_dirs: DataDirs,
) {
    let span = info_span!("agent", node = %identity.principal, remote = %conn.remote_address());
    async move {
        let registered = tokio::time::timeout(REGISTER_TIMEOUT, accept_register(&conn, max_frame)).await;
        let (mut send, recv, register) = match registered {
            Ok(Ok((send, recv, Hello::Register(register)))) => (send, recv, register),
            Ok(Ok((mut send, _, Hello::OtherVersion(version)))) => {
                let reason = format!(
                    "protocol version {version} is not supported; this master speaks {PROTOCOL_VERSION}: use a matching slotmarket-agent"
                );
                return refuse(&conn, Some(&mut send), &reason).await;
            }
            Ok(Err(reason)) => return refuse(&conn, None, &reason).await,
            Err(_) => return refuse(&conn, None, "no Register within 10 s").await,
        };
        if let Err(reason) = check_register(&register, &identity) {
            return refuse(&conn, Some(&mut send), &reason).await;
        }
        let session = match data_dirs.claim(&register) {
            Ok(session) => session,
            Err(reason) => return refuse(&conn, Some(&mut send), &reason).await,
        };
        let node = register.node.clone();
        let (outbound, outbound_rx) = mpsc::unbounded_channel();
        let (assigned, assigned_rx) = oneshot::channel();
        let registered = Input::AgentRegistered {
            node: register.node,
            map_slots: register.map_slots,
            reduce_slots: register.reduce_slots,
            live_containers: register.live_containers,
            outbound,
            assigned,
            data_mode: register.data_mode,
            data_dir_id: register.data_dir_id,
        };
        if inbox.send(registered).is_err() {
            data_dirs.release(&node, session);
            return refuse(&conn, Some(&mut send), "master is shutting down").await;
        }
        let Ok(agent) = assigned_rx.await else {
            data_dirs.release(&node, session);
            return;
        };
        info!(%agent, "agent registered");
        let writer = tokio::spawn(write_outbound(conn.clone(), send, outbound_rx, max_frame));
        read_inbound(recv, agent, &inbox, max_frame).await;
        let _ = inbox.send(Input::Agent(Event::AgentDisconnected { agent }));
        data_dirs.release(&node, session);
        writer.abort();
        conn.close(0u32.into(), b"session ended");
        info!(%agent, "agent disconnected");
    }
    .instrument(span)
    .await
}

/// An agent's first message, as far as the master reads it.
enum Hello {
    /// A `Register` of this protocol version.
    Register(Register),
    /// A `Register` announcing another version (its rest may not decode): refused with a
    /// `Refused` the agent logs, saying which build to use.
    OtherVersion(u32),
}

async fn accept_register(
    conn: &quinn::Connection,
    max_frame: usize,
) -> Result<(quinn::SendStream, quinn::RecvStream, Hello), String> {
    let (send, mut recv) = conn.accept_bi().await.map_err(|e| format!("no control stream: {e}"))?;
    let payload = match read_payload(&mut recv, max_frame).await {
        Ok(Some(payload)) => payload,
        Ok(None) => return Err("control stream ended before Register".into()),
        Err(e) => return Err(format!("bad Register: {e}")),
    };
    // The version first: an agent of another version may send a Register this build
    // cannot decode. Every decodable Register announces one, so this is the only check.
    if let Some(version) = register_version(&payload).filter(|&v| v != PROTOCOL_VERSION) {
        return Ok((send, recv, Hello::OtherVersion(version)));
    }
    match decode_payload::<AgentToMaster>(&payload) {
        Ok(AgentToMaster::Register(register)) => Ok((send, recv, Hello::Register(register))),
        Ok(other) => Err(format!("the first message must be Register, got {}", message_name(&other))),
        Err(e) => Err(format!("bad Register: {e}")),
    }
}

fn check_register(register: &Register, identity: &Identity) -> Result<(), String> {
    if register.node != identity.principal {
        return Err(format!(
            "node name \"{}\" does not match the certificate's principal \"{}\"",
            register.node, identity.principal
        ));
    }
    Ok(())
}

async fn refuse(conn: &quinn::Connection, send: Option<&mut quinn::SendStream>, reason: &str) {
    warn!(reason, "agent refused");
    if let Some(send) = send {
        let refused = MasterToAgent::Refused { reason: reason.to_string() };
        if write_frame(send, &refused, usize::MAX).await.is_ok() {
            let _ = send.finish();
            // Give the frame a moment to leave before the close discards it.
            let _ = tokio::time::timeout(Duration::from_secs(1), send.stopped()).await;
        }
    }
    conn.close(PROTOCOL_ERROR.into(), reason.as_bytes());
}

/// Writes the actor's messages in order; when the actor drops the queue (agent lost or
/// replaced) the connection is closed.
async fn write_outbound(
    conn: quinn::Connection,
    mut send: quinn::SendStream,
    mut outbound: mpsc::UnboundedReceiver<MasterToAgent>,
    max_frame: usize,
) {
    while let Some(message) = outbound.recv().await {
        let refused = matches!(message, MasterToAgent::Refused { .. });
        if let Err(error) = write_frame(&mut send, &message, max_frame).await {
            warn!(%error, "writing to agent failed");
            break;
        }
        if refused {
            break;
        }
    }
    let _ = send.finish();
    let _ = tokio::time::timeout(Duration::from_secs(1), send.stopped()).await;
    conn.close(0u32.into(), b"dropped by the master");
}

/// Decodes the agent's messages into core events until the stream ends or breaks.
async fn read_inbound(
    mut recv: quinn::RecvStream,
    agent: AgentId,
    inbox: &mpsc::UnboundedSender<Input>,
    max_frame: usize,
) {
    loop {
        let event = match read_frame::<AgentToMaster>(&mut recv, max_frame).await {
            Ok(Some(AgentToMaster::Heartbeat)) => Event::AgentHeartbeat { agent },
            Ok(Some(AgentToMaster::Reports(reports))) => Event::ContainerReports { agent, reports },
            Ok(Some(AgentToMaster::LogRead(answer))) => {
                if inbox.send(Input::LogRead { agent, answer }).is_err() {
                    return;
                }
                continue;
            }
            Ok(Some(AgentToMaster::Locate(locate))) => {
                if inbox.send(Input::Locate { agent, locate }).is_err() {
                    return;
                }
                continue;
            }
            Ok(Some(AgentToMaster::OutputRead(answer))) => {
                if inbox.send(Input::OutputRead { agent, answer }).is_err() {
                    return;
                }
                continue;
            }
            Ok(Some(AgentToMaster::Leaving)) => {
                info!(%agent, "agent leaving; its tasks go elsewhere");
                Event::AgentLeaving { agent }
            }
            Ok(Some(AgentToMaster::Register(_))) => {
                warn!(%agent, "second Register on a registered session; closing");
                let _ = recv.stop(PROTOCOL_ERROR.into());
                return;
            }
            Ok(None) => return,
            Err(StreamError::Frame(error)) => {
                warn!(%agent, %error, "bad frame from agent; closing its stream");
                let _ = recv.stop(FRAME_ERROR_CODE);
                return;
            }
            Err(error) => {
                debug!(%agent, %error, "agent stream ended");
                return;
            }
        };
        if inbox.send(Input::Agent(event)).is_err() {
            return;
        }
    }
}

fn message_name(message: &AgentToMaster) -> &'static str {
    match message {
        AgentToMaster::Register(_) => "Register",
        AgentToMaster::Heartbeat => "Heartbeat",
        AgentToMaster::Reports(_) => "Reports",
        AgentToMaster::Leaving => "Leaving",
        AgentToMaster::LogRead(_) => "LogRead",
        AgentToMaster::Locate(_) => "Locate",
        AgentToMaster::OutputRead(_) => "OutputRead",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(node: &str, id: &str, dir: &str) -> Register {
        Register {
            version: PROTOCOL_VERSION,
            node: node.into(),
            map_slots: 1,
            reduce_slots: 1,
            live_containers: vec![],
            data_dir_id: id.into(),
            data_dir: dir.into(),
            data_mode: DataMode::Shared,
        }
    }

    #[test]
    fn agents_sharing_the_directory_join_and_another_is_refused_naming_both() {
        let dirs = DataDirs::default();
        dirs.claim(&register("n1", "aa", "/nfs/data")).unwrap();
        dirs.claim(&register("n2", "aa", "/mnt/data")).unwrap();
        let err = dirs.claim(&register("n3", "bb", "/local/data")).unwrap_err();
        assert!(err.starts_with("data directory /local/data of agent n3 is not the directory"), "{err}");
        assert!(err.contains("uses /nfs/data") || err.contains("uses /mnt/data"), "{err}");
        assert!(err.contains("point data_dir at one directory"), "{err}");
    }

    fn local(node: &str, id: &str, dir: &str) -> Register {
        let shuffle = "127.0.0.1:7000".parse().unwrap();
        Register { data_mode: DataMode::Local { shuffle }, ..register(node, id, dir) }
    }

    #[test]
    fn local_agents_join_with_their_own_directories_beside_shared_ones() {
        let dirs = DataDirs::default();
        dirs.claim(&register("n1", "nfs", "/nfs/data")).unwrap();
        dirs.claim(&local("n2", "d2", "/disk/data")).unwrap();
        dirs.claim(&local("n3", "d3", "/disk/data")).unwrap();
        // The shared check applies among shared-mode agents only.
        dirs.claim(&register("n4", "nfs", "/mnt/nfs")).unwrap();
        let err = dirs.claim(&register("n5", "d5", "/x")).unwrap_err();
        assert!(err.contains("agent n1 uses /nfs/data"), "{err}");
        // A node re-registering keeps its own directory.
        dirs.claim(&local("n2", "d2", "/disk/data")).unwrap();
    }

    #[test]
    fn two_local_agents_with_one_directory_are_refused_saying_they_share_it() {
        let dirs = DataDirs::default();
        dirs.claim(&local("n1", "same", "/srv/a")).unwrap();
        let err = dirs.claim(&local("n2", "same", "/srv/b")).unwrap_err();
        assert!(
            err.starts_with("data directory /srv/b of agent n2 is the directory agent n1 already uses"),
            "{err}"
        );
        assert!(err.contains("(/srv/a;"), "{err}");
        assert!(err.contains("give each agent a data_dir of its own"), "{err}");
    }

    #[test]
    fn the_directory_is_free_again_once_its_agents_are_gone() {
        let dirs = DataDirs::default();
        let first = dirs.claim(&register("n1", "aa", "/a")).unwrap();
        assert!(dirs.claim(&register("n2", "bb", "/b")).is_err());
        // The same node may come back with another directory (it is the only one).
        let second = dirs.claim(&register("n1", "cc", "/c")).unwrap();
        // The older session ending does not drop the newer claim.
        dirs.release("n1", first);
        assert!(dirs.claim(&register("n2", "bb", "/b")).is_err());
        dirs.release("n1", second);
        dirs.claim(&register("n2", "bb", "/b")).unwrap();
    }
}
