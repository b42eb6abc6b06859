//! The cluster certificate authority: making the CA, issuing role certificates with rcgen,
//! loading PEM files for rustls, and reading a peer's role and principal back out of its
//! certificate.
//!
//! A certificate's Subject carries the identity: `CN` is the principal, `OU` the role and
//! `O` is always `slotmarket`. Private keys are written with mode 0600 and no file is ever
//! overwritten.
//!
//! Certificates are strict DER, which OpenSSL and Python's `cryptography` insist on: rcgen
//! 0.13 encodes an end entity's `cA FALSE` (a DEFAULT value, which DER forbids) and pads
//! KeyUsage to nine bits (DER drops trailing zero bits), so this module writes those two
//! extensions itself.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::der::{self, DerError};
use crate::identity::{Identity, Role};
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    Ia5String, IsCa, KeyIdMethod, KeyPair, SanType,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;

/// The Subject `O` of every Slotmarket certificate.
pub const ORGANIZATION: &str = "slotmarket";

/// Principal of the master's certificate.
pub const MASTER_NAME: &str = "master";

/// Principal of the administrator certificate made by [`init`].
pub const ADMIN_NAME: &str = "admin";

/// How long the CA and the certificates issued by it stay valid.
const VALIDITY_YEARS: i32 = 10;

/// Why making, issuing or reading certificates failed.
#[derive(Debug, Error)]
pub enum PkiError {
    /// The directory for the certificates could not be created.
    #[error("cannot create certificate directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// `init` found a CA already in place.
    #[error(
        "{path} already exists; refusing to replace the cluster CA (use another directory, \
         or delete the old CA deliberately first)"
    )]
    CaExists {
        /// The existing CA certificate.
        path: PathBuf,
    },
    /// A file that would be written already exists.
    #[error("{path} already exists; refusing to overwrite it (remove it first to re-issue)")]
    FileExists {
        /// The existing file.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {source} (check the certificate directory; `pki init` makes the CA)")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source} (check that its directory is writable)")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The certificate or account name is not usable in a file name or certificate.
    #[error("invalid name {name:?}: use 1 to 64 characters from A-Z a-z 0-9 . _ -")]
    BadName {
        /// The name given.
        name: String,
    },
    /// The name is taken by the CA's own files.
    #[error("the name \"ca\" is reserved for the cluster CA; choose another name")]
    ReservedName,
    /// `issue` was asked for a master certificate.
    #[error("master certificates are made only by `pki init`; issue agent, user or admin certificates")]
    MasterRole,
    /// A master host name is neither a DNS name nor an IP address.
    #[error("invalid master host {host:?}: give a DNS name or an IP address ({source})")]
    BadHost {
        /// The host given.
        host: String,
        /// Why rcgen refused it.
        source: rcgen::Error,
    },
    /// A file holds no PEM certificate.
    #[error("{path} holds no PEM certificate; point it at a .pem file made by `pki`")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A PEM file could not be parsed.
    #[error("{path} is not valid PEM: {source}")]
    BadPem {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: rustls_pki_types::pem::Error,
    },
    /// A private key file could not be used for signing.
    #[error("{path} is not a usable private key: {source}")]
    BadKey {
        /// The file.
        path: PathBuf,
        /// Why rcgen refused it.
        source: rcgen::Error,
    },
    /// The CA key does not belong to the CA certificate.
    #[error("{key} is not the private key of {cert}; restore the matching pair")]
    KeyMismatch {
        /// The CA certificate.
        cert: PathBuf,
        /// The CA key.
        key: PathBuf,
    },
    /// The CA certificate was not made by `pki init`.
    #[error("{path} is not a Slotmarket CA certificate (made by `pki init`)")]
    NotOurCa {
        /// The CA certificate.
        path: PathBuf,
    },
    /// rcgen failed to build or sign a certificate.
    #[error("cannot generate certificate: {0}")]
    Generate(#[source] rcgen::Error),
    /// The bytes are not an X.509 certificate.
    #[error("certificate is not valid X.509: {0}")]
    Parse(#[source] DerError),
    /// The certificate lacks a Subject field Slotmarket needs, or has it twice.
    #[error("certificate subject needs exactly one {field}; it was not issued by Slotmarket's pki")]
    MissingField {
        /// The field (`CN`, `OU` or `O`).
        field: &'static str,
    },
    /// The certificate's `O` is not [`ORGANIZATION`].
    #[error("certificate organisation is {found:?}, not \"slotmarket\"")]
    WrongOrganization {
        /// The `O` found.
        found: String,
    },
    /// The certificate's `OU` is not a role.
    #[error("certificate names unknown role {role:?}")]
    UnknownRole {
        /// The `OU` found.
        role: String,
    },
}

/// Where one party's CA certificate, certificate and key live.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TlsFiles {
    /// The cluster CA certificate (PEM), used to verify the peer.
    pub ca: PathBuf,
    /// This party's certificate (PEM).
    pub cert: PathBuf,
    /// This party's private key (PEM, PKCS#8).
    pub key: PathBuf,
}

/// The contents of [`TlsFiles`], parsed and ready for rustls.
#[derive(Debug)]
pub struct TlsMaterial {
    /// Every certificate in the CA file.
    pub ca: Vec<CertificateDer<'static>>,
    /// This party's certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// This party's private key.
    pub key: PrivateKeyDer<'static>,
}

impl TlsFiles {
    /// The layout `pki` writes: `dir/ca.pem`, `dir/{name}.pem` and `dir/{name}.key`.
    pub fn in_dir(dir: &Path, name: &str) -> TlsFiles {
        TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        }
    }

    /// Reads and parses the three files.
    pub fn load(&self) -> Result<TlsMaterial, PkiError> {
        let ca = read_certs(&self.ca)?;
        let chain = read_certs(&self.cert)?;
        let pem = read(&self.key)?;
        let key = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|source| PkiError::BadPem { path: self.key.clone(), source })?;
        Ok(TlsMaterial { ca, chain, key })
    }

    /// The identity named by this party's own certificate.
    pub fn identity(&self) -> Result<Identity, PkiError> {
        let chain = read_certs(&self.cert)?;
        // read_certs never returns an empty list.
        identity_from_der(chain.first().map(|c| c.as_ref()).unwrap_or_default())
    }
}

