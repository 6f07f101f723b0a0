//! Figures kept per SMB2 command (message counts, response times): looked up by the command's
//! code, so that counting a message is an index and not a search among names, and shown by
//! name in name order — the order and the JSON of the map keyed by name that this replaces.

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::smb2::Command;

/// Codes with a name in the spec (`Command::name`): one slot each.
const KNOWN: usize = Command::MAX_KNOWN as usize + 1;

/// A value per SMB2 command seen.
#[derive(Clone, Debug, PartialEq)]
pub struct ByCommand<V> {
    /// Indexed by code.
    known: [Option<V>; KNOWN],
    /// Codes the spec does not define (at most 65,536 − `KNOWN`, as the map by name had).
    other: BTreeMap<u16, V>,
}

impl<V> Default for ByCommand<V> {
    fn default() -> Self {
        ByCommand {
            known: std::array::from_fn(|_| None),
            other: BTreeMap::new(),
        }
    }
}

impl<V> ByCommand<V> {
    /// Applies `f` to the value of `cmd`, made by `new` the first time.
    #[inline]
    pub fn update(&mut self, cmd: Command, new: impl FnOnce() -> V, f: impl FnOnce(&mut V)) {
        let v = match self.known.get_mut(usize::from(cmd.0)) {
            Some(slot) => slot.get_or_insert_with(new),
            None => self.other_mut(cmd, new),
        };
        f(v);
    }

    /// The value of a code the spec does not define: out of line, so that the per-message
    /// callers of `update` save no registers for it.
    #[inline(never)]
    fn other_mut(&mut self, cmd: Command, new: impl FnOnce() -> V) -> &mut V {
        self.other.entry(cmd.0).or_insert_with(new)
    }

    pub fn get(&self, cmd: Command) -> Option<&V> {
        match self.known.get(usize::from(cmd.0)) {
            Some(slot) => slot.as_ref(),
            None => self.other.get(&cmd.0),
        }
    }

    /// The commands seen, in code order (tshark's order for the response-time table).
    pub fn by_code(&self) -> impl Iterator<Item = (Command, &V)> {
        let known = (0u16..)
            .zip(&self.known)
            .filter_map(|(code, v)| Some((Command(code), v.as_ref()?)));
        known.chain(self.other.iter().map(|(&code, v)| (Command(code), v)))
    }

    /// The commands seen by name (`Command`'s `Display`: the spec's name or `UNKNOWN_0x…`),
    /// in name order.
    pub fn by_name(&self) -> Vec<(String, &V)> {
        let mut rows: Vec<(String, &V)> = self
            .by_code()
            .map(|(cmd, v)| (cmd.to_string(), v))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    /// The table as a map from name to value (what tshark's counts are compared with).
    pub fn to_names(&self) -> BTreeMap<String, V>
    where
        V: Clone,
    {
        self.by_code()
            .map(|(cmd, v)| (cmd.to_string(), v.clone()))
            .collect()
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.by_code().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.known.iter().flatten().count() + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ByCommand<u64> {
    /// Adds one to `cmd`'s count.
    #[inline]
    pub fn count(&mut self, cmd: Command) {
        self.update(cmd, || 0, |n| *n += 1);
    }
}

/// A map from name to value, in name order.
impl<V: Serialize> Serialize for ByCommand<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rows = self.by_name();
        let mut m = s.serialize_map(Some(rows.len()))?;
        for (name, v) in rows {
            m.serialize_entry(&name, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_code_and_shows_them_by_name_as_a_map_keyed_by_name_would() {
        let mut t = ByCommand::default();
        for cmd in [
            Command::WRITE,
            Command(0x99),
            Command::READ,
            Command::WRITE,
            Command(0x14),
            Command::CREATE,
            Command::WRITE,
        ] {
            t.count(cmd);
        }
        assert_eq!(t.get(Command::WRITE), Some(&3));
        assert_eq!(t.get(Command(0x99)), Some(&1));
        assert_eq!(t.get(Command::CLOSE), None);
        assert_eq!(t.len(), 5);
        let names: Vec<(String, u64)> = t.by_name().into_iter().map(|(n, v)| (n, *v)).collect();
        // The order of a BTreeMap<String, _>: UNKNOWN_… between TREE_… and WRITE.
        let mut map = BTreeMap::new();
        for (n, v) in &names {
            map.insert(n.clone(), *v);
        }
        assert_eq!(names, map.clone().into_iter().collect::<Vec<_>>());
        assert_eq!(
            names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            [
                "CREATE",
                "READ",
                "UNKNOWN_0x0014",
                "UNKNOWN_0x0099",
                "WRITE"
            ]
        );
        let codes: Vec<u16> = t.by_code().map(|(c, _)| c.0).collect();
        assert_eq!(codes, [0x05, 0x08, 0x09, 0x14, 0x99]);
        assert_eq!(
            serde_json::to_string(&t).ok().as_deref(),
            serde_json::to_string(&map).ok().as_deref()
        );
        assert_eq!(t.values().sum::<u64>(), 7);
    }

    #[test]
    fn an_empty_table_is_empty_and_an_empty_map() {
        let t = ByCommand::<u64>::default();
        assert!(t.is_empty());
        assert_eq!(serde_json::to_string(&t).ok().as_deref(), Some("{}"));
    }
}
