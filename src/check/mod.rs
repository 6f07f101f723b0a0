//! `sqos check`: assertions over a capture's analysis for CI pipelines — rules files, baseline
//! comparison, text and JUnit reports. Reference: docs/check.md.

pub mod baseline;
pub mod eval;
pub mod facts;
pub mod figure;
pub mod flows;
pub mod judge;
pub mod junit;
pub mod outcome;
pub mod report;
pub mod rules;
pub mod source;
