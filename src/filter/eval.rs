//! Evaluating a filter on one message, flow or interval row.
//!
//! Values are the same flat JSON the CSV/JSON outputs write (built only when a filter reads
//! them). A missing field (absent, null, empty list) fails every test but `not`; a list passes
//! a test when one of its elements does (`!=`: when none equals), as in Wireshark.

use std::cell::OnceCell;
use std::cmp::Ordering;
use std::collections::BTreeSet;

use serde_json::{Map, Value};
use uuid::Uuid;

use super::fields::{FieldRef, Scope};
use super::parse::{CmpOp, Expr, Literal};
use super::shortcut::Shortcut;
use crate::analysis::{FlowFindingCode, FlowState};
use crate::capture::Timestamp;
use crate::output::columns::{flow_row, message_flat};
use crate::output::json::record_flat_picked;
use crate::pipeline::SqosRecord;

/// What a filter is evaluated on: a message (with its flow as known then), a flow, or an
/// interval row (with its flow).
pub struct Subject<'a> {
    message: Option<&'a SqosRecord>,
    flow: Option<&'a FlowState>,
    row: Option<&'a Map<String, Value>>,
    /// Finding codes of the flow's messages (flows only).
    message_codes: Option<&'a BTreeSet<&'static str>>,
    start: Timestamp,
    /// The message keys the reader will ask for ([`Subject::wanting`]): only these are made.
    wanted: &'a [&'static str],
    wanted_map: OnceCell<Map<String, Value>>,
    message_map: OnceCell<Map<String, Value>>,
    /// The flow's flat row made once for all its messages ([`Subject::with_flow_row`]).
    flow_row: Option<&'a Map<String, Value>>,
    flow_map: OnceCell<Map<String, Value>>,
}

impl<'a> Subject<'a> {
    fn new(start: Timestamp) -> Self {
        Subject {
            message: None,
            flow: None,
            row: None,
            message_codes: None,
            start,
            wanted: &[],
            wanted_map: OnceCell::new(),
            message_map: OnceCell::new(),
            flow_row: None,
            flow_map: OnceCell::new(),
        }
    }

    /// A message, with the flow it belongs to as known when it was seen. `start` is the
    /// capture's first frame time (for `--time` in seconds).
    pub fn message(rec: &'a SqosRecord, flow: Option<&'a FlowState>, start: Timestamp) -> Self {
        Subject {
            message: Some(rec),
            flow,
            ..Subject::new(start)
        }
    }

