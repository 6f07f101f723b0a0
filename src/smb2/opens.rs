//! Which name each FileId was opened with: filled by CREATE responses, emptied by CLOSE.
//!
//! Keyed by (SessionId, FileId), not by connection: with SMB3 multichannel a session and its
//! opens are used over several connections. Bounded: the oldest open is forgotten when full.

use std::collections::{HashMap, VecDeque};

use super::file_id::FileId;

#[derive(Debug)]
pub struct OpenTable {
    names: HashMap<(u64, FileId), String>,
    order: VecDeque<(u64, FileId)>,
    capacity: usize,
}

impl OpenTable {
    pub fn new(capacity: usize) -> Self {
        OpenTable {
            names: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Remember an open; returns true when an older open had to be forgotten.
    pub fn open(&mut self, session: u64, file_id: FileId, name: String) -> bool {
        if self.names.insert((session, file_id), name).is_none() {
            self.order.push_back((session, file_id));
        }
        let mut evicted = false;
        while self.names.len() > self.capacity {
            match self.order.pop_front() {
                Some(k) => evicted |= self.names.remove(&k).is_some(),
                None => break,
            }
        }
        if self.order.len() > 2 * self.names.len() + 64 {
            let names = &self.names;
            self.order.retain(|k| names.contains_key(k));
        }
        evicted
    }

    pub fn name(&self, session: u64, file_id: FileId) -> Option<&str> {
        self.names.get(&(session, file_id)).map(String::as_str)
    }

    /// The open ended (CLOSE); returns its name.
    pub fn close(&mut self, session: u64, file_id: FileId) -> Option<String> {
        self.names.remove(&(session, file_id))
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fid(n: u64) -> FileId {
        FileId {
            persistent: n,
            volatile: n + 100,
        }
    }

    #[test]
    fn open_close_and_bound() {
        let mut t = OpenTable::new(2);
        assert!(!t.open(9, fid(1), "a.vhdx".into()));
        assert!(!t.open(9, fid(2), "b.vhdx".into()));
        assert_eq!(t.name(9, fid(1)), Some("a.vhdx"));
        assert_eq!(t.name(8, fid(1)), None);
        assert!(t.open(9, fid(3), "c.vhdx".into()));
        assert_eq!(t.name(9, fid(1)), None);
        assert_eq!(t.close(9, fid(2)), Some("b.vhdx".into()));
        assert_eq!(t.len(), 1);
    }
}
