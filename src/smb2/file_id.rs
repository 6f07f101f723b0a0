//! SMB2 FileId (MS-SMB2 2.2.14.1).

use std::fmt;

/// SMB2 FileId (persistent, volatile).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    pub persistent: u64,
    pub volatile: u64,
}

impl FileId {
    /// The value that, in a related compound operation, means "the FileId of the preceding
    /// operation in the chain" (MS-SMB2 3.2.4.1.4).
    pub const RELATED: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    pub fn is_related_placeholder(self) -> bool {
        self == Self::RELATED
    }

    /// The 16 bytes as they stand in a message: Persistent, then Volatile.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.persistent.to_le_bytes());
        b[8..].copy_from_slice(&self.volatile.to_le_bytes());
        b
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}:{:016x}", self.persistent, self.volatile)
    }
}
