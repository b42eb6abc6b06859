//! A small strict DER reader for the X.509 certificates `pki` issues and the peers present:
//! the Subject's attributes and raw bytes, the SubjectPublicKeyInfo, and the extensions.
//!
//! It replaces `x509-parser`, whose `asn1-rs` brought its own derive crates, a second `syn`
//! and a second `thiserror` into every release build, for the four things Slotmarket reads
//! out of a certificate. It checks structure only: signatures, validity and usages are the
//! TLS verifier's job (rustls-webpki), which has already accepted a peer's certificate
//! before its identity is read here.

use thiserror::Error;

/// Why bytes are not a DER certificate of the shape RFC 5280 gives.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum DerError {
    /// The input ended inside a value's header or content.
    #[error("truncated DER value")]
    Truncated,
    /// A length is indefinite, not minimally encoded, or does not fit in memory.
    #[error("length not in DER form")]
    BadLength,
    /// A tag uses the high-tag-number form, which no certificate field needs.
    #[error("unsupported high tag number form")]
    HighTag,
    /// A field had another tag than the certificate's structure puts there.
    #[error("expected tag {expected:#04x}, found {found:#04x}")]
    UnexpectedTag {
        /// The tag RFC 5280 puts there.
        expected: u8,
        /// The tag found.
        found: u8,
    },
    /// Bytes follow the end of a value that must be the last one.
    #[error("trailing bytes after a DER value")]
    Trailing,
    /// A BOOLEAN is not one octet of 0x00 or 0xFF.
    #[error("BOOLEAN not in DER form")]
    BadBoolean,
}

/// DER tags of the universal types a certificate uses.
mod tag {
    pub(super) const BOOLEAN: u8 = 0x01;
    pub(super) const INTEGER: u8 = 0x02;
    pub(super) const OCTET_STRING: u8 = 0x04;
    pub(super) const OID: u8 = 0x06;
    pub(super) const UTF8_STRING: u8 = 0x0c;
    pub(super) const NUMERIC_STRING: u8 = 0x12;
    pub(super) const PRINTABLE_STRING: u8 = 0x13;
    pub(super) const IA5_STRING: u8 = 0x16;
    pub(super) const VISIBLE_STRING: u8 = 0x1a;
    pub(super) const SEQUENCE: u8 = 0x30;
    pub(super) const SET: u8 = 0x31;
    /// `[0] EXPLICIT`: the TBSCertificate's version.
    pub(super) const VERSION: u8 = 0xa0;
    /// `[1] IMPLICIT`: issuerUniqueID.
    pub(super) const ISSUER_UID: u8 = 0x81;
    /// `[2] IMPLICIT`: subjectUniqueID.
    pub(super) const SUBJECT_UID: u8 = 0x82;
    /// `[3] EXPLICIT`: the TBSCertificate's extensions.
    pub(super) const EXTENSIONS: u8 = 0xa3;
}

/// Content octets of the OIDs read here (X.690 encoding without tag and length).
pub mod oid {
    /// `id-at-commonName` (2.5.4.3).
    pub const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    /// `id-at-organizationName` (2.5.4.10).
    pub const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];
    /// `id-at-organizationalUnitName` (2.5.4.11).
    pub const ORGANIZATIONAL_UNIT: &[u8] = &[0x55, 0x04, 0x0b];
    /// `id-ce-subjectKeyIdentifier` (2.5.29.14).
    pub const SUBJECT_KEY_IDENTIFIER: &[u8] = &[0x55, 0x1d, 0x0e];
    /// `id-ce-basicConstraints` (2.5.29.19).
    pub const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
}

/// One DER value: its tag, its content octets and the whole encoding (header included).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Tlv<'a> {
    /// The identifier octet.
    pub tag: u8,
    /// The content octets.
    pub content: &'a [u8],
    /// Header and content, as they appear in the input.
    pub raw: &'a [u8],
}

