//! The network between the simulated hosts and the capture file: TCP connections (handshake,
//! MSS segmentation, sequence and acknowledgement numbers, delayed ACKs, loss with
//! retransmission, reordering, capture gaps) and the time-ordered writing of frames.
//!
//! The capture point is the client's NIC: client→server frames are stamped when sent,
//! server→client frames when they arrive. So the time between a request's last frame and its
//! response's last frame is exactly what the client measures.
//!
//! Data segments are scheduled when a message is sent (so the simulation knows at once when the
//! receiver will have it); ACK numbers and pure ACKs are decided when frames leave the time
//! ordered queue, from what each side has received by then.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::io::{self, Write};
use std::rc::Rc;

use crate::capture::writer::FileWriter;
use crate::capture::Timestamp;

use super::packet::{build_headers, Endpoint, TcpFields, TCP_ACK, TCP_PSH, TCP_RST, TCP_SYN};
use super::rng::Rng;

/// Microseconds since the Unix epoch.
pub type Time = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    fn idx(self) -> usize {
        self as usize
    }
    fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// A piece of an SMB2 message on the wire: its own bytes, or `len` bytes of the shared filler
/// (READ/WRITE data), which is never copied per message.
pub enum Part {
    Bytes(Vec<u8>),
    Fill(usize),
}

impl Part {
    fn len(&self) -> usize {
        match self {
            Part::Bytes(b) => b.len(),
            Part::Fill(n) => *n,
        }
    }
}

/// Largest filler part (the largest READ/WRITE).
pub const MAX_FILL: usize = 1 << 20;

/// Network behaviour knobs.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// TCP payload bytes per full segment.
    pub mss: usize,
    /// One-way delay between the capture point (client) and the server, µs.
    pub one_way_us: u64,
    /// Link speed in bytes per µs (1250 = 10 Gbit/s).
    pub bytes_per_us: u64,
    /// Probability that a data segment is lost (and retransmitted after `rto_us`).
    pub loss: f64,
    /// Probability that a data segment is missing from the capture only (the endpoints got it).
    pub gap: f64,
    /// 802.1Q tag on every frame.
    pub vlan: Option<u16>,
    /// Probability that a server→client data segment arrives after its successor.
    pub reorder: f64,
    /// Retransmission timeout, µs.
    pub rto_us: u64,
    /// Time a receiver waits before acknowledging an odd last segment, µs.
    pub delayed_ack_us: u64,
    /// Frames before this time are not written (a capture started mid-connection).
    pub capture_from: Option<Time>,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            mss: 1448,
            one_way_us: 60,
            bytes_per_us: 1250,
            loss: 0.0,
            gap: 0.0,
            vlan: None,
            reorder: 0.0,
            rto_us: 200_000,
            delayed_ack_us: 200,
            capture_from: None,
        }
    }
}

/// Where an SMB2 message ended up in the capture: the frame that completed it for its receiver.
#[derive(Clone, Copy, Debug, Default)]
pub struct Trace {
    pub frame: Option<u64>,
    pub ts: Time,
    /// Part of the message is missing from the capture.
    pub gap: bool,
}

/// What the simulation learns when it sends a message.
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    pub tag: u32,
    /// When the receiver has the whole message.
    pub at: Time,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Normal,
    /// Captured, lost after the capture point; a retransmission follows.
    LostSeen,
    /// Lost before the capture point; a retransmission follows.
    LostUnseen,
    /// Delivered but missing from the capture.
    Unseen,
}

struct Chunk {
    parts: Vec<Part>,
}

enum Kind {
    Syn,
    SynAck,
    HandshakeAck,
    PureAck,
    /// The connection is reset by this side.
    Rst,
    Data {
        chunk: Rc<Chunk>,
        off: usize,
        len: usize,
        stream_off: u64,
        fate: Fate,
        first_tag: u32,
        last_tag: u32,
        psh: bool,
    },
}

struct Pkt {
    ts: Time,
    order: u64,
    conn: u32,
    from: Side,
    kind: Kind,
}

