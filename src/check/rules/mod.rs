//! Rules files: what `sqos check` asserts about a capture (reference: docs/check.md).
//!
//! Each rule kind is an array of tables (`[[flow_metric]]`, …). The file is read with serde and
//! toml, unknown keys are refused, values are checked as they are read, and every error names the
//! file's line and the key. Rules keep the order they have in the file.

mod kinds;
pub mod values;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;

use toml::Spanned;
use uuid::Uuid;

use crate::check::figure::{Agreement, Figure};
use crate::check::flows::Flow;
use crate::sqos::{Severity, Status};
use kinds::{RulesDoc, ToleranceKey};
pub use values::{Bound, Glob, NtStatusSpec, OptionName, StatusSpec, Tolerance};

/// Which flows a per-flow rule is about.
#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    All,
    Id(Uuid),
    Initiator(Glob),
}

impl Selector {
    pub fn matches(&self, f: &Flow) -> bool {
        match self {
            Selector::All => true,
            Selector::Id(id) => f.id().eq_ignore_ascii_case(&id.to_string()),
            Selector::Initiator(g) => f.initiator_name().is_some_and(|n| g.matches(n)),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::All => f.write_str("every flow"),
            Selector::Id(id) => write!(f, "flow {id}"),
            Selector::Initiator(g) => write!(f, "initiator {}", g.as_str()),
        }
    }
}

/// An inclusive range with either end open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountRange {
    pub min: Option<u64>,
    pub max: Option<u64>,
}

impl CountRange {
    pub fn contains(&self, v: u64) -> bool {
        self.min.is_none_or(|m| v >= m) && self.max.is_none_or(|m| v <= m)
    }
}

impl fmt::Display for CountRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (Some(a), Some(b)) if a == b => write!(f, "= {a}"),
            (Some(a), Some(b)) => write!(f, "{a}..={b}"),
            (Some(a), None) => write!(f, "≥ {a}"),
            (None, Some(b)) => write!(f, "≤ {b}"),
            (None, None) => f.write_str("any"),
        }
    }
}

/// What a rule asserts.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// No finding (message or flow) of at least this severity, except the listed codes; when
    /// `only` is not empty, only those codes count.
    NoFindings {
        min: Severity,
        except: Vec<String>,
        only: Vec<String>,
    },
    /// Every SQOS request got a final response.
    AllAnswered,
    /// Final responses carry only these NT statuses.
    NtStatuses {
        allowed: Vec<NtStatusSpec>,
    },
    FlowMetric {
        select: Selector,
        figure: Figure,
        min: Option<Bound>,
        max: Option<Bound>,
        /// Flows without the figure pass instead of failing.
        skip_missing: bool,
    },
    FlowAgreement {
        select: Selector,
        metric: Agreement,
        tolerance: Tolerance,
        /// Flows without one of the two figures pass instead of failing.
        skip_missing: bool,
    },
    FlowEquals {
        select: Selector,
        figure: Figure,
        value: f64,
    },
    FlowStatus {
        select: Selector,
        status: Status,
    },
    /// `present`: at least one flow matches; otherwise none does.
    FlowExists {
        select: Selector,
        present: bool,
    },
    FlowCount(CountRange),
    MessageCount {
        option: OptionName,
        range: CountRange,
    },
}

impl Check {
    /// The kind's table name in the rules file.
    pub fn kind(&self) -> &'static str {
        match self {
            Check::NoFindings { .. } => "no_findings",
            Check::AllAnswered => "all_answered",
            Check::NtStatuses { .. } => "nt_statuses",
            Check::FlowMetric { .. } => "flow_metric",
            Check::FlowAgreement { .. } => "flow_agreement",
            Check::FlowEquals { .. } => "flow_equals",
            Check::FlowStatus { .. } => "flow_status",
            Check::FlowExists { present: true, .. } => "flow_exists",
            Check::FlowExists { present: false, .. } => "flow_absent",
            Check::FlowCount(_) => "flow_count",
            Check::MessageCount { .. } => "message_count",
        }
    }

    /// A readable default name, used when the rule has none.
    fn default_name(&self) -> String {
        let sel = |s: &Selector| match s {
            Selector::All => String::new(),
            s => format!(" ({s})"),
        };
        match self {
            Check::NoFindings { min, .. } => format!("no findings ≥ {}", min.as_str()),
            Check::AllAnswered => "every request answered".into(),
            Check::NtStatuses { .. } => "NT statuses allowed".into(),
            Check::FlowMetric { select, figure, .. } => {
                format!("{figure} in bounds{}", sel(select))
            }
            Check::FlowAgreement { select, metric, .. } => {
                format!("{} reported vs observed{}", metric.name(), sel(select))
            }
            Check::FlowEquals { select, figure, .. } => format!("{figure} value{}", sel(select)),
            Check::FlowStatus { select, .. } => format!("final status{}", sel(select)),
            Check::FlowExists {
                select,
                present: true,
            } => format!("{select} exists"),
            Check::FlowExists {
                select,
                present: false,
            } => format!("{select} absent"),
            Check::FlowCount(_) => "number of flows".into(),
            Check::MessageCount { option, .. } => format!("{} requests", option.name()),
        }
    }
}

