//! Streaming pcap / pcapng reader. STUB: owned by the capture/net work.

use std::io::Read;
use std::path::Path;

use thiserror::Error;

use super::Frame;

#[derive(Debug, Error)]
pub enum CaptureError {
    #[error("{path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("not a pcap or pcapng capture (offset {offset})")]
    NotACapture { offset: u64 },
    #[error("read error at offset {offset}: {source}")]
    Io { offset: u64, source: std::io::Error },
    #[error("capture cut off in frame {frame} at offset {offset}")]
    Truncated { frame: u64, offset: u64 },
    #[error("corrupt capture at frame {frame}, offset {offset}: {reason}")]
    Corrupt {
        frame: u64,
        offset: u64,
        reason: String,
    },
}

/// Reads frames one at a time from a pcap or pcapng stream, never loading the whole input.
pub struct CaptureReader {
    _inner: Box<dyn Read + Send>,
}

impl CaptureReader {
    /// Open a file (`-` is stdin); gzip-compressed input is detected by its magic bytes.
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        let f = std::fs::File::open(path).map_err(|source| CaptureError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_reader(Box::new(f))
    }
    pub fn from_reader(inner: Box<dyn Read + Send>) -> Result<Self, CaptureError> {
        Ok(CaptureReader { _inner: inner })
    }
    /// The next frame, `Ok(None)` at the clean end of the capture.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        Ok(None)
    }
    /// Bytes of the (decompressed) input consumed so far, for progress display.
    pub fn bytes_read(&self) -> u64 {
        0
    }
    /// Number of frames returned so far.
    pub fn frames_read(&self) -> u64 {
        0
    }
}
