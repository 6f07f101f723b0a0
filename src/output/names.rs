//! Display names the faces share.

use crate::smb2::NtStatus;

/// The NT status name, or its hex value when the name is not known.
pub fn nt_status_label(status: u32) -> String {
    match NtStatus(status).name() {
        Some(n) => n.to_string(),
        None => format!("0x{status:08x}"),
    }
}
