//! The Hyper-V hosts as SMB2 clients: each connects its channels (NEGOTIATE, SESSION_SETUP or
//! binding, TREE_CONNECT, FSCTL_QUERY_NETWORK_INTERFACE_INFO), opens and closes its VMs'
//! disks, sends their READ/WRITE and SQOS IOCTLs round robin over the channels it believes
//! alive, and replays what was outstanding on a channel that failed. Each flow's SQOS client
//! (what it asks and when) is in `flows`.

use std::io::Write;

use super::net::{ChanRt, Ctx, Item, ReqItem, ReqKind, RespItem, RespKind, Target};
use super::records::{PolRec, UpdRec};
use super::vm::Vms;
use super::Ev;
use crate::sqos::FSCTL_STORAGE_QOS_CONTROL;
use crate::synth::packet::Endpoint;
use crate::synth::scenario::{Cluster, FlowSpec, PolicySpec, SetupStyle};
use crate::synth::seal::Sealer;
use crate::synth::smb2::{self, FileId, Header};
use crate::synth::wire::{ConnSpec, Side, Time};

/// Time between a host's session being ready and its next channel connecting, µs.
const CHANNEL_CONNECT_GAP_US: u64 = 3_000;
/// The spare open's file (misbehaving and faulty-server scenarios).
pub(super) const SPARE_FILE: &str = "scratch\\probe.vhdx";

/// A host's own state.
pub(super) struct HostRt {
    pub spare: Option<FileId>,
    /// The host's channels (indices in the channels), the first one its primary.
    pub chans: Vec<usize>,
    /// Round robin over the channels.
    rr: usize,
    /// Open.ChannelSequence (MS-SMB2 3.2.4.1.x), raised when a channel fails.
    channel_sequence: u16,
}

/// A VM disk as its host's SQOS client knows it.
pub(super) struct FlowRt {
    pub host: usize,
    pub spec: FlowSpec,
    pub fid: Option<FileId>,
    /// Its first status is in: the VM's I/O may flow.
    pub ready: bool,
    pub closing: bool,
    pub policy: PolicySpec,
    pub max_io_rate: u64,
    pub max_bw: u64,
    pub base: u32,
    pub last_update: Option<Time>,
    pub timer_gen: u64,
    /// Handed over (`Action::Handoff`): drains, sends `final_msg`, closes, opens `handoff`.
    pub retired: bool,
    pub handoff: Option<(usize, u64)>,
    pub final_msg: Option<usize>,
    pub updates: Vec<UpdRec>,
    pub policies: Vec<PolRec>,
    pub file_names: Vec<String>,
}

/// The client side of the cluster: every host and the flows of its VMs.
pub(super) struct Hosts {
    pub hosts: Vec<HostRt>,
    pub flows: Vec<FlowRt>,
}

impl Hosts {
    /// The hosts of `c` with the flows `(host, spec)`, and their channels (the primary
    /// channel of host h is channel h; further channels follow).
    pub fn new(c: &Cluster, flows: Vec<(usize, FlowSpec)>) -> (Hosts, Vec<ChanRt>) {
        let flows = flows
            .into_iter()
            .map(|(host, spec)| FlowRt {
                host,
                policy: spec.policy,
                spec,
                fid: None,
                ready: false,
                closing: false,
                max_io_rate: 0,
                max_bw: 0,
                base: 8192,
                last_update: None,
                timer_gen: 0,
                retired: false,
                handoff: None,
                final_msg: None,
                updates: Vec::new(),
                policies: Vec::new(),
                file_names: Vec::new(),
            })
            .collect();
        let mut chans: Vec<ChanRt> = (0..c.hosts.len()).map(|h| ChanRt::new(h, 0)).collect();
        let mut hosts = Vec::new();
        for (h, spec) in c.hosts.iter().enumerate() {
            let mut mine = vec![h];
            for index in 1..=spec.extra_channels.len() {
                mine.push(chans.len());
                chans.push(ChanRt::new(h, index));
            }
            hosts.push(HostRt {
                spare: None,
                chans: mine,
                rr: 0,
                channel_sequence: 0,
            });
        }
        (Hosts { hosts, flows }, chans)
    }

    /// The channel the host sends its next request on: round robin over the channels its
    /// session is bound to and it believes alive (its primary before any other is bound).
    pub fn next_chan<W: Write>(&self, ctx: &Ctx<W>, h: usize) -> usize {
        let Some(host) = self.hosts.get(h) else {
            return h;
        };
        let live: Vec<usize> = host
            .chans
            .iter()
            .copied()
            .filter(|&c| ctx.chans.get(c).is_some_and(|x| x.ready && !x.known_dead))
            .collect();
        if live.is_empty() {
            return h;
        }
        live[host.rr % live.len()]
    }