/// Reads one value off the front of `input`; returns it and what follows.
pub fn read_tlv(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), DerError> {
    let (&tag, rest) = input.split_first().ok_or(DerError::Truncated)?;
    if tag & 0x1f == 0x1f {
        return Err(DerError::HighTag);
    }
    let (&first, rest) = rest.split_first().ok_or(DerError::Truncated)?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        // Long form: 1 to 8 length octets, no leading zero, and only for lengths of 128 or
        // more; 0x80 alone is BER's indefinite length.
        let count = usize::from(first & 0x7f);
        if count == 0 || count > size_of::<usize>() {
            return Err(DerError::BadLength);
        }
        let octets = rest.get(..count).ok_or(DerError::Truncated)?;
        if octets[0] == 0 {
            return Err(DerError::BadLength);
        }
        let len = octets.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        if len < 0x80 {
            return Err(DerError::BadLength);
        }
        (len, &rest[count..])
    };
    let content = rest.get(..len).ok_or(DerError::Truncated)?;
    let header = input.len() - rest.len();
    let value = Tlv { tag, content, raw: &input[..header + len] };
    Ok((value, &rest[len..]))
}

/// Reads the values inside a constructed value's content, in order.
#[derive(Clone, Debug)]
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(content: &'a [u8]) -> Reader<'a> {
        Reader { rest: content }
    }

    /// The next value, whatever its tag.
    fn any(&mut self) -> Result<Tlv<'a>, DerError> {
        let (value, rest) = read_tlv(self.rest)?;
        self.rest = rest;
        Ok(value)
    }

    /// The next value, which must have tag `expected`.
    fn expect(&mut self, expected: u8) -> Result<Tlv<'a>, DerError> {
        let value = self.any()?;
        if value.tag != expected {
            return Err(DerError::UnexpectedTag { expected, found: value.tag });
        }
        Ok(value)
    }

    /// The next value if it has tag `wanted` (an OPTIONAL or DEFAULT field).
    fn optional(&mut self, wanted: u8) -> Result<Option<Tlv<'a>>, DerError> {
        match self.rest.first() {
            Some(&found) if found == wanted => self.any().map(Some),
            _ => Ok(None),
        }
    }

    /// Fails unless every value has been read.
    fn finish(&self) -> Result<(), DerError> {
        if self.rest.is_empty() { Ok(()) } else { Err(DerError::Trailing) }
    }
}

/// One attribute of a Name: its type's OID and its value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Attribute<'a> {
    /// The attribute type (OID content octets).
    pub oid: &'a [u8],
    /// The value, a string type in every certificate Slotmarket makes.
    pub value: Tlv<'a>,
}

impl Attribute<'_> {
    /// The value as text, if it is a UTF8String or one of the ASCII string types.
    pub fn as_str(&self) -> Option<&str> {
        let text = std::str::from_utf8(self.value.content).ok()?;
        match self.value.tag {
            tag::UTF8_STRING => Some(text),
            tag::PRINTABLE_STRING | tag::IA5_STRING | tag::VISIBLE_STRING | tag::NUMERIC_STRING => {
                text.is_ascii().then_some(text)
            }
            _ => None,
        }
    }
}

/// One certificate extension.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Extension<'a> {
    /// The extension's OID (content octets).
    pub oid: &'a [u8],
    /// Whether it is marked critical.
    pub critical: bool,
    /// The extnValue's content: the DER of the extension's own structure.
    pub value: &'a [u8],
}

/// The parts of a certificate Slotmarket reads, borrowed from its DER.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Certificate<'a> {
    /// The Subject Name, header included (what an issued certificate's Issuer repeats).
    pub subject_raw: &'a [u8],
    /// The Subject's attributes in order of appearance.
    pub subject: Vec<Attribute<'a>>,
    /// The SubjectPublicKeyInfo, header included.
    pub public_key_info: &'a [u8],
    /// The extensions in order of appearance (empty for a v1 certificate).
    pub extensions: Vec<Extension<'a>>,
}

