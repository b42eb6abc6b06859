//! Connection options: flags, environment and an optional TOML file merged into
//! [`ClientOptions`], certificate checks with errors that say how to make them, connecting
//! and requests with bounded waits and errors that say what was tried.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use serde::Deserialize;
use slotmarket_common::client::{Client, ClientError};
use slotmarket_common::config::{DEFAULT_CERT_DIR, DEFAULT_MASTER_ADDR, DEFAULT_SERVER_NAME, load_toml};
use slotmarket_common::identity::{Identity, Role};
use slotmarket_common::ids::JobId;
use slotmarket_common::pki::TlsFiles;
use slotmarket_common::protocol::{JobStatus, Request, Response};
use slotmarket_common::transport::{self, TransportError};

/// Identity (certificate file stem) used when none is given.
pub(crate) const DEFAULT_IDENTITY: &str = "admin";
/// How long to wait for the answer to one request.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long closing a connection may take; by then the answer is printed, so a slow or
/// vanished master must not hold the command up.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where and as whom to connect; every flag also reads an environment variable, and both
/// override the config file.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Connection (every command but pki and demo)")]
pub(crate) struct ConnectionArgs {
    /// Master address, HOST:PORT [default: 127.0.0.1:7400].
    #[arg(long, global = true, env = "SLOTMARKET_MASTER", value_name = "ADDR")]
    pub(crate) master: Option<String>,
    /// Name the master's certificate must carry [default: localhost].
    #[arg(long, global = true, env = "SLOTMARKET_SERVER_NAME", value_name = "NAME")]
    pub(crate) server_name: Option<String>,
    /// Directory with ca.pem and NAME.pem/NAME.key [default: pki].
    #[arg(long, global = true, env = "SLOTMARKET_CERT_DIR", value_name = "DIR")]
    pub(crate) cert_dir: Option<PathBuf>,
    /// Certificate to present: DIR/NAME.pem and DIR/NAME.key [default: admin].
    #[arg(long, global = true, env = "SLOTMARKET_IDENTITY", value_name = "NAME")]
    pub(crate) identity: Option<String>,
    /// TOML file with any of: master, server_name, cert_dir, identity [default: the first
    /// of $XDG_CONFIG_HOME/slotmarket/config.toml (~/.config/…) and
    /// /etc/slotmarket/config.toml that exists].
    #[arg(long, global = true, env = "SLOTMARKET_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// The `--config` file. Every key is optional; unknown keys are refused so a typo does not
/// silently fall back to a default.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    /// Master address.
    pub(crate) master: Option<String>,
    /// TLS server name.
    pub(crate) server_name: Option<String>,
    /// Certificate directory; relative paths are taken from the file's directory.
    pub(crate) cert_dir: Option<PathBuf>,
    /// Identity name.
    pub(crate) identity: Option<String>,
}

impl ConfigFile {
    /// Reads and parses `path`, resolving a relative `cert_dir` against its directory.
    fn load(path: &Path) -> Result<ConfigFile> {
        let mut file: ConfigFile = load_toml(path)?;
        if let (Some(dir), Some(base)) = (&file.cert_dir, path.parent())
            && dir.is_relative()
        {
            file.cert_dir = Some(base.join(dir));
        }
        Ok(file)
    }
}

/// Fully resolved connection settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientOptions {
    /// Master address as given (host name or IP, with port).
    pub(crate) master: String,
    /// TLS server name.
    pub(crate) server_name: String,
    /// Certificate directory.
    pub(crate) cert_dir: PathBuf,
    /// Identity name.
    pub(crate) identity: String,
}

impl ClientOptions {
    /// Reads the config file named by `args`, or else the first default one that exists
    /// (see [`default_config`]), and merges it under the flags.
    pub(crate) fn from_args(args: &ConnectionArgs) -> Result<ClientOptions> {
        let path = args.config.clone().or_else(|| {
            default_config(|name| std::env::var_os(name).map(PathBuf::from), |path| path.is_file())
        });
        let file = match &path {
            // The error names the file already.
            Some(path) => ConfigFile::load(path).context("client config")?,
            None => ConfigFile::default(),
        };
        Ok(ClientOptions::merge(args, file))
    }

