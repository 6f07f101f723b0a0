//! SMB2 command codes and NT status codes, with their names.

use std::fmt;

/// An SMB2 command code (MS-SMB2 2.2.1). Unknown codes are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Command(pub u16);

impl Command {
    pub const NEGOTIATE: Command = Command(0x00);
    pub const SESSION_SETUP: Command = Command(0x01);
    pub const LOGOFF: Command = Command(0x02);
    pub const TREE_CONNECT: Command = Command(0x03);
    pub const TREE_DISCONNECT: Command = Command(0x04);
    pub const CREATE: Command = Command(0x05);
    pub const CLOSE: Command = Command(0x06);
    pub const FLUSH: Command = Command(0x07);
    pub const READ: Command = Command(0x08);
    pub const WRITE: Command = Command(0x09);
    pub const LOCK: Command = Command(0x0A);
    pub const IOCTL: Command = Command(0x0B);
    pub const CANCEL: Command = Command(0x0C);
    pub const ECHO: Command = Command(0x0D);
    pub const QUERY_DIRECTORY: Command = Command(0x0E);
    pub const CHANGE_NOTIFY: Command = Command(0x0F);
    pub const QUERY_INFO: Command = Command(0x10);
    pub const SET_INFO: Command = Command(0x11);
    pub const OPLOCK_BREAK: Command = Command(0x12);
    pub const SERVER_TO_CLIENT_NOTIFICATION: Command = Command(0x13);

    /// Highest command code the spec defines.
    pub const MAX_KNOWN: u16 = 0x13;

    /// The spec's name, `None` for codes it does not define.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 20] = [
            "NEGOTIATE",
            "SESSION_SETUP",
            "LOGOFF",
            "TREE_CONNECT",
            "TREE_DISCONNECT",
            "CREATE",
            "CLOSE",
            "FLUSH",
            "READ",
            "WRITE",
            "LOCK",
            "IOCTL",
            "CANCEL",
            "ECHO",
            "QUERY_DIRECTORY",
            "CHANGE_NOTIFY",
            "QUERY_INFO",
            "SET_INFO",
            "OPLOCK_BREAK",
            "SERVER_TO_CLIENT_NOTIFICATION",
        ];
        NAMES.get(usize::from(self.0)).copied()
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "UNKNOWN_0x{:04X}", self.0),
        }
    }
}

/// An NTSTATUS value (MS-ERREF 2.3). Unknown values are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NtStatus(pub u32);

impl NtStatus {
    pub const SUCCESS: NtStatus = NtStatus(0x0000_0000);
    pub const PENDING: NtStatus = NtStatus(0x0000_0103);
    pub const NOTIFY_ENUM_DIR: NtStatus = NtStatus(0x0000_010C);
    pub const BUFFER_OVERFLOW: NtStatus = NtStatus(0x8000_0005);
    pub const NO_MORE_FILES: NtStatus = NtStatus(0x8000_0006);
    pub const NOT_IMPLEMENTED: NtStatus = NtStatus(0xC000_0002);
    pub const INVALID_INFO_CLASS: NtStatus = NtStatus(0xC000_0003);
    pub const INVALID_HANDLE: NtStatus = NtStatus(0xC000_0008);
    pub const INVALID_PARAMETER: NtStatus = NtStatus(0xC000_000D);
    pub const NO_SUCH_FILE: NtStatus = NtStatus(0xC000_000F);
    pub const INVALID_DEVICE_REQUEST: NtStatus = NtStatus(0xC000_0010);
    pub const END_OF_FILE: NtStatus = NtStatus(0xC000_0011);
    pub const MORE_PROCESSING_REQUIRED: NtStatus = NtStatus(0xC000_0016);
    pub const ACCESS_DENIED: NtStatus = NtStatus(0xC000_0022);
    pub const BUFFER_TOO_SMALL: NtStatus = NtStatus(0xC000_0023);
    pub const OBJECT_NAME_INVALID: NtStatus = NtStatus(0xC000_0033);
    pub const OBJECT_NAME_NOT_FOUND: NtStatus = NtStatus(0xC000_0034);
    pub const OBJECT_NAME_COLLISION: NtStatus = NtStatus(0xC000_0035);
    pub const OBJECT_PATH_NOT_FOUND: NtStatus = NtStatus(0xC000_003A);
    pub const SHARING_VIOLATION: NtStatus = NtStatus(0xC000_0043);
    pub const DELETE_PENDING: NtStatus = NtStatus(0xC000_0056);
    pub const REVISION_MISMATCH: NtStatus = NtStatus(0xC000_0059);
    pub const LOGON_FAILURE: NtStatus = NtStatus(0xC000_006D);
    pub const INSUFFICIENT_RESOURCES: NtStatus = NtStatus(0xC000_009A);
    pub const FILE_IS_A_DIRECTORY: NtStatus = NtStatus(0xC000_00BA);
    pub const NOT_SUPPORTED: NtStatus = NtStatus(0xC000_00BB);
    pub const NETWORK_NAME_DELETED: NtStatus = NtStatus(0xC000_00C9);
    pub const BAD_NETWORK_NAME: NtStatus = NtStatus(0xC000_00CC);
    pub const DIRECTORY_NOT_EMPTY: NtStatus = NtStatus(0xC000_0101);
    pub const NOT_A_DIRECTORY: NtStatus = NtStatus(0xC000_0103);
    pub const CANCELLED: NtStatus = NtStatus(0xC000_0120);
    pub const FILE_CLOSED: NtStatus = NtStatus(0xC000_0128);
    pub const INVALID_DEVICE_STATE: NtStatus = NtStatus(0xC000_0184);
    pub const FS_DRIVER_REQUIRED: NtStatus = NtStatus(0xC000_019C);
    pub const USER_SESSION_DELETED: NtStatus = NtStatus(0xC000_0203);
    pub const NOT_FOUND: NtStatus = NtStatus(0xC000_0225);
    pub const NETWORK_SESSION_EXPIRED: NtStatus = NtStatus(0xC000_035C);

