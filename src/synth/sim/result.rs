//! What the simulation hands back: the records, the wire's traces to turn tags into frames,
//! and the ground truth built from them.

use std::io::{self, Write};

use super::client::{FlowRt, Hosts};
use super::net::Ctx;
use super::records::{IoRec, MsgRec};
use super::vm::{VmDisk, Vms};
use super::SILENCE_DETECT_US;
use crate::smb2::crypto::SessionKeys;
use crate::synth::scenario::{Cluster, DropKind};
use crate::synth::truth::{self, secs};
use crate::synth::wire::{Time, Trace};

/// A channel as the truth describes it.
struct ChanResult {
    host: usize,
    primary: bool,
    label: String,
    client: String,
    server: String,
    dropped: Option<(DropKind, Time)>,
}

/// Everything the simulation recorded, with the wire's traces to turn tags into frames.
pub struct SimResult {
    channels: Vec<ChanResult>,
    pub traces: Vec<Trace>,
    pub frames: u64,
    pub file_bytes: u64,
    pub retransmissions: u64,
    pub reordered: u64,
    pub missing: u64,
    ios: Vec<IoRec>,
    msgs: Vec<MsgRec>,
    flows: Vec<FlowRt>,
    disks: Vec<VmDisk>,
    /// `--encrypt`: the keys of every session, for the key file.
    pub keys: Vec<SessionKeys>,
}