    /// Flag or environment first, then the file, then the built-in default.
    pub(crate) fn merge(args: &ConnectionArgs, file: ConfigFile) -> ClientOptions {
        ClientOptions {
            master: args.master.clone().or(file.master).unwrap_or_else(|| DEFAULT_MASTER_ADDR.into()),
            server_name: args
                .server_name
                .clone()
                .or(file.server_name)
                .unwrap_or_else(|| DEFAULT_SERVER_NAME.into()),
            cert_dir: args.cert_dir.clone().or(file.cert_dir).unwrap_or_else(|| DEFAULT_CERT_DIR.into()),
            identity: args.identity.clone().or(file.identity).unwrap_or_else(|| DEFAULT_IDENTITY.into()),
        }
    }

    /// Checks the certificate files and connects.
    pub(crate) async fn connect(&self) -> Result<Client> {
        let files = TlsFiles::in_dir(&self.cert_dir, &self.identity);
        check_tls_files(&files, &self.cert_dir, &self.identity)?;
        let identity = check_client_role(&files, &self.identity)?;
        let connected = connect_as(&self.master, &self.server_name, &files, identity).await;
        if self.master == DEFAULT_MASTER_ADDR {
            // The likeliest mistake: no address configured at all.
            return connected.with_context(|| {
                format!(
                    "trying the default master address {DEFAULT_MASTER_ADDR} \
                     (set another with --master, SLOTMARKET_MASTER or `master` in --config)"
                )
            });
        }
        connected
    }
}

/// The system-wide client config, read when no per-user one exists.
pub(crate) const SYSTEM_CONFIG: &str = "/etc/slotmarket/config.toml";

/// The client config to read when none is named: `$XDG_CONFIG_HOME/slotmarket/config.toml`
/// (`$HOME/.config/…` when `XDG_CONFIG_HOME` is unset or empty), then
/// [`SYSTEM_CONFIG`]; the first that `exists`. `env` reads an environment variable.
pub(crate) fn default_config(
    env: impl Fn(&str) -> Option<PathBuf>,
    exists: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let non_empty = |name: &str| env(name).filter(|value| !value.as_os_str().is_empty());
    let user_dir =
        non_empty("XDG_CONFIG_HOME").or_else(|| non_empty("HOME").map(|home| home.join(".config")));
    let user = user_dir.map(|dir| dir.join("slotmarket").join("config.toml"));
    user.into_iter().chain([PathBuf::from(SYSTEM_CONFIG)]).find(|path| exists(path))
}

/// Resolves `args` and connects; what every request command starts with.
pub(crate) async fn connect_from_args(args: &ConnectionArgs) -> Result<Client> {
    ClientOptions::from_args(args)?.connect().await
}

/// Fails naming the first missing certificate file and the command that makes it.
pub(crate) fn check_tls_files(files: &TlsFiles, dir: &Path, identity: &str) -> Result<()> {
    let dir_shown = dir.display();
    for (what, path) in
        [("CA certificate", &files.ca), ("certificate", &files.cert), ("private key", &files.key)]
    {
        if path.is_file() {
            continue;
        }
        let how = if what == "CA certificate" || identity == DEFAULT_IDENTITY {
            format!("`slotmarket pki init --dir {dir_shown}` makes the CA and the admin certificate")
        } else {
            format!(
                "`slotmarket pki issue --dir {dir_shown} --role user --name {identity}` makes it \
                 (after `slotmarket pki init --dir {dir_shown}`)"
            )
        };
        bail!(
            "{what} {} not found (identity \"{identity}\", cert dir {dir_shown}); {how}, \
             or point --cert-dir / SLOTMARKET_CERT_DIR at an existing directory",
            path.display()
        );
    }
    Ok(())
}

/// Refuses agent and master certificates up front: the master would take such a
/// connection for an agent's and fail with a confusing protocol error. Answers the
/// identity the certificate names, so connecting need not parse it again.
fn check_client_role(files: &TlsFiles, identity: &str) -> Result<Identity> {
    let who = files.identity().with_context(|| format!("reading certificate {}", files.cert.display()))?;
    match who.role {
        Role::User | Role::Admin => Ok(who),
        role => bail!(
            "identity \"{identity}\" holds a certificate for role {role}; the command line needs a user or admin \
             identity (--identity / SLOTMARKET_IDENTITY, e.g. admin)"
        ),
    }
}

