//! Hand-built SMB2 byte streams for tests: headers, the bodies sqos decodes, compound chains,
//! NBSS framing. Field layouts follow MS-SMB2 section 2.2.
#![allow(dead_code)]

pub const CREATE: u16 = 5;
pub const CLOSE: u16 = 6;
pub const READ: u16 = 8;
pub const WRITE: u16 = 9;
pub const IOCTL: u16 = 0x0B;
pub const ECHO: u16 = 0x0D;

pub const FLAG_RESPONSE: u32 = 1;
pub const FLAG_ASYNC: u32 = 2;
pub const FLAG_RELATED: u32 = 4;

pub const STATUS_PENDING: u32 = 0x103;
pub const STATUS_NOT_FOUND: u32 = 0xC000_0225;
pub const FSCTL_SQOS: u32 = 0x0009_0350;

/// The framer as the pipeline configures it: SQOS IOCTL buffers kept whole.
pub fn framer_config() -> sqos::smb2::FramerConfig {
    sqos::smb2::FramerConfig {
        keep_ioctls: &[FSCTL_SQOS],
        ..Default::default()
    }
}

/// One SMB2 message (header fields + body bytes).
#[derive(Clone, Debug)]
pub struct Msg {
    pub command: u16,
    pub flags: u32,
    pub status: u32,
    pub message_id: u64,
    pub session_id: u64,
    pub tree_id: u32,
    pub async_id: Option<u64>,
    pub credits: u16,
    pub body: Vec<u8>,
}

impl Msg {
    pub fn request(command: u16, message_id: u64, body: Vec<u8>) -> Msg {
        Msg {
            command,
            flags: 0,
            status: 0,
            message_id,
            session_id: 0x1122_3344_5566_7788,
            tree_id: 5,
            async_id: None,
            credits: 1,
            body,
        }
    }
    pub fn response(command: u16, message_id: u64, status: u32, body: Vec<u8>) -> Msg {
        Msg {
            flags: FLAG_RESPONSE,
            status,
            ..Msg::request(command, message_id, body)
        }
    }
    pub fn async_id(mut self, id: u64) -> Msg {
        self.flags |= FLAG_ASYNC;
        self.async_id = Some(id);
        self
    }
    pub fn related(mut self) -> Msg {
        self.flags |= FLAG_RELATED;
        self
    }
    /// Header + body with the given NextCommand.
    pub fn bytes(&self, next_command: u32) -> Vec<u8> {
        let mut h = Vec::with_capacity(64 + self.body.len());
        h.extend_from_slice(&[0xFE, b'S', b'M', b'B']);
        h.extend_from_slice(&64u16.to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes()); // CreditCharge
        h.extend_from_slice(&self.status.to_le_bytes());
        h.extend_from_slice(&self.command.to_le_bytes());
        h.extend_from_slice(&self.credits.to_le_bytes());
        h.extend_from_slice(&self.flags.to_le_bytes());
        h.extend_from_slice(&next_command.to_le_bytes());
        h.extend_from_slice(&self.message_id.to_le_bytes());
        match self.async_id {
            Some(a) => h.extend_from_slice(&a.to_le_bytes()),
            None => {
                h.extend_from_slice(&0xFEFFu32.to_le_bytes()); // ProcessId
                h.extend_from_slice(&self.tree_id.to_le_bytes());
            }
        }
        h.extend_from_slice(&self.session_id.to_le_bytes());
        h.extend_from_slice(&[0u8; 16]);
        h.extend_from_slice(&self.body);
        h
    }
}

/// A compound chain: each part padded to 8 bytes, NextCommand set, the last one 0.
pub fn compound(msgs: &[Msg]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let last = i + 1 == msgs.len();
        let raw_len = 64 + m.body.len();
        let padded = raw_len.div_ceil(8) * 8;
        let mut b = m.bytes(if last { 0 } else { padded as u32 });
        if !last {
            b.resize(padded, 0);
        }
        out.extend_from_slice(&b);
    }
    out
}

/// NBSS session message around `payload`.
pub fn nbss(payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut v = vec![0, (len >> 16) as u8, (len >> 8) as u8, len as u8];
    v.extend_from_slice(payload);
    v
}

/// A single SMB2 message in its NBSS framing.
pub fn framed(m: &Msg) -> Vec<u8> {
    nbss(&m.bytes(0))
}

pub fn fid(p: u64, v: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&p.to_le_bytes());
    b[8..].copy_from_slice(&v.to_le_bytes());
    b
}

pub const RELATED_FID: [u8; 16] = [0xFF; 16];

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

