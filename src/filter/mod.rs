//! Display filters (`-Y EXPR`) and their shortcuts (`--flow`, `--vm`, `--finding`, `--time`):
//! which messages, flows or interval rows a command shows. Grammar, fields and semantics are in
//! docs/filter.md.
//!
//! Parsing is a pure function from text to an expression (errors carry the span for a caret);
//! names resolve against the JSON keys the outputs write ([`fields`]); evaluation reads those
//! same values ([`eval`]). [`select`] holds the record sinks that apply a filter while a capture
//! is read.

pub mod error;
pub mod eval;
pub mod fields;
mod lex;
pub mod parse;
pub mod select;
pub mod shortcut;

pub use error::{FilterError, Span};
pub use eval::Subject;
pub use fields::{Context, FieldRef, Scope};
pub use select::{FlowSelect, HoldMessages, MessageSelect, ReadAgain};

use crate::analysis::FlowState;
use crate::capture::Timestamp;
use crate::pipeline::SqosRecord;
use parse::Expr;
use shortcut::{NameGlob, Shortcut, TimeWindow};

/// The shortcut options as given on the command line (each list is OR-ed, the kinds AND-ed).
#[derive(Clone, Debug, Default)]
pub struct Shortcuts {
    pub flows: Vec<String>,
    pub vms: Vec<String>,
    pub findings: Vec<String>,
    pub time: Option<String>,
}

/// A compiled filter for one kind of listing.
#[derive(Clone, Debug)]
pub struct Filter {
    expr: Expr,
    ctx: Context,
    /// The message keys the expression reads (so only they are made for each message).
    message_keys: Vec<&'static str>,
}

impl Filter {
    /// Parse a `-Y` expression alone.
    pub fn parse(src: &str, ctx: Context) -> Result<Filter, FilterError> {
        Ok(Filter::new(parse::parse(src, ctx)?, ctx))
    }

    /// The filter of a command line: `-Y` and the shortcuts, all of which must hold. `None`
    /// when nothing filters.
    pub fn build(
        ctx: Context,
        display: Option<&str>,
        sc: &Shortcuts,
    ) -> Result<Option<Filter>, FilterError> {
        let mut parts: Vec<Expr> = Vec::new();
        if let Some(src) = display {
            parts.push(parse::parse(src, ctx)?);
        }
        let any = |option: &'static str,
                   items: &[String],
                   make: fn(NameGlob) -> Shortcut|
         -> Result<Option<Expr>, FilterError> {
            let mut e: Option<Expr> = None;
            for s in items {
                let node = Expr::Shortcut(make(NameGlob::new(option, s)?));
                e = Some(match e {
                    Some(prev) => Expr::or(prev, node),
                    None => node,
                });
            }
            Ok(e)
        };
        parts.extend(any("--flow", &sc.flows, Shortcut::Flow)?);
        parts.extend(any("--vm", &sc.vms, Shortcut::Vm)?);
        parts.extend(any("--finding", &sc.findings, Shortcut::Finding)?);
        if let Some(t) = &sc.time {
            parts.push(Expr::Shortcut(Shortcut::Time(TimeWindow::parse(t)?)));
        }
        let expr = parts.into_iter().reduce(Expr::and);
        Ok(expr.map(|expr| Filter::new(expr, ctx)))
    }

    fn new(expr: Expr, ctx: Context) -> Filter {
        let mut fields = Vec::new();
        expr.fields(&mut fields);
        let message_keys = fields::message_keys(&fields);
        Filter {
            expr,
            ctx,
            message_keys,
        }
    }

    pub fn context(&self) -> Context {
        self.ctx
    }

    fn fields(&self) -> Vec<FieldRef> {
        let mut v = Vec::new();
        self.expr.fields(&mut v);
        v
    }

    fn shortcuts(&self) -> Vec<&Shortcut> {
        let mut v = Vec::new();
        self.expr.shortcuts(&mut v);
        v
    }

    /// The filter reads message fields or times: flows are then judged on their messages.
    pub fn needs_messages(&self) -> bool {
        self.fields().iter().any(|f| f.scope == Scope::Message)
            || self
                .shortcuts()
                .iter()
                .any(|s| matches!(s, Shortcut::Time(_)))
    }

    /// The filter reads the flow of a message (so the flows must be followed).
    pub fn needs_flow(&self) -> bool {
        self.fields().iter().any(|f| f.scope == Scope::Flow)
            || self
                .shortcuts()
                .iter()
                .any(|s| !matches!(s, Shortcut::Time(_)))
    }

    /// The filter asks for findings (flows then remember their messages' finding codes).
    pub fn needs_message_findings(&self) -> bool {
        self.shortcuts()
            .iter()
            .any(|s| matches!(s, Shortcut::Finding(_)))
    }

    pub fn matches(&self, s: &Subject<'_>) -> bool {
        eval::eval(&self.expr, s)
    }

    /// Whether a message passes, with its flow as known then (and that flow's flat row where
    /// the caller made it once: [`Subject::with_flow_row`]); only the message keys the filter
    /// reads are made.
    pub fn matches_message(
        &self,
        rec: &SqosRecord,
        flow: Option<&FlowState>,
        row: Option<&serde_json::Map<String, serde_json::Value>>,
        start: Timestamp,
    ) -> bool {
        self.matches(
            &Subject::message(rec, flow, start)
                .wanting(&self.message_keys)
                .with_flow_row(row),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Any text parses or gives an error whose span lies on character boundaries inside it
        /// (what the fuzz target `filter` checks at length).
        #[test]
        fn any_text_parses_or_points_inside_itself(text in "[ -~éλ]{0,40}|[a-z_. ()!=<>~&|\"'{}0-9,]{0,40}") {
            for ctx in [Context::Messages, Context::Flows, Context::Series] {
                if let Err(e) = Filter::parse(&text, ctx) {
                    if let Some(at) = e.span() {
                        proptest::prop_assert!(at.start <= at.end && at.end <= text.len());
                        proptest::prop_assert!(text.is_char_boundary(at.start) && text.is_char_boundary(at.end));
                    }
                    proptest::prop_assert!(e.render(&text).starts_with(&e.to_string()));
                }
            }
        }
    }

    #[test]
    fn shortcuts_and_expression_combine() {
        let sc = Shortcuts {
            vms: vec!["vm01".into(), "vm02".into()],
            time: Some("1..2".into()),
            ..Shortcuts::default()
        };
        let f = Filter::build(Context::Flows, Some("limit > 5"), &sc)
            .expect("builds")
            .expect("a filter");
        assert!(f.needs_messages(), "--time is judged on messages");
        assert!(f.needs_flow());
        assert!(Filter::build(Context::Flows, None, &Shortcuts::default())
            .expect("builds")
            .is_none());
        let bad = Shortcuts {
            time: Some("soon".into()),
            ..Shortcuts::default()
        };
        assert!(matches!(
            Filter::build(Context::Messages, None, &bad),
            Err(FilterError::Option {
                option: "--time",
                ..
            })
        ));
        let f = Filter::parse("sqos.limit > 5", Context::Flows).expect("parses");
        assert!(f.needs_messages() && !f.needs_flow());
    }
}
