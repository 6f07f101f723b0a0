//! The SMB2 COMPRESSION_TRANSFORM_HEADER (MS-SMB2 2.2.42) in its two forms, the chained
//! payload header (2.2.42.2.1) and the Pattern_V1 payload (2.2.42.2.2). The layout is stated
//! once here and used by the parser (`super::decompress`) and the writer (`sqos synth
//! --compress`).
//!
//! ```text
//! unchained (Flags 0)                        chained (Flags 1)
//!  0  ProtocolId  0xFC 'S' 'M' 'B'            0  ProtocolId
//!  4  OriginalCompressedSegmentSize           4  OriginalCompressedSegmentSize
//!  8  CompressionAlgorithm (2)                8  payload header 1: CompressionAlgorithm (2)
//! 10  Flags (2) = 0                          10                   Flags (2) = 1 (CHAINED)
//! 12  Offset (4): uncompressed bytes that    12                   Length (4)
//!     follow the header before the           16                   [OriginalPayloadSize (4)]
//!     compressed segment                          payload 1, payload header 2, …
//! 16  [Offset bytes in clear] compressed…
//! ```
//!
//! In the chained form OriginalPayloadSize is present for LZNT1, LZ77, LZ77+Huffman and LZ4,
//! and counts in Length. A Pattern_V1 payload is 8 bytes: Pattern, two reserved fields,
//! Repetitions (4).

use super::CompressError;

pub const PROTOCOL_ID: [u8; 4] = [0xFC, b'S', b'M', b'B'];
/// Length of the unchained header (and of the fixed part of either form that `Flags` is in).
pub const UNCHAINED_LEN: usize = 16;
/// ProtocolId and OriginalCompressedSegmentSize: where the chained payload headers start.
pub const CHAINED_START: usize = 8;
/// A chained payload header without OriginalPayloadSize.
pub const PAYLOAD_HEADER_LEN: usize = 8;
/// Length of a Pattern_V1 payload.
pub const PATTERN_V1_LEN: usize = 8;
/// Flags: SMB2_COMPRESSION_FLAG_CHAINED.
pub const FLAG_CHAINED: u16 = 0x0001;

/// CompressionAlgorithm values (MS-SMB2 2.2.3.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    None,
    Lznt1,
    Lz77,
    Lz77Huffman,
    PatternV1,
    Lz4,
    Unknown(u16),
}

impl Algorithm {
    pub fn from_id(id: u16) -> Algorithm {
        match id {
            0 => Algorithm::None,
            1 => Algorithm::Lznt1,
            2 => Algorithm::Lz77,
            3 => Algorithm::Lz77Huffman,
            4 => Algorithm::PatternV1,
            5 => Algorithm::Lz4,
            n => Algorithm::Unknown(n),
        }
    }

    pub fn id(self) -> u16 {
        match self {
            Algorithm::None => 0,
            Algorithm::Lznt1 => 1,
            Algorithm::Lz77 => 2,
            Algorithm::Lz77Huffman => 3,
            Algorithm::PatternV1 => 4,
            Algorithm::Lz4 => 5,
            Algorithm::Unknown(n) => n,
        }
    }

    /// Whether a chained payload of this algorithm carries OriginalPayloadSize.
    pub fn has_original_size(self) -> bool {
        matches!(
            self,
            Algorithm::Lznt1 | Algorithm::Lz77 | Algorithm::Lz77Huffman | Algorithm::Lz4
        )
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Algorithm::None => f.write_str("NONE"),
            Algorithm::Lznt1 => f.write_str("LZNT1"),
            Algorithm::Lz77 => f.write_str("LZ77"),
            Algorithm::Lz77Huffman => f.write_str("LZ77+Huffman"),
            Algorithm::PatternV1 => f.write_str("Pattern_V1"),
            Algorithm::Lz4 => f.write_str("LZ4"),
            Algorithm::Unknown(n) => write!(f, "0x{n:04x}"),
        }
    }
}

/// The header's first 16 bytes read both ways; `Flags` says which applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransformHeader {
    /// One algorithm over the whole message after `offset` bytes in clear.
    Unchained {
        /// OriginalCompressedSegmentSize: the decompressed size of the compressed segment.
        original_size: u32,
        algorithm: Algorithm,
        offset: u32,
    },
    /// A sequence of payloads from [`CHAINED_START`] on.
    Chained {
        /// OriginalCompressedSegmentSize: the size of the whole decompressed message.
        original_size: u32,
    },
}

/// One SMB2_COMPRESSION_CHAINED_PAYLOAD_HEADER.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloadHeader {
    pub algorithm: Algorithm,
    pub flags: u16,
    /// Bytes after the 8-byte header (OriginalPayloadSize included when present).
    pub length: u32,
    pub original_payload_size: Option<u32>,
}

/// SMB2_COMPRESSION_PATTERN_PAYLOAD_V1: `repetitions` copies of `pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternV1 {
    pub pattern: u8,
    pub repetitions: u32,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn short(what: &'static str, offset: usize) -> CompressError {
    CompressError::Truncated { what, offset }
}