pub fn create_request(name: &str) -> Vec<u8> {
    let name = utf16(name);
    let mut b = Vec::new();
    b.extend_from_slice(&57u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]); // SecurityFlags, RequestedOplockLevel
    b.extend_from_slice(&2u32.to_le_bytes()); // ImpersonationLevel
    b.extend_from_slice(&[0u8; 16]); // SmbCreateFlags, Reserved
    b.extend_from_slice(&0x0012_019Fu32.to_le_bytes()); // DesiredAccess
    b.extend_from_slice(&0x80u32.to_le_bytes()); // FileAttributes
    b.extend_from_slice(&7u32.to_le_bytes()); // ShareAccess
    b.extend_from_slice(&1u32.to_le_bytes()); // CreateDisposition
    b.extend_from_slice(&0x40u32.to_le_bytes()); // CreateOptions
    b.extend_from_slice(&(64u16 + 56).to_le_bytes()); // NameOffset
    b.extend_from_slice(&(name.len() as u16).to_le_bytes());
    b.extend_from_slice(&[0u8; 8]); // CreateContexts
    b.extend_from_slice(&name);
    b
}

pub fn create_response(file_id: [u8; 16]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&89u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&1u32.to_le_bytes()); // CreateAction: opened
    b.extend_from_slice(&[0u8; 40]); // times, AllocationSize
    b.extend_from_slice(&4096u64.to_le_bytes()); // EndofFile
    b.extend_from_slice(&0x80u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&file_id);
    b.extend_from_slice(&[0u8; 8]);
    b.push(0); // Buffer
    b
}

pub fn close_request(file_id: [u8; 16]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&24u16.to_le_bytes());
    b.extend_from_slice(&[0u8; 6]);
    b.extend_from_slice(&file_id);
    b
}

pub fn close_response() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&60u16.to_le_bytes());
    b.extend_from_slice(&[0u8; 58]);
    b
}

/// IOCTL request with its input at `64 + 56 + pad` (pad > 0: not the usual place).
pub fn ioctl_request(
    ctl: u32,
    file_id: [u8; 16],
    input: &[u8],
    max_out: u32,
    pad: usize,
) -> Vec<u8> {
    let off = 64 + 56 + pad as u32;
    let mut b = Vec::new();
    b.extend_from_slice(&57u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&ctl.to_le_bytes());
    b.extend_from_slice(&file_id);
    b.extend_from_slice(&(if input.is_empty() { 0 } else { off }).to_le_bytes());
    b.extend_from_slice(&(input.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // MaxInputResponse
    b.extend_from_slice(&0u32.to_le_bytes()); // OutputOffset
    b.extend_from_slice(&0u32.to_le_bytes()); // OutputCount
    b.extend_from_slice(&max_out.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes()); // Flags: FSCTL
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend(std::iter::repeat_n(0xEE, pad));
    b.extend_from_slice(input);
    b
}

/// IOCTL response with its output at `64 + 48 + pad`.
pub fn ioctl_response(ctl: u32, file_id: [u8; 16], output: &[u8], pad: usize) -> Vec<u8> {
    let off = 64 + 48 + pad as u32;
    let mut b = Vec::new();
    b.extend_from_slice(&49u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&ctl.to_le_bytes());
    b.extend_from_slice(&file_id);
    b.extend_from_slice(&off.to_le_bytes()); // InputOffset
    b.extend_from_slice(&0u32.to_le_bytes()); // InputCount
    b.extend_from_slice(&off.to_le_bytes()); // OutputOffset
    b.extend_from_slice(&(output.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend(std::iter::repeat_n(0xEE, pad));
    b.extend_from_slice(output);
    b
}

pub fn read_request(file_id: [u8; 16], length: u32, offset: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&49u16.to_le_bytes());
    b.extend_from_slice(&[0x50, 0]);
    b.extend_from_slice(&length.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&file_id);
    b.extend_from_slice(&[0u8; 16]);
    b.push(0);
    b
}

/// READ response whose data (`len` bytes of `fill`) follows at offset 80.
pub fn read_response(len: usize, fill: u8) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + len);
    b.extend_from_slice(&17u16.to_le_bytes());
    b.push(80);
    b.push(0);
    b.extend_from_slice(&(len as u32).to_le_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b.resize(16 + len, fill);
    b
}

pub fn write_request(file_id: [u8; 16], len: usize, fill: u8) -> Vec<u8> {
    let mut b = Vec::with_capacity(48 + len);
    b.extend_from_slice(&49u16.to_le_bytes());
    b.extend_from_slice(&112u16.to_le_bytes());
    b.extend_from_slice(&(len as u32).to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&file_id);
    b.extend_from_slice(&[0u8; 16]);
    b.resize(48 + len, fill);
    b
}

pub fn write_response(count: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&17u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b
}

pub fn error_response() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.push(0);
    b
}

pub fn echo() -> Vec<u8> {
    vec![4, 0, 0, 0]
}
