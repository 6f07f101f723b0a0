//! SMB2: NetBIOS session framing, the 64-byte header, the commands sqos needs (CREATE, CLOSE,
//! IOCTL, READ, WRITE), compound chains, and request/response matching.
//!
//! Parsers (`header`, `body`, `netbios`) are pure functions over bytes; `framer` turns a byte
//! stream into messages without copying bulk data; `matcher` and `opens` keep the bounded state
//! that links requests, responses and file names.

pub mod body;
pub mod compress;
pub mod crypto;
pub mod error;
pub mod file_id;
pub mod framer;
pub mod header;
pub mod matcher;
pub mod names;
pub mod netbios;
pub mod opens;
pub mod transform;

pub use body::{parse_body, Body};
pub use error::Smb2Error;
pub use file_id::FileId;
pub use framer::{Framer, FramerConfig, FramerEvent, FramerOut, Part, Smb2Message};
pub use header::{parse_header, Header, HeaderFlags, HeaderForm, ProtocolId, HEADER_LEN};
pub use matcher::{Evicted, PendingTable};
pub use names::{Command, NtStatus};
pub use opens::OpenTable;