    /// `next_chan`, and the round robin moves on.
    pub fn pick_chan<W: Write>(&mut self, ctx: &Ctx<W>, h: usize) -> usize {
        let ch = self.next_chan(ctx, h);
        if let Some(host) = self.hosts.get_mut(h) {
            host.rr = host.rr.wrapping_add(1);
        }
        ch
    }

    /// The header of a request the host sends on channel `ch` (MessageIds count per channel).
    pub fn header<W: Write>(
        &self,
        ctx: &mut Ctx<W>,
        ch: usize,
        command: u16,
        charge: u16,
    ) -> Header {
        let chan = &mut ctx.chans[ch];
        let mid = chan.next_mid;
        chan.next_mid += u64::from(charge.max(1));
        let h = chan.host;
        let session = &ctx.sessions[h];
        let credits = charge.max(1) + u16::from(command == smb2::NEGOTIATE) * 30;
        Header {
            // ChannelSequence (SMB 3.x requests): raised after a channel failed.
            status: u32::from(self.hosts[h].channel_sequence),
            ..Header::request(command, mid, charge, credits, session.tree, session.session)
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn send<W: Write>(
        &self,
        ctx: &mut Ctx<W>,
        ch: usize,
        t: Time,
        hdr: Header,
        body: &[u8],
        fill: usize,
        kind: ReqKind,
    ) {
        let item = Item::Req(ReqItem { hdr, kind });
        ctx.send(ch, Side::Client, t, hdr, body, fill, item);
    }

    /// Connect channel `ch` and send its NEGOTIATE. The primary then sets the session up, a
    /// further channel binds to it (SESSION_SETUP with SMB2_SESSION_FLAG_BINDING).
    pub fn connect_channel<W: Write>(&mut self, ctx: &mut Ctx<W>, ch: usize, t: Time) {
        let Some((h, index)) = ctx.chans.get(ch).map(|c| (c.host, c.index)) else {
            return;
        };
        let c = ctx.c;
        let Some(spec) = c.hosts.get(h) else {
            return;
        };
        let (client, server) = match index.checked_sub(1) {
            None => ((spec.mac, spec.ip), (c.server_mac, c.server_ip)),
            Some(i) => match spec.extra_channels.get(i) {
                Some(n) => ((n.client_mac, n.client_ip), (n.server_mac, n.server_ip)),
                None => return,
            },
        };
        let conn = ConnSpec {
            client: Endpoint {
                mac: client.0,
                ip: client.1,
                port: 49_700 + ctx.rng.below(12_000) as u16,
            },
            server: Endpoint {
                mac: server.0,
                ip: server.1,
                port: 445,
            },
            vlan: None,
            interface: spec.interface,
        };
        let ends = (
            std::net::SocketAddr::new(conn.client.ip, conn.client.port),
            std::net::SocketAddr::new(conn.server.ip, conn.server.port),
        );
        let (conn, ready) = ctx.wire.connect(conn, t);
        let chan = &mut ctx.chans[ch];
        chan.conn = conn;
        (chan.client, chan.server) = (Some(ends.0), Some(ends.1));
        if let (Some(cipher), 0) = (ctx.encrypt, index) {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&ctx.rng.next_u64().to_le_bytes());
            key[8..].copy_from_slice(&ctx.rng.next_u64().to_le_bytes());
            if let Some(s) = ctx.sessions.get_mut(h) {
                s.sealer = Some(Sealer::new(cipher, spec.smb_dialect, key));
            }
        }
        let mut guid = [0u8; 16];
        guid.copy_from_slice(&ctx.rng.uuid().to_bytes_le());
        let salt = ctx.salt();
        let ciphers = if ctx.encrypt.is_some() {
            smb2::CIPHERS_ALL
        } else {
            smb2::CIPHERS_128
        };
        let body = smb2::negotiate_request(spec.smb_dialect, &guid, &salt, ciphers, ctx.squeeze);
        let hdr = self.header(ctx, ch, smb2::NEGOTIATE, 0);
        self.send(ctx, ch, ready, hdr, &body, 0, ReqKind::Negotiate);
    }

    /// The client knows channel `ch` failed: what was outstanding on it is sent again on the
    /// host's other channels (SMB2_FLAGS_REPLAY_OPERATION on WRITE and IOCTL), with the
    /// ChannelSequence raised (MS-SMB2 3.2.4.1.x, 3.2.7.x).
    pub fn channel_failed<W: Write>(&mut self, ctx: &mut Ctx<W>, ch: usize, t: Time) {
        let Some(c) = ctx.chans.get_mut(ch) else {
            return;
        };
        if c.known_dead {
            return;
        }
        c.known_dead = true;
        let h = c.host;
        if let Some(host) = self.hosts.get_mut(h) {
            host.channel_sequence = host.channel_sequence.wrapping_add(1);
        }
        // In the order they were first sent.
        let ios: Vec<usize> = (0..ctx.ios.len())
            .filter(|&i| ctx.ios[i].chan == ch && ctx.ios[i].resp_done.is_none())
            .collect();
        let msgs: Vec<usize> = (0..ctx.msgs.len())
            .filter(|&m| {
                let r = &ctx.msgs[m];
                r.chan == ch && r.host == h && !r.answered
            })
            .collect();
        for io in ios {
            self.send_io(ctx, io, t, true);
        }
        for m in msgs {
            self.send_ioctl_msg(ctx, m, t, true);
        }
    }

    /// A response arrived on channel `ch`.
    pub fn response<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        vms: &mut Vms,
        ch: usize,
        t: Time,
        it: RespItem,
    ) {
        let Some((h, primary)) = ctx.chans.get(ch).map(|c| (c.host, c.index == 0)) else {
            return;
        };
        // A further channel binds the host's session (two legs, like its setup).
        let flags = if primary {
            0
        } else {
            smb2::SESSION_FLAG_BINDING
        };
        match it.kind {
            RespKind::Negotiate => {
                let hdr = self.header(ctx, ch, smb2::SESSION_SETUP, 1);
                let body = smb2::session_setup_request(flags);
                self.send(ctx, ch, t, hdr, &body, 0, ReqKind::Session(1));
            }
            RespKind::Session(1) => {
                let hdr = self.header(ctx, ch, smb2::SESSION_SETUP, 1);
                let body = smb2::session_setup_request(flags);
                self.send(ctx, ch, t, hdr, &body, 0, ReqKind::Session(2));
            }
            RespKind::Session(_) if !primary => {
                if let Some(c) = ctx.chans.get_mut(ch) {
                    c.ready = true;
                }
            }
            RespKind::Session(_) => {
                let path = ctx.c.share_path();
                let hdr = self.header(ctx, ch, smb2::TREE_CONNECT, 1);
                let body = smb2::tree_connect_request(&path);
                self.send(ctx, ch, t, hdr, &body, 0, ReqKind::Tree);
            }
            RespKind::Interfaces => {
                // The server's interfaces are known: one more channel per pair of NICs.
                let extra: Vec<usize> = self.hosts[h].chans.iter().skip(1).copied().collect();
                for (i, c) in extra.into_iter().enumerate() {
                    ctx.at(t + CHANNEL_CONNECT_GAP_US * (i as u64 + 1), Ev::Connect(c));
                }
            }
            RespKind::Tree => {
                if let Some(c) = ctx.chans.get_mut(ch) {
                    c.ready = true;
                }
                if self.hosts[h].chans.len() > 1 {
                    // Multichannel: ask the server for its interfaces (MS-SMB2 3.2.4.20.10).
                    let hdr = self.header(ctx, ch, smb2::IOCTL, 1);
                    let body = smb2::ioctl_request(
                        smb2::FSCTL_QUERY_NETWORK_INTERFACE_INFO,
                        &FileId {
                            persistent: u64::MAX,
                            volatile: u64::MAX,
                        },
                        &[],
                        65_536,
                    );
                    self.send(ctx, ch, t, hdr, &body, 0, ReqKind::Interfaces);
                }
                // Open every disk of the host at once (one write, several messages per segment).
                let mine: Vec<usize> = (0..self.flows.len())
                    .filter(|&f| self.flows[f].host == h && self.flows[f].spec.opened_at_start)
                    .collect();
                for f in mine {
                    self.send_create(ctx, h, t, Target::Flow(f));
                }
                if ctx.c.spare_open {
                    self.send_create(ctx, h, t, Target::Spare);
                }
            }
            RespKind::Create(Target::Flow(f), fid) => {
                if let Some(fl) = self.flows.get_mut(f) {
                    fl.fid = Some(fid);
                    fl.closing = false;
                    let name = fl.spec.path.clone();
                    fl.file_names.push(name);
                    let style = if fl.file_names.len() > 1 {
                        SetupStyle::Separate
                    } else {
                        fl.spec.setup
                    };
                    self.setup_flow(ctx, f, t, style);
                }
            }
            RespKind::Create(Target::Spare, fid) => {
                if let Some(host) = self.hosts.get_mut(h) {
                    host.spare = Some(fid);
                }
            }
            RespKind::Close(Target::Flow(f)) => match self.flows.get(f) {
                Some(fl) if fl.retired => {
                    if let Some((to, after)) = fl.handoff {
                        ctx.at(t + after, Ev::Open(to));
                    }
                }
                _ => self.send_create(ctx, h, t, Target::Flow(f)),
            },
            RespKind::Close(Target::Spare) => {}
            RespKind::Io(io) => vms.io_complete(ctx, self, io, t),
            RespKind::Ioctl(m) => {
                if let Some(rec) = ctx.msgs.get_mut(m) {
                    rec.answered = true;
                }
                self.ioctl_answered(ctx, vms, m, t, it.status)
            }
        }
    }

