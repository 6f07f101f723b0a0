//! The flow analysis `sqos check` runs alongside its own message facts: the same analyzer as
//! `sqos flows`, so a saved baseline compares like with like.

use super::facts::FlowAnalysis;
use crate::analysis::{Analysis, Analyzer, AnalyzerConfig};

impl FlowAnalysis for Analyzer {
    fn into_analysis(self) -> Analysis {
        self.finish()
    }
}

/// A fresh flow analysis for one capture, configured as `sqos flows` is.
pub fn flow_analysis(cfg: AnalyzerConfig) -> Analyzer {
    Analyzer::new(cfg)
}