impl PartialEq for Pkt {
    fn eq(&self, other: &Self) -> bool {
        self.ts == other.ts && self.order == other.order
    }
}
impl Eq for Pkt {}
impl PartialOrd for Pkt {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pkt {
    // Reversed: BinaryHeap is a max-heap and we want the earliest frame first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ts, other.order).cmp(&(self.ts, self.order))
    }
}

/// What one side has received: the in-order point plus out-of-order ranges.
#[derive(Default)]
struct Receiver {
    next: u64,
    ooo: BTreeMap<u64, u64>,
}

impl Receiver {
    fn insert(&mut self, start: u64, end: u64) {
        if end <= self.next {
            return;
        }
        if start > self.next {
            let e = self.ooo.entry(start).or_insert(end);
            *e = (*e).max(end);
            return;
        }
        self.next = end;
        while let Some((&s, &e)) = self.ooo.first_key_value() {
            if s > self.next {
                break;
            }
            self.ooo.remove(&s);
            self.next = self.next.max(e);
        }
    }
}

/// Per connection, per side state.
#[derive(Default)]
struct SideState {
    isn: u32,
    ip_id: u16,
    /// Stream bytes handed to TCP.
    next_off: u64,
    /// The sender's link is busy until then.
    busy_until: Time,
    /// The peer has every byte sent so far at this time (in-order delivery).
    delivered_until: Time,
    /// Bytes of this side's data that have left (for the sequence number of pure ACKs).
    sent_off: u64,
    /// What this side received, and when each step becomes visible in its ACKs.
    rx: Receiver,
    ack_hist: VecDeque<(Time, u64)>,
    ack_now: u64,
    last_ack_sent: Option<u64>,
    unacked_segs: u32,
}

/// The two ends of one TCP connection and where its frames go.
#[derive(Clone, Copy, Debug)]
pub struct ConnSpec {
    pub client: Endpoint,
    pub server: Endpoint,
    pub vlan: Option<u16>,
    pub interface: u32,
}

struct Conn {
    spec: ConnSpec,
    sides: [SideState; 2],
    /// The connection failed at this time ([`Wire::kill`]): nothing of it is sent or
    /// captured from then on (but its reset).
    dead_from: Option<Time>,
}

pub struct Wire<W: Write> {
    writer: FileWriter<W>,
    cfg: NetConfig,
    conns: Vec<Conn>,
    heap: BinaryHeap<Pkt>,
    order: u64,
    rng: Rng,
    fill: Vec<u8>,
    hdr: Vec<u8>,
    payload: Vec<u8>,
    traces: Vec<Trace>,
    /// Frames never written (lost before the capture point or cut by a capture gap).
    pub unseen_segments: u64,
    pub retransmissions: u64,
    pub reordered: u64,
}

impl<W: Write> Wire<W> {
    pub fn new(writer: FileWriter<W>, cfg: NetConfig, rng: Rng) -> Wire<W> {
        // Cheap, recognisable filler: a repeating printable pattern.
        let pattern = b"sqos-synth VHDX block data ";
        let fill = pattern
            .iter()
            .copied()
            .cycle()
            .take(MAX_FILL + 65536)
            .collect();
        Wire {
            writer,
            cfg,
            conns: Vec::new(),
            heap: BinaryHeap::new(),
            order: 0,
            rng,
            fill,
            hdr: Vec::with_capacity(128),
            payload: Vec::with_capacity(65536),
            traces: Vec::new(),
            unseen_segments: 0,
            retransmissions: 0,
            reordered: 0,
        }
    }

    pub fn config(&self) -> &NetConfig {
        &self.cfg
    }

    /// The shared filler that `Part::Fill` stands for.
    pub fn filler(&self) -> &[u8] {
        &self.fill
    }

    /// When `side` of `conn` can start sending something new.
    pub fn busy_until(&self, conn: u32, side: Side) -> Time {
        self.conns
            .get(conn as usize)
            .map_or(0, |c| c.sides[side.idx()].busy_until)
    }

    fn push(&mut self, ts: Time, conn: u32, from: Side, kind: Kind) {
        self.order += 1;
        self.heap.push(Pkt {
            ts,
            order: self.order,
            conn,
            from,
            kind,
        });
    }

