//! The result of one rule (or one baseline comparison) on one capture.

/// Pass or fail of one rule, with what was measured and what was expected.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub name: String,
    /// The rule kind (`flow_metric`, …, or `baseline`).
    pub kind: &'static str,
    /// Line of the rule in its rules file.
    pub line: Option<usize>,
    pub passed: bool,
    pub measured: String,
    pub expected: String,
    /// Every offending item when there are several (flows, statuses, findings).
    pub details: Vec<String>,
}

/// Items shown inline in `measured` before "+N more".
const INLINE: usize = 3;

/// Join items for a one-line measurement, the rest counted.
pub fn summarize(items: &[String]) -> String {
    let mut s = items
        .iter()
        .take(INLINE)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > INLINE {
        s.push_str(&format!("; +{} more", items.len() - INLINE));
    }
    s
}

/// All outcomes for one capture, or why it could not be judged.
#[derive(Debug)]
pub struct CaptureVerdict {
    pub capture: String,
    pub outcomes: Vec<Outcome>,
    /// Set when the capture could not be judged at all (exit code 2).
    pub error: Option<String>,
}

impl CaptureVerdict {
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.passed).count()
    }
    pub fn failed(&self) -> usize {
        self.outcomes.iter().filter(|o| !o.passed).count()
    }
    pub fn failed_names(&self) -> Vec<&str> {
        self.outcomes
            .iter()
            .filter(|o| !o.passed)
            .map(|o| o.name.as_str())
            .collect()
    }
}

/// Exit code for a run over several captures: 2 if any could not be judged, else 1 if any
/// rule failed, else 0.
pub fn exit_code(verdicts: &[CaptureVerdict]) -> i32 {
    if verdicts.iter().any(|v| v.error.is_some()) {
        2
    } else if verdicts.iter().any(|v| v.failed() > 0) {
        1
    } else {
        0
    }
}
