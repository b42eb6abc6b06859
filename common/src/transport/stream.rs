//! One frame at a time on quinn streams: write a message, read a message with the size
//! limit checked before any payload is buffered, and abort a stream that sent a bad frame.

use quinn::{RecvStream, SendStream, VarInt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::protocol::frame::{FrameError, LENGTH_PREFIX, decode_payload, encode_frame, payload_len};

/// Application error code used to reset or stop a stream whose peer sent a bad frame.
pub const FRAME_ERROR_CODE: VarInt = VarInt::from_u32(1);

/// Largest piece of a payload read (and allocated) at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Why a frame could not be sent or received.
#[derive(Debug, Error)]
pub enum StreamError {
    /// The frame itself is bad: oversized, truncated or malformed. The connection is fine.
    #[error("bad frame: {0}")]
    Frame(#[from] FrameError),
    /// Reading failed: the connection was lost or the peer reset the stream.
    #[error("stream read failed: {0}")]
    Read(#[from] quinn::ReadError),
    /// Writing failed: the connection was lost or the peer stopped the stream.
    #[error("stream write failed: {0}")]
    Write(#[from] quinn::WriteError),
    /// The stream had already been finished or reset locally.
    #[error("stream already closed: {0}")]
    Closed(#[from] quinn::ClosedStream),
}

impl StreamError {
    /// The frame error, if the peer's data was at fault rather than the connection.
    pub fn frame(&self) -> Option<&FrameError> {
        match self {
            StreamError::Frame(err) => Some(err),
            _ => None,
        }
    }
}

/// Encodes `msg` (refusing payloads over `limit`) and writes the whole frame.
pub async fn write_frame<T: Serialize>(
    send: &mut SendStream,
    msg: &T,
    limit: usize,
) -> Result<(), StreamError> {
    let bytes = encode_frame(msg, limit)?;
    send.write_all(&bytes).await?;
    Ok(())
}

/// Reads one frame. `Ok(None)` if the peer finished the stream cleanly before the first
/// byte of a frame; a stream ending inside a frame is [`FrameError::Truncated`]. The
/// announced length is checked against `limit` before the payload is read or allocated.
pub async fn read_frame<T: DeserializeOwned>(
    recv: &mut RecvStream,
    limit: usize,
) -> Result<Option<T>, StreamError> {
    match read_payload(recv, limit).await? {
        Some(payload) => Ok(Some(decode_payload(&payload)?)),
        None => Ok(None),
    }
}

/// Reads one frame's payload without decoding it, as [`read_frame`] does: for a reader
/// that looks at its first fields (the protocol version) before decoding the rest.
pub async fn read_payload(recv: &mut RecvStream, limit: usize) -> Result<Option<Vec<u8>>, StreamError> {
    let mut prefix = [0u8; LENGTH_PREFIX];
    let mut filled = 0;
    while filled < LENGTH_PREFIX {
        match recv.read(&mut prefix[filled..]).await? {
            Some(n) => filled += n,
            None if filled == 0 => return Ok(None),
            None => return Err(FrameError::Truncated { expected: LENGTH_PREFIX, got: filled }.into()),
        }
    }
    let len = payload_len(prefix, limit)?;
    // Grow with what actually arrives: a peer that announces a large frame and sends
    // nothing must not make us hold the whole announced size.
    let mut payload = Vec::with_capacity(len.min(READ_CHUNK));
    while payload.len() < len {
        match recv.read_chunk((len - payload.len()).min(READ_CHUNK), true).await? {
            Some(chunk) => payload.extend_from_slice(&chunk.bytes),
            None => {
                let (expected, got) = (LENGTH_PREFIX + len, LENGTH_PREFIX + payload.len());
                return Err(FrameError::Truncated { expected, got }.into());
            }
        }
    }
    Ok(Some(payload))
}

/// Abandons both halves of a stream with `code` (usually [`FRAME_ERROR_CODE`]): the peer's
/// writes and reads fail with that code. Halves already closed are left alone.
pub fn abort_stream(send: &mut SendStream, recv: &mut RecvStream, code: VarInt) {
    // Either half may already be finished; that is not an error worth reporting.
    let _ = send.reset(code);
    let _ = recv.stop(code);
}