    /// Says which message keys will be read: a message's flat object is then made of these
    /// alone (a field asked for beyond them still gets the whole object).
    pub fn wanting(mut self, keys: &'a [&'static str]) -> Self {
        self.wanted = keys;
        self
    }

    /// The flat row of the subject's flow (`columns::flow_row` of it), made by the caller once
    /// for the flow's messages where the flow does not change: a final flow's. `None`: made
    /// here when a flow field is read.
    pub fn with_flow_row(mut self, row: Option<&'a Map<String, Value>>) -> Self {
        self.flow_row = row;
        self
    }

    /// A flow, with the finding codes its messages carried.
    pub fn flow(
        flow: &'a FlowState,
        message_codes: Option<&'a BTreeSet<&'static str>>,
        start: Timestamp,
    ) -> Self {
        Subject {
            flow: Some(flow),
            message_codes,
            ..Subject::new(start)
        }
    }

    /// A flow known only by its flat JSON (`flow_flat`: a saved flow table, a baseline).
    pub fn flow_map(map: Map<String, Value>, start: Timestamp) -> Self {
        let s = Subject::new(start);
        let _ = s.flow_map.set(map);
        s
    }

    /// An interval row (the flat object of `sqos export --what series`) and its flow.
    pub fn row(row: &'a Map<String, Value>, flow: Option<&'a FlowState>, start: Timestamp) -> Self {
        Subject {
            row: Some(row),
            flow,
            ..Subject::new(start)
        }
    }

    /// A field's value (`None` when absent, null or an empty list).
    pub fn field(&self, f: FieldRef) -> Option<&Value> {
        self.value(f)
    }

    fn value(&self, f: FieldRef) -> Option<&Value> {
        let map = match f.scope {
            Scope::Message if self.wanted.contains(&f.name) => self.wanted_map.get_or_init(|| {
                self.message
                    .map(|rec| record_flat_picked(rec, self.wanted))
                    .unwrap_or_default()
            }),
            Scope::Message => self
                .message_map
                .get_or_init(|| self.message.map(message_flat).unwrap_or_default()),
            Scope::Flow => match self.flow_row {
                Some(row) => row,
                None => self
                    .flow_map
                    .get_or_init(|| self.flow.map(flow_row).unwrap_or_default()),
            },
            Scope::Row => self.row?,
        };
        map.get(f.name).filter(|v| match v {
            Value::Null => false,
            Value::Array(a) => !a.is_empty(),
            _ => true,
        })
    }

    /// The flow's id and initiator name, falling back to what the message itself names.
    fn flow_id_and_name(&self) -> (Option<Uuid>, Option<&str>) {
        let (mut id, mut name) = match (self.flow, self.flow_map.get()) {
            (Some(f), _) => (Some(f.id), f.initiator_name.as_deref()),
            (None, Some(m)) => (
                m.get("logical_flow_id")
                    .and_then(Value::as_str)
                    .and_then(|s| Uuid::parse_str(s).ok()),
                m.get("initiator_name").and_then(Value::as_str),
            ),
            (None, None) => (None, None),
        };
        if let Some(rec) = self.message {
            let (mid, mname) = rec.named_flow();
            id = id.filter(|u| !u.is_nil()).or(mid);
            name = name.or(mname);
        }
        (id.filter(|u| !u.is_nil()), name)
    }

    fn shortcut(&self, s: &Shortcut) -> bool {
        match s {
            Shortcut::Flow(g) => {
                let (id, name) = self.flow_id_and_name();
                let prefix = g.text.trim_matches(|c| c == '{' || c == '}').to_lowercase();
                id.is_some_and(|u| !prefix.is_empty() && u.to_string().starts_with(&prefix))
                    || name.is_some_and(|n| g.matches(n))
            }
            Shortcut::Vm(g) => self.flow_id_and_name().1.is_some_and(|n| g.matches(n)),
            Shortcut::Finding(g) => self.has_finding(g),
            Shortcut::Time(w) => match (self.message, self.row) {
                (Some(rec), _) => w.contains(rec.ts, self.start),
                (None, Some(row)) => {
                    // A row is in the window when it overlaps it.
                    let t = |k: &str| {
                        row.get(k)
                            .and_then(Value::as_f64)
                            .map(|s| Timestamp((s * 1e9) as i64))
                    };
                    match (t("start"), t("end")) {
                        (Some(a), Some(b)) => w.overlaps(a, b, self.start),
                        _ => false,
                    }
                }
                // A flow is judged on its messages (see `Filter::needs_messages`).
                (None, None) => false,
            },
        }
    }

    fn has_finding(&self, g: &super::shortcut::NameGlob) -> bool {
        if let Some(rec) = self.message {
            let own = rec
                .body
                .findings()
                .iter()
                .any(|f| g.matches(f.code.as_str()));
            // A flow finding given at this message's frame is about this message.
            let flow = self.flow.is_some_and(|f| {
                f.findings
                    .iter()
                    .any(|x| x.frame == rec.frame && g.matches(x.code.as_str()))
            });
            return own || flow;
        }
        let flow = self.flow.is_some_and(|f| {
            FlowFindingCode::ALL
                .iter()
                .zip(f.finding_counts)
                .any(|(c, n)| n > 0 && g.matches(c.as_str()))
        });
        let msgs = self
            .message_codes
            .is_some_and(|codes| codes.iter().any(|c| g.matches(c)));
        let saved = self.flow.is_none()
            && self
                .flow_map
                .get()
                .and_then(|m| m.get("finding_codes"))
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|c| c.as_str().is_some_and(|c| g.matches(c))));
        flow || msgs || saved
    }
}

