//! Tests of the DER reader: it reads what x509-parser (an independent parser, a
//! dev-dependency) reads from every certificate `pki` issues, and refuses what is not DER.

use super::*;
use crate::identity::Role;
use crate::pki::{self, TlsFiles};
use rustls_pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The CA, master, admin, a user and an agent certificate of a fresh cluster CA.
fn issued_certificates() -> Vec<(String, CertificateDer<'static>)> {
    let dir = tempfile::tempdir().unwrap();
    pki::init(dir.path(), &["master.example".to_string()]).unwrap();
    pki::issue(dir.path(), Role::User, "alice").unwrap();
    pki::issue(dir.path(), Role::Agent, "node-1").unwrap();
    ["ca", "master", "admin", "alice", "node-1"]
        .into_iter()
        .map(|name| {
            let mut chain = TlsFiles::in_dir(dir.path(), name).load().unwrap().chain;
            (name.to_string(), chain.swap_remove(0))
        })
        .collect()
}

#[test]
fn reads_what_x509_parser_reads_from_every_issued_certificate() {
    for (name, der) in issued_certificates() {
        let ours = Certificate::from_der(&der).unwrap();
        let (_, theirs) = X509Certificate::from_der(&der).unwrap();
        assert_eq!(ours.subject_raw, theirs.subject().as_raw(), "{name}: subject");
        assert_eq!(ours.public_key_info, theirs.public_key().raw, "{name}: public key");
        let attrs: Vec<(&[u8], &str)> = ours.subject.iter().map(|a| (a.oid, a.as_str().unwrap())).collect();
        let expected: Vec<(&[u8], &str)> = theirs
            .subject()
            .iter_attributes()
            .map(|a| (a.attr_type().as_bytes(), a.as_str().unwrap()))
            .collect();
        assert_eq!(attrs, expected, "{name}: subject attributes");
        let cn = ours.subject_values(oid::COMMON_NAME).next().unwrap().as_str().unwrap();
        assert_eq!(Some(cn), theirs.subject().iter_common_name().next().and_then(|a| a.as_str().ok()));
        let extensions: Vec<(&[u8], bool, &[u8])> =
            ours.extensions.iter().map(|e| (e.oid, e.critical, e.value)).collect();
        let expected: Vec<(&[u8], bool, &[u8])> =
            theirs.extensions().iter().map(|e| (e.oid.as_bytes(), e.critical, e.value)).collect();
        assert_eq!(extensions, expected, "{name}: extensions");
        // The CA: basicConstraints, keyUsage, its key id; leaves add usages, names, issuer id.
        assert!(extensions.len() >= 3, "{name}: {} extensions", extensions.len());
        assert_eq!(ours.is_ca(), Ok(theirs.is_ca()), "{name}: cA");
        assert_eq!(ours.is_ca(), Ok(name == "ca"), "{name}: cA");
        let key_id = theirs.extensions().iter().find_map(|e| match e.parsed_extension() {
            x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0),
            _ => None,
        });
        assert!(key_id.is_some(), "{name}: no key id");
        assert_eq!(ours.subject_key_id(), key_id, "{name}: key id");
    }
}

#[test]
fn every_truncation_and_any_trailing_byte_is_refused() {
    let (_, der) = issued_certificates().swap_remove(3);
    for len in 0..der.len() {
        assert!(Certificate::from_der(&der[..len]).is_err(), "prefix of {len} bytes accepted");
    }
    let mut longer = der.to_vec();
    longer.push(0);
    assert_eq!(Certificate::from_der(&longer), Err(DerError::Trailing));
    // `n` `o`: a value of 111 bytes that is not there.
    assert_eq!(Certificate::from_der(b"not a certificate"), Err(DerError::Truncated));
    let not_a_sequence = [0x04, 0x01, 0x00];
    assert_eq!(
        Certificate::from_der(&not_a_sequence),
        Err(DerError::UnexpectedTag { expected: 0x30, found: 0x04 })
    );
}

#[test]
fn lengths_and_tags_must_be_der() {
    let value = read_tlv(&[0x04, 0x02, 0xaa, 0xbb, 0x05]).unwrap();
    assert_eq!(
        value,
        (Tlv { tag: 0x04, content: &[0xaa, 0xbb], raw: &[0x04, 0x02, 0xaa, 0xbb] }, &[0x05][..])
    );
    let mut long = vec![0x04, 0x81, 0x80];
    long.extend([7; 0x80]);
    let (value, rest) = read_tlv(&long).unwrap();
    assert_eq!((value.content.len(), value.raw.len(), rest.len()), (0x80, 0x83, 0));
    // Indefinite, long form for a short length, a leading zero octet, too many octets.
    assert_eq!(read_tlv(&[0x30, 0x80, 0x00, 0x00]), Err(DerError::BadLength));
    assert_eq!(read_tlv(&[0x04, 0x81, 0x01, 0x00]), Err(DerError::BadLength));
    assert_eq!(read_tlv(&[0x04, 0x82, 0x00, 0x80]), Err(DerError::BadLength));
    assert_eq!(read_tlv(&[0x04, 0x89, 1, 1, 1, 1, 1, 1, 1, 1, 1]), Err(DerError::BadLength));
    assert_eq!(read_tlv(&[0x04, 0x83, 0x01, 0x00]), Err(DerError::Truncated));
    assert_eq!(read_tlv(&[0x04, 0x03, 0x01]), Err(DerError::Truncated));
    assert_eq!(read_tlv(&[0x1f, 0x01, 0x00]), Err(DerError::HighTag));
    assert_eq!(read_tlv(&[]), Err(DerError::Truncated));
}

#[test]
fn only_text_string_types_read_as_text() {
    let attr = |tag, content: &'static [u8]| Attribute {
        oid: oid::COMMON_NAME,
        value: Tlv { tag, content, raw: &[] },
    };
    assert_eq!(attr(0x0c, "née".as_bytes()).as_str(), Some("née"));
    assert_eq!(attr(0x13, b"alice").as_str(), Some("alice"));
    assert_eq!(attr(0x16, b"a.b").as_str(), Some("a.b"));
    assert_eq!(attr(0x13, "née".as_bytes()).as_str(), None, "non-ASCII PrintableString");
    assert_eq!(attr(0x1e, &[0, b'a']).as_str(), None, "BMPString");
    assert_eq!(attr(0x0c, &[0xff]).as_str(), None, "invalid UTF-8");
}

#[test]
fn basic_constraints_flag_and_a_bad_boolean() {
    let cert = |value: &'static [u8]| Certificate {
        subject_raw: &[],
        subject: Vec::new(),
        public_key_info: &[],
        extensions: vec![Extension { oid: oid::BASIC_CONSTRAINTS, critical: true, value }],
    };
    assert_eq!(cert(&[0x30, 0x03, 0x01, 0x01, 0xff]).is_ca(), Ok(true));
    assert_eq!(cert(&[0x30, 0x06, 0x01, 0x01, 0xff, 0x02, 0x01, 0x00]).is_ca(), Ok(true));
    assert_eq!(cert(&[0x30, 0x00]).is_ca(), Ok(false));
    assert_eq!(cert(&[0x30, 0x03, 0x01, 0x01, 0x01]).is_ca(), Err(DerError::BadBoolean));
    assert_eq!(cert(&[0x30, 0x00, 0x00]).is_ca(), Err(DerError::Trailing));
    let none = Certificate { extensions: Vec::new(), ..cert(&[]) };
    assert_eq!(none.is_ca(), Ok(false));
}
