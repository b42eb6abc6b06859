//! Tests of the certificate authority: identities, file safety, host names, and that every
//! certificate issued is strict DER that non-Rust TLS stacks accept.

use super::*;
// x509-parser is a dev-dependency only: an independent parser to check what `pki` writes
// and what `der` reads (the release build no longer carries it).
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

fn leaf_der(path: &Path) -> CertificateDer<'static> {
    read_certs(path).unwrap().swap_remove(0)
}

#[test]
fn issued_certificates_carry_role_and_principal() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path(), &[]).unwrap();
    let alice = issue(dir.path(), Role::User, "alice").unwrap();
    let node = issue(dir.path(), Role::Agent, "node-1.rack_2").unwrap();
    let expect = |files: &TlsFiles, role, principal: &str| {
        let id = identity_from_der(&leaf_der(&files.cert)).unwrap();
        assert_eq!(id, Identity { role, principal: principal.into() });
        assert_eq!(files.identity().unwrap(), id);
    };
    expect(&alice, Role::User, "alice");
    expect(&node, Role::Agent, "node-1.rack_2");
    expect(&TlsFiles::in_dir(dir.path(), "master"), Role::Master, "master");
    expect(&TlsFiles::in_dir(dir.path(), "admin"), Role::Admin, "admin");
    assert_eq!(alice, TlsFiles::in_dir(dir.path(), "alice"));
    assert!(alice.load().is_ok());
}

#[cfg(unix)]
#[test]
fn private_keys_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    init(dir.path(), &[]).unwrap();
    issue(dir.path(), Role::User, "alice").unwrap();
    for name in ["ca", "master", "admin", "alice"] {
        let mode = fs::metadata(dir.path().join(format!("{name}.key"))).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{name}.key");
    }
}

#[test]
fn init_never_replaces_a_ca_and_issue_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path(), &[]).unwrap();
    let before = fs::read(dir.path().join("ca.pem")).unwrap();
    assert!(matches!(init(dir.path(), &[]), Err(PkiError::CaExists { .. })));
    assert_eq!(fs::read(dir.path().join("ca.pem")).unwrap(), before);

    issue(dir.path(), Role::User, "alice").unwrap();
    let err = issue(dir.path(), Role::Admin, "alice").unwrap_err();
    assert!(matches!(err, PkiError::FileExists { ref path } if path.ends_with("alice.pem")), "{err}");
    assert!(matches!(issue(dir.path(), Role::User, "admin"), Err(PkiError::FileExists { .. })));
}

#[test]
fn bad_names_and_master_role_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path(), &[]).unwrap();
    for name in ["", "a/b", "../x", "al ice", "é", &"x".repeat(65)] {
        let err = issue(dir.path(), Role::User, name).unwrap_err();
        assert!(matches!(err, PkiError::BadName { .. }), "{name:?}: {err}");
    }
    assert!(issue(dir.path(), Role::User, &"x".repeat(64)).is_ok());
    assert!(matches!(issue(dir.path(), Role::User, "ca"), Err(PkiError::ReservedName)));
    assert!(matches!(issue(dir.path(), Role::Master, "m2"), Err(PkiError::MasterRole)));
    let fresh = tempfile::tempdir().unwrap();
    let err = issue(fresh.path(), Role::User, "alice").unwrap_err();
    assert!(matches!(err, PkiError::Read { ref path, .. } if path.ends_with("ca.pem")), "{err}");
}

