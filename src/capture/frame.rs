/// Capture timestamp in nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn from_secs_nanos(secs: i64, nanos: u32) -> Self {
        Timestamp(
            secs.saturating_mul(1_000_000_000)
                .saturating_add(i64::from(nanos)),
        )
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Seconds from `earlier` to `self` (negative if `earlier` is later).
    pub fn secs_since(self, earlier: Timestamp) -> f64 {
        (self.0 - earlier.0) as f64 / 1e9
    }
    /// Nanoseconds from `earlier` to `self` (negative if `earlier` is later).
    pub fn nanos_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// Frames in a row that a reader handed over as one run (their bytes looked at in place and
/// nothing more wanted of them): how many, the last one and its time, the latest time among
/// them (captures are not always in time order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRun {
    pub frames: u64,
    pub last: (u64, Timestamp),
    pub latest: Timestamp,
}

impl FrameRun {
    /// A run of no frames yet, for frames to [`join`](FrameRun::join) (see [`FrameRun::taken`]).
    pub const EMPTY: FrameRun = FrameRun {
        frames: 0,
        last: (0, Timestamp(i64::MIN)),
        latest: Timestamp(i64::MIN),
    };

    /// The run of frame `number` at `ts` alone.
    #[inline]
    pub fn one(number: u64, ts: Timestamp) -> FrameRun {
        FrameRun {
            frames: 1,
            last: (number, ts),
            latest: ts,
        }
    }

    /// The frames of `next`, which follow, join the run.
    #[inline]
    pub fn join(&mut self, next: FrameRun) {
        self.frames += next.frames;
        self.last = next.last;
        self.latest = self.latest.max(next.latest);
    }

    /// The run, if a frame joined it.
    #[inline]
    pub fn taken(self) -> Option<FrameRun> {
        (self.frames > 0).then_some(self)
    }

    /// Frame `number` at `ts` joins the run (or begins one).
    #[inline]
    pub fn add(run: &mut Option<FrameRun>, number: u64, ts: Timestamp) {
        FrameRun::append(run, FrameRun::one(number, ts));
    }

    /// The frames of `next`, which follow, join the run (or begin it).
    #[inline]
    pub fn append(run: &mut Option<FrameRun>, next: FrameRun) {
        match run {
            Some(r) => r.join(next),
            None => *run = Some(next),
        }
    }
}

/// One captured frame, borrowed from the reader's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// 1-based frame number, counted across all sections and interfaces like Wireshark does.
    pub number: u64,
    pub ts: Timestamp,
    /// pcapng interface index (0 for classic pcap).
    pub interface: u32,
    /// pcap LINKTYPE_* value of the interface this frame came from.
    pub link_type: u32,
    /// The captured bytes (possibly cut by snaplen).
    pub data: &'a [u8],
    /// The length of the frame on the wire.
    pub orig_len: u32,
}

impl<'a> Frame<'a> {
    /// Frame `number`, seen at `ts` on a capture's first interface: `data`, a whole Ethernet
    /// frame. How a tool or a test that makes its own frames hands one to the pipeline.
    pub fn ethernet(number: u64, ts: Timestamp, data: &'a [u8]) -> Frame<'a> {
        Frame {
            number,
            ts,
            interface: 0,
            link_type: super::link::linktype::ETHERNET,
            data,
            orig_len: data.len() as u32,
        }
    }
}

impl Frame<'_> {
    /// True when the capture kept fewer bytes than were on the wire (snaplen).
    pub fn is_truncated(&self) -> bool {
        is_cut(self.data.len(), self.orig_len)
    }
}

/// True when a frame of which `captured` bytes were kept was `orig_len` on the wire: cut by
/// the snaplen. For frames known by their bytes and length only (a worker's batch, the lane).
#[inline]
pub fn is_cut(captured: usize, orig_len: u32) -> bool {
    (captured as u64) < u64::from(orig_len)
}

/// A frame copied out of the reader's buffer, kept beside a record that needs its bytes
/// (`sqos dissect -x`, `-w`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameCopy {
    pub number: u64,
    pub ts: Timestamp,
    pub interface: u32,
    pub link_type: u32,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

impl Frame<'_> {
    pub fn to_copy(&self) -> FrameCopy {
        FrameCopy {
            number: self.number,
            ts: self.ts,
            interface: self.interface,
            link_type: self.link_type,
            orig_len: self.orig_len,
            data: self.data.to_vec(),
        }
    }
}
