//! What the analysis made of one SQOS message: the logical flow it belongs to (and how that is
//! known) and, on the final answer to an UPDATE_COUNTERS, the interval it closed. Faces that
//! annotate messages (`sqos annotate`, read by the Wireshark plugin) take it from
//! `Analyzer::last_message` right after feeding the message.

use serde::Serialize;
use uuid::Uuid;

use super::interval::Rates;

/// How the flow of a message is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowFrom {
    /// Carried by the message: the flow a SET_LOGICAL_FLOW_ID / PROBE_POLICY request joins, the
    /// one an open of unknown state names, or the one its answer names.
    Message,
    /// The open's tracked association (section 3.2.1.2).
    Open,
}

/// The answer to an UPDATE_COUNTERS, for the interval its request closed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdateAnswer {
    /// The flow's first update: it opens the series, no figures (docs/analysis.md).
    First,
    /// The interval from the previous update's request to this one's; `rates` when the server
    /// applied the counters.
    Interval { secs: f64, rates: Option<Rates> },
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MessageView {
    pub flow: Option<(Uuid, FlowFrom)>,
    pub update: Option<UpdateAnswer>,
}
