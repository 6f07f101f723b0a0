//! Each flow's SQOS client (MS-SQOS section 3.1): after CREATE it associates the open with its
//! logical flow and sets its policy (separately, combined, or with the status later), asks for
//! its status with the counters of the I/O done since the last time on the timer the answers
//! set (3.1.5.1, notes <4>, <5>), and follows the script: a changed policy, a disk closed and
//! opened again, a flow handed over to another host, a channel that fails, raw requests.

use std::io::Write;

use super::client::{Hosts, SPARE_FILE};
use super::net::{Ctx, Target};
use super::records::{Counters, MsgRec, PolRec, Purpose, UpdRec};
use super::vm::{effective_rate, Vms};
use super::Ev;
use crate::sqos::{Options, Request, Response};
use crate::synth::scenario::{Action, CounterReporting, SetupStyle};
use crate::synth::smb2::{self, FileId};
use crate::synth::wire::{Side, Time};

/// MaxOutputResponse of the client's IOCTLs (what Windows' test suite sends).
const MAX_OUTPUT: u32 = 4096;
/// Status request interval after a failed request (note <4>) and when TimeToLive ≤ 1000 (note <5>).
const FAILURE_RETRY_MS: u64 = 10_000;
const DEFAULT_TTL_MS: u64 = 1000;

impl Hosts {
    fn flow_request(&self, ctx: &Ctx<impl Write>, f: usize, opts: Options) -> Request {
        let fl = &self.flows[f];
        let dialect = ctx.c.hosts[fl.host].sqos;
        let mut r = Request::new(dialect);
        r.options = opts;
        r.logical_flow_id = fl.spec.flow_id;
        r.policy_id = fl.policy.policy_id;
        r.initiator_id = fl.spec.initiator_id;
        r
    }

    fn policy_request(&self, ctx: &Ctx<impl Write>, f: usize, opts: Options) -> Request {
        let fl = &self.flows[f];
        let host = &ctx.c.hosts[fl.host];
        let mut r = self
            .flow_request(ctx, f, opts)
            .with_names(&fl.spec.vm, &host.name);
        r.limit = fl.policy.limit;
        r.reservation = fl.policy.reservation;
        if let Some(v) = r.v1_1.as_mut() {
            v.bandwidth_limit = fl.policy.bandwidth_limit;
        }
        r
    }

    pub fn setup_flow<W: Write>(&mut self, ctx: &mut Ctx<W>, f: usize, t: Time, style: SetupStyle) {
        match style {
            SetupStyle::Combined => {
                let r = self.policy_request(
                    ctx,
                    f,
                    Options::SET_LOGICAL_FLOW_ID | Options::SET_POLICY | Options::GET_STATUS,
                );
                let purpose = Purpose::SetPolicy { with_status: true };
                self.send_ioctl(ctx, f, t, r, purpose, "associate and set policy");
            }
            _ => {
                let mut r = self.flow_request(ctx, f, Options::SET_LOGICAL_FLOW_ID);
                r.policy_id = uuid::Uuid::nil();
                r.initiator_id = uuid::Uuid::nil();
                self.send_ioctl(
                    ctx,
                    f,
                    t,
                    r,
                    Purpose::SetFlowId(style),
                    "associate the open with its logical flow",
                );
            }
        }
    }

