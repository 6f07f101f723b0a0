//! IP and TCP: segments out of L3 packets, and per-connection, per-direction stream reassembly.
//!
//! [`decode_tcp`] borrows the segment from the frame; [`Reassembler`] hands in-order bytes to a
//! [`StreamSink`] (straight from the frame when they arrive in order), reports bytes that will
//! never arrive as gaps, and bounds what it buffers.

mod conn;
mod conn_slots;
pub mod reassembly;
pub mod segment;
mod stats;
mod stream;

pub use conn::{ConnId, ConnKey, Dir};
pub use conn_slots::{ConnSlots, CONN_SLOTS};
pub use reassembly::{CloseKind, NetNote, Reassembler, ReassemblyConfig, StreamSink};
pub use segment::{decode_tcp, NetError, TcpFlags, TcpSegment};
pub use stats::ReassemblyStats;
