//! The Scale-Out File Server as the simulation runs it: answers each request (NEGOTIATE,
//! SESSION_SETUP, TREE_CONNECT with the share, CREATE with new FileIds, CLOSE, the interface
//! list), serves READ/WRITE from shared storage (a FIFO of `storage_iops` normalized I/Os per
//! second plus a service time), and answers SQOS requests with the rules of `synth::server`,
//! a scripted bug striking the request it is armed for.

use std::io::Write;

use uuid::Uuid;

use super::client::Hosts;
use super::net::{Ctx, Item, ReqItem, ReqKind, RespItem, RespKind, Target};
use super::Ev;
use crate::smb2::crypto::Cipher;
use crate::sqos::{encode_request_with, encode_response, NamePlacement, FSCTL_STORAGE_QOS_CONTROL};
use crate::synth::rng::Rng;
use crate::synth::scenario::{Cluster, FaultOn};
use crate::synth::server::{ServerFault, ServerPolicy, SqosServer};
use crate::synth::smb2::{self, FileId, Header};
use crate::synth::wire::{Side, Time};

/// Server think time before answering, µs.
const SERVER_TURNAROUND_US: u64 = 25;

pub(super) struct FileServer {
    sqos: SqosServer,
    /// The storage is busy until then.
    storage_free: Time,
    /// Bugs armed and waiting for the request they strike, in arming order.
    armed: Vec<usize>,
    /// Per host: the next volatile FileId.
    next_volatile: Vec<u64>,
}

impl FileServer {
    pub fn new(c: &Cluster, rng: Rng) -> FileServer {
        let mut sqos = SqosServer::new(c.reservable_iops, c.base_ttl_ms, rng);
        for (id, p) in &c.policies {
            sqos.set_policy(*id, *p);
        }
        FileServer {
            sqos,
            storage_free: 0,
            armed: Vec::new(),
            next_volatile: vec![1; c.hosts.len()],
        }
    }

    /// The administrator changes a policy.
    pub fn set_policy(&mut self, id: Uuid, policy: ServerPolicy) {
        self.sqos.set_policy(id, policy);
    }

    /// Bug `i` of the cluster strikes the next request it matches.
    pub fn arm(&mut self, i: usize) {
        self.armed.push(i);
    }

    /// Sends a response: `hdr` is the request's header with the status to answer.
    fn send<W: Write>(
        ctx: &mut Ctx<W>,
        ch: usize,
        t: Time,
        hdr: Header,
        body: &[u8],
        fill: usize,
        kind: RespKind,
    ) {
        let status = hdr.status;
        let hdr = Header {
            response: true,
            credits: hdr.credit_charge.max(1),
            ..hdr
        };
        let item = Item::Resp(RespItem { status, kind });
        ctx.send(ch, Side::Server, t, hdr, body, fill, item);
    }