impl<'a> Certificate<'a> {
    /// Parses a whole certificate; bytes after it are an error.
    pub fn from_der(der: &'a [u8]) -> Result<Certificate<'a>, DerError> {
        let (cert, rest) = read_tlv(der)?;
        if !rest.is_empty() {
            return Err(DerError::Trailing);
        }
        let mut cert = reader_of(cert, tag::SEQUENCE)?;
        let tbs = cert.expect(tag::SEQUENCE)?;
        cert.expect(tag::SEQUENCE)?; // signatureAlgorithm
        cert.any()?; // signatureValue, a BIT STRING
        cert.finish()?;

        let mut tbs = Reader::new(tbs.content);
        tbs.optional(tag::VERSION)?;
        tbs.expect(tag::INTEGER)?; // serialNumber
        tbs.expect(tag::SEQUENCE)?; // signature
        tbs.expect(tag::SEQUENCE)?; // issuer
        tbs.expect(tag::SEQUENCE)?; // validity
        let subject = tbs.expect(tag::SEQUENCE)?;
        let public_key_info = tbs.expect(tag::SEQUENCE)?;
        tbs.optional(tag::ISSUER_UID)?;
        tbs.optional(tag::SUBJECT_UID)?;
        let extensions = match tbs.optional(tag::EXTENSIONS)? {
            Some(explicit) => extensions(explicit)?,
            None => Vec::new(),
        };
        tbs.finish()?;
        Ok(Certificate {
            subject_raw: subject.raw,
            subject: name_attributes(subject)?,
            public_key_info: public_key_info.raw,
            extensions,
        })
    }

    /// Every Subject value of attribute type `oid`, in order.
    pub fn subject_values(&self, oid: &'a [u8]) -> impl Iterator<Item = &Attribute<'a>> {
        self.subject.iter().filter(move |attr| attr.oid == oid)
    }

    /// The extension with OID `oid`, if present.
    pub fn extension(&self, oid: &[u8]) -> Option<&Extension<'a>> {
        self.extensions.iter().find(|ext| ext.oid == oid)
    }

    /// The subjectKeyIdentifier's key id, if the extension is present and well formed.
    pub fn subject_key_id(&self) -> Option<&'a [u8]> {
        let ext = self.extension(oid::SUBJECT_KEY_IDENTIFIER)?;
        let (id, rest) = read_tlv(ext.value).ok()?;
        (id.tag == tag::OCTET_STRING && rest.is_empty()).then_some(id.content)
    }

    /// Whether basicConstraints is present and says `cA TRUE`.
    pub fn is_ca(&self) -> Result<bool, DerError> {
        let Some(ext) = self.extension(oid::BASIC_CONSTRAINTS) else { return Ok(false) };
        let (constraints, rest) = read_tlv(ext.value)?;
        if !rest.is_empty() {
            return Err(DerError::Trailing);
        }
        let mut fields = reader_of(constraints, tag::SEQUENCE)?;
        match fields.optional(tag::BOOLEAN)? {
            Some(flag) => boolean(flag),
            None => Ok(false),
        }
    }
}

/// A reader over `value`'s content, which must have tag `expected`.
fn reader_of(value: Tlv<'_>, expected: u8) -> Result<Reader<'_>, DerError> {
    if value.tag != expected {
        return Err(DerError::UnexpectedTag { expected, found: value.tag });
    }
    Ok(Reader::new(value.content))
}

/// A DER BOOLEAN's value.
fn boolean(value: Tlv<'_>) -> Result<bool, DerError> {
    match value.content {
        [0xff] => Ok(true),
        [0x00] => Ok(false),
        _ => Err(DerError::BadBoolean),
    }
}

/// The attributes of a Name: a SEQUENCE of SETs of (type, value) SEQUENCEs.
fn name_attributes(name: Tlv<'_>) -> Result<Vec<Attribute<'_>>, DerError> {
    let mut rdns = Reader::new(name.content);
    let mut attributes = Vec::new();
    while !rdns.rest.is_empty() {
        let mut rdn = Reader::new(rdns.expect(tag::SET)?.content);
        while !rdn.rest.is_empty() {
            let mut pair = Reader::new(rdn.expect(tag::SEQUENCE)?.content);
            let oid = pair.expect(tag::OID)?.content;
            let value = pair.any()?;
            pair.finish()?;
            attributes.push(Attribute { oid, value });
        }
    }
    Ok(attributes)
}

/// The extensions inside the TBSCertificate's `[3] EXPLICIT` wrapper.
fn extensions(explicit: Tlv<'_>) -> Result<Vec<Extension<'_>>, DerError> {
    let mut wrapper = Reader::new(explicit.content);
    let list = wrapper.expect(tag::SEQUENCE)?;
    wrapper.finish()?;
    let mut list = Reader::new(list.content);
    let mut found = Vec::new();
    while !list.rest.is_empty() {
        let mut ext = Reader::new(list.expect(tag::SEQUENCE)?.content);
        let oid = ext.expect(tag::OID)?.content;
        let critical = match ext.optional(tag::BOOLEAN)? {
            Some(flag) => boolean(flag)?,
            None => false,
        };
        let value = ext.expect(tag::OCTET_STRING)?.content;
        ext.finish()?;
        found.push(Extension { oid, critical, value });
    }
    Ok(found)
}

#[cfg(test)]
#[path = "der_tests.rs"]
mod tests;
