//! What reassembly counted over a capture: kept apart from the connection table and the
//! per-direction streams, which both count into it.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    pub connections: u64,
    /// Segments on a tracked port.
    pub segments: u64,
    /// Of those, taken by the bulk path ([`crate::net::Reassembler::push_packet`]): counted off
    /// unseen, or handed over without the full decode.
    pub bulk_segments: u64,
    /// Of those, taken in runs by the bulk lane (`Reassembler::bulk_lane`).
    pub lane_segments: u64,
    /// Segments whose data had all been delivered already.
    pub retransmissions: u64,
    /// Segments buffered because bytes before them were missing.
    pub out_of_order: u64,
    /// Segments partly covering bytes delivered or buffered already (the first copy wins).
    pub overlaps: u64,
    pub gaps: u64,
    pub gap_bytes: u64,
    /// Bytes discarded: segments far outside the stream's window, data after a FIN or on a
    /// closed connection.
    pub dropped_bytes: u64,
}
