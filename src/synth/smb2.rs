//! SMB2/3 messages as a Windows client and a Scale-Out File Server put them on the wire
//! ([MS-SMB2] section 2.2), each with its 4-byte NetBIOS session header. Bodies carry the fields
//! Windows fills; security blobs are empty (no SPNEGO/NTLM is simulated).

use super::squeeze::Squeezer;
use super::wire::Part;
use crate::smb2::netbios::session_message_header;
pub use crate::smb2::FileId;
use crate::smb2::{Command, HeaderFlags, HeaderForm, NtStatus, HEADER_LEN};

// The commands the generator sends, from the crate's one command table.
pub const NEGOTIATE: u16 = Command::NEGOTIATE.0;
pub const SESSION_SETUP: u16 = Command::SESSION_SETUP.0;
pub const TREE_CONNECT: u16 = Command::TREE_CONNECT.0;
pub const CREATE: u16 = Command::CREATE.0;
pub const CLOSE: u16 = Command::CLOSE.0;
pub const READ: u16 = Command::READ.0;
pub const WRITE: u16 = Command::WRITE.0;
pub const IOCTL: u16 = Command::IOCTL.0;

// The statuses the generator sends, from the crate's one NT status table.
pub const STATUS_SUCCESS: u32 = NtStatus::SUCCESS.0;
pub const STATUS_MORE_PROCESSING_REQUIRED: u32 = NtStatus::MORE_PROCESSING_REQUIRED.0;
pub const STATUS_INVALID_PARAMETER: u32 = NtStatus::INVALID_PARAMETER.0;
pub const STATUS_NOT_FOUND: u32 = NtStatus::NOT_FOUND.0;
pub const STATUS_REVISION_MISMATCH: u32 = NtStatus::REVISION_MISMATCH.0;

/// SESSION_SETUP request Flags: bind the session to this connection (a further channel).
pub const SESSION_FLAG_BINDING: u8 = 0x01;
/// FSCTL_QUERY_NETWORK_INTERFACE_INFO: the server's interfaces, for multichannel.
pub const FSCTL_QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;

pub const DIALECT_302: u16 = 0x0302;
pub const DIALECT_311: u16 = 0x0311;

/// The fixed SMB2 header fields that vary between messages.
#[derive(Clone, Copy, Debug, Default)]
pub struct Header {
    pub command: u16,
    pub status: u32,
    pub response: bool,
    pub message_id: u64,
    pub credit_charge: u16,
    pub credits: u16,
    pub tree_id: u32,
    pub session_id: u64,
    /// SMB2_FLAGS_REPLAY_OPERATION: the request is sent again (on another channel).
    pub replay: bool,
}

impl Header {
    /// A client's request: NEGOTIATE goes before there is a session, NEGOTIATE, SESSION_SETUP
    /// and TREE_CONNECT before there is a tree.
    pub fn request(
        command: u16,
        message_id: u64,
        credit_charge: u16,
        credits: u16,
        tree_id: u32,
        session_id: u64,
    ) -> Header {
        Header {
            command,
            message_id,
            credit_charge,
            credits,
            tree_id: if matches!(command, NEGOTIATE | SESSION_SETUP | TREE_CONNECT) {
                0
            } else {
                tree_id
            },
            session_id: if command == NEGOTIATE { 0 } else { session_id },
            ..Header::default()
        }
    }

    /// The answer's header with `status`; a TREE_CONNECT's answer names the new tree.
    pub fn answer(self, status: u32, tree_id: u32) -> Header {
        Header {
            status,
            response: true,
            tree_id: if self.command == TREE_CONNECT {
                tree_id
            } else {
                self.tree_id
            },
            ..self
        }
    }
}

