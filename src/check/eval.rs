//! Judging rules against one capture's evidence: its message facts and its flow table.

use super::facts::MessageFacts;
use super::figure::Figure;
use super::flows::{status_label, Flow, FlowTable};
use super::outcome::{summarize, Outcome};
use super::rules::values::fmt_num;
use super::rules::{Bound, Check, CountRange, OptionName, Rule, Selector, Tolerance};
use crate::smb2::NtStatus;
use crate::sqos::Severity;

/// What a capture showed: per-message facts and the flow table.
pub struct Evidence<'a> {
    pub facts: &'a MessageFacts,
    pub flows: &'a FlowTable,
}

/// Judge every rule, in order.
pub fn evaluate(rules: &[Rule], ev: &Evidence<'_>) -> Vec<Outcome> {
    rules.iter().map(|r| judge(r, ev)).collect()
}

struct Judged {
    passed: bool,
    measured: String,
    expected: String,
    details: Vec<String>,
}

pub fn judge(rule: &Rule, ev: &Evidence<'_>) -> Outcome {
    let j = match &rule.check {
        Check::NoFindings { min, except, only } => no_findings(ev, *min, except, only),
        Check::AllAnswered => all_answered(ev.facts),
        Check::NtStatuses { allowed } => nt_statuses(ev.facts, allowed),
        Check::FlowMetric {
            select,
            figure,
            min,
            max,
            skip_missing,
        } => per_flow(
            ev.flows,
            select,
            &bounds_text(*figure, *min, *max),
            |f| match f.figure(*figure) {
                None => (*skip_missing, missing(*skip_missing)),
                Some(v) => flow_metric(f, v, *min, *max),
            },
        ),
        Check::FlowAgreement {
            select,
            metric,
            tolerance,
            skip_missing,
        } => {
            let (rep, obs) = metric.figures();
            per_flow(
                ev.flows,
                select,
                &format!("{rep} within {tolerance} of {obs}"),
                |f| agreement(f, rep, obs, *tolerance, *skip_missing),
            )
        }
        Check::FlowEquals {
            select,
            figure,
            value,
        } => per_flow(
            ev.flows,
            select,
            &format!("{figure} = {}", fmt_num(*value)),
            |f| match f.figure(*figure) {
                None => (false, "none".into()),
                Some(v) => (Tolerance::EXACT.accepts(v, *value), fmt_num(v)),
            },
        ),
        Check::FlowStatus { select, status } => per_flow(
            ev.flows,
            select,
            &format!("last status {}", status_label(*status)),
            |f| (f.last_status() == Some(*status), f.last_status_text()),
        ),
        Check::FlowExists { select, present } => exists(ev.flows, select, *present),
        Check::FlowCount(range) => count(ev.flows.len() as u64, *range, "flow"),
        Check::MessageCount { option, range } => {
            let n = match option {
                OptionName::Any => ev.facts.requests,
                o => ev
                    .facts
                    .requests_by_option
                    .get(o.name())
                    .copied()
                    .unwrap_or(0),
            };
            count(n, *range, "request")
        }
    };
    Outcome {
        name: rule.name.clone(),
        kind: rule.check.kind(),
        line: Some(rule.line),
        passed: j.passed,
        measured: j.measured,
        expected: j.expected,
        details: j.details,
    }
}

/// "1 flow", "2 flows".
fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn severity_of(s: &str) -> Severity {
    match s {
        "note" => Severity::Note,
        "warning" => Severity::Warning,
        // An unknown severity is not silently ignored.
        _ => Severity::Error,
    }
}

fn no_findings(ev: &Evidence<'_>, min: Severity, except: &[String], only: &[String]) -> Judged {
    let counted = |code: &str, sev: Severity| {
        sev >= min
            && !except.iter().any(|c| c == code)
            && (only.is_empty() || only.iter().any(|c| c == code))
    };
    let mut details = Vec::new();
    let mut total = 0u64;
    for (code, t) in &ev.facts.findings {
        if counted(code, t.severity) {
            total += t.tally.count;
            details.push(format!(
                "{code} ({}) ×{}, first in frame {}",
                t.severity.as_str(),
                t.tally.count,
                t.tally.first_frame
            ));
        }
    }
    for f in ev.flows.flows() {
        for x in f.findings() {
            if counted(&x.code, severity_of(&x.severity)) {
                total += x.occurrences;
                let at = x
                    .frame
                    .map(|n| format!(" in frame {n}"))
                    .unwrap_or_default();
                let times = if x.occurrences > 1 {
                    format!(" ×{}", x.occurrences)
                } else {
                    String::new()
                };
                details.push(format!(
                    "{}: {} ({}){times}{at}",
                    f.label(),
                    x.code,
                    x.severity
                ));
            }
        }
    }
    let mut expected = format!("no finding ≥ {}", min.as_str());
    if !only.is_empty() {
        expected.push_str(&format!(" among {}", only.join(", ")));
    }
    if !except.is_empty() {
        expected.push_str(&format!(" except {}", except.join(", ")));
    }
    Judged {
        passed: total == 0,
        measured: if total == 0 {
            "0 findings".into()
        } else {
            format!("{}: {}", plural(total, "finding"), summarize(&details))
        },
        expected,
        details,
    }
}