/// One rule of a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub name: String,
    /// 1-based line of the rule's table in the file.
    pub line: usize,
    pub check: Check,
}

/// Tolerances of the baseline comparison, per figure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BaselineTolerances {
    pub default: Option<Tolerance>,
    pub per_figure: BTreeMap<Figure, Tolerance>,
}

impl BaselineTolerances {
    /// The tolerance for a figure: its own; else, for a rate, the default; else exact. Settings
    /// (limits, the server's rates, BaseIoSize) are configuration, so a loose default never
    /// hides a changed limit.
    pub fn for_figure(&self, f: Figure) -> Tolerance {
        self.per_figure
            .get(&f)
            .copied()
            .or(self.default.filter(|_| !f.is_setting()))
            .unwrap_or(Tolerance::EXACT)
    }

    /// Entries of `over` replace ours (command line over rules file).
    pub fn overridden_by(mut self, over: &BaselineTolerances) -> Self {
        if over.default.is_some() {
            self.default = over.default;
        }
        self.per_figure
            .extend(over.per_figure.iter().map(|(k, v)| (*k, *v)));
        self
    }

    /// Parse `FIGURE=SPEC` (FIGURE a figure name or `default`; SPEC `10%`, `5`, `10%+5`).
    pub fn add_cli(&mut self, arg: &str) -> Result<(), String> {
        let (k, v) = arg
            .split_once('=')
            .ok_or_else(|| format!("`{arg}`: expected FIGURE=TOLERANCE, e.g. iops=10%"))?;
        let t = Tolerance::parse_cli(v).map_err(|e| format!("`{arg}`: {e}"))?;
        match ToleranceKey::try_from(k.trim().to_string()).map_err(|e| format!("`{arg}`: {e}"))? {
            ToleranceKey::Default => self.default = Some(t),
            ToleranceKey::Figure(f) => {
                self.per_figure.insert(f, t);
            }
        }
        Ok(())
    }
}

/// A loaded, valid rules file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rules {
    pub rules: Vec<Rule>,
    pub baseline: BaselineTolerances,
}

/// A rules file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {}{message}", key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        key: Option<String>,
        message: String,
    },
}

impl RulesError {
    /// The 1-based line the error is about, when it is about the content.
    pub fn line(&self) -> Option<usize> {
        match self {
            RulesError::Invalid { line, .. } => Some(*line),
            RulesError::Read { .. } => None,
        }
    }
}

impl Rules {
    pub fn load(path: &Path) -> Result<Rules, RulesError> {
        let text = std::fs::read_to_string(path).map_err(|source| RulesError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Rules::parse(&text, &path.display().to_string())
    }

    /// Parse rules from text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Rules, RulesError> {
        let doc: RulesDoc = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let (line, column) = line_col(text, span.start);
            RulesError::Invalid {
                path: origin.to_string(),
                line,
                column,
                key: key_at(text, span.start),
                message: e.message().trim_end().to_string(),
            }
        })?;
        let mut b = Builder {
            text,
            origin,
            rules: Vec::new(),
        };
        b.build(doc)
    }
}

struct Builder<'a> {
    text: &'a str,
    origin: &'a str,
    /// (position in the file, rule).
    rules: Vec<(usize, Rule)>,
}

/// The table an error is about, and the key in it.
struct Bad {
    key: &'static str,
    message: String,
}

fn bad(key: &'static str, message: impl Into<String>) -> Bad {
    Bad {
        key,
        message: message.into(),
    }
}