#[test]
fn master_certificate_names_the_requested_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = vec!["10.0.0.5".to_string(), "master.example".to_string()];
    init(&dir.path().join("nested"), &hosts).unwrap();
    let der = leaf_der(&dir.path().join("nested/master.pem"));
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    let sans: Vec<String> = cert
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .map(|name| match name {
            GeneralName::DNSName(dns) => dns.to_string(),
            GeneralName::IPAddress(ip) => format!("{ip:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(sans.len(), 5, "{sans:?}");
    assert!(sans.contains(&"localhost".to_string()) && sans.contains(&"master.example".to_string()));
    assert!(sans.contains(&format!("{:?}", [10u8, 0, 0, 5].as_slice())), "{sans:?}");
    let bad = tempfile::tempdir().unwrap();
    let err = init(bad.path(), &["bad host é".to_string()]).unwrap_err();
    assert!(matches!(err, PkiError::BadHost { ref host, .. } if host == "bad host é"), "{err}");
}

#[test]
fn a_ca_key_from_another_ca_is_detected() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    init(one.path(), &[]).unwrap();
    init(two.path(), &[]).unwrap();
    fs::remove_file(one.path().join("ca.key")).unwrap();
    fs::copy(two.path().join("ca.key"), one.path().join("ca.key")).unwrap();
    assert!(matches!(issue(one.path(), Role::User, "alice"), Err(PkiError::KeyMismatch { .. })));
}

#[test]
fn foreign_certificates_name_no_identity() {
    assert!(matches!(identity_from_der(b"not a certificate"), Err(PkiError::Parse(_))));
    let dir = tempfile::tempdir().unwrap();
    init(dir.path(), &[]).unwrap();
    let ca = leaf_der(&dir.path().join("ca.pem"));
    assert!(matches!(identity_from_der(&ca), Err(PkiError::MissingField { field: "OU" })));
    let key = KeyPair::generate().unwrap();
    let other = CertificateParams::new(vec!["x".to_string()]).unwrap().self_signed(&key).unwrap();
    assert!(matches!(identity_from_der(other.der()), Err(PkiError::MissingField { field: "O" })));
}

#[test]
fn civil_dates_match_the_calendar() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    assert_eq!(civil_from_days(19_723), (2024, 1, 1));
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
}

/// Every certificate `init` and `issue` write: the CA, master, admin, a user and an agent.
fn every_issued_certificate(dir: &Path) -> Vec<(String, CertificateDer<'static>)> {
    init(dir, &["master.example".to_string()]).unwrap();
    issue(dir, Role::User, "alice").unwrap();
    issue(dir, Role::Agent, "node-1").unwrap();
    ["ca", "master", "admin", "alice", "node-1"]
        .into_iter()
        .map(|name| (name.to_string(), leaf_der(&dir.join(format!("{name}.pem")))))
        .collect()
}

/// One DER TLV: tag, header length, content.
fn tlv(bytes: &[u8]) -> Result<(u8, &[u8], usize), String> {
    let (&tag, rest) = bytes.split_first().ok_or("empty value")?;
    let (&first, rest) = rest.split_first().ok_or("no length")?;
    if tag & 0x1f == 0x1f {
        return Err(format!("high tag number form in tag {tag:#04x}"));
    }
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let count = usize::from(first & 0x7f);
        let octets = rest.get(..count).ok_or("truncated length")?;
        // DER: definite, long form only for lengths of 128 or more, no leading zero octet.
        if count == 0 || octets[0] == 0 {
            return Err(format!("non-minimal length in tag {tag:#04x}"));
        }
        let len = octets.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        if len < 0x80 {
            return Err(format!("long-form length {len} in tag {tag:#04x}"));
        }
        (len, 2 + count)
    };
    let content = bytes.get(header..header + len).ok_or("truncated content")?;
    Ok((tag, content, header + len))
}

/// Walks DER values and reports the first violation of the rules OpenSSL and Python's
/// `cryptography` enforce: minimal lengths, no BOOLEAN FALSE (every BOOLEAN in a
/// certificate is `DEFAULT FALSE`, so an encoded FALSE is an encoded default), BOOLEAN
/// TRUE as 0xFF, and no trailing zero bits in a BIT STRING with unused bits (named bit
/// lists such as KeyUsage). Descends into constructed values, not OCTET STRINGs.
fn der_violation(mut bytes: &[u8]) -> Result<(), String> {
    while !bytes.is_empty() {
        let (tag, content, used) = tlv(bytes)?;
        match tag {
            0x01 if content != [0xff] => {
                return Err(format!("BOOLEAN {content:02x?} (explicit default or not DER)"));
            }
            0x03 => {
                let (&unused, bits) = content.split_first().ok_or("empty BIT STRING")?;
                if unused > 0 {
                    let last = bits.last().ok_or("BIT STRING with unused bits but no octets")?;
                    if last & (1 << unused) == 0 || last & ((1 << unused) - 1) != 0 {
                        return Err(format!("BIT STRING {content:02x?} has trailing zero bits"));
                    }
                }
            }
            t if t & 0x20 != 0 => der_violation(content)?,
            _ => {}
        }
        bytes = &bytes[used..];
    }
    Ok(())
}

