//! Display names the faces share.

/// The NT status name, or its hex value when the name is not known.
pub fn nt_status_label(status: u32) -> String {
    match status {
        0 => "STATUS_SUCCESS".into(),
        _ => format!("0x{status:08x}"),
    }
}
