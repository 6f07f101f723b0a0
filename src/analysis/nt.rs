//! The NT status codes MS-SQOS servers answer with (section 3.2.5.1).

pub const STATUS_SUCCESS: u32 = 0x0000_0000;
pub const STATUS_INVALID_PARAMETER: u32 = 0xC000_000D;
pub const STATUS_INVALID_DEVICE_REQUEST: u32 = 0xC000_0010;
pub const STATUS_REVISION_MISMATCH: u32 = 0xC000_0059;
pub const STATUS_NOT_SUPPORTED: u32 = 0xC000_00BB;
pub const STATUS_NOT_FOUND: u32 = 0xC000_0225;

/// The spec's name of a status this module reasons about, else its hex value.
pub fn status_name(status: u32) -> String {
    match status {
        STATUS_SUCCESS => "STATUS_SUCCESS".into(),
        STATUS_INVALID_PARAMETER => "STATUS_INVALID_PARAMETER".into(),
        STATUS_INVALID_DEVICE_REQUEST => "STATUS_INVALID_DEVICE_REQUEST".into(),
        STATUS_REVISION_MISMATCH => "STATUS_REVISION_MISMATCH".into(),
        STATUS_NOT_SUPPORTED => "STATUS_NOT_SUPPORTED".into(),
        STATUS_NOT_FOUND => "STATUS_NOT_FOUND".into(),
        other => format!("0x{other:08x}"),
    }
}