    /// Opens a connection with a 3-way handshake starting at `t`. Returns its id and the time
    /// the client may send.
    pub fn connect(&mut self, mut spec: ConnSpec, t: Time) -> (u32, Time) {
        if spec.vlan.is_none() {
            spec.vlan = self.cfg.vlan;
        }
        let id = self.conns.len() as u32;
        let mut sides: [SideState; 2] = Default::default();
        for s in sides.iter_mut() {
            s.isn = self.rng.next_u64() as u32;
            s.ip_id = self.rng.next_u64() as u16;
        }
        self.conns.push(Conn {
            spec,
            sides,
            dead_from: None,
        });
        let owd = self.cfg.one_way_us;
        let synack = t + 2 * owd + 15;
        let ack = synack + 3;
        self.push(t, id, Side::Client, Kind::Syn);
        self.push(synack, id, Side::Server, Kind::SynAck);
        self.push(ack, id, Side::Client, Kind::HandshakeAck);
        for s in self.conns[id as usize].sides.iter_mut() {
            s.busy_until = ack + 1;
            s.delivered_until = ack + owd;
        }
        (id, ack + 1)
    }

    /// The connection fails at `t`: nothing more of it reaches the capture or the other side,
    /// not even what was sent before and is still on its way. `reset_by` sends a RST at `t`
    /// (else the connection just goes silent: a link or NIC that failed).
    pub fn kill(&mut self, conn: u32, t: Time, reset_by: Option<Side>) {
        let Some(c) = self.conns.get_mut(conn as usize) else {
            return;
        };
        if c.dead_from.is_some() {
            return;
        }
        c.dead_from = Some(t);
        if let Some(side) = reset_by {
            self.push(t, conn, side, Kind::Rst);
        }
    }

