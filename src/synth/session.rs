//! One client on one connection with one request outstanding at a time: the TCP handshake,
//! the SMB2 set-up (NEGOTIATE, SESSION_SETUP in two legs, TREE_CONNECT `\\sofs\vms`, CREATE of
//! one disk), then request → response exchanges. The spec examples and the `large` benchmark
//! stream are written on it. (The cluster simulation sets its many connections up event by
//! event, from the same message builders and [`Header::request`].)

use std::io::{self, Write};

use super::packet::Endpoint;
use super::scenario::{nic_ip, nic_mac, server_nic_ip, server_nic_mac, EPOCH_US};
use super::seal::Sealer;
use super::smb2::{self, FileId, Header};
use super::squeeze::Squeezer;
use super::wire::{ConnSpec, Part, Side, Time, Wire};
use crate::smb2::crypto::Cipher;

/// The session id the server gives, and the tree id of `\\sofs\vms`.
const SESSION_ID: u64 = 0x0000_4400_0000_0011;
const TREE_ID: u32 = 1;

/// The one disk the client opens.
pub const FILE_ID: FileId = FileId {
    persistent: 0x0000_0800_0000_0001,
    volatile: 0x0000_0c00_0000_0041,
};

/// What the connection negotiates and opens.
pub struct Setup<'a> {
    pub ipv6: bool,
    pub client_port: u16,
    pub smb_dialect: u16,
    /// The preauth salt both sides send (3.1.1).
    pub salt: [u8; 32],
    /// `--encrypt`: offered and chosen, and every message after SESSION_SETUP sealed.
    pub encrypt: Option<(Cipher, [u8; 16])>,
    /// `--compress`: negotiated, and every message after SESSION_SETUP compressed.
    pub squeeze: Option<Squeezer>,
    /// The disk (under the share) and its size.
    pub file: &'a str,
    pub file_size: u64,
    pub pace: Pace,
}

/// The timing of an exchange.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// The server answers this long after it has the request, µs (plus 1 µs per 2,500 bytes of
    /// data either way).
    pub server_us: u64,
    /// The client sends its next set-up request this long after the answer, µs.
    pub next_us: u64,
}

/// The client end of the connection and the SMB2 state both ends share.
pub struct Session<W: Write> {
    pub wire: Wire<W>,
    conn: u32,
    pub client: Endpoint,
    pub server: Endpoint,
    next_mid: u64,
    pace: Pace,
    sealer: Option<Sealer>,
    squeeze: Option<Squeezer>,
}

/// One exchange as it went: tags of the request and the response, when the request's last
/// frame was captured, and when the client has the answer.
#[derive(Clone, Copy, Debug)]
pub struct Exchanged {
    pub request: u32,
    pub request_done: Time,
    pub response: u32,
    pub done: Time,
}

