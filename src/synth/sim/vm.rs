//! The VMs' I/O: each VM disk asks for READs and WRITEs at random times (its demand: rate,
//! sizes, read share), they wait in the VM's queue, and the host starts them as its queue depth
//! and — for a host that obeys — the flow's limits allow (section 3.1.7.1, a token bucket with
//! `BURST_US` of tolerance). Completed I/O is counted for the flow's next update.

use std::collections::VecDeque;
use std::io::Write;

use super::client::{FlowRt, Hosts};
use super::net::Ctx;
use super::records::{Counters, IoRec};
use super::{Ev, BURST_US};
use crate::sqos::Dialect;
use crate::synth::rng::Rng;
use crate::synth::smb2::Header;
use crate::synth::wire::Time;

/// Requests the VM queues before it blocks.
const VM_QUEUE_LIMIT: usize = 64;

/// One VM disk's I/O.
pub(super) struct VmDisk {
    rng: Rng,
    /// Asked for, not started: (asked at, write, length, offset).
    queue: VecDeque<(Time, bool, u32, u64)>,
    /// Its arrivals have started.
    arrivals: bool,
    outstanding: u32,
    /// The throttle's theoretical time for the next I/O.
    next_allowed: Time,
    dispatch_at: Option<Time>,
    /// Completed since the last update: their counters and records.
    cnt: Counters,
    ios: Vec<usize>,
    pub totals: Counters,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl VmDisk {
    /// Completed I/O no update reported.
    pub fn unreported(&self) -> u64 {
        self.ios.len() as u64
    }
}

#[derive(Default)]
pub(super) struct Vms {
    pub disks: Vec<VmDisk>,
}

impl Vms {
    /// The next flow's disk, drawing from `rng`.
    pub fn add(&mut self, rng: Rng) {
        self.disks.push(VmDisk {
            rng,
            queue: VecDeque::new(),
            arrivals: false,
            outstanding: 0,
            next_allowed: 0,
            dispatch_at: None,
            cnt: Counters::default(),
            ios: Vec::new(),
            totals: Counters::default(),
            bytes_read: 0,
            bytes_written: 0,
        });
    }

    /// The flow is set up: its VM starts asking for I/O (once).
    pub fn start<W: Write>(&mut self, ctx: &mut Ctx<W>, f: usize, t: Time) {
        if let Some(d) = self.disks.get_mut(f).filter(|d| !d.arrivals) {
            d.arrivals = true;
            ctx.at(t + 1, Ev::Arrival(f));
        }
    }

    /// I/Os of flow `f` started and not completed.
    pub fn outstanding(&self, f: usize) -> u32 {
        self.disks.get(f).map_or(0, |d| d.outstanding)
    }

    /// The counters and the I/O completed since the last update, for the next one.
    pub fn take_interval(&mut self, f: usize) -> (Counters, Vec<usize>) {
        match self.disks.get_mut(f) {
            Some(d) => (std::mem::take(&mut d.cnt), std::mem::take(&mut d.ios)),
            None => (Counters::default(), Vec::new()),
        }
    }

    /// The disk leaves its host: what the VM queued is not started.
    pub fn cancel_queued(&mut self, f: usize) {
        if let Some(d) = self.disks.get_mut(f) {
            d.queue.clear();
        }
    }

    /// A scheduled dispatch is due.
    pub fn dispatch_due(&mut self, f: usize) {
        if let Some(d) = self.disks.get_mut(f) {
            d.dispatch_at = None;
        }
    }

    /// The VM asks for one more I/O; the next arrival is drawn.
    pub fn arrival<W: Write>(&mut self, ctx: &mut Ctx<W>, hosts: &mut Hosts, f: usize, t: Time) {
        let end = ctx.c.start + ctx.c.duration_us;
        let Some(fl) = hosts.flows.get(f).filter(|fl| !fl.retired) else {
            return;
        };
        let Some(d) = self.disks.get_mut(f) else {
            return;
        };
        let demand = &fl.spec.demand;
        if d.queue.len() < VM_QUEUE_LIMIT {
            let weights: Vec<u32> = demand.sizes.iter().map(|s| s.1).collect();
            let size = demand
                .sizes
                .get(d.rng.weighted(&weights))
                .map_or(4096, |s| s.0);
            let write = d.rng.below(100) >= u64::from(demand.read_percent);
            let blocks = (fl.spec.disk_bytes / 4096)
                .saturating_sub(u64::from(size / 4096) + 1)
                .max(1);
            let offset = d.rng.below(blocks) * 4096;
            d.queue.push_back((t, write, size, offset));
        }
        let mean = 1e6 / demand.iops.max(0.01);
        let next = t + (d.rng.exp(mean) as u64).max(1);
        if next < end {
            ctx.at(next, Ev::Arrival(f));
        }
        self.dispatch(ctx, hosts, f, t);
    }