    /// Sends whole messages, back to back in one write (so small ones share segments), from
    /// `from` at `t` (for the server: the time it sends, the capture sees it `one_way_us` later).
    /// On a connection that failed, nothing is sent: the messages are never delivered.
    pub fn send(&mut self, conn: u32, from: Side, t: Time, msgs: Vec<Vec<Part>>) -> Vec<Delivery> {
        let owd = self.cfg.one_way_us;
        let mss = self.cfg.mss.max(1);
        let Some(c) = self.conns.get_mut(conn as usize) else {
            return Vec::new();
        };
        if c.dead_from.is_some_and(|d| t >= d) {
            return msgs
                .iter()
                .map(|_| {
                    self.traces.push(Trace::default());
                    Delivery {
                        tag: self.traces.len() as u32 - 1,
                        at: Time::MAX,
                    }
                })
                .collect();
        }
        let side = &mut c.sides[from.idx()];
        // Message boundaries inside the chunk, and their tags.
        let first_tag = self.traces.len() as u32;
        let mut ends = Vec::with_capacity(msgs.len());
        let mut parts = Vec::new();
        let mut total = 0usize;
        for m in msgs {
            for p in m {
                total += p.len();
                parts.push(p);
            }
            ends.push(total);
            self.traces.push(Trace::default());
        }
        let chunk = Rc::new(Chunk { parts });
        let start = t.max(side.busy_until);
        let base_off = side.next_off;
        side.next_off += total as u64;
        let per_us = self.cfg.bytes_per_us.max(1);
        side.busy_until = start + (total as u64).div_ceil(per_us).max(1);

        let mut msg_done: Vec<Time> = vec![0; ends.len()];
        let mut off = 0usize;
        let mut msg_idx = 0usize;
        let mut pending: Vec<(Time, Kind)> = Vec::new();
        while off < total {
            let len = mss.min(total - off);
            let send_t = start + (off as u64) / per_us;
            // Captured at: client side at send time, server side one way later.
            let cap_t = match from {
                Side::Client => send_t,
                Side::Server => send_t + owd,
            };
            let mut fate = Fate::Normal;
            if self.rng.chance(self.cfg.loss) {
                fate = if from == Side::Client {
                    Fate::LostSeen
                } else {
                    Fate::LostUnseen
                };
            } else if self.rng.chance(self.cfg.gap) {
                fate = Fate::Unseen;
            }
            let delivered = match (fate, from) {
                (Fate::Normal | Fate::Unseen, Side::Client) => cap_t + owd,
                (Fate::Normal | Fate::Unseen, Side::Server) => cap_t,
                (_, _) => cap_t + self.cfg.rto_us + owd,
            };
            let last_tag_idx = ends
                .iter()
                .position(|&e| e >= off + len)
                .unwrap_or(ends.len().saturating_sub(1));
            let first_tag_idx = msg_idx;
            for d in msg_done
                .iter_mut()
                .take(last_tag_idx + 1)
                .skip(first_tag_idx)
            {
                *d = (*d).max(delivered);
            }
            let kind = |fate| Kind::Data {
                chunk: Rc::clone(&chunk),
                off,
                len,
                stream_off: base_off + off as u64,
                fate,
                first_tag: first_tag + first_tag_idx as u32,
                last_tag: first_tag + last_tag_idx as u32,
                psh: off + len == total,
            };
            pending.push((cap_t, kind(fate)));
            if matches!(fate, Fate::LostSeen | Fate::LostUnseen) {
                let re_t = match from {
                    Side::Client => cap_t + self.cfg.rto_us,
                    Side::Server => cap_t + self.cfg.rto_us,
                };
                pending.push((re_t, kind(Fate::Normal)));
                self.retransmissions += 1;
            }
            off += len;
            while msg_idx < ends.len() && ends[msg_idx] <= off {
                msg_idx += 1;
            }
        }
        // Reordering (server→client only: the network sits between the server and the capture
        // point): a segment arrives right after its successor.
        if from == Side::Server && self.cfg.reorder > 0.0 {
            let mut i = 0;
            while i + 1 < pending.len() {
                if self.rng.chance(self.cfg.reorder) {
                    let later = pending[i + 1].0;
                    pending[i].0 = later;
                    pending.swap(i, i + 1);
                    self.reordered += 1;
                    // The late segment completes the messages it carries no earlier than now.
                    if let Kind::Data {
                        first_tag: ft,
                        last_tag: lt,
                        ..
                    } = &pending[i + 1].1
                    {
                        for tag in *ft..=*lt {
                            if let Some(d) = msg_done.get_mut((tag - first_tag) as usize) {
                                *d = (*d).max(later);
                            }
                        }
                    }
                    i += 2;
                } else {
                    i += 1;
                }
            }
        }
        for (ts, kind) in pending {
            self.push(ts, conn, from, kind);
        }
        // In-order delivery: nothing completes before what was sent earlier.
        let Some(c) = self.conns.get_mut(conn as usize) else {
            return Vec::new();
        };
        let side = &mut c.sides[from.idx()];
        let mut out = Vec::with_capacity(msg_done.len());
        for (i, d) in msg_done.into_iter().enumerate() {
            let at = d.max(side.delivered_until);
            side.delivered_until = at;
            out.push(Delivery {
                tag: first_tag + i as u32,
                at,
            });
        }
        out
    }

    /// Writes every frame stamped before `t` (no later call can schedule a frame before it).
    pub fn flush_before(&mut self, t: Time) -> io::Result<()> {
        while self.heap.peek().is_some_and(|p| p.ts < t) {
            if let Some(p) = self.heap.pop() {
                self.emit(p)?;
            }
        }
        Ok(())
    }

    /// Writes everything still queued; returns the traces of all messages (by tag).
    pub fn finish(mut self) -> io::Result<(W, Vec<Trace>, u64, u64)> {
        while let Some(p) = self.heap.pop() {
            self.emit(p)?;
        }
        let frames = self.writer.frames();
        let bytes = self.writer.bytes();
        let mut w = self.writer.into_inner();
        w.flush()?;
        Ok((w, self.traces, frames, bytes))
    }

    fn clock(side: Side, ts: Time) -> u32 {
        let base: u32 = match side {
            Side::Client => 0x0100_0000,
            Side::Server => 0x2000_0000,
        };
        base.wrapping_add((ts / 1000) as u32)
    }