    fn send_ioctl<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        f: usize,
        t: Time,
        req: Request,
        purpose: Purpose,
        note: &str,
    ) {
        let Some(fl) = self.flows.get(f) else {
            return;
        };
        let (h, fid) = (fl.host, fl.fid.unwrap_or_default());
        let name = fl.spec.path.clone();
        if matches!(purpose, Purpose::SetPolicy { .. }) {
            let policy = fl.policy;
            let m = ctx.msgs.len();
            if let Some(fl) = self.flows.get_mut(f) {
                fl.policies.push(PolRec {
                    time: t,
                    msg: m,
                    policy,
                });
            }
        }
        let on = (h, Target::Flow(f), fid, Some(name));
        self.ioctl_on(ctx, on, t, req, MAX_OUTPUT, purpose, note.to_string());
    }

    /// Records and sends a SQOS request of host `h` on the open `(target, fid, file name)`.
    #[allow(clippy::too_many_arguments)]
    fn ioctl_on<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        (h, target, fid, file_name): (usize, Target, FileId, Option<String>),
        t: Time,
        req: Request,
        max_out: u32,
        purpose: Purpose,
        note: String,
    ) -> usize {
        let m = ctx.msgs.len();
        ctx.msgs.push(MsgRec {
            host: h,
            chan: h,
            fid,
            flow: match target {
                Target::Flow(f) => Some(f),
                Target::Spare => None,
            },
            target,
            file_name,
            req,
            max_out,
            purpose,
            note,
            req_tag: None,
            first_req_tag: None,
            sends: Vec::new(),
            answered: false,
            sent: t,
            mid: 0,
            fault: None,
            resp_tag: None,
            nt: None,
            resp: None,
        });
        self.send_ioctl_msg(ctx, m, t, false);
        m
    }

    /// The answer to SQOS request `m` is in.
    pub fn ioctl_answered<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        vms: &mut Vms,
        m: usize,
        t: Time,
        status: u32,
    ) {
        let Some(rec) = ctx.msgs.get(m) else {
            return;
        };
        let (purpose, flow, resp) = (rec.purpose, rec.flow, rec.resp.clone());
        let Some(f) = flow else {
            return;
        };
        if purpose == Purpose::Raw {
            return;
        }
        if let Some(fl) = self.flows.get(f).filter(|fl| fl.retired) {
            // Answers to a flow leaving its host change nothing; its last update's answer
            // lets it close.
            if fl.final_msg == Some(m) {
                self.send_close(ctx, f, t);
            }
            return;
        }
        if status != smb2::STATUS_SUCCESS {
            self.arm_timer(ctx, f, t, FAILURE_RETRY_MS * 1000);
            return;
        }
        match purpose {
            Purpose::SetFlowId(SetupStyle::StatusLater) => {
                let r = self.policy_request(ctx, f, Options::SET_POLICY);
                self.send_ioctl(
                    ctx,
                    f,
                    t,
                    r,
                    Purpose::SetPolicy { with_status: false },
                    "set policy (status follows within 1 s)",
                );
            }
            Purpose::SetFlowId(_) => {
                let r = self.policy_request(ctx, f, Options::SET_POLICY | Options::GET_STATUS);
                self.send_ioctl(
                    ctx,
                    f,
                    t,
                    r,
                    Purpose::SetPolicy { with_status: true },
                    "set policy and get status",
                );
            }
            Purpose::SetPolicy { with_status: false } => {
                // Section 3.1.6: the status request must follow within 1 second.
                let delay = 200_000 + ctx.rng.below(600_000);
                self.arm_timer(ctx, f, t, delay);
            }
            Purpose::SetPolicy { with_status: true } | Purpose::Status => {
                if let Some(r) = resp {
                    self.apply_status(ctx, vms, f, t, &r);
                }
            }
            Purpose::Raw => {}
        }
    }

    /// Section 3.1.5.1.
    fn apply_status<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        vms: &mut Vms,
        f: usize,
        t: Time,
        r: &Response,
    ) {
        let poll = u64::from(
            ctx.c
                .hosts
                .get(self.flows[f].host)
                .map_or(1, |h| h.poll_factor),
        );
        let Some(fl) = self.flows.get_mut(f) else {
            return;
        };
        fl.max_io_rate = r.maximum_io_rate;
        if let Some(bw) = r.maximum_bandwidth {
            fl.max_bw = bw;
        }
        if r.base_io_size > 0 {
            fl.base = r.base_io_size;
        }
        let ttl_ms = if r.time_to_live > 1000 {
            u64::from(r.time_to_live)
        } else {
            DEFAULT_TTL_MS
        };
        let start_io = !fl.ready;
        fl.ready = true;
        self.arm_timer(ctx, f, t, ttl_ms * 1000 * poll);
        if start_io {
            vms.start(ctx, f, t);
        }
        vms.dispatch(ctx, self, f, t);
    }

    pub fn arm_timer<W: Write>(&mut self, ctx: &mut Ctx<W>, f: usize, t: Time, after_us: u64) {
        let Some(fl) = self.flows.get_mut(f) else {
            return;
        };
        fl.timer_gen += 1;
        let gen = fl.timer_gen;
        ctx.at(t + after_us, Ev::Status(f, gen));
    }

    /// The status timer of flow `f` (generation `gen`) went off: GET_STATUS|UPDATE_COUNTERS
    /// with the counters of the I/O completed since the last one.
    pub fn status_timer<W: Write>(
        &mut self,
        ctx: &mut Ctx<W>,
        vms: &mut Vms,
        f: usize,
        gen: u64,
        t: Time,
    ) {
        let Some(fl) = self.flows.get(f) else {
            return;
        };
        if fl.timer_gen != gen {
            return;
        }
        let drained = fl.retired && vms.outstanding(f) == 0 && fl.final_msg.is_none();
        if fl.fid.is_none() || (fl.closing && !drained) {
            ctx.at(t + 200_000, Ev::Status(f, gen));
            return;
        }
        // Counters are taken when the request actually leaves: wait for the link so no
        // response lands between "taken" and "sent" (the interval rule is in frame order).
        let ch = self.next_chan(ctx, fl.host);
        let conn = ctx.chans[ch].conn;
        let free = ctx.wire.busy_until(conn, Side::Client);
        if free > t {
            ctx.at(free, Ev::Status(f, gen));
            return;
        }
        let mut r = self.flow_request(ctx, f, Options::GET_STATUS | Options::UPDATE_COUNTERS);
        let reporting = ctx.c.hosts[self.flows[f].host].counters;
        let (actual, ios) = vms.take_interval(f);
        let c = match reporting {
            CounterReporting::Honest => actual,
            CounterReporting::ReadsOnly => Counters::sum(
                ios.iter()
                    .filter_map(|&i| ctx.ios.get(i))
                    .filter(|io| !io.write),
            ),
        };
        let fl = &mut self.flows[f];
        r.io_count_increment = c.io;
        r.normalized_io_count_increment = c.norm;
        r.latency_increment = c.latency;
        r.lower_latency_increment = c.lower;
        if let Some(v) = r.v1_1.as_mut() {
            v.kilobyte_count_increment = c.bytes / 1024;
        }
        let prev = fl.last_update.replace(t);
        let host = &ctx.c.hosts[fl.host];
        let rate = effective_rate(fl, host.sqos, host.throttles_bandwidth).map_or(0, |r| r as u64);
        let m = ctx.msgs.len();
        fl.updates.push(UpdRec {
            msg: m,
            prev,
            rate,
            inc: c,
            actual,
            ios,
        });
        // Timer re-armed by the answer.
        fl.timer_gen += 1;
        let note = if fl.retired {
            fl.final_msg = Some(m);
            "last status request with counters before the disk leaves the host"
        } else {
            "status request with counters"
        };
        self.send_ioctl(ctx, f, t, r, Purpose::Status, note);
    }

    /// A scripted event of the hosts' (the server's own are the server's).
    pub fn script<W: Write>(&mut self, ctx: &mut Ctx<W>, vms: &mut Vms, action: Action, t: Time) {
        match action {
            Action::ClientPolicy { flow, policy } => {
                if let Some(fl) = self.flows.get_mut(flow) {
                    fl.policy = policy;
                    if fl.fid.is_some() && !fl.closing {
                        let r = self.policy_request(
                            ctx,
                            flow,
                            Options::SET_POLICY | Options::GET_STATUS,
                        );
                        self.send_ioctl(
                            ctx,
                            flow,
                            t,
                            r,
                            Purpose::SetPolicy { with_status: true },
                            "policy changed on the host",
                        );
                    }
                }
            }
            Action::ServerPolicy { .. } | Action::ArmFault(_) => {}
            Action::Reopen { flow } => {
                if let Some(fl) = self.flows.get_mut(flow) {
                    fl.closing = true;
                    if vms.outstanding(flow) == 0 {
                        self.send_close(ctx, flow, t);
                    }
                }
            }
            Action::Handoff { from, to, after_us } => {
                if let Some(fl) = self.flows.get_mut(from) {
                    if fl.retired || fl.fid.is_none() {
                        return;
                    }
                    fl.closing = true;
                    fl.retired = true;
                    fl.handoff = Some((to, after_us));
                    vms.cancel_queued(from);
                    // The regular status timer stops; the last update goes once I/O drained.
                    fl.timer_gen += 1;
                    if vms.outstanding(from) == 0 {
                        self.arm_timer(ctx, from, t, 0);
                    }
                }
            }
            Action::DropChannel { host, channel, how } => {
                // It strikes the next request the channel carries (see `Ctx::flush_outbox`).
                if let Some(c) = self
                    .hosts
                    .get(host)
                    .and_then(|x| x.chans.get(channel))
                    .and_then(|&ch| ctx.chans.get_mut(ch))
                    .filter(|c| c.dead_at.is_none())
                {
                    c.armed = Some(how);
                }
            }
            Action::Raw { host, raw } => {
                let (target, fid, name) = match raw.on_flow {
                    Some(f) => match self.flows.get(f) {
                        Some(fl) => (Target::Flow(f), fl.fid, Some(fl.spec.path.clone())),
                        None => return,
                    },
                    None => (
                        Target::Spare,
                        self.hosts.get(host).and_then(|h| h.spare),
                        Some(SPARE_FILE.to_string()),
                    ),
                };
                let Some(fid) = fid else {
                    return;
                };
                self.ioctl_on(
                    ctx,
                    (host, target, fid, name),
                    t,
                    raw.request,
                    raw.max_output,
                    Purpose::Raw,
                    raw.note.to_string(),
                );
            }
        }
    }
}
