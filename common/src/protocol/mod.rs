//! The wire protocol: message enums and the length-prefixed frame codec. Pure: no
//! sockets here (see `transport` for quinn streams).

pub mod frame;
pub mod history;
pub mod messages;

pub use frame::{DEFAULT_MAX_FRAME, FrameError, decode_frame, encode_frame};
pub use history::{JobHistory, StageHistory};
pub use messages::*;
