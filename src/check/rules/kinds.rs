//! The tables of a rules file as written, one struct per rule kind. Unknown keys are errors.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;
use uuid::Uuid;

use super::values::{Bound, Glob, MinSeverity, NtStatusSpec, OptionName, StatusSpec, Tolerance};
use crate::check::figure::{Agreement, Figure};

/// The whole file: an array of tables per rule kind, plus baseline settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesDoc {
    #[serde(default)]
    pub no_findings: Vec<Spanned<NoFindings>>,
    #[serde(default)]
    pub all_answered: Vec<Spanned<Named>>,
    #[serde(default)]
    pub nt_statuses: Vec<Spanned<NtStatuses>>,
    #[serde(default)]
    pub flow_metric: Vec<Spanned<FlowMetric>>,
    #[serde(default)]
    pub flow_agreement: Vec<Spanned<FlowAgreement>>,
    #[serde(default)]
    pub flow_equals: Vec<Spanned<FlowEquals>>,
    #[serde(default)]
    pub flow_status: Vec<Spanned<FlowStatus>>,
    #[serde(default)]
    pub flow_exists: Vec<Spanned<FlowPick>>,
    #[serde(default)]
    pub flow_absent: Vec<Spanned<FlowPick>>,
    #[serde(default)]
    pub flow_count: Vec<Spanned<Count>>,
    #[serde(default)]
    pub message_count: Vec<Spanned<MessageCount>>,
    #[serde(default)]
    pub baseline: Option<BaselineDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Named {
    pub name: Option<String>,
}

fn warning() -> MinSeverity {
    MinSeverity::Warning
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoFindings {
    pub name: Option<String>,
    #[serde(default = "warning")]
    pub min_severity: MinSeverity,
    /// Codes not counted.
    #[serde(default)]
    pub except: Vec<String>,
    /// When not empty, only these codes are counted.
    #[serde(default)]
    pub only: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NtStatuses {
    pub name: Option<String>,
    pub allowed: Vec<NtStatusSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowMetric {
    pub name: Option<String>,
    pub flow: Option<Uuid>,
    pub initiator: Option<Glob>,
    pub metric: Figure,
    pub min: Option<Bound>,
    pub max: Option<Bound>,
    #[serde(default)]
    pub skip_missing: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowAgreement {
    pub name: Option<String>,
    pub flow: Option<Uuid>,
    pub initiator: Option<Glob>,
    pub metric: Agreement,
    #[serde(default)]
    pub relative: f64,
    #[serde(default)]
    pub absolute: f64,
    #[serde(default)]
    pub skip_missing: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEquals {
    pub name: Option<String>,
    pub flow: Option<Uuid>,
    pub initiator: Option<Glob>,
    pub field: Figure,
    pub value: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowStatus {
    pub name: Option<String>,
    pub flow: Option<Uuid>,
    pub initiator: Option<Glob>,
    pub equals: StatusSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowPick {
    pub name: Option<String>,
    pub flow: Option<Uuid>,
    pub initiator: Option<Glob>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Count {
    pub name: Option<String>,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageCount {
    pub name: Option<String>,
    pub option: OptionName,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

/// A figure name, or `default` for the figures not named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub enum ToleranceKey {
    Default,
    Figure(Figure),
}

impl TryFrom<String> for ToleranceKey {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s == "default" {
            return Ok(ToleranceKey::Default);
        }
        s.parse()
            .map(ToleranceKey::Figure)
            .map_err(|e| format!("{e}, or `default`"))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineDoc {
    #[serde(default)]
    pub tolerance: BTreeMap<ToleranceKey, Tolerance>,
}
