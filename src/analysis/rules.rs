//! The server's rules (MS-SQOS section 3.2.5.1 and product note <8>) applied to a request and
//! the tracked state of its open: which failures the server must answer, and what a success
//! changes. Pure: no state is touched here.

use uuid::Uuid;

use super::open::Association;
use crate::smb2::NtStatus;
// The server rules follow the spec's text: the minimum name offset (104) and the response
// size (80) are its numbers, not the layout's (docs/sqos-codec.md, decisions 5 and 9).
use crate::sqos::layout::{
    MAX_POLICY_PARAMETER as PRODUCT_MAX_VALUE, SPEC_TEXT_MIN_NAME_OFFSET as MIN_NAME_OFFSET,
    SPEC_TEXT_RESPONSE_SIZE as MIN_STATUS_OUTPUT,
};
use crate::sqos::{Options, Request, Severity, STORAGE_QOS_INITIATOR_NAME_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    Initiator,
    InitiatorNode,
}

impl Name {
    fn field(self) -> &'static str {
        match self {
            Name::Initiator => "InitiatorName",
            Name::InitiatorNode => "InitiatorNodeName",
        }
    }
}

/// A rule that makes the server fail the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    UnknownVersion(u16),
    NoKnownOption(u32),
    ProbeNullFlowId,
    SetPolicyUnassociated,
    NameTooLong(Name, u16),
    NameOffsetTooLow(Name, u16),
    NameBeyondRequest(Name, usize),
    /// Product note <8> (Windows Server): a field value Windows rejects.
    ProductInvalid(&'static str),
    UpdateUnassociated,
    StatusOutputTooSmall(u32),
    StatusUnassociated,
}

impl Rule {
    /// The NT status the spec prescribes.
    pub fn status(self) -> NtStatus {
        match self {
            Rule::UnknownVersion(_) => NtStatus::REVISION_MISMATCH,
            Rule::SetPolicyUnassociated | Rule::UpdateUnassociated | Rule::StatusUnassociated => {
                NtStatus::NOT_FOUND
            }
            _ => NtStatus::INVALID_PARAMETER,
        }
    }

    /// Normative rules are errors to break; product notes (<8>) only warnings.
    pub fn severity(self) -> Severity {
        match self {
            Rule::ProductInvalid(_) => Severity::Warning,
            _ => Severity::Error,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Rule::UnknownVersion(v) => {
                format!("ProtocolVersion 0x{v:04x} is not 0x0100 or 0x0101 (section 3.2.5.1)")
            }
            Rule::NoKnownOption(o) => {
                format!("Options 0x{o:08x} has no defined flag (section 3.2.5.1)")
            }
            Rule::ProbeNullFlowId => {
                "PROBE_POLICY with a null LogicalFlowID on an unassociated open (section 3.2.5.1.1)"
                    .into()
            }
            Rule::SetPolicyUnassociated => {
                "SET_POLICY on an open not associated to a logical flow (section 3.2.5.1.2)".into()
            }
            Rule::NameTooLong(n, len) => format!(
                "{}Length {len} > STORAGE_QOS_INITIATOR_NAME_SIZE 512 (section 3.2.5.1.2)",
                n.field()
            ),
            Rule::NameOffsetTooLow(n, off) => format!(
                "{}Offset {off} < {MIN_NAME_OFFSET} with a non-zero length (section 3.2.5.1.2)",
                n.field()
            ),
            Rule::NameBeyondRequest(n, size) => format!(
                "{} ends beyond the {size}-byte request (section 3.2.5.1.2)",
                n.field()
            ),
            Rule::ProductInvalid(what) => {
                format!("{what} (Windows rejects it, product note <8> of section 3.2.5.1.2)")
            }
            Rule::UpdateUnassociated => {
                "UPDATE_COUNTERS on an open not associated to a logical flow (section 3.2.5.1.3)"
                    .into()
            }
            Rule::StatusOutputTooSmall(n) => format!(
                "GET_STATUS with MaxOutputResponse {n} < {MIN_STATUS_OUTPUT} (section 3.2.5.1.4)"
            ),
            Rule::StatusUnassociated => {
                "GET_STATUS on an open not associated to a logical flow (section 3.2.5.1.4)".into()
            }
        }
    }
}