#[test]
fn der_checker_catches_explicit_defaults_and_padded_bit_strings() {
    // rcgen 0.13's `IsCa::ExplicitNoCa` and its 9-bit KeyUsage: what this module used to write.
    assert!(der_violation(&[0x30, 0x03, 0x01, 0x01, 0x00]).is_err());
    assert!(der_violation(&[0x30, 0x04, 0x03, 0x02, 0x07, 0x80]).is_ok());
    assert!(der_violation(&[0x03, 0x03, 0x07, 0x80, 0x00]).is_err());
    assert!(der_violation(&[0x04, 0x81, 0x01, 0x00]).is_err());
    assert!(der_violation(&[0x30, 0x00]).is_ok());
}

#[test]
fn issued_certificates_are_strict_der_without_explicit_defaults() {
    let dir = tempfile::tempdir().unwrap();
    for (name, der) in every_issued_certificate(dir.path()) {
        if let Err(violation) = der_violation(&der) {
            panic!("{name}.pem: {violation}");
        }
        let (rest, cert) = X509Certificate::from_der(&der).unwrap();
        assert!(rest.is_empty(), "{name}.pem: trailing bytes");
        for ext in cert.extensions() {
            if let Err(violation) = der_violation(ext.value) {
                panic!("{name}.pem extension {}: {violation}", ext.oid);
            }
            assert!(
                !matches!(ext.parsed_extension(), ParsedExtension::UnsupportedExtension { .. }),
                "{name}.pem: unexpected extension {}",
                ext.oid
            );
        }
    }
}

#[test]
fn certificates_carry_the_usages_tls_stacks_check() {
    let dir = tempfile::tempdir().unwrap();
    for (name, der) in every_issued_certificate(dir.path()) {
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let constraints = cert.basic_constraints().unwrap().map(|c| c.value.clone());
        let usage = cert.key_usage().unwrap().map(|u| u.value.flags).unwrap_or_default();
        let has = |wanted: fn(&ParsedExtension) -> bool| {
            cert.extensions().iter().any(|e| wanted(e.parsed_extension()))
        };
        assert!(
            has(|e| matches!(e, ParsedExtension::SubjectKeyIdentifier(_))),
            "{name}.pem: no key identifier"
        );
        let eku = cert.extended_key_usage().unwrap().map(|e| (e.value.server_auth, e.value.client_auth));
        if name == "ca" {
            assert!(constraints.is_some_and(|c| c.ca && c.path_len_constraint == Some(0)), "{name}");
            assert!(cert.key_usage().unwrap().is_some_and(|u| u.value.key_cert_sign() && u.value.crl_sign()));
            continue;
        }
        // An end-entity certificate says so (critical, cA absent) and signs handshakes only.
        let critical = cert.basic_constraints().unwrap().is_some_and(|c| c.critical);
        assert!(critical && constraints.is_some_and(|c| !c.ca && c.path_len_constraint.is_none()), "{name}");
        assert_eq!(usage, 1, "{name}.pem: key usage must be digitalSignature only");
        assert!(has(|e| matches!(e, ParsedExtension::AuthorityKeyIdentifier(_))), "{name}.pem: no issuer id");
        let role = identity_from_der(&der).unwrap().role;
        // Agents serve shuffle fetches, so they are TLS servers too.
        let expected = if matches!(role, Role::Master | Role::Agent) { (true, true) } else { (false, true) };
        assert_eq!(eku, Some(expected), "{name}.pem: extended key usage (serverAuth, clientAuth)");
        if name != "master" {
            let sans = cert.subject_alternative_name().unwrap().map(|s| s.value.general_names.clone());
            let uri = client_uri(role, &name);
            let mut wanted = vec![GeneralName::URI(&uri)];
            if role == Role::Agent {
                wanted.push(GeneralName::DNSName(&name));
            }
            assert_eq!(sans, Some(wanted), "{name}.pem: client certificates name a URI, agents their node");
        }
    }
}
