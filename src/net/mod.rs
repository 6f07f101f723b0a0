//! IP and TCP: segments out of L3 packets, and per-connection, per-direction stream reassembly.

mod conn;
pub mod reassembly;
pub mod segment;
mod stream;

pub use conn::{ConnId, ConnKey, Dir};
pub use reassembly::{
    CloseKind, NetNote, Reassembler, ReassemblyConfig, ReassemblyStats, StreamSink,
};
pub use segment::{decode_tcp, NetError, TcpFlags, TcpSegment};