/// Creates a cluster CA in `dir` (created if needed) with a master certificate for
/// `localhost`, `127.0.0.1`, `::1` and `master_hosts`, and an `admin` certificate.
///
/// Refuses if `dir/ca.pem` exists, so an existing CA is never replaced.
pub fn init(dir: &Path, master_hosts: &[String]) -> Result<(), PkiError> {
    fs::create_dir_all(dir).map_err(|source| PkiError::CreateDir { path: dir.to_path_buf(), source })?;
    let ca_files = TlsFiles::in_dir(dir, "ca");
    if ca_files.ca.exists() {
        return Err(PkiError::CaExists { path: ca_files.ca });
    }
    let master = TlsFiles::in_dir(dir, MASTER_NAME);
    let admin = TlsFiles::in_dir(dir, ADMIN_NAME);
    for path in [&ca_files.key, &master.cert, &master.key, &admin.cert, &admin.key] {
        refuse_existing(path)?;
    }

    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    for host in master_hosts {
        if !sans.contains(host) {
            sans.push(host.clone());
        }
    }
    let master_params = CertificateParams::new(sans.clone()).map_err(|source| {
        // Find the culprit for the message; the defaults are always valid.
        let host = sans.iter().find(|h| CertificateParams::new(vec![(*h).clone()]).is_err());
        PkiError::BadHost { host: host.cloned().unwrap_or_default(), source }
    })?;

    let ca_key = KeyPair::generate().map_err(PkiError::Generate)?;
    let ca_cert =
        ca_params(&ca_common_name(&ca_key), None).self_signed(&ca_key).map_err(PkiError::Generate)?;
    write_new(&ca_files.key, ca_key.serialize_pem().as_bytes(), 0o600)?;
    write_new(&ca_files.ca, ca_cert.pem().as_bytes(), 0o644)?;

    let ca = LoadedCa { cert: ca_cert, key: ca_key };
    sign_and_write(&ca, master_params, Role::Master, MASTER_NAME, &master)?;
    sign_and_write(&ca, CertificateParams::default(), Role::Admin, ADMIN_NAME, &admin)?;
    Ok(())
}