impl<W: Write> Session<W> {
    /// Connects at the capture's start and runs the set-up; returns the session and the time the
    /// client may send its next request.
    pub fn open(mut wire: Wire<W>, setup: &Setup) -> io::Result<(Session<W>, Time)> {
        // The first host's first NIC and the server's (the cluster's addressing plan).
        let client = Endpoint {
            mac: nic_mac(0, 0),
            ip: nic_ip(0, 0, setup.ipv6),
            port: setup.client_port,
        };
        let server = Endpoint {
            mac: server_nic_mac(0),
            ip: server_nic_ip(0, setup.ipv6),
            port: 445,
        };
        let spec = ConnSpec {
            client,
            server,
            vlan: None,
            interface: 0,
        };
        let (conn, ready) = wire.connect(spec, EPOCH_US);
        let mut s = Session {
            wire,
            conn,
            client,
            server,
            next_mid: 0,
            pace: setup.pace,
            sealer: setup
                .encrypt
                .map(|(c, key)| Sealer::new(c, setup.smb_dialect, key)),
            squeeze: setup.squeeze,
        };
        let guid = *uuid::Uuid::from_u128(0x3d6a_2b11_7c44_4a0e_9e2f_0c1d_2e3f_4a5b).as_bytes();
        let (ciphers, chosen) = match setup.encrypt {
            Some((c, _)) => (smb2::CIPHERS_ALL, c.id()),
            None => (smb2::CIPHERS_128, smb2::CIPHER_DEFAULT),
        };
        let d = setup.smb_dialect;
        let mut t = ready;
        let steps: [(u16, Vec<u8>, u32, Vec<u8>); 5] = [
            (
                smb2::NEGOTIATE,
                smb2::negotiate_request(d, &guid, &setup.salt, ciphers, setup.squeeze),
                smb2::STATUS_SUCCESS,
                smb2::negotiate_response(
                    d,
                    &guid,
                    t,
                    EPOCH_US - 86_400_000_000,
                    &setup.salt,
                    chosen,
                    setup.squeeze,
                ),
            ),
            (
                smb2::SESSION_SETUP,
                smb2::session_setup_request(0),
                smb2::STATUS_MORE_PROCESSING_REQUIRED,
                smb2::session_setup_response(),
            ),
            (
                smb2::SESSION_SETUP,
                smb2::session_setup_request(0),
                smb2::STATUS_SUCCESS,
                smb2::session_setup_response(),
            ),
            (
                smb2::TREE_CONNECT,
                smb2::tree_connect_request("\\\\sofs\\vms"),
                smb2::STATUS_SUCCESS,
                smb2::tree_connect_response(),
            ),
            (
                smb2::CREATE,
                smb2::create_request(setup.file),
                0,
                Vec::new(),
            ),
        ];
        for (cmd, req, status, resp) in steps {
            let resp = if cmd == smb2::CREATE {
                smb2::create_response(&FILE_ID, t, setup.file_size)
            } else {
                resp
            };
            let h = s.header(cmd, u16::from(cmd != smb2::NEGOTIATE));
            let x = s.exchange(t, h, (req, 0), status, (resp, 0))?;
            t = x.done + s.pace.next_us;
        }
        Ok((s, t))
    }

    /// The header of the client's next request (MessageIds count up by the charge).
    pub fn header(&mut self, command: u16, charge: u16) -> Header {
        let h = Header::request(
            command,
            self.next_mid,
            charge,
            charge.max(1),
            TREE_ID,
            SESSION_ID,
        );
        self.next_mid += u64::from(charge.max(1));
        h
    }

    /// A message as it goes on the wire: compressed when compression is on, then sealed once
    /// the session is encrypted.
    fn on_wire(&mut self, from_client: bool, parts: Vec<Part>) -> Vec<Part> {
        let parts = match &self.squeeze {
            Some(z) => z.outgoing(parts, self.wire.filler()),
            None => parts,
        };
        match self.sealer.as_mut() {
            Some(s) => s.outgoing(from_client, parts, self.wire.filler()),
            None => parts,
        }
    }

    /// Request → response; `req` and `resp` are bodies with the length of filler data after
    /// them (WRITE and READ data).
    pub fn exchange(
        &mut self,
        t: Time,
        h: Header,
        req: (Vec<u8>, usize),
        status: u32,
        resp: (Vec<u8>, usize),
    ) -> io::Result<Exchanged> {
        self.wire.flush_before(t)?;
        let msg = self.on_wire(true, smb2::message(&h, &req.0, req.1));
        let d = self.wire.send(self.conn, Side::Client, t, vec![msg]);
        let (qtag, qat) = d.first().map_or((0, t), |d| (d.tag, d.at));
        let rh = h.answer(status, TREE_ID);
        let server_t = qat + self.pace.server_us + (resp.1 + req.1) as u64 / 2500;
        self.wire.flush_before(qat)?;
        let msg = self.on_wire(false, smb2::message(&rh, &resp.0, resp.1));
        let r = self.wire.send(self.conn, Side::Server, server_t, vec![msg]);
        let (rtag, rat) = r.first().map_or((0, server_t), |d| (d.tag, d.at));
        Ok(Exchanged {
            request: qtag,
            request_done: qat.saturating_sub(self.wire.config().one_way_us),
            response: rtag,
            done: rat,
        })
    }

    /// The session's keys, when it is encrypted.
    pub fn keys(&self) -> Option<crate::smb2::crypto::SessionKeys> {
        self.sealer.as_ref().and_then(Sealer::session_keys)
    }

    /// "client → server", as the truth names a channel.
    pub fn channel_label(&self) -> String {
        format!(
            "{} → {}",
            std::net::SocketAddr::new(self.client.ip, self.client.port),
            std::net::SocketAddr::new(self.server.ip, self.server.port)
        )
    }
}