    const NAMES: [(u32, &'static str); 37] = [
        (0x0000_0000, "STATUS_SUCCESS"),
        (0x0000_0103, "STATUS_PENDING"),
        (0x0000_010C, "STATUS_NOTIFY_ENUM_DIR"),
        (0x8000_0005, "STATUS_BUFFER_OVERFLOW"),
        (0x8000_0006, "STATUS_NO_MORE_FILES"),
        (0xC000_0002, "STATUS_NOT_IMPLEMENTED"),
        (0xC000_0003, "STATUS_INVALID_INFO_CLASS"),
        (0xC000_0008, "STATUS_INVALID_HANDLE"),
        (0xC000_000D, "STATUS_INVALID_PARAMETER"),
        (0xC000_000F, "STATUS_NO_SUCH_FILE"),
        (0xC000_0010, "STATUS_INVALID_DEVICE_REQUEST"),
        (0xC000_0011, "STATUS_END_OF_FILE"),
        (0xC000_0016, "STATUS_MORE_PROCESSING_REQUIRED"),
        (0xC000_0022, "STATUS_ACCESS_DENIED"),
        (0xC000_0023, "STATUS_BUFFER_TOO_SMALL"),
        (0xC000_0033, "STATUS_OBJECT_NAME_INVALID"),
        (0xC000_0034, "STATUS_OBJECT_NAME_NOT_FOUND"),
        (0xC000_0035, "STATUS_OBJECT_NAME_COLLISION"),
        (0xC000_003A, "STATUS_OBJECT_PATH_NOT_FOUND"),
        (0xC000_0043, "STATUS_SHARING_VIOLATION"),
        (0xC000_0056, "STATUS_DELETE_PENDING"),
        (0xC000_0059, "STATUS_REVISION_MISMATCH"),
        (0xC000_006D, "STATUS_LOGON_FAILURE"),
        (0xC000_009A, "STATUS_INSUFFICIENT_RESOURCES"),
        (0xC000_00BA, "STATUS_FILE_IS_A_DIRECTORY"),
        (0xC000_00BB, "STATUS_NOT_SUPPORTED"),
        (0xC000_00C9, "STATUS_NETWORK_NAME_DELETED"),
        (0xC000_00CC, "STATUS_BAD_NETWORK_NAME"),
        (0xC000_0101, "STATUS_DIRECTORY_NOT_EMPTY"),
        (0xC000_0103, "STATUS_NOT_A_DIRECTORY"),
        (0xC000_0120, "STATUS_CANCELLED"),
        (0xC000_0128, "STATUS_FILE_CLOSED"),
        (0xC000_0184, "STATUS_INVALID_DEVICE_STATE"),
        (0xC000_019C, "STATUS_FS_DRIVER_REQUIRED"),
        (0xC000_0203, "STATUS_USER_SESSION_DELETED"),
        (0xC000_0225, "STATUS_NOT_FOUND"),
        (0xC000_035C, "STATUS_NETWORK_SESSION_EXPIRED"),
    ];

    /// The MS-ERREF name of a common status, `None` for others.
    pub fn name(self) -> Option<&'static str> {
        Self::NAMES
            .iter()
            .find(|(code, _)| *code == self.0)
            .map(|&(_, name)| name)
    }

    /// The status `name()` gives this name (exact spelling, e.g. "STATUS_NOT_FOUND").
    pub fn from_name(s: &str) -> Option<NtStatus> {
        Self::NAMES
            .iter()
            .find(|(_, name)| *name == s)
            .map(|&(code, _)| NtStatus(code))
    }

    /// The name, or the value in lowercase hex when the name is not known: how `dissect` and the
    /// flow findings show a status.
    pub fn label(self) -> String {
        match self.name() {
            Some(n) => n.to_string(),
            None => format!("0x{:08x}", self.0),
        }
    }

    /// Severity bits 0b11: an error status.
    pub fn is_error(self) -> bool {
        self.0 >> 30 == 0b11
    }
}

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "0x{:08X}", self.0),
        }
    }
}