/// Resolves `master` and connects (the client bounds the wait), naming the address on
/// failure.
pub(crate) async fn connect(master: &str, server_name: &str, files: &TlsFiles) -> Result<Client> {
    let identity =
        files.identity().with_context(|| format!("reading certificate {}", files.cert.display()))?;
    connect_as(master, server_name, files, identity).await
}

/// [`connect`] with the identity `files.cert` names already read.
async fn connect_as(master: &str, server_name: &str, files: &TlsFiles, identity: Identity) -> Result<Client> {
    let addr: SocketAddr =
        transport::resolve(master).await.with_context(|| format!("resolving master address \"{master}\""))?;
    // Show the resolved address only when it adds something.
    let target = if addr.to_string() == master { master.to_string() } else { format!("{master} ({addr})") };
    match Client::connect_as(addr, server_name, files, identity).await {
        Ok(client) => Ok(client),
        // QUIC runs over UDP, so a master that is not running often shows up as silence
        // rather than a refusal.
        Err(ClientError::Transport(TransportError::ConnectTimeout { timeout, .. })) => bail!(
            "no answer from master at {target} within {}s; is slotmarket-master running there?",
            timeout.as_secs()
        ),
        // The handshake error repeats its cause and says nothing of the likely mistake.
        Err(err) if caused_by(&err, "UnknownIssuer") => bail!(
            "the master at {target} presented a certificate from another cluster's CA (TLS: UnknownIssuer): \
             {} is not the CA of the cluster that master belongs to; use that cluster's ca.pem \
             (--cert-dir / SLOTMARKET_CERT_DIR)",
            files.ca.display()
        ),
        Err(err) => Err(anyhow!(err))
            .with_context(|| format!("connecting to master at {target} (server name \"{server_name}\")")),
    }
}

/// Closes a connection politely, with a bounded wait.
pub(crate) async fn close(client: Client) {
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, client.close()).await;
}

/// Waits for one request (a typed [`Client`] call such as `client.jobs()`) with a bounded
/// wait. A refusal by the master arrives as an `Err` that names the master's reason.
pub(crate) async fn bounded<T>(call: impl Future<Output = Result<T, ClientError>>) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(answer)) => Ok(answer),
        // The master's refusal already reads as a sentence; more context would only repeat it.
        Ok(Err(err @ ClientError::Server(_))) => Err(err.into()),
        // TLS 1.3 lets the client finish its handshake before the master has checked the
        // client's certificate, so a refused one surfaces at the first request, as the
        // master's alert repeated through every layer of the connection error.
        Ok(Err(err)) if caused_by(&err, "UnknownIssuer") => bail!(
            "the master refused this client's certificate: it was not issued by the CA that master trusts \
             (TLS: UnknownIssuer); use an identity issued by that cluster's CA (`slotmarket pki issue`; \
             --cert-dir / SLOTMARKET_CERT_DIR, --identity / SLOTMARKET_IDENTITY)"
        ),
        Ok(Err(err)) => Err(anyhow!(err).context("request to master failed")),
        Err(_) => bail!("the master did not answer within {}s", CALL_TIMEOUT.as_secs()),
    }
}