/// A whole message: NetBIOS header, SMB2 header and `body`, then `fill` bytes of filler data.
pub fn message(h: &Header, body: &[u8], fill: usize) -> Vec<Part> {
    let mut flags = if h.response {
        HeaderFlags::SERVER_TO_REDIR
    } else {
        0
    };
    if h.replay {
        flags |= HeaderFlags::REPLAY_OPERATION;
    }
    let header = crate::smb2::Header {
        structure_size: HEADER_LEN as u16,
        credit_charge: h.credit_charge,
        status: NtStatus(h.status),
        command: Command(h.command),
        credits: h.credits,
        flags: HeaderFlags(flags),
        next_command: 0,
        message_id: h.message_id,
        // Windows sends 0xFEFF in the reserved ProcessId.
        form: HeaderForm::Sync {
            process_id: 0xfeff,
            tree_id: h.tree_id,
        },
        session_id: h.session_id,
        signature: [0; 16],
    };
    let mut b = Vec::with_capacity(4 + HEADER_LEN + body.len());
    b.extend_from_slice(&session_message_header(HEADER_LEN + body.len() + fill));
    b.extend_from_slice(&header.to_bytes());
    b.extend_from_slice(body);
    let mut parts = vec![Part::Bytes(b)];
    if fill > 0 {
        parts.push(Part::Fill(fill));
    }
    parts
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

fn pad8(b: &mut Vec<u8>, header_len: usize) {
    while (b.len() + header_len) % 8 != 0 {
        b.push(0);
    }
}

/// Windows FILETIME (100 ns since 1601) of a capture time in µs since 1970.
pub fn filetime(us: u64) -> u64 {
    us * 10 + 116_444_736_000_000_000
}

const CAPS_CLIENT: u32 = 0x0000_007f; // DFS, leasing, large MTU, multi-channel, persistent handles, directory leasing, encryption

/// Ciphers a Windows 10 client offers (AES-128-GCM, AES-128-CCM); Windows 11 adds AES-256.
pub const CIPHERS_128: &[u16] = &[0x0002, 0x0001];
pub const CIPHERS_ALL: &[u16] = &[0x0004, 0x0002, 0x0003, 0x0001];
/// The cipher a server picks when encryption is not asked for (AES-128-GCM).
pub const CIPHER_DEFAULT: u16 = 0x0002;

/// `compression`: offered (3.1.1 only).
pub fn negotiate_request(
    dialect: u16,
    client_guid: &[u8; 16],
    salt: &[u8; 32],
    ciphers: &[u16],
    compression: Option<Squeezer>,
) -> Vec<u8> {
    let dialects: &[u16] = if dialect == DIALECT_311 {
        &[0x0202, 0x0210, 0x0300, 0x0302, 0x0311]
    } else {
        &[0x0202, 0x0210, 0x0300, 0x0302]
    };
    let mut b = Vec::with_capacity(160);
    b.extend_from_slice(&36u16.to_le_bytes());
    b.extend_from_slice(&(dialects.len() as u16).to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes()); // SecurityMode: signing enabled
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&CAPS_CLIENT.to_le_bytes());
    b.extend_from_slice(client_guid);
    let ctx_at = b.len();
    b.extend_from_slice(&[0u8; 8]); // ClientStartTime or context offset/count
    for d in dialects {
        b.extend_from_slice(&d.to_le_bytes());
    }
    if dialect == DIALECT_311 {
        pad8(&mut b, 64);
        let off = (64 + b.len()) as u32;
        b[ctx_at..ctx_at + 4].copy_from_slice(&off.to_le_bytes());
        b[ctx_at + 4..ctx_at + 6].copy_from_slice(&2u16.to_le_bytes());
        negotiate_contexts(&mut b, salt, ciphers);
    }
    add_compression_context(
        &mut b,
        NEGOTIATE_REQUEST_CONTEXT_COUNT_AT,
        compression,
        dialect,
    );
    b
}

/// PREAUTH_INTEGRITY_CAPABILITIES (SHA-512) and ENCRYPTION_CAPABILITIES.
fn negotiate_contexts(b: &mut Vec<u8>, salt: &[u8; 32], ciphers: &[u16]) {
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&38u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes()); // HashAlgorithmCount
    b.extend_from_slice(&32u16.to_le_bytes()); // SaltLength
    b.extend_from_slice(&1u16.to_le_bytes()); // SHA-512
    b.extend_from_slice(salt);
    pad8(b, 64);
    let n = ciphers.len() as u16;
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&(2 + 2 * n).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    for c in ciphers {
        b.extend_from_slice(&c.to_le_bytes());
    }
}