/// Issues a client certificate for `(role, name)` signed by the CA in `dir`, written to
/// `dir/{name}.pem` and `dir/{name}.key`. Refuses master certificates, invalid names and
/// existing files.
pub fn issue(dir: &Path, role: Role, name: &str) -> Result<TlsFiles, PkiError> {
    if role == Role::Master {
        return Err(PkiError::MasterRole);
    }
    check_name(name)?;
    let files = TlsFiles::in_dir(dir, name);
    refuse_existing(&files.cert)?;
    refuse_existing(&files.key)?;
    let ca = load_ca(dir)?;
    sign_and_write(&ca, CertificateParams::default(), role, name, &files)?;
    Ok(files)
}

/// Reads the role (`OU`) and principal (`CN`) from a DER certificate made by this module.
pub fn identity_from_der(cert_der: &[u8]) -> Result<Identity, PkiError> {
    let cert = der::Certificate::from_der(cert_der).map_err(PkiError::Parse)?;
    let org = single(cert.subject_values(der::oid::ORGANIZATION), "O")?;
    if org != ORGANIZATION {
        return Err(PkiError::WrongOrganization { found: org });
    }
    let role = single(cert.subject_values(der::oid::ORGANIZATIONAL_UNIT), "OU")?;
    let role = role.parse::<Role>().map_err(|_| PkiError::UnknownRole { role })?;
    let principal = single(cert.subject_values(der::oid::COMMON_NAME), "CN")?;
    Ok(Identity { role, principal })
}

/// Whether `name` is usable as a principal and file stem: `[A-Za-z0-9._-]{1,64}`, and not
/// `ca` (the CA's own files).
pub fn check_name(name: &str) -> Result<(), PkiError> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        return Err(PkiError::BadName { name: name.to_string() });
    }
    if name == "ca" {
        return Err(PkiError::ReservedName);
    }
    Ok(())
}

/// The CA certificate and key, ready to sign.
struct LoadedCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// Parameters of the CA certificate. `key_id` pins the subject key identifier when
/// re-creating the parameters of an existing CA, so issued certificates point at it.
fn ca_params(common_name: &str, key_id: Option<Vec<u8>>) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, ORGANIZATION);
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.custom_extensions =
        vec![key_usage(&[KEY_USAGE_DIGITAL_SIGNATURE, KEY_USAGE_KEY_CERT_SIGN, KEY_USAGE_CRL_SIGN])];
    set_validity(&mut params);
    if let Some(id) = key_id {
        params.key_identifier_method = KeyIdMethod::PreSpecified(id);
    }
    params
}

/// A CA name unique to this cluster, so a certificate from another cluster's CA is
/// reported as an unknown issuer rather than a bad signature.
fn ca_common_name(key: &KeyPair) -> String {
    let raw = key.public_key_raw();
    let tag: String = raw.iter().skip(1).take(4).map(|b| format!("{b:02x}")).collect();
    format!("slotmarket cluster CA {tag}")
}

/// Fills in the subject, usages and validity of a leaf certificate for `key`.
fn leaf_params(
    params: &mut CertificateParams,
    role: Role,
    name: &str,
    key: &KeyPair,
) -> Result<(), PkiError> {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, ORGANIZATION);
    dn.push(DnType::OrganizationalUnitName, role.name());
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    // `NoCa` writes no basicConstraints; ours says "end entity" in valid DER instead.
    params.is_ca = IsCa::NoCa;
    params.custom_extensions =
        vec![end_entity_constraints(), key_usage(&[KEY_USAGE_DIGITAL_SIGNATURE]), subject_key_id(key)];
    // The master serves clients and agents; an agent also serves other agents' shuffle
    // fetches (under its node name); users and admins are clients only.
    params.extended_key_usages = match role {
        Role::Master | Role::Agent => {
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]
        }
        Role::User | Role::Admin => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    if role != Role::Master {
        // Client profiles (Python's `cryptography` verifier among them) require a subject
        // alternative name; the identity itself is still read from the Subject.
        let uri = Ia5String::try_from(client_uri(role, name)).map_err(PkiError::Generate)?;
        params.subject_alt_names.push(SanType::URI(uri));
    }
    if role == Role::Agent {
        // The name other agents' shuffle fetches check (the node name is the TLS name).
        params.subject_alt_names.push(agent_server_name(name)?);
    }
    params.use_authority_key_identifier_extension = true;
    set_validity(params);
    Ok(())
}