/// Evaluate `e` on `s`.
pub fn eval(e: &Expr, s: &Subject<'_>) -> bool {
    match e {
        Expr::Or(a, b) => eval(a, s) || eval(b, s),
        Expr::And(a, b) => eval(a, s) && eval(b, s),
        Expr::Not(a) => !eval(a, s),
        Expr::Exists(f) => s.value(*f).is_some(),
        Expr::Cmp { field, op, value } => match s.value(*field) {
            None => false,
            Some(Value::Array(items)) if *op == CmpOp::Ne => {
                !items.iter().any(|v| compare(v, CmpOp::Eq, value))
            }
            Some(Value::Array(items)) => items.iter().any(|v| compare(v, *op, value)),
            Some(v) => compare(v, *op, value),
        },
        Expr::In { field, values } => match s.value(*field) {
            None => false,
            Some(Value::Array(items)) => items
                .iter()
                .any(|v| values.iter().any(|l| compare(v, CmpOp::Eq, l))),
            Some(v) => values.iter().any(|l| compare(v, CmpOp::Eq, l)),
        },
        Expr::Matches { field, regex } => match s.value(*field) {
            None => false,
            Some(Value::Array(items)) => items.iter().any(|v| regex.is_match(&text_of(v))),
            Some(v) => regex.is_match(&text_of(v)),
        },
        Expr::Shortcut(sc) => s.shortcut(sc),
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn ordered(ord: Option<Ordering>, op: CmpOp) -> bool {
    let Some(o) = ord else {
        return false;
    };
    match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Contains => false,
    }
}

/// One scalar value against one literal.
fn compare(v: &Value, op: CmpOp, lit: &Literal) -> bool {
    match v {
        Value::Number(n) => {
            if op == CmpOp::Contains {
                return n.to_string().contains(&lit.text);
            }
            // Integers compare exactly (u64 above 2^53 too); otherwise as doubles.
            let exact = n
                .as_u64()
                .map(i128::from)
                .or_else(|| n.as_i64().map(i128::from));
            match (exact, lit.int) {
                (Some(a), Some(b)) => ordered(Some(a.cmp(&b)), op),
                _ => match (n.as_f64(), lit.float) {
                    (Some(a), Some(b)) => ordered(a.partial_cmp(&b), op),
                    _ => false,
                },
            }
        }
        Value::Bool(b) => {
            let want = lit.boolean.or(match lit.int {
                Some(1) => Some(true),
                Some(0) => Some(false),
                _ => None,
            });
            match (op, want) {
                (CmpOp::Eq, Some(w)) => *b == w,
                (CmpOp::Ne, Some(w)) => *b != w,
                _ => false,
            }
        }
        Value::String(s) => {
            if op == CmpOp::Contains {
                return s.contains(&lit.text);
            }
            // GUIDs compare as GUIDs (any case, with or without braces).
            if let (Some(want), Ok(have)) = (lit.uuid, Uuid::parse_str(s)) {
                return ordered(Some(have.cmp(&want)), op);
            }
            // An order against a number is numeric: a string that is not a number has none.
            let ordering = !matches!(op, CmpOp::Eq | CmpOp::Ne);
            if let (true, Some(want)) = (ordering, lit.float) {
                let have = s.parse::<f64>().ok();
                return ordered(have.and_then(|h| h.partial_cmp(&want)), op);
            }
            ordered(Some(s.as_str().cmp(lit.text.as_str())), op)
        }
        Value::Null | Value::Array(_) | Value::Object(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::fields::Context;
    use crate::filter::parse::parse;
    use serde_json::json;

    /// The first message of a committed capture, as the pipeline makes it.
    fn first_message() -> SqosRecord {
        #[derive(Default)]
        struct First(Option<SqosRecord>);
        impl crate::pipeline::RecordSink for First {
            fn on_sqos(&mut self, rec: SqosRecord) {
                self.0.get_or_insert(rec);
            }
            fn on_channel(&mut self, _: &crate::pipeline::ChannelRecord) {}
        }
        impl crate::run::CaptureSink for First {}
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/captures/spec-examples-1.1.pcap"
        );
        let mut first = First::default();
        crate::run::run_path(path.as_ref(), Default::default(), &mut first).expect("readable");
        first.0.expect("a message")
    }

    #[test]
    fn a_subject_wanting_keys_makes_only_those_until_asked_for_another() {
        let rec = first_message();
        let field = |name| FieldRef {
            scope: Scope::Message,
            name,
        };
        let s = Subject::message(&rec, None, Timestamp(0)).wanting(&["frame", "msg_id"]);
        assert_eq!(s.field(field("frame")), Some(&json!(rec.frame)));
        assert_eq!(s.field(field("msg_id")), Some(&json!(rec.msg_id)));
        let made: Vec<&String> = s.wanted_map.get().expect("made").keys().collect();
        assert_eq!(made, ["frame", "msg_id"]);
        assert!(s.message_map.get().is_none(), "the whole object not made");
        // A key beyond those: the whole object, and the same answers from it.
        assert_eq!(s.field(field("session_id")), Some(&json!(rec.session_id)));
        assert!(s.message_map.get().is_some_and(|m| m.len() > 10));
    }

    fn row_matches(filter: &str, row: Value) -> bool {
        let Value::Object(m) = row else {
            panic!("object")
        };
        let e = parse(filter, Context::Series).expect("parses");
        eval(&e, &Subject::row(&m, None, Timestamp(0)))
    }

    #[test]
    fn comparisons_on_numbers_strings_and_missing_values() {
        let r = json!({"index": 3, "iops": 12.5, "initiator_name": "vm01", "status_ok": true,
                       "maximum_io_rate": null, "logical_flow_id": "06608ea2-8b2a-4c3b-9e2b-1d0e5f2a9c11"});
        assert!(row_matches("index == 3", r.clone()));
        assert!(row_matches("index >= 0x3 and index < 4", r.clone()));
        assert!(row_matches("iops > 12 and iops le 12.5", r.clone()));
        assert!(!row_matches("iops > 12.5", r.clone()));
        assert!(row_matches("initiator_name == vm01", r.clone()));
        assert!(row_matches("initiator_name contains \"m0\"", r.clone()));
        assert!(!row_matches("initiator_name contains \"M0\"", r.clone()));
        assert!(row_matches(
            "initiator_name matches \"^VM0[0-9]$\"",
            r.clone()
        ));
        assert!(row_matches("initiator_name in {vm02 vm01}", r.clone()));
        assert!(row_matches(
            "status_ok == true and status_ok == 1",
            r.clone()
        ));
        assert!(row_matches(
            "logical_flow_id == 06608EA2-8B2A-4C3B-9E2B-1D0E5F2A9C11",
            r.clone()
        ));
        // Missing (null) fails every test, even `!=`; `not` turns that round.
        assert!(!row_matches("maximum_io_rate", r.clone()));
        assert!(!row_matches("maximum_io_rate != 5", r.clone()));
        assert!(row_matches("not maximum_io_rate == 5", r.clone()));
        assert!(row_matches("iops", r.clone()));
        // A string is not a number.
        assert!(!row_matches("initiator_name > 5", r));
    }
}
