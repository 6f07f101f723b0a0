//! `sqos dissect -w OUT`: the frames that carry the shown messages, written as a capture with
//! their original bytes, lengths and timestamps (through the crate's one pcap writer,
//! [`crate::capture::writer`]).
//!
//! A classic pcap holds one link type; pcapng (an OUT named `*.pcapng`) one interface per
//! interface and link type of the input. Each frame is written once, however many messages it
//! completes. A message that began in an earlier frame (it spans several TCP segments) has only
//! its last frame written, and the report says how many did.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

use crate::capture::link::linktype;
use crate::capture::writer::DEFAULT_SNAPLEN;
use crate::capture::{
    CaptureFormat, FrameCopy, PcapOptions, PcapWriter, PcapngWriter, TsPrecision,
};
use crate::pipeline::SqosRecord;

enum Out {
    /// The file, until the first frame says which link type the pcap header names.
    Pending(BufWriter<File>),
    Pcap {
        w: PcapWriter<BufWriter<File>>,
        link_type: u32,
    },
    Pcapng {
        w: PcapngWriter<BufWriter<File>>,
        /// (input interface, link type) → output interface.
        interfaces: HashMap<(u32, u32), u32>,
    },
    /// Only while switching states.
    Gone,
}

pub struct FramesOut {
    out: Out,
    pcapng: bool,
    input: Option<CaptureFormat>,
    last_frame: Option<u64>,
    pub frames: u64,
    pub messages: u64,
    /// Messages whose first frame came before the one written.
    pub began_earlier: u64,
    first_began_earlier: Option<u64>,
    /// Frames not written: a link type other than the pcap's.
    pub other_link: u64,
}

fn link_name(t: u32) -> &'static str {
    match t {
        linktype::ETHERNET => "Ethernet",
        linktype::LINUX_SLL => "Linux cooked",
        linktype::LINUX_SLL2 => "Linux cooked v2",
        linktype::RAW | linktype::RAW_BSD12 | linktype::RAW_BSD14 => "raw IP",
        linktype::IPV4 => "raw IPv4",
        linktype::IPV6 => "raw IPv6",
        linktype::NULL | linktype::LOOP => "BSD loopback",
        _ => "link type",
    }
}

impl FramesOut {
    /// Creates `path` now, so a bad path fails before the capture is read.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = BufWriter::new(File::create(path)?);
        let pcapng = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("pcapng"));
        let out = if pcapng {
            Out::Pcapng {
                w: PcapngWriter::new(file)?,
                interfaces: HashMap::new(),
            }
        } else {
            Out::Pending(file)
        };
        Ok(FramesOut {
            out,
            pcapng,
            input: None,
            last_frame: None,
            frames: 0,
            messages: 0,
            began_earlier: 0,
            first_began_earlier: None,
            other_link: 0,
        })
    }

    /// The input's format (for the report).
    pub fn input_format(&mut self, f: CaptureFormat) {
        self.input = Some(f);
    }

    /// Write the frame that completed `rec` (once per frame). Errors stick and are reported by
    /// [`FramesOut::finish`].
    pub fn write(&mut self, rec: &SqosRecord) {
        self.messages += 1;
        if rec.first_frame.is_some_and(|f| f < rec.frame) {
            self.began_earlier += 1;
            self.first_began_earlier.get_or_insert(rec.frame);
        }
        let Some(f) = rec.frame_copy.as_deref() else {
            return;
        };
        if self.last_frame.is_some_and(|l| l >= f.number) {
            return;
        }
        self.last_frame = Some(f.number);
        if self.frame(f).is_err() {
            // Reported at the end: the writer keeps failing the same way.
            self.out = Out::Gone;
        }
    }

    fn frame(&mut self, f: &FrameCopy) -> io::Result<()> {
        if let Out::Pending(_) = self.out {
            let Out::Pending(file) = std::mem::replace(&mut self.out, Out::Gone) else {
                return Ok(());
            };
            self.out = Out::Pcap {
                w: pcap_writer(file, f.link_type)?,
                link_type: f.link_type,
            };
        }
        match &mut self.out {
            Out::Pcap { w, link_type } => {
                if *link_type != f.link_type {
                    self.other_link += 1;
                    return Ok(());
                }
                w.write_captured(f.ts, &f.data, f.orig_len)?;
            }
            Out::Pcapng { w, interfaces } => {
                let key = (f.interface, f.link_type);
                let idx = match interfaces.get(&key) {
                    Some(i) => *i,
                    None => {
                        let link = u16::try_from(f.link_type).map_err(|_| {
                            io::Error::new(io::ErrorKind::InvalidInput, "link type above 65535")
                        })?;
                        let i = w.add_interface(link, DEFAULT_SNAPLEN, 9)?;
                        interfaces.insert(key, i);
                        i
                    }
                };
                w.write_epb(idx, f.ts, &f.data, f.orig_len)?;
            }
            Out::Pending(_) | Out::Gone => {
                return Err(io::Error::other("the output failed earlier"))
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// Flush, and say what was written.
    pub fn finish(self) -> io::Result<String> {
        let (format, link) = match self.out {
            Out::Pending(file) => {
                // Nothing matched: still a valid (empty) capture.
                let w = pcap_writer(file, linktype::ETHERNET)?;
                w.into_inner().into_inner().map_err(|e| e.into_error())?;
                ("pcap".to_string(), None)
            }
            Out::Pcap { w, link_type } => {
                w.into_inner().into_inner().map_err(|e| e.into_error())?;
                ("pcap".to_string(), Some(link_type))
            }
            Out::Pcapng { w, .. } => {
                w.into_inner().into_inner().map_err(|e| e.into_error())?;
                ("pcapng".to_string(), None)
            }
            Out::Gone => return Err(io::Error::other("writing the frames failed")),
        };
        let mut s = format!(
            "{} frame{} carrying {} SQOS message{}, as {format}",
            self.frames,
            if self.frames == 1 { "" } else { "s" },
            self.messages,
            if self.messages == 1 { "" } else { "s" },
        );
        if let Some(t) = link {
            s.push_str(&format!(
                " (link type {t}, {}; nanosecond timestamps)",
                link_name(t)
            ));
        }
        if self.input == Some(CaptureFormat::PcapNg) && !self.pcapng {
            s.push_str(
                "; the input was pcapng: its comments and interface details are not kept \
                 (name the output .pcapng to keep one interface per input interface)",
            );
        }
        if self.other_link > 0 {
            s.push_str(&format!(
                "; {} frames of another link type left out (a pcap holds one; name the output .pcapng)",
                self.other_link
            ));
        }
        if self.began_earlier > 0 {
            s.push_str(&format!(
                "; {} messages began in an earlier frame (first: the one completed in frame {}): only their last frame is written",
                self.began_earlier,
                self.first_began_earlier.unwrap_or_default()
            ));
        }
        Ok(s)
    }
}

fn pcap_writer(file: BufWriter<File>, link_type: u32) -> io::Result<PcapWriter<BufWriter<File>>> {
    PcapWriter::with_options(
        file,
        PcapOptions {
            link_type,
            // Nanoseconds keep every input's timestamps exactly (pcapng may be finer than µs).
            precision: TsPrecision::Nano,
            big_endian: false,
            snaplen: DEFAULT_SNAPLEN,
        },
    )
}
