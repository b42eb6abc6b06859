//! The protocol version read from the front of a payload before the rest is decoded.
//! postcard is not self-describing, so a message from a peer of another version need not
//! decode at all; reading its version first lets the master tell that peer to use a
//! matching build instead of calling its frame malformed.

/// The version a [`ClientRequest`](super::ClientRequest)'s payload announces (its first
/// field), if the payload starts with one.
pub fn client_request_version(payload: &[u8]) -> Option<u32> {
    postcard::take_from_bytes::<u32>(payload).ok().map(|(version, _)| version)
}

/// The version an agent's [`Register`](super::Register) announces, if the payload is an
/// [`AgentToMaster::Register`](super::AgentToMaster::Register): the enum's first variant,
/// whose first field is the version.
pub fn register_version(payload: &[u8]) -> Option<u32> {
    const REGISTER_VARIANT: u32 = 0;
    match postcard::take_from_bytes::<(u32, u32)>(payload) {
        Ok(((REGISTER_VARIANT, version), _)) => Some(version),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AgentToMaster, ClientRequest, DataMode, PROTOCOL_VERSION, Register, Request};

    fn register(version: u32) -> AgentToMaster {
        AgentToMaster::Register(Register {
            version,
            node: "n1".into(),
            map_slots: 4,
            reduce_slots: 2,
            live_containers: vec![],
            data_dir_id: "id".into(),
            data_dir: "/data".into(),
            data_mode: DataMode::Shared,
        })
    }

    #[test]
    fn the_version_is_read_from_a_message_of_this_build() {
        let request = postcard::to_allocvec(&ClientRequest::new(Request::Nodes)).unwrap();
        assert_eq!(client_request_version(&request), Some(PROTOCOL_VERSION));
        let hello = postcard::to_allocvec(&register(PROTOCOL_VERSION)).unwrap();
        assert_eq!(register_version(&hello), Some(PROTOCOL_VERSION));
        let heartbeat = postcard::to_allocvec(&AgentToMaster::Heartbeat).unwrap();
        assert_eq!(register_version(&heartbeat), None, "not a Register");
    }

    #[test]
    fn the_version_is_read_even_when_the_rest_does_not_decode() {
        // Version 2 followed by a body no build of this one can read.
        let mut request = postcard::to_allocvec(&2u32).unwrap();
        request.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert_eq!(client_request_version(&request), Some(2));
        assert!(postcard::from_bytes::<ClientRequest>(&request).is_err());
        let mut hello = postcard::to_allocvec(&register(7)).unwrap();
        hello.truncate(3);
        assert_eq!(register_version(&hello), Some(7));
        assert_eq!(client_request_version(&[0xff, 0xff]), None, "an unfinished varint");
    }
}
