//! Frames: a 4-byte big-endian payload length, then a postcard payload. The length is
//! checked against a hard limit before anything is buffered, so a peer cannot make us
//! allocate more than the limit.

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

/// Largest payload accepted unless configured otherwise: 1 MiB.
pub const DEFAULT_MAX_FRAME: usize = 1 << 20;

/// Bytes of the length prefix.
pub const LENGTH_PREFIX: usize = 4;

/// Why a frame could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum FrameError {
    /// The announced or encoded payload is over the limit.
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The payload length.
        len: usize,
        /// The limit in force.
        limit: usize,
    },
    /// The buffer ends before the frame does.
    #[error("truncated frame: expected {expected} bytes, got {got}")]
    Truncated {
        /// Bytes the frame needs.
        expected: usize,
        /// Bytes available.
        got: usize,
    },
    /// The payload is not a valid message.
    #[error("malformed frame: {0}")]
    Malformed(#[from] postcard::Error),
}

/// Encodes `msg` as one frame, refusing payloads over `limit`.
pub fn encode_frame<T: Serialize>(msg: &T, limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut buf = vec![0u8; LENGTH_PREFIX];
    let mut buf = postcard::to_extend(msg, std::mem::take(&mut buf))?;
    let len = buf.len() - LENGTH_PREFIX;
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    let prefix = u32::try_from(len).map_err(|_| FrameError::TooLarge { len, limit })?;
    buf[..LENGTH_PREFIX].copy_from_slice(&prefix.to_be_bytes());
    Ok(buf)
}

/// Reads the payload length from a 4-byte prefix and checks it against `limit`.
pub fn payload_len(prefix: [u8; LENGTH_PREFIX], limit: usize) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    Ok(len)
}

/// Decodes one whole frame from the front of `buf`; returns the message and the bytes
/// used. A payload must be consumed exactly: trailing bytes inside a frame are malformed.
pub fn decode_frame<T: DeserializeOwned>(buf: &[u8], limit: usize) -> Result<(T, usize), FrameError> {
    let prefix: [u8; LENGTH_PREFIX] = buf
        .get(..LENGTH_PREFIX)
        .and_then(|p| p.try_into().ok())
        .ok_or(FrameError::Truncated { expected: LENGTH_PREFIX, got: buf.len() })?;
    let len = payload_len(prefix, limit)?;
    let end = LENGTH_PREFIX + len;
    let payload =
        buf.get(LENGTH_PREFIX..end).ok_or(FrameError::Truncated { expected: end, got: buf.len() })?;
    Ok((decode_payload(payload)?, end))
}

/// Decodes a payload that must hold exactly one message.
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    let (msg, rest) = postcard::take_from_bytes(payload)?;
    if !rest.is_empty() {
        return Err(FrameError::Malformed(postcard::Error::DeserializeBadEncoding));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AgentToMaster, ClientRequest, Request};

    #[test]
    fn a_frame_round_trips() {
        let msg = ClientRequest::new(Request::Nodes);
        let bytes = encode_frame(&msg, DEFAULT_MAX_FRAME).unwrap();
        let (back, used): (ClientRequest, usize) = decode_frame(&bytes, DEFAULT_MAX_FRAME).unwrap();
        assert_eq!((back, used), (msg, bytes.len()));
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading_the_payload() {
        let bytes = (u32::MAX).to_be_bytes();
        let err = decode_frame::<AgentToMaster>(&bytes, DEFAULT_MAX_FRAME).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { len, .. } if len == u32::MAX as usize));
    }

    #[test]
    fn encoding_refuses_payloads_over_the_limit() {
        let big = AgentToMaster::Register(crate::protocol::Register {
            version: 1,
            node: "x".repeat(100),
            map_slots: 1,
            reduce_slots: 1,
            live_containers: vec![],
            data_dir_id: String::new(),
            data_dir: String::new(),
            data_mode: crate::protocol::DataMode::Shared,
        });
        assert!(matches!(encode_frame(&big, 16), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn truncated_and_garbage_frames_are_errors_not_panics() {
        let msg = encode_frame(&ClientRequest::new(Request::Nodes), DEFAULT_MAX_FRAME).unwrap();
        for cut in 0..msg.len() {
            assert!(matches!(
                decode_frame::<ClientRequest>(&msg[..cut], DEFAULT_MAX_FRAME),
                Err(FrameError::Truncated { .. })
            ));
        }
        let garbage = [0, 0, 0, 3, 0xff, 0xff, 0xff];
        assert!(matches!(
            decode_frame::<ClientRequest>(&garbage, DEFAULT_MAX_FRAME),
            Err(FrameError::Malformed(_))
        ));
        let mut trailing = msg.clone();
        trailing[3] += 1;
        trailing.push(0);
        assert!(matches!(
            decode_frame::<ClientRequest>(&trailing, DEFAULT_MAX_FRAME),
            Err(FrameError::Malformed(_))
        ));
    }
}