    /// A handed-over flow opens its disk on its new host.
    pub fn open<W: Write>(&mut self, ctx: &mut Ctx<W>, f: usize, t: Time) {
        if let Some(h) = self.flows.get(f).map(|fl| fl.host) {
            self.send_create(ctx, h, t, Target::Flow(f));
        }
    }

    fn send_create<W: Write>(&mut self, ctx: &mut Ctx<W>, h: usize, t: Time, target: Target) {
        let name = match target {
            Target::Flow(f) => self
                .flows
                .get(f)
                .map(|f| f.spec.path.clone())
                .unwrap_or_default(),
            Target::Spare => SPARE_FILE.to_string(),
        };
        let hdr = self.header(ctx, h, smb2::CREATE, 1);
        let body = smb2::create_request(&name);
        self.send(ctx, h, t, hdr, &body, 0, ReqKind::Create(target));
    }

    pub fn send_close<W: Write>(&mut self, ctx: &mut Ctx<W>, f: usize, t: Time) {
        let Some(fl) = self.flows.get_mut(f) else {
            return;
        };
        let Some(fid) = fl.fid.take() else {
            return;
        };
        fl.ready = false;
        let h = fl.host;
        let hdr = self.header(ctx, h, smb2::CLOSE, 1);
        let body = smb2::close_request(&fid);
        let kind = ReqKind::Close(Target::Flow(f), fid);
        self.send(ctx, h, t, hdr, &body, 0, kind);
    }