/// Where NegotiateContextCount is in a NEGOTIATE request body and in a response body.
const NEGOTIATE_REQUEST_CONTEXT_COUNT_AT: usize = 32;
const NEGOTIATE_RESPONSE_CONTEXT_COUNT_AT: usize = 6;

/// Append SMB2_COMPRESSION_CAPABILITIES (MS-SMB2 2.2.3.1.3) to a 3.1.1 NEGOTIATE body whose
/// NegotiateContextCount is at `count_at`.
fn add_compression_context(b: &mut Vec<u8>, count_at: usize, z: Option<Squeezer>, dialect: u16) {
    let Some(z) = z.filter(|_| dialect == DIALECT_311) else {
        return;
    };
    let (algorithms, chained) = (z.algorithm_ids(), z.chained);
    pad8(b, 64);
    let n = algorithms.len() as u16;
    b.extend_from_slice(&3u16.to_le_bytes());
    b.extend_from_slice(&(8 + 2 * n).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes()); // Padding
    b.extend_from_slice(&u32::from(chained).to_le_bytes()); // SMB2_COMPRESSION_CAPABILITIES_FLAG_CHAINED
    for a in algorithms {
        b.extend_from_slice(&a.to_le_bytes());
    }
    if let Some(c) = b.get_mut(count_at..count_at + 2) {
        let count = u16::from_le_bytes([c[0], c[1]]) + 1;
        c.copy_from_slice(&count.to_le_bytes());
    }
}

/// `compression`: chosen (3.1.1 only).
pub fn negotiate_response(
    dialect: u16,
    server_guid: &[u8; 16],
    now_us: u64,
    boot_us: u64,
    salt: &[u8; 32],
    cipher: u16,
    compression: Option<Squeezer>,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(200);
    b.extend_from_slice(&65u16.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes()); // SecurityMode: signing enabled
    b.extend_from_slice(&dialect.to_le_bytes());
    let ctx_count: u16 = if dialect == DIALECT_311 { 2 } else { 0 };
    b.extend_from_slice(&ctx_count.to_le_bytes());
    b.extend_from_slice(server_guid);
    b.extend_from_slice(&0x0000_002fu32.to_le_bytes()); // DFS, leasing, large MTU, multi-channel, persistent
    b.extend_from_slice(&8_388_608u32.to_le_bytes()); // MaxTransactSize
    b.extend_from_slice(&8_388_608u32.to_le_bytes()); // MaxReadSize
    b.extend_from_slice(&8_388_608u32.to_le_bytes()); // MaxWriteSize
    b.extend_from_slice(&filetime(now_us).to_le_bytes());
    b.extend_from_slice(&filetime(boot_us).to_le_bytes());
    b.extend_from_slice(&128u16.to_le_bytes()); // SecurityBufferOffset
    b.extend_from_slice(&0u16.to_le_bytes()); // SecurityBufferLength
    let ctx_at = b.len();
    b.extend_from_slice(&0u32.to_le_bytes());
    if dialect == DIALECT_311 {
        pad8(&mut b, 64);
        let off = (64 + b.len()) as u32;
        b[ctx_at..ctx_at + 4].copy_from_slice(&off.to_le_bytes());
        negotiate_contexts(&mut b, salt, &[cipher]);
    }
    add_compression_context(
        &mut b,
        NEGOTIATE_RESPONSE_CONTEXT_COUNT_AT,
        compression,
        dialect,
    );
    b
}

/// `flags`: 0, or [`SESSION_FLAG_BINDING`] on a further channel of the session.
pub fn session_setup_request(flags: u8) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(&25u16.to_le_bytes());
    b.push(flags);
    b.push(1); // SecurityMode: signing enabled
    b.extend_from_slice(&0x0000_0001u32.to_le_bytes()); // Capabilities: DFS
    b.extend_from_slice(&0u32.to_le_bytes()); // Channel
    b.extend_from_slice(&88u16.to_le_bytes()); // SecurityBufferOffset
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes()); // PreviousSessionId
    b
}

pub fn session_setup_response() -> Vec<u8> {
    let mut b = Vec::with_capacity(8);
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes()); // SessionFlags
    b.extend_from_slice(&72u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b
}