/// Decode the header at the start of `msg` (the message after its NetBIOS header).
pub fn parse_transform_header(msg: &[u8]) -> Result<TransformHeader, CompressError> {
    if msg.get(..4) != Some(&PROTOCOL_ID[..]) {
        return Err(CompressError::NotCompressed);
    }
    let original_size = u32_at(msg, 4).ok_or(short("COMPRESSION_TRANSFORM_HEADER", 4))?;
    let flags = u16_at(msg, 10).ok_or(short("COMPRESSION_TRANSFORM_HEADER", 10))?;
    if flags & FLAG_CHAINED != 0 {
        return Ok(TransformHeader::Chained { original_size });
    }
    let algorithm = Algorithm::from_id(u16_at(msg, 8).unwrap_or(0));
    let offset = u32_at(msg, 12).ok_or(short("COMPRESSION_TRANSFORM_HEADER", 12))?;
    Ok(TransformHeader::Unchained {
        original_size,
        algorithm,
        offset,
    })
}

/// Decode the chained payload header at `at`; returns it and where its data starts.
pub fn parse_payload_header(
    msg: &[u8],
    at: usize,
) -> Result<(PayloadHeader, usize), CompressError> {
    let algorithm = Algorithm::from_id(u16_at(msg, at).ok_or(short("payload header", at))?);
    let flags = u16_at(msg, at + 2).ok_or(short("payload header", at))?;
    let length = u32_at(msg, at + 4).ok_or(short("payload header", at))?;
    let mut data = at + PAYLOAD_HEADER_LEN;
    let original_payload_size = if algorithm.has_original_size() {
        let n = u32_at(msg, data).ok_or(short("OriginalPayloadSize", data))?;
        data += 4;
        Some(n)
    } else {
        None
    };
    Ok((
        PayloadHeader {
            algorithm,
            flags,
            length,
            original_payload_size,
        },
        data,
    ))
}

/// Decode a Pattern_V1 payload.
pub fn parse_pattern_v1(data: &[u8]) -> Result<PatternV1, CompressError> {
    if data.len() != PATTERN_V1_LEN {
        return Err(CompressError::Corrupt {
            algorithm: Algorithm::PatternV1,
            why: "payload is not 8 bytes",
        });
    }
    Ok(PatternV1 {
        pattern: data[0],
        repetitions: u32_at(data, 4).unwrap_or(0),
    })
}

impl TransformHeader {
    /// The header bytes: 16 for the unchained form; for the chained form the 8 bytes before
    /// the first payload header.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = PROTOCOL_ID.to_vec();
        match *self {
            TransformHeader::Unchained {
                original_size,
                algorithm,
                offset,
            } => {
                b.extend_from_slice(&original_size.to_le_bytes());
                b.extend_from_slice(&algorithm.id().to_le_bytes());
                b.extend_from_slice(&0u16.to_le_bytes());
                b.extend_from_slice(&offset.to_le_bytes());
            }
            TransformHeader::Chained { original_size } => {
                b.extend_from_slice(&original_size.to_le_bytes());
            }
        }
        b
    }
}

impl PayloadHeader {
    /// Append the header (and OriginalPayloadSize when present) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.algorithm.id().to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.length.to_le_bytes());
        if let Some(n) = self.original_payload_size {
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

impl PatternV1 {
    pub fn to_bytes(&self) -> [u8; PATTERN_V1_LEN] {
        let mut b = [0u8; PATTERN_V1_LEN];
        b[0] = self.pattern;
        b[4..].copy_from_slice(&self.repetitions.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchained_header_round_trips() {
        let h = TransformHeader::Unchained {
            original_size: 0x1234,
            algorithm: Algorithm::Lz77,
            offset: 0x70,
        };
        let b = h.to_bytes();
        assert_eq!(
            b,
            [0xFC, b'S', b'M', b'B', 0x34, 0x12, 0, 0, 2, 0, 0, 0, 0x70, 0, 0, 0]
        );
        assert_eq!(parse_transform_header(&b), Ok(h));
    }

    #[test]
    fn chained_header_and_payloads_round_trip() {
        let mut b = TransformHeader::Chained { original_size: 300 }.to_bytes();
        let first = PayloadHeader {
            algorithm: Algorithm::None,
            flags: FLAG_CHAINED,
            length: 112,
            original_payload_size: None,
        };
        first.write(&mut b);
        assert_eq!(b.len(), 16);
        assert_eq!(
            parse_transform_header(&b),
            Ok(TransformHeader::Chained { original_size: 300 })
        );
        assert_eq!(parse_payload_header(&b, 8), Ok((first, 16)));
        let lz = PayloadHeader {
            algorithm: Algorithm::Lz77Huffman,
            flags: 0,
            length: 4 + 90,
            original_payload_size: Some(188),
        };
        let mut c = Vec::new();
        lz.write(&mut c);
        assert_eq!(c, [3, 0, 0, 0, 94, 0, 0, 0, 188, 0, 0, 0]);
        assert_eq!(parse_payload_header(&c, 0), Ok((lz, 12)));
        let p = PatternV1 {
            pattern: 0,
            repetitions: 4096,
        };
        assert_eq!(parse_pattern_v1(&p.to_bytes()), Ok(p));
    }

    #[test]
    fn short_or_foreign_headers_are_errors() {
        assert_eq!(
            parse_transform_header(b"\xfeSMB\0\0\0\0\0\0\0\0\0\0\0\0"),
            Err(CompressError::NotCompressed)
        );
        assert!(matches!(
            parse_transform_header(b"\xfcSMB\x10\0"),
            Err(CompressError::Truncated { .. })
        ));
        assert!(matches!(
            parse_payload_header(&[2, 0, 0, 0, 8, 0, 0, 0], 0),
            Err(CompressError::Truncated { .. })
        ));
    }
}
