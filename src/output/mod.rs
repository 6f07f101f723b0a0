//! The faces that print: tshark-like text, JSON / JSONL, statistics.

pub mod annotate;
pub mod csv;
pub mod escape;
pub mod flows;
pub mod frames;
pub mod json;
pub mod plot;
pub mod png;
pub mod stats;
pub mod text;
pub mod time;
