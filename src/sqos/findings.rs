//! Findings ("expert info") about one SQOS message. STUB: owned by the codec work.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Stable identifier of a finding kind; `as_str` is the code users filter on and must never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum FindingCode {
    ShortBuffer,
}

impl FindingCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingCode::ShortBuffer => "sqos.short_buffer",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: FindingCode,
    pub severity: Severity,
    /// A human sentence naming the field and the values.
    pub message: String,
}
