//! Certificates from `pki` work outside rustls: `openssl` prints and verifies them
//! strictly, Python's `cryptography` parses and path-validates them, and `aioquic` (a
//! Python QUIC stack) completes the mutual-TLS handshake with a real master and gets an
//! answer to a `Nodes` request.
//!
//! Needs `openssl` and `python3` with `cryptography` and `aioquic`
//! (`python3 -m pip install cryptography aioquic`; `.ci/run` installs them). A missing
//! tool fails the test with that advice rather than skipping it.

use std::path::Path;
use std::process::Output;

use tokio::process::Command;

use crate::support::{TestCluster, WAIT, agent};

/// The peer script, beside this file.
const CLIENT_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/interop_client.py");

/// Every certificate the cluster's `pki` made (`TestCluster` issues alice and bob; the
/// agent's is issued when it starts).
const CERTIFICATES: &[&str] = &["ca", "master", "admin", "alice", "bob", "node-a"];

/// Runs `program args`, bounded by [`WAIT`]; panics with `install` if it cannot start.
async fn run(program: &str, args: &[&str], install: &str) -> Output {
    let mut command = Command::new(program);
    command.args(args).kill_on_drop(true);
    let output = tokio::time::timeout(WAIT, command.output()).await;
    let output =
        output.unwrap_or_else(|_| panic!("`{program} {}` did not finish in {WAIT:?}", args.join(" ")));
    output.unwrap_or_else(|err| panic!("cannot run {program} ({err}): {install}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Fails loudly, naming what to install, when a tool this test needs is missing.
async fn require_tools() {
    let openssl = run("openssl", &["version"], "install OpenSSL (e.g. apt-get install openssl)").await;
    assert!(openssl.status.success(), "`openssl version` failed: {}", text(&openssl.stderr));
    let probe = "import aioquic, cryptography.x509.verification";
    let python = run("python3", &["-c", probe], "install Python 3 (e.g. apt-get install python3)").await;
    assert!(
        python.status.success(),
        "python3 lacks aioquic or cryptography >= 42: run `python3 -m pip install cryptography aioquic` \
         ({})",
        text(&python.stderr)
    );
}

/// `openssl x509 -text` prints the certificate without complaint, and `openssl verify
/// -x509_strict` accepts it against the CA for its purpose.
async fn openssl_accepts(pki_dir: &Path, name: &str, purpose: &str) {
    let install = "install OpenSSL";
    let cert = pki_dir.join(format!("{name}.pem"));
    let cert = cert.to_str().expect("utf-8 temp path");
    let shown = run("openssl", &["x509", "-noout", "-text", "-in", cert], install).await;
    assert!(shown.status.success() && shown.stderr.is_empty(), "{name}: {}", text(&shown.stderr));
    assert!(
        text(&shown.stdout).contains("X509v3 Basic Constraints: critical"),
        "{name}: {}",
        text(&shown.stdout)
    );
    let ca = pki_dir.join("ca.pem");
    let ca = ca.to_str().expect("utf-8 temp path");
    let args = ["verify", "-x509_strict", "-CAfile", ca, "-purpose", purpose, cert];
    let verified = run("openssl", &args, install).await;
    let out = text(&verified.stdout) + &text(&verified.stderr);
    assert!(verified.status.success() && out.trim().ends_with(": OK"), "{name} as {purpose}: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_work_with_openssl_python_cryptography_and_aioquic() {
    require_tools().await;
    let cluster = TestCluster::start(&[agent("node-a", 1, 1)]).await;
    let pki_dir = cluster.dir.path().join("pki");

    openssl_accepts(&pki_dir, "master", "sslserver").await;
    for name in ["admin", "alice", "bob", "node-a"] {
        openssl_accepts(&pki_dir, name, "sslclient").await;
    }
    // The CA signs; it is not itself a TLS peer.
    openssl_accepts(&pki_dir, "ca", "any").await;

    let port = cluster.addr.port().to_string();
    let pki = pki_dir.to_str().expect("utf-8 temp path");
    let mut args = vec![CLIENT_SCRIPT, pki, "127.0.0.1", &port, "alice"];
    args.extend_from_slice(CERTIFICATES);
    let output = run("python3", &args, "install Python 3").await;
    assert!(
        output.status.success(),
        "the Python peer failed:\n{}\nmaster log:\n{}",
        text(&output.stderr),
        cluster.log_tail("master")
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the script prints JSON");
    assert_eq!(answer["alpn"], "slotmarket/1", "{answer}");
    // Users see the nodes (README "Who sees what"): a `Nodes` answer naming the agent.
    assert_eq!(answer["variant"], 3, "expected Response::Nodes: {answer}");
    let nodes = answer["nodes"].as_array().expect("node list");
    assert!(nodes.iter().any(|n| n["node"] == "node-a" && n["connected"] == true), "{answer}");
    for name in CERTIFICATES {
        assert!(answer["extensions"][name].as_array().is_some_and(|e| !e.is_empty()), "{name}: {answer}");
    }
}
