//! The flow analysis `sqos check` runs alongside its own message facts: the same analyzer and
//! JSON as `sqos flows --format json`, so a saved baseline compares like with like.

use serde_json::Value;

use super::facts::FlowAnalysis;
use crate::analysis::{Analyzer, AnalyzerConfig};
use crate::output::flows::flows_json;

impl FlowAnalysis for Analyzer {
    fn into_flows_json(self) -> Result<Value, String> {
        Ok(flows_json(&self.finish()))
    }
}

/// A fresh flow analysis for one capture, configured as `sqos flows` is.
pub fn flow_analysis(cfg: AnalyzerConfig) -> Analyzer {
    Analyzer::new(cfg)
}
