//! The wire protocol: message enums and the length-prefixed frame codec. Pure: no
//! sockets here (see `transport` for quinn streams).

pub mod accounts;
pub mod estimate_eval;
pub mod frame;
pub mod history;
pub mod messages;
pub mod outputs;
pub mod profile;
pub mod queue;
pub mod quote;
pub mod reservation;
pub mod shuffle;
pub mod tasks;
pub mod version;

pub use accounts::{
    AccountMarket, AccountSummary, EntryKind, LedgerEntry, LedgerPage, MAX_LEDGER_PAGE, MarketInfo,
};
pub use estimate_eval::{EstimateEvalQuery, EstimateEvalReport, EvalMethod, EvalRow};
pub use frame::{DEFAULT_MAX_FRAME, FrameError, decode_frame, encode_frame};
pub use history::{JobHistory, StageHistory};
pub use messages::*;
pub use outputs::{
    DEFAULT_OUTPUT_DIR, JobCleanup, MAX_OUTPUT_CHUNK, MAX_OUTPUT_FILES, OutputData, OutputFile, OutputOp,
    OutputQuery, OutputRead, OutputReadReply, RemoveJob, check_job_path,
};
pub use profile::{ProfileView, StageProfileView};
pub use queue::{QueueEntry, QueueView, WaitReason};
pub use quote::{ChoiceRefusal, DeadlineChoice, Purchase, QuoteInfo, QuotePoint, SLOT_MS_PER_CREDIT};
pub use reservation::{DemandClass, ReservationView, ReservedKind};
pub use shuffle::{
    DataMode, ENV_FETCH_SOCKET, ENV_FETCH_TOKEN, FetchPart, InputHolder, LocalFetch, LocalFetchReply, Locate,
    Located, SHUFFLE_ALPN, ShuffleReply, ShuffleRequest, StageOutputs,
};
pub use tasks::{LogChunk, LogQuery, LogRead, LogReadReply, MAX_LOG_CHUNK, TaskList, TaskRow};