/// The subject alternative name an agent's shuffle service is checked against: its node
/// name, as an IP address if it is one, else as a DNS name.
fn agent_server_name(name: &str) -> Result<SanType, PkiError> {
    if let Ok(ip) = name.parse::<std::net::IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    Ok(SanType::DnsName(Ia5String::try_from(name.to_string()).map_err(PkiError::Generate)?))
}

/// The URI a client certificate names as its subject alternative name, e.g.
/// `urn:slotmarket:user:alice`.
pub fn client_uri(role: Role, name: &str) -> String {
    format!("urn:{ORGANIZATION}:{}:{name}", role.name())
}

/// Makes a key, signs a leaf certificate for `(role, name)` with the CA and writes
/// `files.cert` and `files.key`.
fn sign_and_write(
    ca: &LoadedCa,
    mut params: CertificateParams,
    role: Role,
    name: &str,
    files: &TlsFiles,
) -> Result<(), PkiError> {
    let key = KeyPair::generate().map_err(PkiError::Generate)?;
    leaf_params(&mut params, role, name, &key)?;
    let cert = params.signed_by(&key, &ca.cert, &ca.key).map_err(PkiError::Generate)?;
    write_new(&files.key, key.serialize_pem().as_bytes(), 0o600)?;
    write_new(&files.cert, cert.pem().as_bytes(), 0o644)
}

// KeyUsage bit numbers (RFC 5280 section 4.2.1.3).
/// `digitalSignature`: signing TLS handshakes.
const KEY_USAGE_DIGITAL_SIGNATURE: u8 = 0;
/// `keyCertSign`: signing certificates (the CA).
const KEY_USAGE_KEY_CERT_SIGN: u8 = 5;
/// `cRLSign`: signing revocation lists (the CA).
const KEY_USAGE_CRL_SIGN: u8 = 6;

/// basicConstraints of an end entity: critical, and an empty SEQUENCE, since `cA` is
/// `DEFAULT FALSE` and DER forbids encoding a default (what `openssl` writes for
/// `CA:FALSE`).
fn end_entity_constraints() -> CustomExtension {
    let mut ext = CustomExtension::from_oid_content(&[2, 5, 29, 19], vec![0x30, 0x00]);
    ext.set_criticality(true);
    ext
}

/// A critical KeyUsage with the given bits, as the minimal DER BIT STRING: a named bit
/// list drops its trailing zero bits (X.690 11.2.2).
fn key_usage(bits: &[u8]) -> CustomExtension {
    let highest = bits.iter().copied().max().unwrap_or(0);
    let mut octets = vec![0u8; usize::from(highest / 8) + 1];
    for &bit in bits {
        octets[usize::from(bit / 8)] |= 0x80 >> (bit % 8);
    }
    let unused = 7 - highest % 8;
    let mut content = vec![0x03, octets.len() as u8 + 1, unused];
    content.extend_from_slice(&octets);
    let mut ext = CustomExtension::from_oid_content(&[2, 5, 29, 15], content);
    ext.set_criticality(true);
    ext
}

/// subjectKeyIdentifier from the leftmost 160 bits of the SHA-256 of the public key
/// (RFC 7093 method 1); rcgen writes it only for CAs and for the `cA FALSE` form.
fn subject_key_id(key: &KeyPair) -> CustomExtension {
    let digest = ring::digest::digest(&ring::digest::SHA256, key.public_key_raw());
    let mut content = vec![0x04, 20];
    content.extend_from_slice(&digest.as_ref()[..20]);
    CustomExtension::from_oid_content(&[2, 5, 29, 14], content)
}

