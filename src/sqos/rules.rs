//! The spec's rules on decoded values: what a server MUST reject (sections 3.2.5.1,
//! 3.2.5.1.1, 3.2.5.1.2 with product note <8>), what a response MUST hold (2.2.2.3, 3.2.5.1.4),
//! and how a response relates to its request. Pure functions of typed values.

use super::findings::{Finding, FindingCode};
use super::layout::{request, response, FieldDef, MAX_POLICY_PARAMETER, SPEC_TEXT_RESPONSE_SIZE};
use super::{Dialect, Options, Request, Response};

fn version_finding(kind: &str, version: u16) -> Finding {
    Finding::new(
        FindingCode::UnknownVersion,
        format!(
            "{kind} ProtocolVersion 0x{version:04X} is neither 0x0100 (1.0) nor 0x0101 (1.1); \
             decoded with the 1.0 layout, a server MUST fail the request with \
             STATUS_REVISION_MISMATCH"
        ),
    )
}

pub(crate) fn unknown_request_version(version: u16) -> Finding {
    version_finding("request", version)
}

pub(crate) fn unknown_response_version(version: u16) -> Finding {
    version_finding("response", version)
}

fn reserved_finding(field: FieldDef, value: u64) -> Finding {
    Finding::new(
        FindingCode::ReservedNonZero,
        format!(
            "{} (offset {}) is 0x{value:X}; it MUST be 0 when sent",
            field.name, field.offset
        ),
    )
}

/// Findings on the fixed fields of a request (the names are checked while they are located).
pub fn check_request(req: &Request) -> Vec<Finding> {
    let mut out = Vec::new();
    if req.reserved != 0 {
        out.push(reserved_finding(request::RESERVED.def, req.reserved.into()));
    }
    let opts = req.options;
    if opts.bits() & Options::KNOWN.bits() == 0 {
        out.push(Finding::new(
            FindingCode::OptionsNone,
            format!(
                "Options 0x{:08X} has none of the flags of section 2.2.2.2; the server MUST fail \
                 the request with STATUS_INVALID_PARAMETER",
                opts.bits()
            ),
        ));
    }
    if opts.unknown_bits() != 0 {
        out.push(Finding::new(
            FindingCode::OptionsUnknownBits,
            format!(
                "Options 0x{:08X} has undefined bits 0x{:08X}",
                opts.bits(),
                opts.unknown_bits()
            ),
        ));
    }
    if opts.contains(Options::PROBE_POLICY) && req.logical_flow_id.is_nil() {
        out.push(Finding::new(
            FindingCode::ProbeNullFlowId,
            "PROBE_POLICY with a NULL LogicalFlowID; the server MUST fail the request with \
             STATUS_INVALID_PARAMETER (section 3.2.5.1.1)",
        ));
    }
    // Section 3.2.5.1.2: the parameter rules apply only to SET_POLICY / PROBE_POLICY.
    if opts.contains(Options::SET_POLICY) || opts.contains(Options::PROBE_POLICY) {
        check_policy_parameters(req, &mut out);
    }
    out
}

/// Note <8> (<4> in revision 1.0): Windows Server fails these with STATUS_INVALID_PARAMETER.
fn check_policy_parameters(req: &Request, out: &mut Vec<Finding>) {
    let mut params = vec![("Limit", req.limit), ("Reservation", req.reservation)];
    if let Some(v11) = req.v1_1.filter(|_| req.dialect() == Some(Dialect::V1_1)) {
        params.push(("BandwidthLimit", v11.bandwidth_limit));
    }
    for &(name, value) in &params {
        if value > MAX_POLICY_PARAMETER {
            out.push(Finding::new(
                FindingCode::ParamTooLarge,
                format!(
                    "{name} {value} is above 1,000,000,000; the server fails the request with \
                     STATUS_INVALID_PARAMETER (section 3.2.5.1.2, note <8>)"
                ),
            ));
        }
    }
    if req.limit > 0 && req.reservation > req.limit {
        out.push(Finding::new(
            FindingCode::ReservationAboveLimit,
            format!(
                "Reservation {} is above Limit {}; the server fails the request with \
                 STATUS_INVALID_PARAMETER (section 3.2.5.1.2, note <8>)",
                req.reservation, req.limit
            ),
        ));
    }
    if !req.policy_id.is_nil() {
        for &(name, value) in params.iter().filter(|(_, v)| *v > 0) {
            out.push(Finding::new(
                FindingCode::ParamWithPolicyId,
                format!(
                    "{name} {value} is non-zero with PolicyID {}; the server fails the request \
                     with STATUS_INVALID_PARAMETER (section 3.2.5.1.2, note <8>)",
                    req.policy_id
                ),
            ));
        }
    }
}

/// Plausible BaseIoSize: a power of two from 512 bytes to 1 MiB (Windows always sends 8192).
fn looks_like_base_io_size(v: u32) -> bool {
    v.is_power_of_two() && (512..=1 << 20).contains(&v)
}

