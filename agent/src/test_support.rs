//! Test helpers: a scripted fake master on loopback QUIC with real certificates made in a
//! temporary directory. Every wait is bounded by [`WAIT`].

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use quinn::{RecvStream, SendStream, VarInt};
use slotmarket_common::identity::Role;
use slotmarket_common::ids::AgentId;
use slotmarket_common::pki::{self, MASTER_NAME, TlsFiles};
use slotmarket_common::protocol::{
    AgentToMaster, ContainerReport, DEFAULT_MAX_FRAME, MasterToAgent, Register,
};
use slotmarket_common::transport::{read_frame, server_endpoint, write_frame};

/// Upper bound for any single wait in these tests.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// The node name the test agents use.
pub(crate) const NODE: &str = "node1";

/// A master that accepts agent connections and lets the test script the conversation.
pub(crate) struct FakeMaster {
    endpoint: quinn::Endpoint,
    pub(crate) addr: SocketAddr,
    /// The agent's certificate files.
    pub(crate) agent_tls: TlsFiles,
}

impl FakeMaster {
    /// Makes a CA, master and agent certificates under `dir` and listens on loopback.
    pub(crate) fn start(dir: &Path) -> FakeMaster {
        let pki_dir = dir.join("pki");
        pki::init(&pki_dir, &[]).unwrap();
        let agent_tls = pki::issue(&pki_dir, Role::Agent, NODE).unwrap();
        let endpoint =
            server_endpoint(SocketAddr::from(([127, 0, 0, 1], 0)), &TlsFiles::in_dir(&pki_dir, MASTER_NAME))
                .unwrap();
        let addr = endpoint.local_addr().unwrap();
        FakeMaster { endpoint, addr, agent_tls }
    }

    /// Accepts the next agent connection and reads its `Register`.
    pub(crate) async fn accept(&self) -> AgentLink {
        let incoming =
            tokio::time::timeout(WAIT, self.endpoint.accept()).await.expect("no agent connected").unwrap();
        let conn = incoming.await.unwrap();
        let (send, mut recv) = tokio::time::timeout(WAIT, conn.accept_bi()).await.unwrap().unwrap();
        let first = tokio::time::timeout(WAIT, read_frame::<AgentToMaster>(&mut recv, DEFAULT_MAX_FRAME))
            .await
            .unwrap()
            .unwrap();
        let Some(AgentToMaster::Register(register)) = first else {
            panic!("expected Register, got {first:?}")
        };
        AgentLink { conn, send, recv, register }
    }
}

/// One agent's control stream, seen from the master.
pub(crate) struct AgentLink {
    conn: quinn::Connection,
    send: SendStream,
    recv: RecvStream,
    /// What the agent registered with.
    pub(crate) register: Register,
}

impl AgentLink {
    /// Sends any message to the agent.
    pub(crate) async fn send(&mut self, msg: MasterToAgent) {
        write_frame(&mut self.send, &msg, DEFAULT_MAX_FRAME).await.unwrap();
    }

    /// Accepts the registration.
    pub(crate) async fn accept_registration(&mut self, agent: u32, heartbeat_ms: u64) {
        self.send(MasterToAgent::Registered { agent: AgentId(agent), heartbeat_interval_ms: heartbeat_ms })
            .await;
    }

    /// The next message from the agent.
    pub(crate) async fn next(&mut self) -> AgentToMaster {
        let read = tokio::time::timeout(WAIT, read_frame(&mut self.recv, DEFAULT_MAX_FRAME));
        match read.await.expect("timed out waiting for the agent").unwrap() {
            Some(msg) => msg,
            None => panic!("the agent finished its control stream"),
        }
    }

    /// Reads until `n` reports have arrived (skipping heartbeats) and returns them.
    pub(crate) async fn reports(&mut self, n: usize) -> Vec<ContainerReport> {
        let mut reports = Vec::new();
        while reports.len() < n {
            match self.next().await {
                AgentToMaster::Reports(batch) => reports.extend(batch),
                AgentToMaster::Heartbeat => {}
                other => panic!("expected reports, got {other:?}"),
            }
        }
        assert_eq!(reports.len(), n, "more reports than expected: {reports:?}");
        reports
    }

    /// Reads until the agent finishes its control stream, collecting the reports.
    pub(crate) async fn reports_until_end(&mut self) -> Vec<ContainerReport> {
        let mut reports = Vec::new();
        loop {
            let read = tokio::time::timeout(WAIT, read_frame(&mut self.recv, DEFAULT_MAX_FRAME));
            match read.await.expect("timed out waiting for the agent to finish").unwrap() {
                Some(AgentToMaster::Reports(batch)) => reports.extend(batch),
                Some(AgentToMaster::Heartbeat) => {}
                Some(other) => panic!("unexpected {other:?}"),
                None => return reports,
            }
        }
    }

    /// Drops the connection as a crashed master or a broken network would.
    pub(crate) fn cut(self) {
        self.conn.close(VarInt::from_u32(7), b"cut by the test");
    }
}
