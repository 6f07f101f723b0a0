//! sqos: a streaming dissector and analyzer for MS-SQOS (Storage Quality of Service) over SMB3.
//!
//! Data flows one way through the modules, and each module only uses the ones before it:
//! `capture` (files, link layers) → `net` (IP, TCP reassembly) → `smb2` (NetBIOS framing,
//! headers, commands, request/response matching) → `sqos` (codec and per-message findings) →
//! `pipeline` (glue producing SQOS records and statistics) → the faces (`output`, CLI).
//! `synth` generates captures; it uses `sqos` to encode messages and nothing downstream.

pub mod analysis;
pub mod budget;
pub mod capture;
pub mod check;
pub mod export;
pub mod feed;
pub mod filter;
pub mod net;
pub mod output;
pub mod pipeline;
pub mod run;
pub mod smb2;
pub mod sqos;
pub mod synth;
#[cfg(feature = "tui")]
pub mod tui;