/// Yes / no / cannot tell (the open's association before the capture was not seen).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tri {
    Yes,
    No,
    Maybe,
}

/// What a successful request does to the open's association (section 3.2.5.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssociationChange {
    Keep,
    Set(Uuid),
    Clear,
}

/// The request as the rules see it.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts<'a> {
    pub request: &'a Request,
    /// Bytes of the SQOS buffer; `None` when it was cut short in the capture.
    pub request_size: Option<usize>,
    pub max_output_response: Option<u32>,
}

/// The verdict of the rules on one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Rules that certainly apply: the server must fail with one of their statuses.
    pub violations: Vec<Rule>,
    /// Some rule depends on an association we do not know.
    pub uncertain: bool,
    pub change: AssociationChange,
    /// The request sets policy parameters on success (SET_POLICY, or PROBE_POLICY in effect).
    pub applies_policy: bool,
    /// PROBE_POLICY was in effect (the open was not associated before).
    pub probe_in_effect: bool,
}

/// Apply section 3.2.5.1 to `facts` on an open in state `before`.
pub fn evaluate(facts: &RequestFacts<'_>, before: Association) -> Outcome {
    let r = facts.request;
    let opts = r.options;
    let mut violations = Vec::new();
    let mut uncertain = false;

    if r.protocol_version.dialect().is_none() {
        violations.push(Rule::UnknownVersion(r.protocol_version.0));
    }
    if opts.bits() & Options::KNOWN.bits() == 0 {
        violations.push(Rule::NoKnownOption(opts.bits()));
    }

    let associated_before = match before {
        Association::Flow(_) => Tri::Yes,
        Association::NotAssociated => Tri::No,
        Association::Unknown => Tri::Maybe,
    };
    // Section 3.2.5.1: PROBE_POLICY is ignored on an associated open.
    let probe = match (opts.contains(Options::PROBE_POLICY), associated_before) {
        (false, _) | (true, Tri::Yes) => Tri::No,
        (true, Tri::No) => Tri::Yes,
        (true, Tri::Maybe) => Tri::Maybe,
    };
    let set = opts.contains(Options::SET_LOGICAL_FLOW_ID);
    let id = r.logical_flow_id;

    // 3.2.5.1.1
    let (change, associated_after) = if set && !id.is_nil() {
        (AssociationChange::Set(id), Tri::Yes)
    } else if probe != Tri::No && !id.is_nil() {
        // Unknown state: either already associated, or associated now; associated either way.
        (AssociationChange::Set(id), Tri::Yes)
    } else if set {
        (AssociationChange::Clear, Tri::No)
    } else {
        (AssociationChange::Keep, associated_before)
    };
    if id.is_nil() && probe == Tri::Yes {
        violations.push(Rule::ProbeNullFlowId);
    } else if id.is_nil() && probe == Tri::Maybe {
        uncertain = true;
    }

    // 3.2.5.1.2
    let set_policy = opts.contains(Options::SET_POLICY);
    // A rule that needs an associated open: certain, or undecidable on an unknown open.
    let need_associated = |tri: Tri, rule: Rule, v: &mut Vec<Rule>, u: &mut bool| match tri {
        Tri::No => v.push(rule),
        Tri::Maybe => *u = true,
        Tri::Yes => {}
    };
    if set_policy {
        need_associated(
            associated_after,
            Rule::SetPolicyUnassociated,
            &mut violations,
            &mut uncertain,
        );
    }
    let applies_policy = set_policy || probe != Tri::No;
    if applies_policy {
        let mut policy_rules = name_rules(facts);
        policy_rules.extend(product_rules(r));
        if set_policy || probe == Tri::Yes {
            violations.extend(policy_rules);
        } else if !policy_rules.is_empty() {
            uncertain = true;
        }
    }

    // 3.2.5.1.3
    if opts.contains(Options::UPDATE_COUNTERS) {
        need_associated(
            associated_after,
            Rule::UpdateUnassociated,
            &mut violations,
            &mut uncertain,
        );
    }

    // 3.2.5.1.4
    if opts.contains(Options::GET_STATUS) {
        if let Some(n) = facts
            .max_output_response
            .filter(|&n| usize::try_from(n).is_ok_and(|n| n < MIN_STATUS_OUTPUT))
        {
            violations.push(Rule::StatusOutputTooSmall(n));
        }
        need_associated(
            associated_after,
            Rule::StatusUnassociated,
            &mut violations,
            &mut uncertain,
        );
    }

    Outcome {
        violations,
        uncertain,
        change,
        applies_policy: set_policy || probe == Tri::Yes || (probe == Tri::Maybe && !id.is_nil()),
        probe_in_effect: probe == Tri::Yes,
    }
}