fn selector(flow: Option<Uuid>, initiator: Option<Glob>) -> Result<Selector, Bad> {
    match (flow, initiator) {
        (Some(_), Some(_)) => Err(bad(
            "initiator",
            "give `flow` or `initiator`, not both (neither selects every flow)",
        )),
        (Some(id), None) => Ok(Selector::Id(id)),
        (None, Some(g)) => Ok(Selector::Initiator(g)),
        (None, None) => Ok(Selector::All),
    }
}

/// A code the codec (`sqos.*`) or the flow analysis (`flow.*`) can report: a typo in `except`
/// or `only` would otherwise silently match nothing.
fn known_finding_code(code: &str) -> bool {
    crate::sqos::FindingCode::from_code(code).is_some()
        || crate::analysis::FlowFindingCode::ALL
            .iter()
            .any(|c| c.as_str() == code)
}

fn count_range(min: Option<u64>, max: Option<u64>) -> Result<CountRange, Bad> {
    match (min, max) {
        (None, None) => Err(bad("max", "give `min`, `max` or both")),
        (Some(a), Some(b)) if a > b => Err(bad("min", format!("`min` {a} is above `max` {b}"))),
        _ => Ok(CountRange { min, max }),
    }
}

impl Builder<'_> {
    fn add<T>(
        &mut self,
        items: Vec<Spanned<T>>,
        f: impl Fn(T) -> Result<(Option<String>, Check), Bad>,
    ) -> Result<(), RulesError> {
        for item in items {
            let span = item.span();
            let (name, check) = f(item.into_inner()).map_err(|b| self.error(&span, b))?;
            let line = line_col(self.text, span.start).0;
            let name = match name {
                Some(n) if n.trim().is_empty() => {
                    return Err(self.error(&span, bad("name", "a rule name must not be empty")))
                }
                Some(n) => n,
                None => check.default_name(),
            };
            self.rules.push((span.start, Rule { name, line, check }));
        }
        Ok(())
    }

    fn error(&self, span: &Range<usize>, b: Bad) -> RulesError {
        // Point at the key's own line when it is written in the table, else at the table.
        let at = find_key(self.text, span, b.key).unwrap_or(span.start);
        let (line, column) = line_col(self.text, at);
        RulesError::Invalid {
            path: self.origin.to_string(),
            line,
            column,
            key: Some(b.key.to_string()),
            message: b.message,
        }
    }

    fn build(&mut self, doc: RulesDoc) -> Result<Rules, RulesError> {
        self.add(doc.no_findings, |r| {
            for (key, codes) in [("except", &r.except), ("only", &r.only)] {
                if let Some(c) = codes.iter().find(|c| !known_finding_code(c)) {
                    return Err(bad(
                        key,
                        format!("unknown finding code `{c}` (codes are listed in docs/sqos-codec.md and docs/analysis.md)"),
                    ));
                }
            }
            Ok((
                r.name,
                Check::NoFindings {
                    min: r.min_severity.severity(),
                    except: r.except,
                    only: r.only,
                },
            ))
        })?;
        self.add(doc.all_answered, |r| Ok((r.name, Check::AllAnswered)))?;
        self.add(doc.nt_statuses, |r| {
            if r.allowed.is_empty() {
                return Err(bad("allowed", "list at least one status"));
            }
            Ok((r.name, Check::NtStatuses { allowed: r.allowed }))
        })?;
        self.add(doc.flow_metric, |r| {
            if r.min.is_none() && r.max.is_none() {
                return Err(bad("max", "give `min`, `max` or both"));
            }
            if let (Some(Bound::Value(a)), Some(Bound::Value(b))) = (r.min, r.max) {
                if a > b {
                    return Err(bad("min", format!("`min` {a} is above `max` {b}")));
                }
            }
            Ok((
                r.name,
                Check::FlowMetric {
                    select: selector(r.flow, r.initiator)?,
                    figure: r.metric,
                    min: r.min,
                    max: r.max,
                    skip_missing: r.skip_missing,
                },
            ))
        })?;
        self.add(doc.flow_agreement, |r| {
            let tolerance = Tolerance::new(r.relative, r.absolute).map_err(|m| {
                bad(
                    if r.relative < 0.0 || !r.relative.is_finite() {
                        "relative"
                    } else {
                        "absolute"
                    },
                    m,
                )
            })?;
            Ok((
                r.name,
                Check::FlowAgreement {
                    select: selector(r.flow, r.initiator)?,
                    metric: r.metric,
                    tolerance,
                    skip_missing: r.skip_missing,
                },
            ))
        })?;
        self.add(doc.flow_equals, |r| {
            if !r.value.is_finite() {
                return Err(bad("value", "must be a finite number"));
            }
            Ok((
                r.name,
                Check::FlowEquals {
                    select: selector(r.flow, r.initiator)?,
                    figure: r.field,
                    value: r.value,
                },
            ))
        })?;
        self.add(doc.flow_status, |r| {
            Ok((
                r.name,
                Check::FlowStatus {
                    select: selector(r.flow, r.initiator)?,
                    status: r.equals.0,
                },
            ))
        })?;
        self.add(doc.flow_exists, |r| {
            Ok((
                r.name,
                Check::FlowExists {
                    select: selector(r.flow, r.initiator)?,
                    present: true,
                },
            ))
        })?;
        self.add(doc.flow_absent, |r| {
            let select = selector(r.flow, r.initiator)?;
            if select == Selector::All {
                return Err(bad("flow", "name the flow (`flow` or `initiator`) that must be absent; for none at all use [[flow_count]] max = 0"));
            }
            Ok((
                r.name,
                Check::FlowExists {
                    select,
                    present: false,
                },
            ))
        })?;
        self.add(doc.flow_count, |r| {
            Ok((r.name, Check::FlowCount(count_range(r.min, r.max)?)))
        })?;
        self.add(doc.message_count, |r| {
            Ok((
                r.name,
                Check::MessageCount {
                    option: r.option,
                    range: count_range(r.min, r.max)?,
                },
            ))
        })?;
        let mut baseline = BaselineTolerances::default();
        for (k, t) in doc.baseline.unwrap_or_default().tolerance {
            match k {
                ToleranceKey::Default => baseline.default = Some(t),
                ToleranceKey::Figure(f) => {
                    baseline.per_figure.insert(f, t);
                }
            }
        }
        let mut rules = std::mem::take(&mut self.rules);
        rules.sort_by_key(|(pos, _)| *pos);
        Ok(Rules {
            rules: rules.into_iter().map(|(_, r)| r).collect(),
            baseline,
        })
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

/// The key an error position is about: the key itself, the key whose value it is, or the
/// table whose header it is.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
    let line_end = text
        .get(offset..)?
        .find('\n')
        .map_or(text.len(), |i| offset + i);
    let before = text.get(line_start..offset)?;
    let after = text.get(offset..line_end)?;
    if let Some(eq) = before.rfind('=') {
        let k: String = before
            .get(..eq)?
            .trim_end()
            .chars()
            .rev()
            .take_while(|c| is_key_char(*c))
            .collect();
        let k: String = k.chars().rev().collect();
        return (!k.is_empty()).then_some(k);
    }
    let rest = after.trim_start();
    if rest.starts_with('[') {
        let k = rest.trim_start_matches('[');
        let k: String = k.chars().take_while(|c| is_key_char(*c)).collect();
        return (!k.is_empty()).then_some(k);
    }
    let k: String = rest.chars().take_while(|c| is_key_char(*c)).collect();
    (!k.is_empty()).then_some(k)
}

/// Offset of `key = ` written at the start of a line of the table whose header (or inline
/// table) starts the span: toml gives an array-of-tables element only its header's span, so
/// the table's body is read up to the next header.
fn find_key(text: &str, span: &Range<usize>, key: &str) -> Option<usize> {
    let body = text.get(span.start..)?;
    let mut pos = 0;
    for (i, line) in body.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        if i > 0 && trimmed.starts_with('[') {
            break;
        }
        if let Some(rest) = trimmed.strip_prefix(key) {
            if rest.trim_start().starts_with('=') {
                return Some(span.start + pos + (line.len() - trimmed.len()));
            }
        }
        pos += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_position_helpers() {
        let t = "a = 1\n[[flow_metric]]\nmetric = \"x\"\n";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 6), (2, 1));
        assert_eq!(key_at(t, 4).as_deref(), Some("a"));
        assert_eq!(key_at(t, 6).as_deref(), Some("flow_metric"));
        assert_eq!(key_at(t, 22).as_deref(), Some("metric"));
        assert_eq!(find_key(t, &(6..21), "metric"), Some(22));
        assert_eq!(find_key(t, &(6..21), "a"), None);
    }
}