    /// Starts what the VM queued as far as the queue depth and the throttle allow.
    pub fn dispatch<W: Write>(&mut self, ctx: &mut Ctx<W>, hosts: &mut Hosts, f: usize, t: Time) {
        let Some(fl) = hosts.flows.get(f) else {
            return;
        };
        let host = &ctx.c.hosts[fl.host];
        let (obey, dialect) = (host.obeys_limits, host.sqos);
        let bandwidth = host.throttles_bandwidth;
        loop {
            let fl = &hosts.flows[f];
            let d = &mut self.disks[f];
            if !fl.ready
                || fl.closing
                || fl.fid.is_none()
                || d.outstanding >= fl.spec.demand.queue_depth
            {
                return;
            }
            let Some(&(gen, write, len, offset)) = d.queue.front() else {
                return;
            };
            let rate = if obey {
                effective_rate(fl, dialect, bandwidth)
            } else {
                None
            };
            if let Some(rate) = rate {
                // GCRA (a token bucket): `next_allowed` is the flow's theoretical time; an I/O
                // may start up to BURST_US ahead of it, then pushes it by its normalized cost.
                let earliest = d.next_allowed.saturating_sub(BURST_US);
                if t < earliest {
                    if d.dispatch_at.is_none() {
                        d.dispatch_at = Some(earliest);
                        ctx.at(earliest, Ev::Dispatch(f));
                    }
                    return;
                }
                let norm = u64::from(len).div_ceil(u64::from(fl.base.max(1)));
                d.next_allowed = d.next_allowed.max(t) + (norm as f64 * 1e6 / rate).ceil() as u64;
            }
            d.queue.pop_front();
            d.outstanding += 1;
            let base = fl.base;
            let io = ctx.ios.len();
            ctx.ios.push(IoRec {
                flow: f,
                chan: 0,
                write,
                offset,
                len,
                norm: u64::from(len).div_ceil(u64::from(base.max(1))),
                gen,
                req_tag: 0,
                req_done: 0,
                resp_tag: None,
                resp_done: None,
                hdr: Header::default(),
            });
            hosts.send_io(ctx, io, t, false);
        }
    }

    /// The response of I/O `io` is in: counted, and the flow closes once drained if it is
    /// closing.
    pub fn io_complete<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        hosts: &mut Hosts,
        io: usize,
        t: Time,
    ) {
        let Some(rec) = ctx.ios.get_mut(io) else {
            return;
        };
        rec.resp_done = Some(t);
        let f = rec.flow;
        let lower = (t - rec.req_done) * 10;
        let latency = (t - rec.gen) * 10;
        let (len, write) = (rec.len, rec.write);
        let (Some(fl), Some(d)) = (hosts.flows.get(f), self.disks.get_mut(f)) else {
            return;
        };
        let norm = u64::from(len).div_ceil(u64::from(fl.base.max(1)));
        rec.norm = norm;
        for c in [&mut d.cnt, &mut d.totals] {
            c.io += 1;
            c.norm += norm;
            c.latency += latency;
            c.lower += lower;
            c.bytes += u64::from(len);
        }
        if write {
            d.bytes_written += u64::from(len);
        } else {
            d.bytes_read += u64::from(len);
        }
        d.ios.push(io);
        d.outstanding = d.outstanding.saturating_sub(1);
        if fl.closing && d.outstanding == 0 && fl.fid.is_some() {
            if fl.retired {
                hosts.arm_timer(ctx, f, t, 0);
            } else {
                hosts.send_close(ctx, f, t);
            }
        }
        self.dispatch(ctx, hosts, f, t);
    }
}

/// Section 3.1.7.1: the rate (normalized IOPS) a flow must not exceed on average, if any
/// (MaximumBandwidth counts only for a 1.1 client that `throttles_bandwidth`).
pub(super) fn effective_rate(
    fl: &FlowRt,
    dialect: Dialect,
    throttles_bandwidth: bool,
) -> Option<f64> {
    let mut rate: Option<f64> = None;
    if fl.max_io_rate > 0 {
        rate = Some(fl.max_io_rate as f64);
    }
    if dialect == Dialect::V1_1 && throttles_bandwidth && fl.max_bw > 0 {
        let bw = fl.max_bw as f64 * 1024.0 / f64::from(fl.base.max(1));
        rate = Some(rate.map_or(bw, |r| r.min(bw)));
    }
    rate
}
