//! An SQOS record kept for later, without its field list.

use super::sqos_build::decode_alone;
use super::{SqosBody, SqosRecord};

/// An [`SqosRecord`] whose decoded field list was dropped: what the TUI's message list keeps of
/// each message, whose record it shows without the fields (messages held until their flows are
/// final need no such view: [`super::HeldRecords`] keeps less). The field list is most of a
/// decoded message's memory (~1.3 KB of ~2 KB for a typical request), and the buffer alone
/// gives it again: decoding made it from the buffer alone (the checks against the IOCTL and the
/// matched request add findings, which are kept).
#[derive(Clone, Debug)]
pub struct CompactRecord(Box<SqosRecord>);

impl CompactRecord {
    pub fn new(mut rec: SqosRecord) -> CompactRecord {
        match &mut rec.body {
            SqosBody::Request(d) => d.fields = Vec::new(),
            SqosBody::Response(d) => d.fields = Vec::new(),
            SqosBody::NoBuffer => {}
        }
        CompactRecord(Box::new(rec))
    }

    /// The record without its field list (everything else as it was).
    pub fn record(&self) -> &SqosRecord {
        &self.0
    }

    /// The whole record again, its field list decoded anew from the buffer.
    pub fn into_full(self) -> SqosRecord {
        let mut rec = *self.0;
        let again = decode_alone(rec.body.kind(), &rec.buffer);
        match (&mut rec.body, again) {
            (SqosBody::Request(d), SqosBody::Request(again)) => d.fields = again.fields,
            (SqosBody::Response(d), SqosBody::Response(again)) => d.fields = again.fields,
            _ => {}
        }
        rec
    }

    /// [`CompactRecord::into_full`] of a copy.
    pub fn full(&self) -> SqosRecord {
        self.clone().into_full()
    }

    /// What holding it costs: [`SqosRecord::held_bytes`], the field list being empty.
    pub fn held_bytes(&self) -> usize {
        self.0.held_bytes()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pipeline::{ChannelRecord, RecordSink};
    use crate::run::CaptureSink;

    /// The SQOS records of a run, as they came: what the tests that hold records read.
    #[derive(Default)]
    pub(crate) struct Kept(pub(crate) Vec<SqosRecord>);

    impl RecordSink for Kept {
        fn on_sqos(&mut self, rec: SqosRecord) {
            self.0.push(rec);
        }
        fn on_channel(&mut self, _rec: &ChannelRecord) {}
    }

    impl CaptureSink for Kept {}

    fn fields(rec: &SqosRecord) -> usize {
        rec.body.fields().len()
    }

    #[test]
    fn a_compact_record_is_smaller_and_gives_the_same_fields_again() {
        // Both dialects, and a server whose answers carry findings.
        let mut kept = Kept::default();
        for name in ["spec-examples-1.1.pcap", "faulty-server.pcap.gz"] {
            let path = format!("{}/captures/{name}", env!("CARGO_MANIFEST_DIR"));
            crate::run::run_path(path.as_ref(), Default::default(), &mut kept).expect(name);
        }
        let findings = |r: &SqosRecord| r.body.findings().len();
        assert!(kept.0.iter().any(|r| fields(r) > 0 && findings(r) > 0));
        let decoded: Vec<&SqosRecord> = kept.0.iter().filter(|r| fields(r) > 0).collect();
        assert!(decoded.len() >= 20, "{} decoded messages", decoded.len());
        for rec in decoded {
            let compact = CompactRecord::new(rec.clone());
            assert_eq!(fields(compact.record()), 0);
            assert_eq!(findings(compact.record()), findings(rec));
            let field_bytes = fields(rec) * std::mem::size_of::<crate::sqos::Field>();
            assert!(
                compact.held_bytes() + field_bytes <= rec.held_bytes(),
                "frame {}",
                rec.frame
            );
            let again = compact.full();
            assert_eq!(
                format!("{again:?}"),
                format!("{rec:?}"),
                "frame {}",
                rec.frame
            );
        }
    }
}
