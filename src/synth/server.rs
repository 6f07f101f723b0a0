//! The Scale-Out File Server's Storage QoS model (MS-SQOS section 3.2): the logical flow table,
//! the association of each open, and the processing rules of section 3.2.5.1 including the
//! Windows validation of note <8>. A request that fails changes no state.
//!
//! `ServerFault` makes one request go wrong the way a buggy implementation would (the
//! `faulty-server` scenario arms them at scripted times).

use std::collections::BTreeMap;

use uuid::Uuid;

use super::rng::Rng;
use super::smb2::{STATUS_INVALID_PARAMETER, STATUS_NOT_FOUND, STATUS_REVISION_MISMATCH};
use crate::sqos::{Dialect, Options, Request, Response, Status, STORAGE_QOS_INITIATOR_NAME_SIZE};

/// An open, as the server knows it: connection (host) and volatile FileId.
pub type OpenKey = (u32, u64);

/// A bug of the server's Storage QoS implementation, applied to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum ServerFault {
    /// Looks the flow up by Request.LogicalFlowID instead of the open's association, so a
    /// request on an unassociated open succeeds (3.2.5.1.2-4 require STATUS_NOT_FOUND).
    IgnoresAssociation,
    /// Skips the field checks of note <8> (e.g. accepts a Reservation above the Limit).
    SkipsPolicyChecks,
    /// Fails the request with this status although no rule applies; nothing is applied.
    FailsWith(u32),
    /// Fails a request the rules fail, but with this status instead of the prescribed one.
    WrongStatus(u32),
    /// Answers GET_STATUS from this other flow's entry (its LogicalFlowID, PolicyID,
    /// InitiatorID and rates); the request itself is applied to the right flow.
    AnswersForFlow(Uuid),
    /// The request is lost inside the server: no response is ever sent, nothing is applied.
    NoResponse,
}

/// A policy configured on the server (looked up by PolicyID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ServerPolicy {
    pub minimum_io_rate: u64,
    pub maximum_io_rate: u64,
    pub maximum_bandwidth: u64,
}

#[derive(Clone, Debug, Default)]
pub struct ServerFlow {
    pub policy_id: Uuid,
    pub initiator_id: Uuid,
    pub limit: u64,
    pub reservation: u64,
    pub bandwidth_limit: u64,
    pub initiator_name: Option<String>,
    pub initiator_node_name: Option<String>,
    pub base_io_size: u32,
    pub opens: u32,
    /// The next status answer uses a 1 s TimeToLive (the policy just changed).
    pub fresh_policy: bool,
    /// Counters received (UPDATE_COUNTERS), summed.
    pub io_count: u64,
    pub normalized_io_count: u64,
}

/// The rates the server assigns to a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assigned {
    pub status: Status,
    pub maximum_io_rate: u64,
    pub minimum_io_rate: u64,
    pub maximum_bandwidth: u64,
}

pub struct SqosServer {
    pub flows: BTreeMap<Uuid, ServerFlow>,
    pub opens: BTreeMap<OpenKey, Uuid>,
    pub policies: BTreeMap<Uuid, ServerPolicy>,
    /// Normalized IOPS the storage can guarantee in total (for reservations).
    pub capacity: u64,
    /// TimeToLive in steady state, ms.
    pub base_ttl_ms: u32,
    rng: Rng,
}

/// Note <8>: the largest Limit / Reservation / BandwidthLimit Windows accepts.
const MAX_POLICY_VALUE: u64 = 1_000_000_000;
/// Minimum name offset as the spec's text states it (section 3.2.5.1.2).
const MIN_NAME_OFFSET: u16 = 104;
/// Minimum output buffer for GET_STATUS as the text states it (section 3.2.5.1.4).
const MIN_MAX_RESPONSE: u32 = 80;

impl SqosServer {
    pub fn new(capacity: u64, base_ttl_ms: u32, rng: Rng) -> SqosServer {
        SqosServer {
            flows: BTreeMap::new(),
            opens: BTreeMap::new(),
            policies: BTreeMap::new(),
            capacity,
            base_ttl_ms,
            rng,
        }
    }

    /// Changes a server-side policy; flows using it answer with a short TimeToLive next.
    pub fn set_policy(&mut self, id: Uuid, p: ServerPolicy) {
        self.policies.insert(id, p);
        for f in self.flows.values_mut().filter(|f| f.policy_id == id) {
            f.fresh_policy = true;
        }
    }

