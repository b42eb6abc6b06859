//! Agent sessions: one long-lived control stream per agent connection. Checks the
//! `Register` message, then decodes heartbeats and reports into core events and writes
//! the actor's launches and kills back. Never touches scheduling state itself.

use std::time::Duration;

use slotmarket_common::identity::Identity;
use slotmarket_common::ids::AgentId;
use slotmarket_common::protocol::{AgentToMaster, MasterToAgent, PROTOCOL_VERSION, Register};
use slotmarket_common::transport::{FRAME_ERROR_CODE, StreamError, read_frame, write_frame};
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, debug, info, info_span, warn};

use super::Input;
use crate::core::Event;

/// How long a new agent connection may take to open its stream and register.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

/// QUIC application error code for a protocol violation by the agent.
const PROTOCOL_ERROR: u32 = 2;

/// Serves one agent connection until it closes or the actor drops it.
pub(super) async fn serve(
    conn: quinn::Connection,
    identity: Identity,
    inbox: mpsc::UnboundedSender<Input>,
    max_frame: usize,
) {
    let span = info_span!("agent", node = %identity.principal, remote = %conn.remote_address());
    async move {
        let registered = tokio::time::timeout(REGISTER_TIMEOUT, accept_register(&conn, max_frame)).await;
        let (mut send, recv, register) = match registered {
            Ok(Ok(stream)) => stream,
            Ok(Err(reason)) => return refuse(&conn, None, &reason).await,
            Err(_) => return refuse(&conn, None, "no Register within 10 s").await,
        };
        if let Err(reason) = check_register(&register, &identity) {
            return refuse(&conn, Some(&mut send), &reason).await;
        }
        let (outbound, outbound_rx) = mpsc::unbounded_channel();
        let (assigned, assigned_rx) = oneshot::channel();
        let registered = Input::AgentRegistered {
            node: register.node,
            map_slots: register.map_slots,
            reduce_slots: register.reduce_slots,
            live_containers: register.live_containers,
            outbound,
            assigned,
        };
        if inbox.send(registered).is_err() {
            return refuse(&conn, Some(&mut send), "master is shutting down").await;
        }
        let Ok(agent) = assigned_rx.await else { return };
        info!(%agent, "agent registered");
        let writer = tokio::spawn(write_outbound(conn.clone(), send, outbound_rx, max_frame));
        read_inbound(recv, agent, &inbox, max_frame).await;
        let _ = inbox.send(Input::Agent(Event::AgentDisconnected { agent }));
        writer.abort();
        conn.close(0u32.into(), b"session ended");
        info!(%agent, "agent disconnected");
    }
    .instrument(span)
    .await
}

async fn accept_register(
    conn: &quinn::Connection,
    max_frame: usize,
) -> Result<(quinn::SendStream, quinn::RecvStream, Register), String> {
    let (send, mut recv) = conn.accept_bi().await.map_err(|e| format!("no control stream: {e}"))?;
    match read_frame::<AgentToMaster>(&mut recv, max_frame).await {
        Ok(Some(AgentToMaster::Register(register))) => Ok((send, recv, register)),
        Ok(Some(other)) => Err(format!("the first message must be Register, got {}", message_name(&other))),
        Ok(None) => Err("control stream ended before Register".into()),
        Err(e) => Err(format!("bad Register: {e}")),
    }
}

fn check_register(register: &Register, identity: &Identity) -> Result<(), String> {
    if register.version != PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {} is not supported; this master speaks {PROTOCOL_VERSION}",
            register.version
        ));
    }
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
    }
}