    /// The in-order receive point of `side` as its frames stamped `ts` carry it.
    fn ack_point(s: &mut SideState, ts: Time) -> u64 {
        while let Some(&(at, v)) = s.ack_hist.front() {
            if at > ts {
                break;
            }
            s.ack_now = v;
            s.ack_hist.pop_front();
        }
        s.ack_now
    }

    fn emit(&mut self, p: Pkt) -> io::Result<()> {
        let owd = self.cfg.one_way_us;
        let delack = self.cfg.delayed_ack_us;
        let capture_from = self.cfg.capture_from.unwrap_or(0);
        let Some(conn) = self.conns.get_mut(p.conn as usize) else {
            return Ok(());
        };
        if conn.dead_from.is_some_and(|d| p.ts >= d) && !matches!(p.kind, Kind::Rst) {
            return Ok(());
        }
        let me = p.from.idx();
        let peer = p.from.peer().idx();
        let (src, dst) = match p.from {
            Side::Client => (conn.spec.client, conn.spec.server),
            Side::Server => (conn.spec.server, conn.spec.client),
        };
        let peer_isn = conn.sides[peer].isn;
        let my_isn = conn.sides[me].isn;
        let mut fields = TcpFields {
            seq: my_isn,
            ack: 0,
            flags: TCP_ACK,
            window: 0xffff,
            ts_val: Self::clock(p.from, p.ts),
            ts_ecr: Self::clock(p.from.peer(), p.ts.saturating_sub(owd)),
            syn_mss: None,
        };
        let mss = (self.cfg.mss + 12).min(usize::from(u16::MAX)) as u16;
        let mut write = p.ts >= capture_from;
        let mut data: Option<(Rc<Chunk>, usize, usize)> = None;
        let mut tags: Option<(u32, u32, bool)> = None;
        match p.kind {
            Kind::Syn => {
                fields.flags = TCP_SYN;
                fields.window = 64240;
                fields.ts_ecr = 0;
                fields.syn_mss = Some(mss);
            }
            Kind::SynAck => {
                fields.flags = TCP_SYN | TCP_ACK;
                fields.ack = peer_isn.wrapping_add(1);
                fields.window = 65535;
                fields.syn_mss = Some(mss);
            }
            Kind::HandshakeAck => {
                fields.seq = my_isn.wrapping_add(1);
                fields.ack = peer_isn.wrapping_add(1);
                conn.sides[me].last_ack_sent = Some(0);
            }
            Kind::Rst => {
                let s = &mut conn.sides[me];
                let point = Self::ack_point(s, p.ts);
                fields.flags = TCP_RST | TCP_ACK;
                fields.window = 0;
                fields.seq = my_isn.wrapping_add(1).wrapping_add(s.sent_off as u32);
                fields.ack = peer_isn.wrapping_add(1).wrapping_add(point as u32);
            }
            Kind::PureAck => {
                let s = &mut conn.sides[me];
                let point = Self::ack_point(s, p.ts);
                if s.last_ack_sent.is_some_and(|a| point <= a) {
                    return Ok(());
                }
                s.last_ack_sent = Some(point);
                s.unacked_segs = 0;
                fields.seq = my_isn.wrapping_add(1).wrapping_add(s.sent_off as u32);
                fields.ack = peer_isn.wrapping_add(1).wrapping_add(point as u32);
            }
            Kind::Data {
                chunk,
                off,
                len,
                stream_off,
                fate,
                first_tag,
                last_tag,
                psh,
            } => {
                let s = &mut conn.sides[me];
                let point = Self::ack_point(s, p.ts);
                s.last_ack_sent = Some(point.max(s.last_ack_sent.unwrap_or(0)));
                s.unacked_segs = 0;
                s.sent_off = s.sent_off.max(stream_off + len as u64);
                fields.seq = my_isn.wrapping_add(1).wrapping_add(stream_off as u32);
                fields.ack = peer_isn.wrapping_add(1).wrapping_add(point as u32);
                if psh {
                    fields.flags |= TCP_PSH;
                }
                let captured = matches!(fate, Fate::Normal | Fate::LostSeen);
                let delivered = matches!(fate, Fate::Normal | Fate::Unseen);
                if !captured {
                    write = false;
                    self.unseen_segments += u64::from(fate == Fate::Unseen);
                }
                if delivered {
                    let r = &mut conn.sides[peer];
                    r.rx.insert(stream_off, stream_off + len as u64);
                    // The client's ACKs carry it at once; the server's are seen a round trip later.
                    let visible = match p.from {
                        Side::Server => p.ts,
                        Side::Client => p.ts + 2 * owd,
                    };
                    r.ack_hist.push_back((visible, r.rx.next));
                    r.unacked_segs += 1;
                    let ack_at = if r.unacked_segs >= 2 {
                        r.unacked_segs = 0;
                        visible + 1
                    } else {
                        visible + delack
                    };
                    let peer_side = p.from.peer();
                    self.order += 1;
                    self.heap.push(Pkt {
                        ts: ack_at,
                        order: self.order,
                        conn: p.conn,
                        from: peer_side,
                        kind: Kind::PureAck,
                    });
                    tags = Some((first_tag, last_tag, write));
                } else if !write {
                    tags = None;
                }
                if fate == Fate::Unseen || (delivered && !write) {
                    for t in first_tag..=last_tag {
                        if let Some(tr) = self.traces.get_mut(t as usize) {
                            tr.gap = true;
                        }
                    }
                }
                data = Some((chunk, off, len));
            }
        }
        if !write {
            return Ok(());
        }
        let Some(conn) = self.conns.get_mut(p.conn as usize) else {
            return Ok(());
        };
        let ip_id = conn.sides[me].ip_id;
        conn.sides[me].ip_id = ip_id.wrapping_add(1);
        let vlan = conn.spec.vlan;
        let iface = conn.spec.interface;
        self.payload.clear();
        if let Some((chunk, off, len)) = &data {
            gather(&chunk.parts, *off, *len, &self.fill, &mut self.payload);
        }
        build_headers(
            &mut self.hdr,
            vlan,
            &src,
            &dst,
            ip_id,
            &fields,
            &self.payload,
        );
        let ts = Timestamp(i64::try_from(p.ts).map_or(i64::MAX, |us| us.saturating_mul(1000)));
        let frame = self
            .writer
            .write_frame(iface, ts, &[&self.hdr, &self.payload])?;
        if let Some((a, b, true)) = tags {
            for t in a..=b {
                if let Some(tr) = self.traces.get_mut(t as usize) {
                    if tr.frame.is_none_or(|f| f < frame) {
                        tr.frame = Some(frame);
                        tr.ts = p.ts;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Copies bytes `off..off+len` of the concatenated parts into `out`.
fn gather(parts: &[Part], off: usize, len: usize, fill: &[u8], out: &mut Vec<u8>) {
    let mut pos = 0usize;
    let end = off + len;
    for p in parts {
        let plen = p.len();
        let (ps, pe) = (pos, pos + plen);
        pos = pe;
        if pe <= off {
            continue;
        }
        if ps >= end {
            break;
        }
        let from = off.max(ps) - ps;
        let to = end.min(pe) - ps;
        match p {
            Part::Bytes(b) => out.extend_from_slice(b.get(from..to).unwrap_or(&[])),
            Part::Fill(_) => out.extend_from_slice(fill.get(from..to).unwrap_or(&[])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_joins_out_of_order_ranges() {
        let mut r = Receiver::default();
        r.insert(10, 20);
        assert_eq!(r.next, 0);
        r.insert(0, 10);
        assert_eq!(r.next, 20);
        r.insert(5, 15);
        assert_eq!(r.next, 20);
    }

    #[test]
    fn gather_spans_parts() {
        let parts = vec![
            Part::Bytes(vec![1, 2, 3]),
            Part::Fill(4),
            Part::Bytes(vec![9]),
        ];
        let mut out = Vec::new();
        gather(&parts, 2, 5, b"abcdef", &mut out);
        assert_eq!(out, vec![3, b'a', b'b', b'c', b'd']);
    }
}
