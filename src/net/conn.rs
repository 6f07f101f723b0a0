use std::fmt;
use std::net::SocketAddr;

/// A TCP connection, numbered in the order it was first seen (0-based, like `tcp.stream`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// Direction of a byte stream within a connection. The server is the side on an SMB port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    ToServer,
    ToClient,
}

impl Dir {
    /// 0 to the server, 1 to the client: an index for state kept per direction.
    #[inline]
    pub fn index(self) -> usize {
        match self {
            Dir::ToServer => 0,
            Dir::ToClient => 1,
        }
    }

    pub fn reverse(self) -> Dir {
        match self {
            Dir::ToServer => Dir::ToClient,
            Dir::ToClient => Dir::ToServer,
        }
    }
}

/// The two ends of a connection, oriented client → server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnKey {
    pub client: SocketAddr,
    pub server: SocketAddr,
}

impl ConnKey {
    /// (source, destination) of a segment travelling in `dir`.
    pub fn endpoints(&self, dir: Dir) -> (SocketAddr, SocketAddr) {
        match dir {
            Dir::ToServer => (self.client, self.server),
            Dir::ToClient => (self.server, self.client),
        }
    }
}

impl fmt::Display for ConnKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} → {}", self.client, self.server)
    }
}