fn name_rules(facts: &RequestFacts<'_>) -> Vec<Rule> {
    let r = facts.request;
    let mut v = Vec::new();
    for (name, off, len) in [
        (
            Name::Initiator,
            r.initiator_name_offset,
            r.initiator_name_length,
        ),
        (
            Name::InitiatorNode,
            r.initiator_node_name_offset,
            r.initiator_node_name_length,
        ),
    ] {
        if len > STORAGE_QOS_INITIATOR_NAME_SIZE {
            v.push(Rule::NameTooLong(name, len));
        }
        if len > 0 && usize::from(off) < MIN_NAME_OFFSET {
            v.push(Rule::NameOffsetTooLow(name, off));
        }
        if let Some(size) = facts.request_size {
            if usize::from(len) + usize::from(off) > size {
                v.push(Rule::NameBeyondRequest(name, size));
            }
        }
    }
    v
}

fn product_rules(r: &Request) -> Vec<Rule> {
    let bandwidth = r.v1_1.map_or(0, |v| v.bandwidth_limit);
    let with_policy = !r.policy_id.is_nil();
    let checks = [
        (r.limit > PRODUCT_MAX_VALUE, "Limit > 1000000000"),
        (
            r.reservation > PRODUCT_MAX_VALUE,
            "Reservation > 1000000000",
        ),
        (bandwidth > PRODUCT_MAX_VALUE, "BandwidthLimit > 1000000000"),
        (
            r.limit > 0 && r.reservation > r.limit,
            "Reservation greater than a non-zero Limit",
        ),
        (
            r.limit > 0 && with_policy,
            "Limit set together with a PolicyID",
        ),
        (
            bandwidth > 0 && with_policy,
            "BandwidthLimit set together with a PolicyID",
        ),
        (
            r.reservation > 0 && with_policy,
            "Reservation set together with a PolicyID",
        ),
    ];
    checks
        .iter()
        .filter(|(hit, _)| *hit)
        .map(|&(_, what)| Rule::ProductInvalid(what))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqos::ProtocolVersion;

    pub(crate) fn request(options: Options, flow: Uuid) -> Request {
        Request {
            options,
            logical_flow_id: flow,
            ..Request::new(crate::sqos::Dialect::V1_1)
        }
    }

    fn eval(r: &Request, before: Association) -> Outcome {
        evaluate(
            &RequestFacts {
                request: r,
                request_size: Some(128),
                max_output_response: Some(96),
            },
            before,
        )
    }

    const F: Uuid = Uuid::from_u128(0xb13a32e4_e2ad_5db2_a4f8_5cd3be9d696e);
    const G: Uuid = Uuid::from_u128(0x1111);

    #[test]
    fn set_logical_flow_id_associates_and_null_dissociates() {
        let o = eval(
            &request(Options::SET_LOGICAL_FLOW_ID, F),
            Association::NotAssociated,
        );
        assert_eq!(o.change, AssociationChange::Set(F));
        assert!(o.violations.is_empty() && !o.uncertain);
        let o = eval(
            &request(Options::SET_LOGICAL_FLOW_ID, Uuid::nil()),
            Association::Flow(F),
        );
        assert_eq!(o.change, AssociationChange::Clear);
    }

    #[test]
    fn requests_needing_association_must_get_not_found() {
        for opt in [
            Options::SET_POLICY,
            Options::UPDATE_COUNTERS,
            Options::GET_STATUS,
        ] {
            let o = eval(&request(opt, F), Association::NotAssociated);
            assert_eq!(o.violations.len(), 1, "{opt:?}");
            assert_eq!(o.violations[0].status(), NtStatus::NOT_FOUND);
            let o = eval(&request(opt, F), Association::Flow(F));
            assert!(o.violations.is_empty(), "{opt:?}");
            let o = eval(&request(opt, F), Association::Unknown);
            assert!(o.violations.is_empty() && o.uncertain, "{opt:?}");
        }
        // Associated in the same request first (3.2.5.1.1 before 3.2.5.1.2).
        let o = eval(
            &request(Options::SET_LOGICAL_FLOW_ID | Options::SET_POLICY, F),
            Association::NotAssociated,
        );
        assert!(o.violations.is_empty());
        // Dissociated in the same request.
        let o = eval(
            &request(
                Options::SET_LOGICAL_FLOW_ID | Options::GET_STATUS,
                Uuid::nil(),
            ),
            Association::Flow(F),
        );
        assert_eq!(o.violations, vec![Rule::StatusUnassociated]);
    }

    #[test]
    fn probe_applies_only_when_unassociated() {
        let o = eval(&request(Options::PROBE_POLICY, G), Association::Flow(F));
        assert_eq!(o.change, AssociationChange::Keep);
        assert!(!o.applies_policy && !o.probe_in_effect);
        let o = eval(
            &request(Options::PROBE_POLICY, G),
            Association::NotAssociated,
        );
        assert_eq!(o.change, AssociationChange::Set(G));
        assert!(o.applies_policy && o.probe_in_effect);
        let o = eval(
            &request(Options::PROBE_POLICY, Uuid::nil()),
            Association::NotAssociated,
        );
        assert_eq!(o.violations, vec![Rule::ProbeNullFlowId]);
        assert_eq!(o.violations[0].status(), NtStatus::INVALID_PARAMETER);
        // Ignored on an associated open: a null id is then no error.
        let o = eval(
            &request(Options::PROBE_POLICY, Uuid::nil()),
            Association::Flow(F),
        );
        assert!(o.violations.is_empty());
        let o = eval(
            &request(Options::PROBE_POLICY, Uuid::nil()),
            Association::Unknown,
        );
        assert!(o.violations.is_empty() && o.uncertain);
    }

    #[test]
    fn version_options_and_output_size() {
        let mut r = request(Options::GET_STATUS, F);
        r.protocol_version = ProtocolVersion(0x0102);
        let o = eval(&r, Association::Flow(F));
        assert_eq!(o.violations, vec![Rule::UnknownVersion(0x0102)]);
        assert_eq!(o.violations[0].status(), NtStatus::REVISION_MISMATCH);
        let o = eval(&request(Options(0x40), F), Association::Flow(F));
        assert_eq!(o.violations, vec![Rule::NoKnownOption(0x40)]);
        let r = request(Options::GET_STATUS, F);
        let o = evaluate(
            &RequestFacts {
                request: &r,
                request_size: Some(128),
                max_output_response: Some(64),
            },
            Association::Flow(F),
        );
        assert_eq!(o.violations, vec![Rule::StatusOutputTooSmall(64)]);
    }

    #[test]
    fn name_and_product_rules_on_set_policy() {
        let mut r = request(Options::SET_POLICY, F);
        r.initiator_name_offset = 96;
        r.initiator_name_length = 14;
        r.initiator_node_name_offset = 200;
        r.initiator_node_name_length = 600;
        let o = eval(&r, Association::Flow(F));
        assert_eq!(
            o.violations,
            vec![
                Rule::NameOffsetTooLow(Name::Initiator, 96),
                Rule::NameTooLong(Name::InitiatorNode, 600),
                Rule::NameBeyondRequest(Name::InitiatorNode, 128),
            ]
        );
        let mut r = request(Options::SET_POLICY, F);
        r.limit = 100;
        r.reservation = 200;
        r.policy_id = G;
        let o = eval(&r, Association::Flow(F));
        assert_eq!(
            o.violations,
            vec![
                Rule::ProductInvalid("Reservation greater than a non-zero Limit"),
                Rule::ProductInvalid("Limit set together with a PolicyID"),
                Rule::ProductInvalid("Reservation set together with a PolicyID"),
            ]
        );
        assert_eq!(o.violations[0].severity(), Severity::Warning);
        // The same values without SET_POLICY/PROBE are not looked at.
        let mut r2 = r.clone();
        r2.options = Options::UPDATE_COUNTERS;
        assert!(eval(&r2, Association::Flow(F)).violations.is_empty());
    }
}
