//! Judging one capture: one pass through the pipeline feeding both the message facts and the
//! flow analysis, then the rules and the baseline comparison, on the typed flows.

use std::ops::ControlFlow;
use std::path::Path;

use serde_json::Value;

use super::baseline::{compare, Baseline};
use super::eval::{evaluate, Evidence};
use super::facts::{FactsSink, FactsTap, FlowAnalysis, MessageFacts};
use super::flows::{FlowTable, FlowTableError};
use super::outcome::{CaptureVerdict, Outcome};
use super::rules::{BaselineTolerances, Rule};
use crate::feed::Feed;
use crate::filter::Filter;
use crate::pipeline::PipelineConfig;
use crate::run::{open, run_capture, Ending, Progress};

/// What to judge each capture against.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub rules: Vec<Rule>,
    pub baseline: Option<Baseline>,
    pub tolerances: BaselineTolerances,
    /// `-Y` and its shortcuts: the baseline flows judged (the capture's are selected by the
    /// analysis, see [`crate::filter::FlowSelect`]).
    pub filter: Option<Filter>,
}

/// A baseline file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not JSON: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
    #[error("{path}: {source}")]
    Table {
        path: String,
        source: FlowTableError,
    },
}

/// Read a flow table saved with `sqos flows --format json`.
pub fn load_baseline(path: &Path) -> Result<Baseline, BaselineError> {
    let p = || path.display().to_string();
    let text = std::fs::read(path).map_err(|source| BaselineError::Read { path: p(), source })?;
    let v: Value = serde_json::from_slice(&text)
        .map_err(|source| BaselineError::Json { path: p(), source })?;
    Baseline::from_json(v).map_err(|source| BaselineError::Table { path: p(), source })
}

/// Judge already collected evidence (no capture needed): the rules, then the baseline.
pub fn judge_evidence(plan: &Plan, facts: &MessageFacts, flows: &FlowTable) -> Vec<Outcome> {
    let mut out = evaluate(plan.rules.as_slice(), &Evidence { facts, flows });
    if let Some(b) = &plan.baseline {
        match &plan.filter {
            Some(f) => out.extend(compare(flows, &b.select(flows, f), &plan.tolerances)),
            None => out.extend(compare(flows, &b.flows, &plan.tolerances)),
        }
    }
    out
}

/// Read `path` once through the pipeline into `analysis` and judge it; `progress` as in
/// [`run_capture`].
pub fn judge_capture<A: FlowAnalysis>(
    path: &Path,
    cfg: PipelineConfig,
    plan: &Plan,
    analysis: A,
    progress: &mut dyn FnMut(&Progress<'_>) -> ControlFlow<()>,
) -> CaptureVerdict {
    let capture = path.display().to_string();
    let failed = |error: String| CaptureVerdict {
        capture: capture.clone(),
        outcomes: Vec::new(),
        error: Some(error),
    };
    let mut sink = FactsSink {
        analysis,
        tap: FactsTap::default(),
    };
    let mut reader = match open(path) {
        Ok(r) => r,
        Err(e) => return failed(format!("unusable capture: {}", e.source)),
    };
    let result = run_capture(&mut reader, cfg, &mut sink, progress);
    // Encrypted messages left closed are said once, as every command says them.
    if let Some(s) = result.stats.undecrypted_summary() {
        eprintln!("sqos check: {capture}: {s}");
    }
    let Feed {
        analysis,
        tap: FactsTap { mut facts, .. },
    } = sink;
    facts.finish();
    let flows = FlowTable::from_analysis(&analysis.into_analysis());
    let mut outcomes = Vec::new();
    // A capture cut short could hide what the rules look for: say so as a failed check.
    if let Ending::Damaged(e) = &result.ending {
        outcomes.push(Outcome {
            name: "capture read to its end".into(),
            kind: "capture",
            line: None,
            passed: false,
            measured: format!("damaged: {e}"),
            expected: "an undamaged capture".into(),
            details: Vec::new(),
        });
    }
    outcomes.extend(judge_evidence(plan, &facts, &flows));
    CaptureVerdict {
        capture,
        outcomes,
        error: None,
    }
}