fn all_answered(facts: &MessageFacts) -> Judged {
    let n = facts.unanswered_total();
    let details: Vec<String> = facts
        .unanswered_frames()
        .map(|f| format!("request in frame {f}"))
        .collect();
    Judged {
        passed: n == 0,
        measured: if n == 0 {
            format!("all {} requests answered", facts.requests)
        } else {
            format!("{n} unanswered: {}", summarize(&details))
        },
        expected: "0 unanswered".into(),
        details,
    }
}

fn nt_statuses(facts: &MessageFacts, allowed: &[super::rules::NtStatusSpec]) -> Judged {
    let mut seen = Vec::new();
    let mut details = Vec::new();
    for (code, t) in &facts.nt_statuses {
        let label = format!("{} ×{}", NtStatus(*code), t.count);
        if !allowed.iter().any(|a| a.0 == *code) {
            details.push(format!("{label}, first in frame {}", t.first_frame));
        }
        seen.push(label);
    }
    let expected = format!(
        "only {}",
        allowed
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Judged {
        passed: details.is_empty(),
        measured: if details.is_empty() {
            if seen.is_empty() {
                "no responses".into()
            } else {
                seen.join(", ")
            }
        } else {
            summarize(&details)
        },
        expected,
        details,
    }
}

/// A bound's value for one flow; `None` when it is a figure that is absent or 0 (0 means "no
/// limit" for the spec's rates and limits).
fn resolve(b: Bound, f: &Flow) -> Option<f64> {
    match b {
        Bound::Value(v) => Some(v),
        Bound::Field { figure, factor } => {
            f.figure(figure).filter(|v| *v != 0.0).map(|v| v * factor)
        }
    }
}

fn bounds_text(figure: Figure, min: Option<Bound>, max: Option<Bound>) -> String {
    match (min, max) {
        (Some(a), Some(b)) => format!("{a} ≤ {figure} ≤ {b}"),
        (Some(a), None) => format!("{figure} ≥ {a}"),
        (None, Some(b)) => format!("{figure} ≤ {b}"),
        (None, None) => format!("{figure} any"),
    }
}

/// How a flow without the figure is shown.
fn missing(skipped: bool) -> String {
    if skipped {
        "none (skipped)".into()
    } else {
        "none".into()
    }
}

fn flow_metric(f: &Flow, v: f64, min: Option<Bound>, max: Option<Bound>) -> (bool, String) {
    let mut ok = true;
    let mut text = fmt_num(v);
    if let Some(lo) = min.and_then(|b| resolve(b, f)) {
        if v < lo {
            ok = false;
            text.push_str(&format!(" < {}", fmt_num(lo)));
        }
    }
    if let Some(hi) = max.and_then(|b| resolve(b, f)) {
        if v > hi {
            ok = false;
            text.push_str(&format!(" > {}", fmt_num(hi)));
        }
    }
    (ok, text)
}

fn agreement(
    f: &Flow,
    rep: Figure,
    obs: Figure,
    t: Tolerance,
    skip_missing: bool,
) -> (bool, String) {
    match (f.figure(rep), f.figure(obs)) {
        (Some(r), Some(o)) => (
            t.accepts(r, o),
            format!("{} reported vs {} observed", fmt_num(r), fmt_num(o)),
        ),
        (r, o) => (
            skip_missing,
            format!(
                "{} reported vs {} observed{}",
                r.map_or("none".into(), fmt_num),
                o.map_or("none".into(), fmt_num),
                if skip_missing { " (skipped)" } else { "" }
            ),
        ),
    }
}

/// Judge each selected flow; the rule passes when there is at least one and all pass.
fn per_flow(
    flows: &FlowTable,
    select: &Selector,
    expected: &str,
    test: impl Fn(&Flow) -> (bool, String),
) -> Judged {
    let selected: Vec<&Flow> = flows.flows().iter().filter(|f| select.matches(f)).collect();
    let expected = match select {
        Selector::All => format!("{expected} for every flow"),
        s => format!("{expected} for {s}"),
    };
    if selected.is_empty() {
        return Judged {
            passed: false,
            measured: format!("no flow selected ({select})"),
            expected,
            details: Vec::new(),
        };
    }
    let mut passed = Vec::new();
    let mut failed = Vec::new();
    for f in &selected {
        let (ok, text) = test(f);
        let line = format!("{}: {text}", f.label());
        if ok {
            passed.push(line);
        } else {
            failed.push(line);
        }
    }
    let measured = if failed.is_empty() {
        summarize(&passed)
    } else {
        format!(
            "{} of {} flows off: {}",
            failed.len(),
            selected.len(),
            summarize(&failed)
        )
    };
    Judged {
        passed: failed.is_empty(),
        measured,
        expected,
        details: failed,
    }
}

fn exists(flows: &FlowTable, select: &Selector, present: bool) -> Judged {
    let found: Vec<String> = flows
        .flows()
        .iter()
        .filter(|f| select.matches(f))
        .map(Flow::label)
        .collect();
    let ok = found.is_empty() != present;
    Judged {
        passed: ok,
        measured: if found.is_empty() {
            "no flow matches".into()
        } else {
            format!(
                "{} {}: {}",
                plural(found.len() as u64, "flow"),
                if found.len() == 1 { "matches" } else { "match" },
                summarize(&found)
            )
        },
        expected: if present {
            format!("{select} present")
        } else {
            format!("{select} absent")
        },
        details: if ok { Vec::new() } else { found },
    }
}

fn count(n: u64, range: CountRange, what: &str) -> Judged {
    Judged {
        passed: range.contains(n),
        measured: plural(n, what),
        expected: format!("{range}"),
        details: Vec::new(),
    }
}
