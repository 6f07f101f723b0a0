//! SMB2: NetBIOS session framing, the 64-byte header, the commands sqos needs (CREATE, CLOSE,
//! IOCTL, READ, WRITE), compound chains, and request/response matching. STUB: owned by the smb2 work.