/// Loads `dir/ca.pem` and `dir/ca.key` and re-creates the CA's signing parameters.
fn load_ca(dir: &Path) -> Result<LoadedCa, PkiError> {
    let files = TlsFiles::in_dir(dir, "ca");
    let der = read_certs(&files.ca)?.swap_remove(0);
    let pem = read(&files.key)?;
    let pem = String::from_utf8(pem).map_err(|e| PkiError::BadKey {
        path: files.key.clone(),
        source: rcgen::Error::PemError(e.to_string()),
    })?;
    let key =
        KeyPair::from_pem(&pem).map_err(|source| PkiError::BadKey { path: files.key.clone(), source })?;

    let parsed = der::Certificate::from_der(&der).map_err(PkiError::Parse)?;
    if parsed.public_key_info != key.public_key_der().as_slice() {
        return Err(PkiError::KeyMismatch { cert: files.ca, key: files.key });
    }
    let not_ours = || PkiError::NotOurCa { path: files.ca.clone() };
    let common_name = single(parsed.subject_values(der::oid::COMMON_NAME), "CN").map_err(|_| not_ours())?;
    let key_id = parsed.subject_key_id().map(<[u8]>::to_vec);
    let cert = ca_params(&common_name, key_id).self_signed(&key).map_err(PkiError::Generate)?;
    // Issued certificates name their issuer by these exact bytes; verify the rebuilt
    // subject matches the one on disk.
    let rebuilt = der::Certificate::from_der(cert.der()).map_err(PkiError::Parse)?;
    if rebuilt.subject_raw != parsed.subject_raw || parsed.is_ca() != Ok(true) {
        return Err(not_ours());
    }
    Ok(LoadedCa { cert, key })
}

/// The one value of a Subject attribute, as a string.
fn single<'a>(
    mut values: impl Iterator<Item = &'a der::Attribute<'a>>,
    field: &'static str,
) -> Result<String, PkiError> {
    let value = values.next().ok_or(PkiError::MissingField { field })?;
    if values.next().is_some() {
        return Err(PkiError::MissingField { field });
    }
    value.as_str().map(str::to_string).ok_or(PkiError::MissingField { field })
}

/// Every certificate in a PEM file; at least one.
fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| PkiError::BadPem { path: path.to_path_buf(), source })?;
    if certs.is_empty() {
        return Err(PkiError::NoCertificate { path: path.to_path_buf() });
    }
    Ok(certs)
}

fn read(path: &Path) -> Result<Vec<u8>, PkiError> {
    fs::read(path).map_err(|source| PkiError::Read { path: path.to_path_buf(), source })
}

fn refuse_existing(path: &Path) -> Result<(), PkiError> {
    if path.exists() { Err(PkiError::FileExists { path: path.to_path_buf() }) } else { Ok(()) }
}

/// Creates `path` with `mode` (Unix) and writes `contents`; never replaces a file.
fn write_new(path: &Path, contents: &[u8], mode: u32) -> Result<(), PkiError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(|source| match source.kind() {
        io::ErrorKind::AlreadyExists => PkiError::FileExists { path: path.to_path_buf() },
        _ => PkiError::Write { path: path.to_path_buf(), source },
    })?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(|source| PkiError::Write { path: path.to_path_buf(), source })
}

/// Valid from yesterday (tolerating clock skew between nodes) to [`VALIDITY_YEARS`] later.
fn set_validity(params: &mut CertificateParams) {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0) - 1;
    let (year, month, day) = civil_from_days(days);
    // Clamp 29 February so the expiry date exists.
    let end_day = if month == 2 && day == 29 { 28 } else { day };
    params.not_before = rcgen::date_time_ymd(year, month, day);
    params.not_after = rcgen::date_time_ymd(year + VALIDITY_YEARS, month, end_day);
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

#[cfg(test)]
#[path = "pki_tests.rs"]
mod tests;
