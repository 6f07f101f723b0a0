//! Counts per label (a connection's endpoints), added to by the label's slot: counting a
//! message is an index and not a search among strings (on encrypted traffic every message is
//! counted by its connection, and the search was ~4 % of the instructions); shown by label in
//! label order — the order and the JSON of the map keyed by label that this replaces.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

/// A count per label, each label once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ByLabel {
    /// In the order the labels came.
    counts: Vec<(String, u64)>,
}

/// Where a label's count is in a [`ByLabel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabelSlot(usize);

impl ByLabel {
    /// The slot of `label`, made (with a count of 0) the first time. A search: once per
    /// connection, not per message — but for the label past the bound that the connections
    /// not listed share (`OTHER_CONNECTIONS`), asked for each of their messages: the last
    /// label made, so the search goes from the end.
    pub fn slot(&mut self, label: &str) -> LabelSlot {
        match self.counts.iter().rposition(|(l, _)| l == label) {
            Some(i) => LabelSlot(i),
            None => {
                self.counts.push((label.to_owned(), 0));
                LabelSlot(self.counts.len() - 1)
            }
        }
    }

    /// Adds one to the count in `slot` (one that [`ByLabel::slot`] gave).
    #[inline]
    pub fn add_one(&mut self, slot: LabelSlot) {
        if let Some((_, n)) = self.counts.get_mut(slot.0) {
            *n += 1;
        }
    }

    /// Labels held.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub fn get(&self, label: &str) -> Option<u64> {
        self.counts
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, n)| *n)
    }

    /// The counts by label, in label order.
    pub fn to_map(&self) -> BTreeMap<&str, u64> {
        self.counts.iter().map(|(l, n)| (l.as_str(), *n)).collect()
    }

    /// The counts in label order.
    pub fn values(&self) -> impl Iterator<Item = u64> + '_ {
        self.to_map().into_values()
    }
}

impl Serialize for ByLabel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_slot_and_shows_them_in_label_order() {
        let mut b = ByLabel::default();
        let z = b.slot("z:1 → a:445");
        let a = b.slot("a:2 → a:445");
        assert_eq!(b.slot("z:1 → a:445"), z, "a label has one slot");
        b.add_one(z);
        b.add_one(a);
        b.add_one(z);
        assert_eq!(b.len(), 2);
        assert_eq!(b.get("z:1 → a:445"), Some(2));
        assert_eq!(b.get("b"), None);
        assert_eq!(b.values().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(
            serde_json::to_string(&b).expect("json"),
            r#"{"a:2 → a:445":1,"z:1 → a:445":2}"#
        );
    }
}