impl SimResult {
    /// Ends the capture (every frame still queued is written) and keeps the records.
    pub(super) fn new<W: Write>(
        ctx: Ctx<W>,
        hosts: Hosts,
        vms: Vms,
        keys: Vec<SessionKeys>,
    ) -> io::Result<(W, SimResult)> {
        let retransmissions = ctx.wire.retransmissions;
        let reordered = ctx.wire.reordered;
        let missing = ctx.wire.unseen_segments;
        let (w, traces, frames, file_bytes) = ctx.wire.finish()?;
        let channels = ctx
            .chans
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let drop = ctx.drops.iter().find(|d| d.0 == i);
                ChanResult {
                    host: c.host,
                    primary: c.index == 0,
                    label: match (c.client, c.server) {
                        (Some(a), Some(b)) => format!("{a} → {b}"),
                        _ => String::new(),
                    },
                    client: c.client.map(|a| a.to_string()).unwrap_or_default(),
                    server: c.server.map(|a| a.to_string()).unwrap_or_default(),
                    dropped: drop.map(|d| (d.1, d.2)),
                }
            })
            .collect();
        let result = SimResult {
            channels,
            traces,
            frames,
            file_bytes,
            retransmissions,
            reordered,
            missing,
            ios: ctx.ios,
            msgs: ctx.msgs,
            flows: hosts.flows,
            disks: vms.disks,
            keys,
        };
        Ok((w, result))
    }

    fn trace(&self, tag: Option<u32>) -> Option<&Trace> {
        tag.and_then(|t| self.traces.get(t as usize))
    }

    fn frame(&self, tag: Option<u32>) -> Option<u64> {
        self.trace(tag).and_then(|t| t.frame)
    }

    /// Frame and time of the first send of a request that is in the capture.
    fn first_seen_send(&self, m: &MsgRec) -> Option<(u64, Time)> {
        m.sends
            .iter()
            .filter_map(|&(_, tag)| self.trace(Some(tag)))
            .find_map(|x| x.frame.map(|f| (f, x.ts)))
    }

    /// The channels a flow's completed I/O and its SQOS requests in the capture went over, in
    /// order of first use (by frame).
    fn flow_channels(&self, f: usize) -> Vec<String> {
        let mut uses: Vec<(u64, usize)> = Vec::new();
        for io in self.ios.iter().filter(|io| io.flow == f) {
            if let Some(fr) = self.frame(io.resp_tag).filter(|_| io.resp_done.is_some()) {
                uses.push((fr, io.chan));
            }
        }
        for m in self.msgs.iter().filter(|m| m.flow == Some(f)) {
            for &(ch, tag) in &m.sends {
                if let Some(fr) = self.frame(Some(tag)) {
                    uses.push((fr, ch));
                }
            }
        }
        uses.sort_unstable();
        let mut out: Vec<String> = Vec::new();
        for (_, ch) in uses {
            if let Some(label) = self.channels.get(ch).map(|c| c.label.clone()) {
                if !out.contains(&label) {
                    out.push(label);
                }
            }
        }
        out
    }

    /// Builds the ground truth (frames resolved).
    pub fn truth(&self, c: &Cluster) -> truth::Truth {
        let mut t = truth::Truth::new();
        for h in &c.hosts {
            t.hosts.push(truth::HostTruth {
                name: h.name.clone(),
                address: h.ip.to_string(),
                smb_dialect: format!(
                    "{}.{}.{}",
                    h.smb_dialect >> 8,
                    (h.smb_dialect >> 4) & 0xf,
                    h.smb_dialect & 0xf
                ),
                sqos_dialect: h.sqos,
                obeys_limits: h.obeys_limits,
                throttles_bandwidth: h.throttles_bandwidth,
                counters: h.counters,
                poll_factor: h.poll_factor,
                channels: Vec::new(),
            });
        }
        for c in &self.channels {
            if let Some(ht) = t.hosts.get_mut(c.host) {
                ht.channels.push(truth::ChannelTruth {
                    client: c.client.clone(),
                    server: c.server.clone(),
                    joined: if c.primary { "setup" } else { "binding" },
                    dropped: c.dropped.map(|d| d.0),
                    dropped_time: c.dropped.map(|d| secs(d.1)),
                    detected_time: c.dropped.map(|(how, at)| match how {
                        DropKind::Rst => secs(at),
                        DropKind::Silence => secs(at + SILENCE_DETECT_US),
                    }),
                });
            }
        }
        for m in &self.msgs {
            let resp_trace = self.trace(m.resp_tag);
            // The sends of the request that are in the capture: the first, then its replays.
            let seen: Vec<(u64, Time)> = m
                .sends
                .iter()
                .filter_map(|&(_, tag)| self.trace(Some(tag)))
                .filter_map(|x| x.frame.map(|f| (f, x.ts)))
                .collect();
            let (request_frame, request_time) = match seen.first() {
                Some(&(f, ts)) => (Some(f), secs(ts)),
                None => (None, secs(m.sent)),
            };
            let replay_request_frames: Vec<u64> = seen.iter().skip(1).map(|x| x.0).collect();
            t.totals.sqos_requests += 1;
            if m.nt.is_some_and(|s| s != 0) {
                t.totals.sqos_errors += 1;
            }
            if let Some(spec) = m.fault.and_then(|i| c.faults.get(i)) {
                let flow = self.flows.get(spec.flow);
                t.faults.push(truth::FaultTruth {
                    fault: spec.fault,
                    finding: spec.finding,
                    what: spec.what,
                    host: c
                        .hosts
                        .get(m.host)
                        .map(|h| h.name.clone())
                        .unwrap_or_default(),
                    logical_flow_id: flow.map(|f| f.spec.flow_id).unwrap_or_default(),
                    initiator_name: flow.map(|f| f.spec.vm.clone()).unwrap_or_default(),
                    file_name: m.file_name.as_deref().map(|n| c.unc(n)),
                    message_id: m.mid,
                    option_names: m.req.options.names(),
                    request_frame,
                    request_time,
                    response_frame: resp_trace.and_then(|x| x.frame),
                    response_time: resp_trace.filter(|x| x.frame.is_some()).map(|x| secs(x.ts)),
                    nt_status: m.nt,
                    nt_status_name: m.nt.map(truth::nt_status_name),
                });
            }
            t.messages.push(truth::MessageTruth {
                host: c
                    .hosts
                    .get(m.host)
                    .map(|h| h.name.clone())
                    .unwrap_or_default(),
                logical_flow_id: m
                    .flow
                    .and_then(|f| self.flows.get(f))
                    .map(|f| f.spec.flow_id),
                file_name: m.file_name.as_deref().map(|n| c.unc(n)),
                request_frame,
                request_time,
                replay_request_frames,
                response_frame: resp_trace.and_then(|x| x.frame),
                response_time: resp_trace.filter(|x| x.frame.is_some()).map(|x| secs(x.ts)),
                protocol_version: m.req.protocol_version.0,
                options: m.req.options.0,
                option_names: m.req.options.names(),
                max_output_response: m.max_out,
                nt_status: m.nt,
                nt_status_name: m.nt.map(truth::nt_status_name),
                response: m.resp.as_ref().map(truth::ResponseTruth::from),
                purpose: m.note.clone(),
            });
        }
        for (f_idx, (fl, vm)) in self.flows.iter().zip(&self.disks).enumerate() {
            let host = &c.hosts[fl.host];
            let mut ft = truth::FlowTruth {
                logical_flow_id: fl.spec.flow_id,
                initiator_id: fl.spec.initiator_id,
                initiator_name: fl.spec.vm.clone(),
                initiator_node_name: host.name.clone(),
                host: host.name.clone(),
                dialect: host.sqos,
                file_names: fl.file_names.iter().map(|n| c.unc(n)).collect(),
                channels: self.flow_channels(f_idx),
                obeys_limits: host.obeys_limits,
                policies: Vec::new(),
                updates: Vec::new(),
                unreported_ios: vm.unreported(),
                totals: truth::FlowTotals {
                    io_count: vm.totals.io,
                    normalized_io_count: vm.totals.norm,
                    bytes_read: vm.bytes_read,
                    bytes_written: vm.bytes_written,
                    latency_100ns: vm.totals.latency,
                    lower_latency_100ns: vm.totals.lower,
                },
            };
            for p in &fl.policies {
                let msg = self.msgs.get(p.msg);
                ft.policies.push(truth::PolicyTruth {
                    time: secs(p.time),
                    request_frame: msg.and_then(|m| self.frame(m.req_tag)),
                    policy: p.policy,
                });
            }
            for u in &fl.updates {
                let Some(m) = self.msgs.get(u.msg) else {
                    continue;
                };
                t.totals.updates += 1;
                let ios = u
                    .ios
                    .iter()
                    .filter_map(|&i| self.ios.get(i))
                    .map(|io| {
                        let req_ts = self.trace(Some(io.req_tag)).map_or(io.req_done, |x| x.ts);
                        let done = io.resp_done.unwrap_or(0);
                        truth::IoTruth {
                            op: if io.write { "write" } else { "read" },
                            offset: io.offset,
                            length: io.len,
                            normalized: io.norm,
                            request_frame: self.frame(Some(io.req_tag)),
                            response_frame: self.frame(io.resp_tag),
                            request_time: secs(req_ts),
                            response_time: secs(done),
                            queue_delay_100ns: (io.req_done - io.gen) * 10,
                            latency_100ns: (done - io.gen) * 10,
                            lower_latency_100ns: (done - io.req_done) * 10,
                        }
                    })
                    .collect();
                let first = self.first_seen_send(m);
                ft.updates.push(truth::UpdateTruth {
                    request_frame: first.map(|x| x.0),
                    request_time: secs(first.map_or(m.sent, |x| x.1)),
                    response_frame: self.frame(m.resp_tag),
                    nt_status: m.nt.unwrap_or(0),
                    previous_request_time: u.prev.map(secs),
                    maximum_io_rate_in_effect: u.rate,
                    io_count_increment: u.inc.io,
                    normalized_io_count_increment: u.inc.norm,
                    latency_increment: u.inc.latency,
                    lower_latency_increment: u.inc.lower,
                    kilobyte_count_increment: m.req.v1_1.map(|v| v.kilobyte_count_increment),
                    actual: truth::Increments {
                        io_count: u.actual.io,
                        normalized_io_count: u.actual.norm,
                        latency: u.actual.latency,
                        lower_latency: u.actual.lower,
                        kilobyte_count: m.req.v1_1.map(|_| u.actual.bytes / 1024),
                    },
                    ios,
                });
            }
            t.flows.push(ft);
        }
        for io in &self.ios {
            if io.resp_done.is_none() {
                continue;
            }
            t.totals.ios += 1;
            if io.write {
                t.totals.writes += 1;
                t.totals.bytes_written += u64::from(io.len);
            } else {
                t.totals.reads += 1;
                t.totals.bytes_read += u64::from(io.len);
            }
        }
        t
    }
}
