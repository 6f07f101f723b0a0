//! Flow analysis: follows opens and logical flows across a capture (MS-SQOS sections 3.1 and
//! 3.2), derives rates from the reported counters and from the READ/WRITE seen on the wire, and
//! checks clients and servers against the spec. Fed by the pipeline in frame order.
//!
//! Definitions (intervals, the first update, tolerances, bounds, finding codes) are in
//! docs/analysis.md.

mod analyzer;
pub mod capped;
pub mod channel;
pub mod checks;
pub mod config;
pub mod finding;
pub mod flow;
pub mod interval;
pub mod open;
pub mod rules;
pub mod view;

pub use analyzer::{Analysis, Analyzer};
pub use channel::{ChannelEnding, FlowChannel};
pub use config::{AnalyzerConfig, Tolerances};
pub use finding::{FlowFinding, FlowFindingCode};
pub use flow::{FlowState, OpenEntry, PolicyView, ServerView, TimelineEntry, TimelineEvent};
pub use interval::{normalized_io_size, Counters, IntervalRow, Observed, ObservedRates, Rates};
pub use open::{AssociatedBy, Association, OpenKey};
pub use view::{FlowFrom, MessageView, UpdateAnswer};