pub fn tree_connect_request(path: &str) -> Vec<u8> {
    let name = utf16(path);
    let mut b = Vec::with_capacity(8 + name.len());
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&72u16.to_le_bytes());
    b.extend_from_slice(&(name.len() as u16).to_le_bytes());
    b.extend_from_slice(&name);
    b
}

/// NETWORK_INTERFACE_INFO entries (MS-SMB2 2.2.32.5): one per (address, interface index), RSS
/// capable, 10 Gbit/s.
pub fn network_interface_info(nics: &[(std::net::IpAddr, u32)]) -> Vec<u8> {
    const ENTRY: usize = 152;
    let mut b = Vec::with_capacity(ENTRY * nics.len());
    for (i, (ip, index)) in nics.iter().enumerate() {
        let next = if i + 1 < nics.len() { ENTRY as u32 } else { 0 };
        b.extend_from_slice(&next.to_le_bytes());
        b.extend_from_slice(&index.to_le_bytes());
        b.extend_from_slice(&0x0000_0001u32.to_le_bytes()); // Capability: RSS_CAPABLE
        b.extend_from_slice(&0u32.to_le_bytes()); // Reserved
        b.extend_from_slice(&10_000_000_000u64.to_le_bytes()); // LinkSpeed, bit/s
        let mut sa = [0u8; 128];
        match ip {
            std::net::IpAddr::V4(v4) => {
                sa[..2].copy_from_slice(&0x0002u16.to_le_bytes()); // InterNetwork
                sa[4..8].copy_from_slice(&v4.octets());
            }
            std::net::IpAddr::V6(v6) => {
                sa[..2].copy_from_slice(&0x0017u16.to_le_bytes()); // InterNetworkV6
                sa[8..24].copy_from_slice(&v6.octets());
            }
        }
        b.extend_from_slice(&sa);
    }
    b
}

pub fn tree_connect_response() -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&16u16.to_le_bytes());
    b.push(1); // disk
    b.push(0);
    b.extend_from_slice(&0x0000_0000u32.to_le_bytes()); // ShareFlags: manual caching
    b.extend_from_slice(&0x0000_0030u32.to_le_bytes()); // continuous availability, scale-out
    b.extend_from_slice(&0x001f_01ffu32.to_le_bytes()); // MaximalAccess
    b
}

pub fn create_request(name: &str) -> Vec<u8> {
    let n = utf16(name);
    let mut b = Vec::with_capacity(56 + n.len());
    b.extend_from_slice(&57u16.to_le_bytes());
    b.push(0); // SecurityFlags
    b.push(0); // RequestedOplockLevel: none
    b.extend_from_slice(&2u32.to_le_bytes()); // Impersonation
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&0x0012_019fu32.to_le_bytes()); // DesiredAccess: read/write
    b.extend_from_slice(&0x0000_0080u32.to_le_bytes()); // FILE_ATTRIBUTE_NORMAL
    b.extend_from_slice(&0x0000_0001u32.to_le_bytes()); // ShareAccess: read
    b.extend_from_slice(&1u32.to_le_bytes()); // FILE_OPEN
    b.extend_from_slice(&0x0000_0060u32.to_le_bytes()); // non-directory, synchronous I/O
    b.extend_from_slice(&120u16.to_le_bytes());
    b.extend_from_slice(&(n.len() as u16).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&n);
    b
}

pub fn create_response(fid: &FileId, now_us: u64, size: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(88);
    b.extend_from_slice(&89u16.to_le_bytes());
    b.push(0);
    b.push(0);
    b.extend_from_slice(&1u32.to_le_bytes()); // FILE_OPENED
    let created = filetime(now_us.saturating_sub(86_400_000_000 * 30));
    let t = filetime(now_us.saturating_sub(1_000_000));
    for v in [created, t, t, t] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&size.to_le_bytes());
    b.extend_from_slice(&size.to_le_bytes());
    b.extend_from_slice(&0x0000_0020u32.to_le_bytes()); // ARCHIVE
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&fid.to_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b
}

pub fn close_request(fid: &FileId) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(&24u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&fid.to_bytes());
    b
}

pub fn close_response() -> Vec<u8> {
    let mut b = vec![0u8; 60];
    b[0..2].copy_from_slice(&60u16.to_le_bytes());
    b
}