    /// A request arrived on channel `ch`. `hosts` tells which file an open is.
    pub fn request<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        hosts: &Hosts,
        ch: usize,
        t: Time,
        it: ReqItem,
    ) {
        let reply = t + SERVER_TURNAROUND_US;
        let Some(h) = ctx.chans.get(ch).map(|c| c.host) else {
            return;
        };
        let c = ctx.c;
        let Some(spec) = c.hosts.get(h) else {
            return;
        };
        // The answer's header: the request's without its ChannelSequence and replay flag.
        let hdr = Header {
            status: 0,
            replay: false,
            ..it.hdr
        };
        match it.kind {
            ReqKind::Negotiate => {
                let guid = *Uuid::from_u128(0x5f0f_5e77_0000_4000_8000_0000_0000_0100).as_bytes();
                let salt = ctx.salt();
                let body = smb2::negotiate_response(
                    spec.smb_dialect,
                    &guid,
                    reply,
                    c.start - 3_600_000_000 * 30,
                    &salt,
                    ctx.encrypt.map_or(smb2::CIPHER_DEFAULT, Cipher::id),
                    ctx.squeeze,
                );
                Self::send(ctx, ch, reply, hdr, &body, 0, RespKind::Negotiate);
            }
            ReqKind::Session(round) => {
                let session = 0x0000_4400_0000_0011 + ((h as u64) << 8);
                if let Some(s) = ctx.sessions.get_mut(h) {
                    s.session = session;
                }
                let status = if round == 1 {
                    smb2::STATUS_MORE_PROCESSING_REQUIRED
                } else {
                    0
                };
                let hdr = Header {
                    session_id: session,
                    status,
                    ..hdr
                };
                let body = smb2::session_setup_response();
                Self::send(ctx, ch, reply, hdr, &body, 0, RespKind::Session(round));
            }
            ReqKind::Tree => {
                let tree = 1 + h as u32;
                if let Some(s) = ctx.sessions.get_mut(h) {
                    s.tree = tree;
                }
                let hdr = Header {
                    tree_id: tree,
                    ..hdr
                };
                let body = smb2::tree_connect_response();
                Self::send(ctx, ch, reply, hdr, &body, 0, RespKind::Tree);
            }
            ReqKind::Create(target) => {
                let Some(next) = self.next_volatile.get_mut(h) else {
                    return;
                };
                let fid = FileId {
                    persistent: 0x0000_0800_0000_0000 | ((h as u64) << 24) | *next,
                    volatile: 0x0000_0c00_0000_0000 | ((h as u64) << 32) | (*next * 0x41),
                };
                *next += 1;
                let size = match target {
                    Target::Flow(f) => hosts.flows.get(f).map_or(1 << 30, |f| f.spec.disk_bytes),
                    Target::Spare => 4 << 20,
                };
                let body = smb2::create_response(&fid, reply, size);
                Self::send(ctx, ch, reply, hdr, &body, 0, RespKind::Create(target, fid));
            }
            ReqKind::Close(target, fid) => {
                self.sqos.close((h as u32, fid.volatile));
                let body = smb2::close_response();
                Self::send(ctx, ch, reply, hdr, &body, 0, RespKind::Close(target));
            }
            ReqKind::Io(io) => {
                let Some(rec) = ctx.ios.get_mut(io) else {
                    return;
                };
                // Shared storage: a FIFO that serves `storage_iops` normalized I/Os per second,
                // plus a service time growing with the size.
                let norm = u64::from(rec.len).div_ceil(8192);
                let start = self.storage_free.max(t);
                self.storage_free = start + norm * 1_000_000 / c.storage_iops.max(1);
                let service = 120 + u64::from(rec.len) / 2500 + ctx.rng.below(160);
                rec.hdr = hdr;
                ctx.at(self.storage_free + service, Ev::IoDone(ch, io));
            }
            ReqKind::Ioctl(m) => self.ioctl(ctx, hosts, ch, reply, hdr, m),
            ReqKind::Interfaces => {
                let nics: Vec<(std::net::IpAddr, u32)> = std::iter::once(c.server_ip)
                    .chain(spec.extra_channels.iter().map(|n| n.server_ip))
                    .zip(1u32..)
                    .collect();
                let out = smb2::network_interface_info(&nics);
                let any = FileId {
                    persistent: u64::MAX,
                    volatile: u64::MAX,
                };
                let body =
                    smb2::ioctl_response(smb2::FSCTL_QUERY_NETWORK_INTERFACE_INFO, &any, &out);
                Self::send(ctx, ch, reply, hdr, &body, 0, RespKind::Interfaces);
            }
        }
    }

    /// The storage has done I/O `io`: its response goes out (unless its channel failed).
    pub fn io_done<W: Write>(&mut self, ctx: &mut Ctx<W>, ch: usize, t: Time, io: usize) {
        // The server cannot answer on a connection that failed.
        if ctx.dead(ch, t) {
            return;
        }
        let Some(rec) = ctx.ios.get(io) else {
            return;
        };
        let (len, hdr, write) = (rec.len, rec.hdr, rec.write);
        if write {
            let body = smb2::write_response(len);
            Self::send(ctx, ch, t, hdr, &body, 0, RespKind::Io(io));
        } else {
            let body = smb2::read_response(len);
            Self::send(ctx, ch, t, hdr, &body, len as usize, RespKind::Io(io));
        }
    }

    fn ioctl<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        hosts: &Hosts,
        ch: usize,
        t: Time,
        hdr: Header,
        m: usize,
    ) {
        let Some(rec) = ctx.msgs.get(m) else {
            return;
        };
        let h = rec.host;
        let fid = match rec.target {
            Target::Flow(f) => hosts.flows.get(f).and_then(|f| f.fid),
            Target::Spare => hosts.hosts.get(h).and_then(|x| x.spare),
        }
        .unwrap_or_default();
        let size = encode_request_with(&rec.req, NamePlacement::AfterFixedPart).len();
        // The first armed bug this request matches strikes it.
        let on = match rec.target {
            Target::Flow(f) => FaultOn::Flow(f),
            Target::Spare => FaultOn::Spare(h),
        };
        let opts = rec.req.options;
        let faults = &ctx.c.faults;
        let hit = self.armed.iter().position(|&i| {
            faults
                .get(i)
                .is_some_and(|f| f.on == on && opts.contains(f.when))
        });
        let fault_index = hit.map(|p| self.armed.remove(p));
        let fault = fault_index.and_then(|i| faults.get(i)).map(|f| f.fault);
        let result =
            self.sqos
                .handle_with((h as u32, fid.volatile), &rec.req, size, rec.max_out, fault);
        let rec = &mut ctx.msgs[m];
        rec.fault = fault_index;
        if fault == Some(ServerFault::NoResponse) {
            // Lost in the server: the client's request stays outstanding.
            return;
        }
        match result {
            Ok(resp) => {
                rec.nt = Some(0);
                let out = resp.as_ref().map(encode_response).unwrap_or_default();
                rec.resp = resp;
                let body = smb2::ioctl_response(FSCTL_STORAGE_QOS_CONTROL, &fid, &out);
                Self::send(ctx, ch, t, hdr, &body, 0, RespKind::Ioctl(m));
            }
            Err(status) => {
                rec.nt = Some(status);
                let hdr = Header { status, ..hdr };
                Self::send(
                    ctx,
                    ch,
                    t,
                    hdr,
                    &smb2::error_response(),
                    0,
                    RespKind::Ioctl(m),
                );
            }
        }
    }
}
