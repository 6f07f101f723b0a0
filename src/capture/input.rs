//! The byte source under the capture reader: file or stdin, gunzipped when it starts with the
//! gzip magic, with a byte counter for progress and the last I/O error kept for the report
//! (pcap-parser reduces read errors to a bare `ReadError`).

use std::io::{self, Cursor, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use flate2::read::MultiGzDecoder;

pub(crate) const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// State shared between the tap (owned by pcap-parser's reader) and the capture reader.
#[derive(Debug, Default)]
pub(crate) struct TapState {
    raw_bytes: AtomicU64,
    error: Mutex<Option<io::Error>>,
}

impl TapState {
    pub(crate) fn raw_bytes(&self) -> u64 {
        self.raw_bytes.load(Ordering::Relaxed)
    }
    /// Keeps `e` as the error that ended reading.
    pub(crate) fn keep_error(&self, e: io::Error) {
        if let Ok(mut slot) = self.error.lock() {
            *slot = Some(e);
        }
    }
    /// The I/O error behind the last failed read, if any.
    pub(crate) fn take_error(&self) -> Option<io::Error> {
        self.error.lock().ok().and_then(|mut e| e.take())
    }
}

/// Counts the raw (possibly compressed) bytes read, and retries reads interrupted by signals
/// so that they are not mistaken for failures.
pub(crate) struct Tap {
    inner: Box<dyn Read + Send>,
    state: Arc<TapState>,
}

impl Tap {
    pub(crate) fn new(inner: Box<dyn Read + Send>) -> (Self, Arc<TapState>) {
        let state = Arc::new(TapState::default());
        (
            Tap {
                inner,
                state: Arc::clone(&state),
            },
            state,
        )
    }
}

impl Read for Tap {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Ok(n) => {
                    self.state.raw_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The top of the stack (above any decompressor): keeps the error that ended reading, which
/// pcap-parser would otherwise reduce to a bare `ReadError`.
pub(crate) struct KeepError {
    inner: Box<dyn Read + Send>,
    state: Arc<TapState>,
}

impl KeepError {
    pub(crate) fn new(inner: Box<dyn Read + Send>, state: Arc<TapState>) -> Self {
        KeepError { inner, state }
    }
}

impl Read for KeepError {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            if let Ok(mut slot) = self.state.error.lock() {
                *slot = Some(io::Error::new(e.kind(), e.to_string()));
            }
        })
    }
}

/// Reads until `buf` is full or the input ends; a short read from a pipe is not the end.
pub(crate) fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = buf.get_mut(filled..).unwrap_or_default();
        match r.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A stream that has already had its first bytes read (for probing) and gives them back first.
pub(crate) type Rewound = io::Chain<Cursor<Vec<u8>>, Box<dyn Read + Send>>;

pub(crate) fn rewind(prefix: Vec<u8>, rest: Box<dyn Read + Send>) -> Rewound {
    Cursor::new(prefix).chain(rest)
}

/// Wraps `tap` in a gzip decoder when its first bytes are the gzip magic. Returns the stream to
/// parse and whether it was compressed.
pub(crate) fn maybe_gunzip(
    mut tap: Box<dyn Read + Send>,
) -> io::Result<(Box<dyn Read + Send>, bool)> {
    let mut magic = [0u8; 2];
    let n = read_full(&mut tap, &mut magic)?;
    let prefix = magic.get(..n).unwrap_or_default().to_vec();
    let gzip = prefix == GZIP_MAGIC;
    let stream: Box<dyn Read + Send> = Box::new(rewind(prefix, tap));
    if gzip {
        // Multi-member: `cat a.gz b.gz` and pigz/bgzip outputs are several gzip members.
        Ok((Box::new(MultiGzDecoder::new(stream)), true))
    } else {
        Ok((stream, false))
    }
}
