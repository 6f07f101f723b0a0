//! Where the flow views get their data: anything that is fed the pipeline's records and can
//! answer with the view model at any moment (also while the capture is still being read).

use uuid::Uuid;

use super::model::{FindingRow, FlowDetail, FlowRow};
use super::store::message_flow;
use crate::analysis::FlowState;
use crate::capture::Timestamp;
use crate::pipeline::{RecordSink, SqosRecord};

pub trait FlowSource: RecordSink + Send {
    /// The first frame's time: series and findings are timed relative to it.
    fn on_first_frame(&mut self, ts: Timestamp);
    /// End of input: let the source close what was left open (e.g. unanswered requests).
    fn finish(&mut self);
    /// The input is idle but not ended (a followed file, a quiet interface): show what the end
    /// of input would (the last, still open interval), until the next record.
    fn settle(&mut self) {}
    /// One row per flow, in order of first appearance.
    fn rows(&self) -> Vec<FlowRow>;
    fn detail(&self, id: Uuid) -> Option<FlowDetail>;
    /// Flow-level findings (message-level ones come from the message store).
    fn findings(&self) -> Vec<FindingRow>;
    /// Notes about what the source had to leave out (its bounds).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The flow a message belongs to, judged before it is fed (filters read its fields).
    fn flow_of(&self, rec: &SqosRecord) -> Option<Uuid> {
        message_flow(rec)
    }
    /// A flow's state, for filters on flow fields.
    fn flow_state(&self, _id: &Uuid) -> Option<&FlowState> {
        None
    }
}