    fn reserved_total(&self) -> u64 {
        self.flows
            .values()
            .filter(|f| f.opens > 0)
            .map(|f| self.base_assignment(f).minimum_io_rate)
            .sum()
    }

    fn base_assignment(&self, f: &ServerFlow) -> Assigned {
        if !f.policy_id.is_nil() {
            return match self.policies.get(&f.policy_id) {
                Some(p) => Assigned {
                    status: Status::OK,
                    maximum_io_rate: p.maximum_io_rate,
                    minimum_io_rate: p.minimum_io_rate,
                    maximum_bandwidth: p.maximum_bandwidth,
                },
                None => Assigned {
                    status: Status::UNKNOWN_POLICY_ID,
                    maximum_io_rate: 0,
                    minimum_io_rate: 0,
                    maximum_bandwidth: 0,
                },
            };
        }
        Assigned {
            status: Status::OK,
            maximum_io_rate: f.limit,
            minimum_io_rate: f.reservation,
            maximum_bandwidth: f.bandwidth_limit,
        }
    }

    /// What the server currently assigns to `flow`: reservations that together exceed the
    /// capacity cannot be met (StorageQoSStatusInsufficientThroughput).
    pub fn assigned(&self, flow: &Uuid) -> Option<Assigned> {
        let f = self.flows.get(flow)?;
        let mut a = self.base_assignment(f);
        if a.status == Status::OK && a.minimum_io_rate > 0 && self.reserved_total() > self.capacity
        {
            a.status = Status::INSUFFICIENT_THROUGHPUT;
        }
        Some(a)
    }

    /// The flow an open is associated with.
    pub fn association(&self, open: OpenKey) -> Option<Uuid> {
        self.opens.get(&open).copied()
    }

    /// The open was closed: it leaves its flow.
    pub fn close(&mut self, open: OpenKey) {
        if let Some(id) = self.opens.remove(&open) {
            if let Some(f) = self.flows.get_mut(&id) {
                f.opens = f.opens.saturating_sub(1);
            }
        }
    }

    /// Section 3.2.5.1 for one request of `request_size` bytes on `open`. `Ok(None)` is success
    /// without an output buffer; `Err` carries the NTSTATUS.
    pub fn handle(
        &mut self,
        open: OpenKey,
        req: &Request,
        request_size: usize,
        max_response: u32,
    ) -> Result<Option<Response>, u32> {
        self.handle_with(open, req, request_size, max_response, None)
    }

    /// `handle` with a bug of the implementation applied to this request. `NoResponse` is the
    /// caller's to honour (it sends nothing); here it changes no state.
    pub fn handle_with(
        &mut self,
        open: OpenKey,
        req: &Request,
        request_size: usize,
        max_response: u32,
        fault: Option<ServerFault>,
    ) -> Result<Option<Response>, u32> {
        match fault {
            Some(ServerFault::FailsWith(status)) => Err(status),
            Some(ServerFault::NoResponse) => Ok(None),
            Some(ServerFault::WrongStatus(status)) => self
                .process(open, req, request_size, max_response, None)
                .map_err(|_| status),
            other => self.process(open, req, request_size, max_response, other),
        }
    }

