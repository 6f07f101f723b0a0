//! How a capture file's records are laid out, and pcap-parser's parse of the next one: shared by
//! the readers that parse records where they lie (in a memory map, in the buffers of a file
//! read in chunks).

use pcap_parser::nom::{self, Needed, Offset};
use pcap_parser::{
    parse_block_be, parse_block_le, parse_pcap_frame, parse_pcap_frame_be,
    parse_pcap_frame_modified, parse_pcap_header, Block, PcapBlockOwned, PcapError,
};

/// How the records of the file are parsed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Layout {
    Pcap { big_endian: bool, modified: bool },
    PcapNg { big_endian: bool },
}

/// The record at the front of `data`, which lies at `offset` of the file, as pcap-parser's
/// readers return it: its length and the block. `Incomplete`: `data` ends inside it.
fn parse_next<'a>(
    layout: &mut Layout,
    data: &'a [u8],
    offset: usize,
) -> Result<(usize, PcapBlockOwned<'a>), nom::Err<PcapError<&'a [u8]>>> {
    if data.is_empty() {
        return Err(nom::Err::Error(PcapError::Eof));
    }
    let parsed = match layout {
        Layout::Pcap { .. } if offset == 0 => {
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
    parsed.map(|(rem, block)| (data.offset(rem), block))
}

/// [`parse_next`] as a reader returns it: a record `data` ends inside is `incomplete(needed)`
/// (for a reader that holds the whole file, a record cut off; for one that reads on, more to
/// read).
pub(crate) fn next_record<'a>(
    layout: &mut Layout,
    data: &'a [u8],
    offset: usize,
    incomplete: fn(Needed) -> PcapError<&'a [u8]>,
) -> Result<(usize, PcapBlockOwned<'a>), PcapError<&'a [u8]>> {
    match parse_next(layout, data, offset) {
        Ok(parsed) => Ok(parsed),
        Err(nom::Err::Error(e)) | Err(nom::Err::Failure(e)) => Err(e),
        Err(nom::Err::Incomplete(needed)) => Err(incomplete(needed)),
    }
}
