//! The cluster simulation, in capture time: Hyper-V hosts (SMB2 clients with MS-SQOS logical
//! flows, section 3.1, [`client`] and [`flows`]), VMs doing I/O through them ([`vm`]), and the
//! file server (SMB2 server, storage, and the MS-SQOS server of section 3.2, [`file_server`]).
//! They talk over [`net`]'s channels; events run in time order; every message goes through the
//! wire, which tells when its receiver has it. [`records`] holds what happened, [`result`]
//! turns it into the ground truth.

mod client;
mod file_server;
mod flows;
mod net;
mod records;
mod result;
mod vm;

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use super::rng::Rng;
use super::scenario::{Action, Cluster};
use super::seal::Sealer;
use super::squeeze::Squeezer;
use super::wire::{Time, Wire};
use crate::smb2::crypto::Cipher;

use client::Hosts;
use file_server::FileServer;
use net::Ctx;
pub use result::SimResult;
use vm::Vms;

/// How far ahead of its average rate a throttled flow may run (burst tolerance), µs: over any
/// window of T seconds a throttled flow starts at most MaximumIoRate × (T + 0.25) normalized
/// I/Os plus one I/O.
pub const BURST_US: u64 = 250_000;
/// How long a client takes to notice that a channel went silent (its requests unanswered,
/// TCP retransmissions unacknowledged), µs.
const SILENCE_DETECT_US: u64 = 1_000_000;

/// What happens at a time.
enum Ev {
    Start(usize),
    ToServer(usize, Vec<net::ReqItem>),
    ToClient(usize, Vec<net::RespItem>),
    IoDone(usize, usize),
    Arrival(usize),
    Dispatch(usize),
    Status(usize, u64),
    Script(usize),
    /// A handed-over flow opens its disk.
    Open(usize),
    /// A further channel of a host connects (index in the channels).
    Connect(usize),
    /// The client notices that a silent channel failed.
    Detect(usize),
}

struct Event {
    t: Time,
    class: u8,
    order: u64,
    ev: Ev,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.class, self.order) == (o.t, o.class, o.order)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.class, o.order).cmp(&(self.t, self.class, self.order))
    }
}

/// The events to come, earliest first (responses to the client before anything else at the
/// same time, then in the order they were scheduled).
#[derive(Default)]
struct Agenda {
    events: BinaryHeap<Event>,
    order: u64,
}

impl Agenda {
    fn at(&mut self, t: Time, ev: Ev) {
        self.order += 1;
        let class = u8::from(!matches!(ev, Ev::ToClient(..)));
        self.events.push(Event {
            t,
            class,
            order: self.order,
            ev,
        });
    }

    fn next(&mut self) -> Option<Event> {
        self.events.pop()
    }
}

pub struct Sim<'c, W: Write> {
    ctx: Ctx<'c, W>,
    hosts: Hosts,
    vms: Vms,
    server: FileServer,
}

impl<'c, W: Write> Sim<'c, W> {
    pub fn new(c: &'c Cluster, wire: Wire<W>, rng: Rng) -> Sim<'c, W> {
        let server = FileServer::new(c, rng.fork(1));
        let mut vms = Vms::default();
        let mut flows = Vec::new();
        for (h, f) in c.flows() {
            vms.add(rng.fork(100 + flows.len() as u64));
            flows.push((h, f.clone()));
        }
        let (hosts, chans) = Hosts::new(c, flows);
        Sim {
            ctx: Ctx::new(c, wire, rng.fork(2), chans),
            hosts,
            vms,
            server,
        }
    }

    /// Compress messages (SMB 3.1.1 hosts) as `squeeze` says.
    pub fn compressed(mut self, squeeze: Option<Squeezer>) -> Self {
        self.ctx.squeeze = squeeze;
        self
    }

    /// Encrypt every session (after its SESSION_SETUP) with `cipher`.
    pub fn encrypted(mut self, cipher: Option<Cipher>) -> Self {
        self.ctx.encrypt = cipher;
        self
    }

    /// Runs the whole capture; returns the wire's traces and the records.
    pub fn run(mut self) -> io::Result<(W, SimResult)> {
        let c = self.ctx.c;
        for h in 0..c.hosts.len() {
            let t = c.start + 40_000 * h as u64 + self.ctx.rng.below(15_000);
            self.ctx.agenda.at(t, Ev::Start(h));
        }
        for (i, (off, _)) in c.script.iter().enumerate() {
            self.ctx.agenda.at(c.start + off, Ev::Script(i));
        }
        let end = c.start + c.duration_us;
        while let Some(e) = self.ctx.agenda.next() {
            if e.t > end {
                break;
            }
            self.ctx.wire.flush_before(e.t)?;
            self.handle(e.t, e.ev);
            self.ctx.flush_outbox();
        }
        let keys = self
            .ctx
            .sessions
            .iter()
            .filter_map(|s| s.sealer.as_ref().and_then(Sealer::session_keys))
            .collect();
        SimResult::new(self.ctx, self.hosts, self.vms, keys)
    }

    fn handle(&mut self, t: Time, ev: Ev) {
        let ctx = &mut self.ctx;
        match ev {
            Ev::Start(h) => self.hosts.connect_channel(ctx, h, t),
            // What a failed channel carries is lost.
            Ev::ToServer(ch, items) if !ctx.dead(ch, t) => {
                for it in items {
                    self.server.request(ctx, &self.hosts, ch, t, it);
                }
            }
            Ev::ToClient(ch, items) if !ctx.dead(ch, t) => {
                for it in items {
                    self.hosts.response(ctx, &mut self.vms, ch, t, it);
                }
            }
            Ev::ToServer(..) | Ev::ToClient(..) => {}
            Ev::IoDone(ch, io) => self.server.io_done(ctx, ch, t, io),
            Ev::Arrival(f) => self.vms.arrival(ctx, &mut self.hosts, f, t),
            Ev::Dispatch(f) => {
                self.vms.dispatch_due(f);
                self.vms.dispatch(ctx, &mut self.hosts, f, t);
            }
            Ev::Status(f, gen) => self.hosts.status_timer(ctx, &mut self.vms, f, gen, t),
            Ev::Script(i) => self.script(i, t),
            Ev::Open(f) => self.hosts.open(ctx, f, t),
            Ev::Connect(ch) => self.hosts.connect_channel(ctx, ch, t),
            Ev::Detect(ch) => self.hosts.channel_failed(ctx, ch, t),
        }
    }

    /// A scripted event: the server's policies and bugs are the server's, the rest the hosts'.
    fn script(&mut self, i: usize, t: Time) {
        let Some((_, action)) = self.ctx.c.script.get(i) else {
            return;
        };
        match action.clone() {
            Action::ServerPolicy { id, policy } => self.server.set_policy(id, policy),
            Action::ArmFault(i) => self.server.arm(i),
            action => self.hosts.script(&mut self.ctx, &mut self.vms, action, t),
        }
    }
}