    fn process(
        &mut self,
        open: OpenKey,
        req: &Request,
        request_size: usize,
        max_response: u32,
        fault: Option<ServerFault>,
    ) -> Result<Option<Response>, u32> {
        let opts = req.options;
        let Some(dialect) = req.protocol_version.dialect() else {
            return Err(STATUS_REVISION_MISMATCH);
        };
        if opts.0 & Options::KNOWN.0 == 0 {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let current = self.association(open);
        let probe = opts.contains(Options::PROBE_POLICY) && current.is_none();
        let set_id = opts.contains(Options::SET_LOGICAL_FLOW_ID);
        let id = req.logical_flow_id;
        // 3.2.5.1.1, decided first and applied only if nothing fails.
        let mut assoc = current;
        if (set_id || probe) && !id.is_nil() {
            assoc = Some(id);
        }
        if probe && id.is_nil() {
            return Err(STATUS_INVALID_PARAMETER);
        }
        if set_id && id.is_nil() {
            assoc = None;
        }
        // The bug: the flow the request names stands in for a missing association (the open
        // itself stays unassociated).
        let looked_up = match fault {
            Some(ServerFault::IgnoresAssociation) if !id.is_nil() => {
                assoc.or_else(|| self.flows.contains_key(&id).then_some(id))
            }
            _ => assoc,
        };
        let set_policy = opts.contains(Options::SET_POLICY);
        // 3.2.5.1.2
        if set_policy && looked_up.is_none() {
            return Err(STATUS_NOT_FOUND);
        }
        if set_policy || probe {
            validate_names(req, request_size)?;
            if fault != Some(ServerFault::SkipsPolicyChecks) {
                validate_product(req)?;
            }
        }
        // 3.2.5.1.3
        if opts.contains(Options::UPDATE_COUNTERS) && looked_up.is_none() {
            return Err(STATUS_NOT_FOUND);
        }
        // 3.2.5.1.4
        let get_status = opts.contains(Options::GET_STATUS);
        if get_status && max_response < MIN_MAX_RESPONSE {
            return Err(STATUS_INVALID_PARAMETER);
        }
        if get_status && looked_up.is_none() {
            return Err(STATUS_NOT_FOUND);
        }

        // Nothing failed: apply.
        if assoc != current {
            if let Some(old) = current {
                if let Some(f) = self.flows.get_mut(&old) {
                    f.opens = f.opens.saturating_sub(1);
                }
                self.opens.remove(&open);
            }
            if let Some(new) = assoc {
                let f = self.flows.entry(new).or_insert_with(|| ServerFlow {
                    base_io_size: 8192,
                    ..ServerFlow::default()
                });
                f.opens += 1;
                self.opens.insert(open, new);
            }
        }
        let Some(flow_id) = looked_up else {
            return Ok(None);
        };
        let v11 = dialect == Dialect::V1_1;
        if let Some(f) = self.flows.get_mut(&flow_id) {
            if set_policy || probe {
                if req.initiator_name_length > 0 {
                    f.initiator_name = req.initiator_name.clone();
                }
                if req.initiator_node_name_length > 0 {
                    f.initiator_node_name = req.initiator_node_name.clone();
                }
                f.policy_id = req.policy_id;
                f.initiator_id = req.initiator_id;
                f.limit = req.limit;
                f.reservation = req.reservation;
                f.bandwidth_limit = req.v1_1.map_or(0, |v| v.bandwidth_limit);
                f.fresh_policy = true;
            }
            if opts.contains(Options::UPDATE_COUNTERS) {
                f.io_count += req.io_count_increment;
                f.normalized_io_count += req.normalized_io_count_increment;
            }
        }
        if !get_status {
            return Ok(None);
        }
        // The entry the answer is read from: the flow's own, or (the bug) another one.
        let answered_id = match fault {
            Some(ServerFault::AnswersForFlow(other)) if self.flows.contains_key(&other) => other,
            _ => flow_id,
        };
        let a = self.assigned(&answered_id).unwrap_or(Assigned {
            status: Status::NOT_AVAILABLE,
            maximum_io_rate: 0,
            minimum_io_rate: 0,
            maximum_bandwidth: 0,
        });
        let jitter = self.rng.below(40) as u32;
        let Some(f) = self.flows.get_mut(&flow_id) else {
            return Ok(None);
        };
        let ttl = if f.fresh_policy {
            1000
        } else {
            self.base_ttl_ms.saturating_sub(jitter).max(1)
        };
        f.fresh_policy = false;
        let base_io_size = f.base_io_size;
        let Some(f) = self.flows.get(&answered_id) else {
            return Ok(None);
        };
        let mut r = Response::new(dialect);
        r.logical_flow_id = answered_id;
        r.policy_id = f.policy_id;
        r.initiator_id = f.initiator_id;
        r.time_to_live = ttl;
        r.status = a.status;
        r.maximum_io_rate = a.maximum_io_rate;
        r.minimum_io_rate = a.minimum_io_rate;
        r.base_io_size = base_io_size;
        if v11 {
            r.maximum_bandwidth = Some(a.maximum_bandwidth);
        }
        Ok(Some(r))
    }
}

/// Section 3.2.5.1.2 name checks.
fn validate_names(req: &Request, request_size: usize) -> Result<(), u32> {
    let names = [
        (req.initiator_name_offset, req.initiator_name_length),
        (
            req.initiator_node_name_offset,
            req.initiator_node_name_length,
        ),
    ];
    for (off, len) in names {
        if len > STORAGE_QOS_INITIATOR_NAME_SIZE
            || (len > 0 && off < MIN_NAME_OFFSET)
            || usize::from(len) + usize::from(off) > request_size
        {
            return Err(STATUS_INVALID_PARAMETER);
        }
    }
    Ok(())
}

/// Section 3.2.5.1.2 field checks, as Windows does them (note <8>).
fn validate_product(req: &Request) -> Result<(), u32> {
    let bw = req.v1_1.map_or(0, |v| v.bandwidth_limit);
    let policy = !req.policy_id.is_nil();
    let bad = req.limit > MAX_POLICY_VALUE
        || req.reservation > MAX_POLICY_VALUE
        || bw > MAX_POLICY_VALUE
        || (req.limit > 0 && req.reservation > req.limit)
        || (req.limit > 0 && policy)
        || (bw > 0 && policy)
        || (req.reservation > 0 && policy);
    if bad {
        Err(STATUS_INVALID_PARAMETER)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqos::{encode_request_with, NamePlacement};

    fn server() -> SqosServer {
        SqosServer::new(1000, 4000, Rng::new(1))
    }

    fn req(opts: Options, id: Uuid) -> Request {
        let mut r = Request::new(Dialect::V1_1);
        r.options = opts;
        r.logical_flow_id = id;
        r
    }

    #[test]
    fn policy_before_association_is_not_found_and_changes_nothing() {
        let mut s = server();
        let id = Uuid::from_u128(5);
        let r = req(Options::SET_POLICY | Options::GET_STATUS, id);
        assert_eq!(s.handle((1, 1), &r, 128, 4096), Err(STATUS_NOT_FOUND));
        let r = req(Options::UPDATE_COUNTERS, id);
        assert_eq!(s.handle((1, 1), &r, 128, 4096), Err(STATUS_NOT_FOUND));
        assert!(s.flows.is_empty());
    }

    #[test]
    fn associate_then_status_reports_limits_with_short_ttl_after_policy() {
        let mut s = server();
        let id = Uuid::from_u128(5);
        assert_eq!(
            s.handle((1, 1), &req(Options::SET_LOGICAL_FLOW_ID, id), 128, 4096),
            Ok(None)
        );
        let mut r = req(Options::SET_POLICY | Options::GET_STATUS, id).with_names("vm01", "hv01");
        r.limit = 500;
        r.reservation = 100;
        let size = encode_request_with(&r, NamePlacement::AfterFixedPart).len();
        let resp = s.handle((1, 1), &r, size, 4096).unwrap().unwrap();
        assert_eq!(resp.time_to_live, 1000);
        assert_eq!(resp.maximum_io_rate, 500);
        assert_eq!(resp.minimum_io_rate, 100);
        assert_eq!(resp.maximum_bandwidth, Some(0));
        let resp = s
            .handle((1, 1), &req(Options::GET_STATUS, id), 128, 4096)
            .unwrap()
            .unwrap();
        assert!(resp.time_to_live > 3960 && resp.time_to_live <= 4000);
        assert_eq!(s.flows[&id].initiator_name.as_deref(), Some("vm01"));
    }

    #[test]
    fn note_8_and_name_rules_give_invalid_parameter() {
        let mut s = server();
        let id = Uuid::from_u128(5);
        s.handle((1, 1), &req(Options::SET_LOGICAL_FLOW_ID, id), 128, 4096)
            .unwrap();
        let mut r = req(Options::SET_POLICY, id);
        r.limit = 10;
        r.reservation = 20;
        assert_eq!(
            s.handle((1, 1), &r, 128, 4096),
            Err(STATUS_INVALID_PARAMETER)
        );
        let mut r = req(Options::SET_POLICY, id);
        r.policy_id = Uuid::from_u128(9);
        r.limit = 10;
        assert_eq!(
            s.handle((1, 1), &r, 128, 4096),
            Err(STATUS_INVALID_PARAMETER)
        );
        let mut r = req(Options::SET_POLICY, id).with_names("vm", "");
        r.initiator_name_offset = 40;
        assert_eq!(
            s.handle((1, 1), &r, 132, 4096),
            Err(STATUS_INVALID_PARAMETER)
        );
        let r = req(Options::PROBE_POLICY, Uuid::nil());
        assert_eq!(
            s.handle((2, 2), &r, 128, 4096),
            Err(STATUS_INVALID_PARAMETER)
        );
        let r = req(Options::GET_STATUS, id);
        assert_eq!(s.handle((1, 1), &r, 128, 64), Err(STATUS_INVALID_PARAMETER));
        let mut r = req(Options::GET_STATUS, id);
        r.protocol_version = crate::sqos::ProtocolVersion(0x0200);
        assert_eq!(
            s.handle((1, 1), &r, 128, 4096),
            Err(STATUS_REVISION_MISMATCH)
        );
    }

    #[test]
    fn faults_break_exactly_one_rule() {
        let mut s = server();
        let (a, b) = (Uuid::from_u128(5), Uuid::from_u128(6));
        for (n, id) in [(1u64, a), (2, b)] {
            s.handle((1, n), &req(Options::SET_LOGICAL_FLOW_ID, id), 128, 4096)
                .unwrap();
            let mut r = req(Options::SET_POLICY, id);
            r.limit = 100 * n;
            r.initiator_id = Uuid::from_u128(0x100 + u128::from(n));
            s.handle((1, n), &r, 128, 4096).unwrap();
        }
        // GET_STATUS on an unassociated open: NOT_FOUND, unless the server ignores associations.
        let status = req(Options::GET_STATUS, a);
        assert_eq!(s.handle((1, 9), &status, 128, 4096), Err(STATUS_NOT_FOUND));
        let fault = Some(ServerFault::IgnoresAssociation);
        let resp = s
            .handle_with((1, 9), &status, 128, 4096, fault)
            .unwrap()
            .unwrap();
        assert_eq!((resp.logical_flow_id, resp.maximum_io_rate), (a, 100));
        assert_eq!(s.association((1, 9)), None);
        // Reservation above Limit: rejected, accepted when the note <8> checks are skipped.
        let mut r = req(Options::SET_POLICY, a);
        r.limit = 50;
        r.reservation = 80;
        assert_eq!(
            s.handle((1, 1), &r, 128, 4096),
            Err(STATUS_INVALID_PARAMETER)
        );
        let fault = Some(ServerFault::SkipsPolicyChecks);
        assert_eq!(s.handle_with((1, 1), &r, 128, 4096, fault), Ok(None));
        assert_eq!((s.flows[&a].limit, s.flows[&a].reservation), (50, 80));
        // A valid request failed; an invalid one failed with the wrong status.
        let fault = Some(ServerFault::FailsWith(STATUS_NOT_FOUND));
        assert_eq!(
            s.handle_with((1, 1), &status, 128, 4096, fault),
            Err(STATUS_NOT_FOUND)
        );
        let fault = Some(ServerFault::WrongStatus(STATUS_INVALID_PARAMETER));
        assert_eq!(
            s.handle_with((1, 9), &status, 128, 4096, fault),
            Err(STATUS_INVALID_PARAMETER)
        );
        // The answer read from another flow's entry; the counters go to the right flow.
        let mut upd = req(Options::GET_STATUS | Options::UPDATE_COUNTERS, a);
        upd.io_count_increment = 7;
        let fault = Some(ServerFault::AnswersForFlow(b));
        let resp = s
            .handle_with((1, 1), &upd, 128, 4096, fault)
            .unwrap()
            .unwrap();
        assert_eq!(resp.logical_flow_id, b);
        assert_eq!(resp.initiator_id, Uuid::from_u128(0x102));
        assert_eq!(resp.maximum_io_rate, 200);
        assert_eq!((s.flows[&a].io_count, s.flows[&b].io_count), (7, 0));
        // A lost request changes nothing.
        let fault = Some(ServerFault::NoResponse);
        assert_eq!(s.handle_with((1, 1), &upd, 128, 4096, fault), Ok(None));
        assert_eq!(s.flows[&a].io_count, 7);
    }

    #[test]
    fn reservations_above_capacity_are_insufficient() {
        let mut s = server();
        for (n, id) in [(1u64, 11u128), (2, 12)] {
            let id = Uuid::from_u128(id);
            s.handle((1, n), &req(Options::SET_LOGICAL_FLOW_ID, id), 128, 4096)
                .unwrap();
            let mut r = req(Options::SET_POLICY, id);
            r.reservation = 600;
            s.handle((1, n), &r, 128, 4096).unwrap();
        }
        let a = s.assigned(&Uuid::from_u128(11)).unwrap();
        assert_eq!(a.status, Status::INSUFFICIENT_THROUGHPUT);
        s.close((1, 2));
        assert_eq!(s.assigned(&Uuid::from_u128(11)).unwrap().status, Status::OK);
    }
}
