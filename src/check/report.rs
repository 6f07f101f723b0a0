//! The text report: one line per rule, the offending items of failed rules, a summary.

use std::fmt::Write;

use super::outcome::CaptureVerdict;

/// Offending items printed under a failed rule.
const DETAILS_SHOWN: usize = 10;

/// The report for one capture.
pub fn capture_text(v: &CaptureVerdict) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", v.capture);
    if let Some(e) = &v.error {
        let _ = writeln!(s, "  ERROR {e}");
    }
    let width = v
        .outcomes
        .iter()
        .map(|o| o.name.chars().count())
        .max()
        .unwrap_or(0);
    for o in &v.outcomes {
        let _ = writeln!(
            s,
            "  {}  {:<width$}  {}  (expected {})",
            if o.passed { "PASS" } else { "FAIL" },
            o.name,
            o.measured,
            o.expected,
        );
        if !o.passed && o.details.len() > 1 {
            for d in o.details.iter().take(DETAILS_SHOWN) {
                let _ = writeln!(s, "        - {d}");
            }
            if o.details.len() > DETAILS_SHOWN {
                let _ = writeln!(s, "        - … {} more", o.details.len() - DETAILS_SHOWN);
            }
        }
    }
    if v.error.is_none() {
        let _ = writeln!(s, "  {} passed, {} failed", v.passed(), v.failed());
    }
    // Details quote names from the wire.
    crate::output::escape::lines(&s).into_owned()
}

/// The total line of a run over several captures (`None` for one capture).
pub fn total_line(verdicts: &[CaptureVerdict]) -> Option<String> {
    if verdicts.len() < 2 {
        return None;
    }
    let passed: usize = verdicts.iter().map(CaptureVerdict::passed).sum();
    let failed: usize = verdicts.iter().map(CaptureVerdict::failed).sum();
    let errors = verdicts.iter().filter(|v| v.error.is_some()).count();
    Some(format!(
        "{} captures: {passed} passed, {failed} failed, {errors} could not be judged\n",
        verdicts.len()
    ))
}
