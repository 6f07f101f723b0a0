//! pcap-parser's reader interface over a memory-mapped file: records are parsed where they lie
//! in the map, with no copy into a buffer. The capture reader drives it exactly like
//! pcap-parser's own streaming readers (whose `next` it mirrors: the file header first for
//! legacy pcap, the byte order of each pcapng section).

use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError};

use super::layout::{next_record, Layout};
use super::mapped::SharedMap;

pub(crate) struct MapReader {
    map: SharedMap,
    layout: Layout,
    /// Offset of the first byte not consumed.
    pos: usize,
}

impl MapReader {
    /// Reads from `pos`: the file's start, or where a record starts (where another reader of
    /// the same file stopped, or a part of it begins), parsing as `layout`.
    pub(crate) fn at(map: SharedMap, layout: Layout, pos: usize) -> Self {
        MapReader { map, layout, pos }
    }
}

impl PcapReaderIterator for MapReader {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        let data = self.map.bytes().get(self.pos..).unwrap_or_default();
        // The whole file is there: a record that needs more is cut off.
        next_record(&mut self.layout, data, self.pos, |_| {
            PcapError::UnexpectedEof
        })
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