/// Whether `err` or one of its causes says `what`.
fn caused_by(err: &ClientError, what: &str) -> bool {
    let err: &(dyn std::error::Error + 'static) = err;
    std::iter::successors(Some(err), |e| e.source()).any(|e| e.to_string().contains(what))
}

/// Sends one untyped request with [`bounded`]'s wait.
// Still used by `workload`; the typed calls on `Client` replace it elsewhere.
pub(crate) async fn call(client: &Client, request: Request) -> Result<Response> {
    bounded(client.call(request)).await
}

/// Asks for one job's status.
pub(crate) async fn job_status(client: &Client, job: JobId) -> Result<JobStatus> {
    bounded(client.status(job)).await.with_context(|| format!("status of {job}"))
}

/// The error for an answer of the wrong kind (a master/CLI version skew or a bug).
// Still used by `workload`; the typed calls on `Client` report this themselves.
pub(crate) fn unexpected(wanted: &str, got: &Response) -> anyhow::Error {
    anyhow!("unexpected answer from master: wanted {wanted}, got {got:?}")
}

/// Parses a job id as printed (`j7`) or bare (`7`); the clap value parser.
pub(crate) fn parse_job_id(text: &str) -> Result<JobId, String> {
    let digits = text.strip_prefix('j').unwrap_or(text);
    digits.parse::<u64>().map(JobId).map_err(|_| format!("\"{text}\" is not a job id; write it as j7 or 7"))
}

#[cfg(test)]
mod tests {
    use slotmarket_common::protocol::{ErrorKind, ErrorReply, JobState};

    use slotmarket_common::pki;

    use super::*;
    use crate::fake_master::{FakeMaster, status};

    #[tokio::test]
    async fn requests_reach_the_master_and_refusals_carry_its_reason() {
        let fake = FakeMaster::start(|request| match request {
            Request::Status { job } if job == JobId(3) => {
                vec![Response::Job(status(job, "wc", JobState::Running))]
            }
            _ => vec![Response::Error(ErrorReply { kind: ErrorKind::NotFound, message: "no job j9".into() })],
        });
        let client = fake.options("alice").connect().await.unwrap();
        // The identity read once, before connecting, is the one the client reports.
        assert_eq!(client.identity(), &Identity { role: Role::User, principal: "alice".into() });
        assert_eq!(job_status(&client, JobId(3)).await.unwrap().summary.state, JobState::Running);
        let err = format!("{:#}", job_status(&client, JobId(9)).await.unwrap_err());
        assert!(err.contains("status of j9") && err.contains("no job j9"), "{err}");
        client.close().await;
        assert_eq!(
            fake.requests(),
            vec![Request::Status { job: JobId(3) }, Request::Status { job: JobId(9) }]
        );
    }

    #[tokio::test]
    async fn agent_certificates_are_refused_before_connecting() {
        let fake = FakeMaster::start(|_| vec![]);
        pki::issue(fake.certs.path(), Role::Agent, "node-1").unwrap();
        let err = format!("{:#}", fake.options("node-1").connect().await.unwrap_err());
        assert!(err.contains("\"node-1\" holds a certificate for role agent"), "{err}");
        assert!(fake.requests().is_empty());
    }

    #[tokio::test]
    async fn a_master_with_another_name_is_refused_naming_the_address() {
        let fake = FakeMaster::start(|_| vec![]);
        let options = ClientOptions { server_name: "elsewhere.example".into(), ..fake.options("admin") };
        let err = format!("{:#}", options.connect().await.unwrap_err());
        assert!(err.contains(&fake.addr.to_string()) && err.contains("elsewhere.example"), "{err}");
    }

    #[tokio::test]
    async fn a_master_of_another_cluster_is_named_as_such() {
        let fake = FakeMaster::start(|_| vec![]);
        let other = tempfile::tempdir().unwrap();
        pki::init(other.path(), &[]).unwrap();
        let options = ClientOptions { cert_dir: other.path().to_path_buf(), ..fake.options("admin") };
        let err = format!("{:#}", options.connect().await.unwrap_err());
        assert!(err.contains("from another cluster's CA") && err.contains("ca.pem"), "{err}");
        assert_eq!(err.matches("UnknownIssuer").count(), 1, "the cause once: {err}");
    }

    #[tokio::test]
    async fn a_client_certificate_of_another_cluster_is_named_as_such() {
        let fake = FakeMaster::start(|_| vec![]);
        let other = tempfile::tempdir().unwrap();
        pki::init(other.path(), &[]).unwrap();
        // This cluster's CA (so the master is trusted), another cluster's admin.
        std::fs::copy(fake.certs.path().join("ca.pem"), other.path().join("ca.pem")).unwrap();
        let options = ClientOptions { cert_dir: other.path().to_path_buf(), ..fake.options("admin") };
        let err = match options.connect().await {
            Ok(client) => format!("{:#}", bounded(client.status(JobId(1))).await.unwrap_err()),
            Err(err) => format!("{err:#}"),
        };
        assert!(err.contains("refused this client's certificate") && err.contains("pki issue"), "{err}");
        assert_eq!(err.matches("UnknownIssuer").count(), 1, "the cause once: {err}");
        assert!(fake.requests().is_empty());
    }

    #[test]
    fn job_ids_parse_with_or_without_the_prefix() {
        assert_eq!(parse_job_id("j7"), Ok(JobId(7)));
        assert_eq!(parse_job_id("42"), Ok(JobId(42)));
        assert!(parse_job_id("j").is_err());
        assert!(parse_job_id("job7").is_err());
        assert!(parse_job_id("-1").is_err());
        assert!(parse_job_id("").is_err());
    }

    #[test]
    fn flags_override_the_file_and_the_file_overrides_defaults() {
        let args = ConnectionArgs { master: Some("10.0.0.1:7400".into()), ..ConnectionArgs::default() };
        let file = ConfigFile {
            master: Some("file:1".into()),
            server_name: Some("master.lab".into()),
            cert_dir: None,
            identity: Some("alice".into()),
        };
        let options = ClientOptions::merge(&args, file);
        assert_eq!(
            options,
            ClientOptions {
                master: "10.0.0.1:7400".into(),
                server_name: "master.lab".into(),
                cert_dir: DEFAULT_CERT_DIR.into(),
                identity: "alice".into(),
            }
        );
    }

    #[test]
    fn defaults_apply_when_nothing_is_given() {
        let options = ClientOptions::merge(&ConnectionArgs::default(), ConfigFile::default());
        assert_eq!(options.master, DEFAULT_MASTER_ADDR);
        assert_eq!(options.server_name, DEFAULT_SERVER_NAME);
        assert_eq!(options.identity, DEFAULT_IDENTITY);
    }

    #[test]
    fn config_files_resolve_cert_dir_beside_themselves_and_refuse_typos() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cli.toml");
        std::fs::write(&path, "master = \"m:1\"\ncert_dir = \"certs\"\n").unwrap();
        let file = ConfigFile::load(&path).unwrap();
        assert_eq!(file.cert_dir, Some(dir.path().join("certs")));
        assert_eq!(file.master.as_deref(), Some("m:1"));

        std::fs::write(&path, "mastr = \"m:1\"\n").unwrap();
        let err = format!("{:#}", ConfigFile::load(&path).unwrap_err());
        assert!(err.contains("mastr"), "{err}");
    }

    #[test]
    fn the_default_config_is_the_users_then_the_systems() {
        let env = |xdg: Option<&str>| {
            let xdg = xdg.map(PathBuf::from);
            move |name: &str| match name {
                "XDG_CONFIG_HOME" => xdg.clone(),
                "HOME" => Some(PathBuf::from("/home/alice")),
                _ => None,
            }
        };
        let xdg_file = PathBuf::from("/cfg/slotmarket/config.toml");
        let home_file = PathBuf::from("/home/alice/.config/slotmarket/config.toml");
        let system = PathBuf::from(SYSTEM_CONFIG);
        let all = |_: &Path| true;
        assert_eq!(default_config(env(Some("/cfg")), all), Some(xdg_file.clone()));
        // Unset or empty XDG_CONFIG_HOME means ~/.config.
        assert_eq!(default_config(env(None), all), Some(home_file.clone()));
        assert_eq!(default_config(env(Some("")), all), Some(home_file));
        // No per-user file: the system one; neither: none.
        assert_eq!(default_config(env(Some("/cfg")), |p: &Path| p == system), Some(system));
        assert_eq!(default_config(env(Some("/cfg")), |_: &Path| false), None);
    }

    #[test]
    fn missing_certificates_are_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles::in_dir(dir.path(), "admin");
        let err = check_tls_files(&files, dir.path(), "admin").unwrap_err().to_string();
        assert!(err.contains("ca.pem"), "{err}");
        assert!(err.contains("slotmarket pki init --dir"), "{err}");

        std::fs::write(&files.ca, "x").unwrap();
        let files = TlsFiles::in_dir(dir.path(), "alice");
        let err = check_tls_files(&files, dir.path(), "alice").unwrap_err().to_string();
        assert!(err.contains("alice.pem"), "{err}");
        assert!(err.contains("pki issue"), "{err}");
    }
}
