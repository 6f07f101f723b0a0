//! The faces that print: tshark-like text, JSON / JSONL, CSV, Arrow / Parquet, statistics, plots.

pub mod annotate;
#[cfg(feature = "arrow")]
pub mod arrow;
pub mod columns;
pub mod csv;
pub mod escape;
pub mod flows;
pub mod frames;
pub mod json;
#[cfg(feature = "arrow")]
pub mod parquet;
pub mod plot;
#[cfg(feature = "png")]
pub mod png;
pub mod stats;
pub mod text;
pub mod time;