    /// Sends the request of I/O `io` on its host's next channel; `replay` sends it again after
    /// the channel it was outstanding on failed (a WRITE flagged as a replay).
    pub fn send_io<W: Write>(&mut self, ctx: &mut Ctx<W>, io: usize, t: Time, replay: bool) {
        let Some(rec) = ctx.ios.get(io) else {
            return;
        };
        let (write, len, offset) = (rec.write, rec.len, rec.offset);
        let Some(fl) = self.flows.get(rec.flow) else {
            return;
        };
        let (h, fid) = (fl.host, fl.fid.unwrap_or_default());
        let ch = self.pick_chan(ctx, h);
        if let Some(rec) = ctx.ios.get_mut(io) {
            rec.chan = ch;
        }
        let charge = len.div_ceil(65536).max(1) as u16;
        if write {
            let hdr = Header {
                replay,
                ..self.header(ctx, ch, smb2::WRITE, charge)
            };
            let body = smb2::write_request(&fid, offset, len);
            self.send(ctx, ch, t, hdr, &body, len as usize, ReqKind::Io(io));
        } else {
            let hdr = self.header(ctx, ch, smb2::READ, charge);
            let body = smb2::read_request(&fid, offset, len);
            self.send(ctx, ch, t, hdr, &body, 0, ReqKind::Io(io));
        }
    }

    /// Sends the IOCTL of message `m` on the host's next channel; `replay` sends it again after
    /// the channel it was outstanding on failed.
    pub fn send_ioctl_msg<W: Write>(&mut self, ctx: &mut Ctx<W>, m: usize, t: Time, replay: bool) {
        let Some(rec) = ctx.msgs.get(m) else {
            return;
        };
        let (h, fid, max_out) = (rec.host, rec.fid, rec.max_out);
        let input =
            crate::sqos::encode_request_with(&rec.req, crate::sqos::NamePlacement::AfterFixedPart);
        // A reset armed on one of the host's channels strikes the next SQOS request: it goes
        // out there (scripted, so that a status request is lost with the channel).
        let armed = self.hosts.get(h).and_then(|x| {
            x.chans.iter().copied().find(|&c| {
                ctx.chans.get(c).is_some_and(|c| {
                    c.ready
                        && !c.known_dead
                        && c.armed == Some(crate::synth::scenario::DropKind::Rst)
                })
            })
        });
        let ch = match (armed, replay) {
            (Some(c), false) => c,
            _ => self.pick_chan(ctx, h),
        };
        let hdr = Header {
            replay,
            ..self.header(ctx, ch, smb2::IOCTL, 1)
        };
        if let Some(rec) = ctx.msgs.get_mut(m) {
            rec.chan = ch;
            if !replay {
                rec.mid = hdr.message_id;
            }
        }
        let body = smb2::ioctl_request(FSCTL_STORAGE_QOS_CONTROL, &fid, &input, max_out);
        self.send(ctx, ch, t, hdr, &body, 0, ReqKind::Ioctl(m));
    }
}