/// Findings on a decoded response.
pub fn check_response(resp: &Response) -> Vec<Finding> {
    let mut out = Vec::new();
    if resp.reserved != 0 {
        out.push(reserved_finding(
            response::RESERVED.def,
            resp.reserved.into(),
        ));
    }
    if resp.options != 0 {
        out.push(Finding::new(
            FindingCode::ResponseOptionsNonZero,
            format!(
                "response Options is 0x{:08X}; the server MUST set it to 0",
                resp.options
            ),
        ));
    }
    if resp.time_to_live == 0 {
        out.push(Finding::new(
            FindingCode::TimeToLiveZero,
            "TimeToLive is 0; the server MUST send a positive validity period (section 3.2.5.1.4)",
        ));
    }
    if resp.status.name().is_none() {
        out.push(Finding::new(
            FindingCode::UnknownStatus,
            format!(
                "Status 0x{:08X} is none of the logical flow status codes of section 2.2.2.1",
                resp.status.0
            ),
        ));
    }
    if resp.base_io_size == 0 {
        out.push(Finding::new(
            FindingCode::BaseIoSizeZero,
            "BaseIoSize is 0; the normalized I/O size (section 4.1) divides by it",
        ));
    }
    if resp.reserved2 != 0 {
        out.push(reserved_finding(
            response::RESERVED2.def,
            resp.reserved2.into(),
        ));
    }
    if let Some(f) = spec_example_layout(resp) {
        out.push(f);
    }
    out
}

/// The section 4.3 example prints a 1.1 response with MaximumBandwidth at 80 and BaseIoSize at
/// 88. We decode by the structure; this says when the bytes fit the example's order better:
/// the value at 80 is no plausible BaseIoSize while the 32 bits at 88 are one and the 32 bits
/// at 92 (which the example calls Reserved) are zero.
fn spec_example_layout(resp: &Response) -> Option<Finding> {
    let bw = resp.maximum_bandwidth?;
    if resp.dialect() != Some(Dialect::V1_1) {
        return None;
    }
    let alt_base = u32::try_from(bw & 0xFFFF_FFFF).unwrap_or(0);
    let alt_reserved = bw >> 32;
    if looks_like_base_io_size(resp.base_io_size)
        || alt_reserved != 0
        || !looks_like_base_io_size(alt_base)
    {
        return None;
    }
    let alt_bw = u64::from(resp.base_io_size) | (u64::from(resp.reserved2) << 32);
    Some(Finding::new(
        FindingCode::ResponseLayoutSpecExample,
        format!(
            "decoded by the structure layout (BaseIoSize at 80, Reserved at 84, MaximumBandwidth \
             at 88): BaseIoSize {}, Reserved {}, MaximumBandwidth {bw}; the bytes look like the \
             spec's section 4.3 example layout, which would read MaximumBandwidth {alt_bw} (at 80), \
             BaseIoSize {alt_base} (at 88), Reserved {alt_reserved} (at 92)",
            resp.base_io_size, resp.reserved2
        ),
    ))
}

/// Section 3.2.5.1.4: a GET_STATUS request needs room for the response. The spec text says 80
/// bytes; the structure is 88 (1.0) or 96 (1.1) bytes, and we check against that, since an
/// 80-byte buffer cannot hold either. `max_output_response` is the IOCTL's MaxOutputResponse.
pub fn check_max_output(req: &Request, max_output_response: u32) -> Option<Finding> {
    if !req.options.contains(Options::GET_STATUS) {
        return None;
    }
    let dialect = req.dialect().unwrap_or(Dialect::V1_0);
    let needed = dialect.response_len();
    let have = usize::try_from(max_output_response).unwrap_or(usize::MAX);
    if have >= needed {
        return None;
    }
    let text = if have < SPEC_TEXT_RESPONSE_SIZE {
        format!("below even the spec text's {SPEC_TEXT_RESPONSE_SIZE}, so the server MUST fail it with STATUS_INVALID_PARAMETER")
    } else {
        format!(
            "the spec text's minimum is {SPEC_TEXT_RESPONSE_SIZE}, but the structure does not fit"
        )
    };
    Some(Finding::new(
        FindingCode::MaxOutputTooSmall,
        format!(
            "GET_STATUS request with MaxOutputResponse {max_output_response}, smaller than the \
             {needed}-byte dialect {dialect} response; {text}"
        ),
    ))
}

/// Findings on a response read together with the request it answers.
pub fn check_response_against_request(req: &Request, resp: &Response) -> Vec<Finding> {
    let mut out = Vec::new();
    if req.protocol_version != resp.protocol_version {
        out.push(Finding::new(
            FindingCode::ResponseVersionMismatch,
            format!(
                "response ProtocolVersion 0x{:04X} differs from the request's 0x{:04X}",
                resp.protocol_version.0, req.protocol_version.0
            ),
        ));
    }
    let opts = req.options;
    if !opts.contains(Options::GET_STATUS) {
        out.push(Finding::new(
            FindingCode::ResponseWithoutGetStatus,
            format!(
                "a response buffer answers a request without GET_STATUS (Options 0x{:08X}); the \
                 server sends one only for GET_STATUS",
                opts.bits()
            ),
        ));
    }
    // PROBE_POLICY without SET_LOGICAL_FLOW_ID is ignored when the open already has a flow, so
    // a different flow in the response is then legitimate.
    let probe_only =
        opts.contains(Options::PROBE_POLICY) && !opts.contains(Options::SET_LOGICAL_FLOW_ID);
    if !req.logical_flow_id.is_nil() && !probe_only && req.logical_flow_id != resp.logical_flow_id {
        out.push(Finding::new(
            FindingCode::ResponseFlowIdMismatch,
            format!(
                "response LogicalFlowID {} differs from the request's {}",
                resp.logical_flow_id, req.logical_flow_id
            ),
        ));
    }
    if opts.contains(Options::SET_POLICY) {
        for (name, want, got) in [
            ("PolicyID", req.policy_id, resp.policy_id),
            ("InitiatorID", req.initiator_id, resp.initiator_id),
        ] {
            if want != got {
                out.push(Finding::new(
                    FindingCode::ResponsePolicyMismatch,
                    format!(
                        "response {name} {got} differs from {want} set by the SET_POLICY request"
                    ),
                ));
            }
        }
    }
    out
}
