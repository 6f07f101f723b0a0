//! The faces that print: tshark-like text, JSON / JSONL, statistics.

pub mod json;
pub mod names;
pub mod stats;
pub mod text;