pub fn read_request(fid: &FileId, offset: u64, len: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(49);
    b.extend_from_slice(&49u16.to_le_bytes());
    b.push(0x50); // Padding: data offset wanted in the response
    b.push(0);
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&fid.to_bytes());
    b.extend_from_slice(&len.to_le_bytes()); // MinimumCount
    b.extend_from_slice(&0u32.to_le_bytes()); // Channel
    b.extend_from_slice(&0u32.to_le_bytes()); // RemainingBytes
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.push(0);
    b
}

/// READ response body; the `len` data bytes follow as filler.
pub fn read_response(len: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&17u16.to_le_bytes());
    b.push(0x50);
    b.push(0);
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b
}

/// WRITE request body; the `len` data bytes follow as filler.
pub fn write_request(fid: &FileId, offset: u64, len: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(48);
    b.extend_from_slice(&49u16.to_le_bytes());
    b.extend_from_slice(&0x70u16.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&fid.to_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b
}

pub fn write_response(len: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&17u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b
}

pub fn ioctl_request(ctl_code: u32, fid: &FileId, input: &[u8], max_output: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(56 + input.len());
    b.extend_from_slice(&57u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&ctl_code.to_le_bytes());
    b.extend_from_slice(&fid.to_bytes());
    b.extend_from_slice(&120u32.to_le_bytes()); // InputOffset
    b.extend_from_slice(&(input.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // MaxInputResponse
    b.extend_from_slice(&120u32.to_le_bytes()); // OutputOffset
    b.extend_from_slice(&0u32.to_le_bytes()); // OutputCount
    b.extend_from_slice(&max_output.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes()); // SMB2_0_IOCTL_IS_FSCTL
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(input);
    b
}

pub fn ioctl_response(ctl_code: u32, fid: &FileId, output: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(48 + output.len());
    b.extend_from_slice(&49u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&ctl_code.to_le_bytes());
    b.extend_from_slice(&fid.to_bytes());
    b.extend_from_slice(&112u32.to_le_bytes()); // InputOffset
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&112u32.to_le_bytes()); // OutputOffset
    b.extend_from_slice(&(output.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(output);
    b
}

/// SMB2 ERROR response body (StructureSize 9, no error data).
pub fn error_response() -> Vec<u8> {
    let mut b = Vec::with_capacity(9);
    b.extend_from_slice(&9u16.to_le_bytes());
    b.push(0);
    b.push(0);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.push(0);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(parts: &[Part]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::Fill(n) => out.extend(std::iter::repeat_n(0u8, *n)),
            }
        }
        out
    }

    #[test]
    fn netbios_length_covers_header_body_and_fill() {
        let h = Header {
            command: WRITE,
            message_id: 7,
            ..Header::default()
        };
        let m = bytes(&message(
            &h,
            &write_request(&FileId::default(), 0, 4096),
            4096,
        ));
        assert_eq!(m.len(), 4 + 64 + 48 + 4096);
        assert_eq!(&m[0..4], &[0, 0, 0x10, 0x70]);
        assert_eq!(&m[4..8], b"\xfeSMB");
        assert_eq!(u16::from_le_bytes([m[16], m[17]]), WRITE);
        assert_eq!(u64::from_le_bytes(m[28..36].try_into().unwrap()), 7);
    }

    #[test]
    fn fixed_body_sizes_match_ms_smb2() {
        let f = FileId::default();
        assert_eq!(read_request(&f, 0, 1).len(), 49);
        assert_eq!(read_response(1).len(), 16);
        assert_eq!(write_request(&f, 0, 1).len(), 48);
        assert_eq!(write_response(1).len(), 16);
        assert_eq!(ioctl_request(0, &f, &[], 0).len(), 56);
        assert_eq!(ioctl_response(0, &f, &[]).len(), 48);
        assert_eq!(create_response(&f, 0, 0).len(), 88);
        assert_eq!(create_request("a").len(), 58);
        assert_eq!(close_response().len(), 60);
        assert_eq!(error_response().len(), 9);
        assert_eq!(
            negotiate_response(DIALECT_302, &[0; 16], 0, 0, &[0; 32], CIPHER_DEFAULT, None).len(),
            64
        );
    }
}
