//! pcap-parser's reader interface over a memory-mapped file: records are parsed where they lie
//! in the map, with no copy into a buffer. The capture reader drives it exactly like
//! pcap-parser's own streaming readers (whose `next` it mirrors: the file header first for
//! legacy pcap, the byte order of each pcapng section).

use pcap_parser::nom::{self, Needed, Offset};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{
    parse_block_be, parse_block_le, parse_pcap_frame, parse_pcap_frame_be,
    parse_pcap_frame_modified, parse_pcap_header, Block, PcapBlockOwned, PcapError,
};

use super::mapped::SharedMap;

/// How the records of the file are parsed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Layout {
    Pcap { big_endian: bool, modified: bool },
    PcapNg { big_endian: bool },
}

pub(crate) struct MapReader {
    map: SharedMap,
    layout: Layout,
    /// Offset of the first byte not consumed.
    pos: usize,
}

impl MapReader {
    pub(crate) fn new(map: SharedMap, layout: Layout) -> Self {
        MapReader {
            map,
            layout,
            pos: 0,
        }
    }
}

impl PcapReaderIterator for MapReader {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        let data = self.map.bytes().get(self.pos..).unwrap_or_default();
        if data.is_empty() {
            return Err(PcapError::Eof);
        }
        let parsed = match &mut self.layout {
            Layout::Pcap { .. } if self.pos == 0 => {
                parse_pcap_header(data).map(|(rem, h)| (rem, PcapBlockOwned::from(h)))
            }
            Layout::Pcap { modified: true, .. } => {
                parse_pcap_frame_modified(data).map(|(rem, b)| (rem, PcapBlockOwned::from(b)))
            }
            Layout::Pcap {
                big_endian: true, ..
            } => parse_pcap_frame_be(data).map(|(rem, b)| (rem, PcapBlockOwned::from(b))),
            Layout::Pcap { .. } => {
                parse_pcap_frame(data).map(|(rem, b)| (rem, PcapBlockOwned::from(b)))
            }
            Layout::PcapNg { big_endian } => {
                let parse = if *big_endian {
                    parse_block_be
                } else {
                    parse_block_le
                };
                parse(data).map(|(rem, b)| {
                    if let Block::SectionHeader(shb) = &b {
                        *big_endian = shb.big_endian();
                    }
                    (rem, PcapBlockOwned::from(b))
                })
            }
        };
        match parsed {
            Ok((rem, block)) => Ok((data.offset(rem), block)),
            Err(nom::Err::Error(e)) | Err(nom::Err::Failure(e)) => Err(e),
            // The whole file is there: a record that needs more is cut off.
            Err(nom::Err::Incomplete(Needed::Size(_) | Needed::Unknown)) => {
                Err(PcapError::UnexpectedEof)
            }
        }
    }

    fn consume(&mut self, offset: usize) {
        self.consume_noshift(offset);
    }

    fn consume_noshift(&mut self, offset: usize) {
        self.pos = self.pos.saturating_add(offset).min(self.map.bytes().len());
        self.map.map().release_before(self.pos);
    }

    fn consumed(&self) -> usize {
        self.pos
    }

    /// Nothing to read: the whole file is in the map.
    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        Ok(())
    }

    fn position(&self) -> usize {
        self.pos
    }

    fn grow(&mut self, _new_size: usize) -> bool {
        false
    }

    fn data(&self) -> &[u8] {
        self.map.bytes().get(self.pos..).unwrap_or_default()
    }

    fn reader_exhausted(&self) -> bool {
        true
    }
}
