//! Which name each FileId was opened with: filled by CREATE responses, emptied by CLOSE.
//!
//! Keyed by (SessionId, FileId), not by connection: with SMB3 multichannel a session and its
//! opens are used over several connections. Bounded by a memory share (`Kind::Opens`: entries
//! at their cost plus the names' bytes): the oldest open is forgotten when full.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use foldhash::fast::RandomState;

use super::file_id::FileId;
use crate::budget::{Kind, Share};

#[derive(Debug)]
pub struct OpenTable {
    /// Shared, not copied, with the requests and records that name the file: a READ or
    /// WRITE of an open file costs no allocation for its name. Looked up by every READ and
    /// WRITE: foldhash, seeded per run (the keys are the peers' ids), not SipHash.
    names: HashMap<(u64, FileId), Arc<str>, RandomState>,
    order: VecDeque<(u64, FileId)>,
    share: Share,
}

impl OpenTable {
    /// A table of at most `max_bytes` (entries at `Kind::Opens`'s cost plus their names).
    pub fn new(max_bytes: usize) -> Self {
        OpenTable {
            names: HashMap::default(),
            order: VecDeque::new(),
            share: Share::new(Kind::Opens, max_bytes),
        }
    }

    /// Remember an open; returns how many older opens had to be forgotten to make room.
    pub fn open(&mut self, session: u64, file_id: FileId, name: impl Into<Arc<str>>) -> usize {
        let name = name.into();
        let key = (session, file_id);
        match self.names.remove(&key) {
            Some(old) => self.share.release(1, old.len()),
            None => self.order.push_back(key),
        }
        let mut evicted = 0;
        while !self.share.fits(1, name.len()) {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            if k == key {
                // Its own (re)opened entry: keep its place at the back.
                self.order.push_back(k);
                if self.order.len() == 1 {
                    break;
                }
                continue;
            }
            if let Some(old) = self.names.remove(&k) {
                self.share.release(1, old.len());
                evicted += 1;
            }
        }
        self.share.charge(1, name.len());
        self.names.insert(key, name);
        if self.order.len() > 2 * self.names.len() + 64 {
            let names = &self.names;
            self.order.retain(|k| names.contains_key(k));
        }
        evicted
    }

    pub fn name(&self, session: u64, file_id: FileId) -> Option<&Arc<str>> {
        self.names.get(&(session, file_id))
    }

    /// The open ended (CLOSE); returns its name.
    pub fn close(&mut self, session: u64, file_id: FileId) -> Option<Arc<str>> {
        let name = self.names.remove(&(session, file_id))?;
        self.share.release(1, name.len());
        Some(name)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn share(&self) -> &Share {
        &self.share
    }

    pub fn share_mut(&mut self) -> &mut Share {
        &mut self.share
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
        let mut t = OpenTable::new(2 * Kind::Opens.entry_cost() + 12);
        assert_eq!(t.open(9, fid(1), "a.vhdx"), 0);
        assert_eq!(t.open(9, fid(2), "b.vhdx"), 0);
        assert_eq!(t.name(9, fid(1)).map(|n| &**n), Some("a.vhdx"));
        assert_eq!(t.name(8, fid(1)).map(|n| &**n), None);
        assert_eq!(t.open(9, fid(3), "c.vhdx"), 1);
        assert_eq!(t.name(9, fid(1)).map(|n| &**n), None);
        assert_eq!(t.close(9, fid(2)), Some("b.vhdx".into()));
        assert_eq!(t.len(), 1);
        assert_eq!(t.share().used(), Kind::Opens.entry_cost() + 6);
    }

    #[test]
    fn a_long_name_costs_its_bytes() {
        let mut t = OpenTable::new(3 * Kind::Opens.entry_cost());
        t.open(1, fid(1), "a");
        t.open(1, fid(2), "b");
        let long = "x".repeat(Kind::Opens.entry_cost());
        assert_eq!(t.open(1, fid(3), long), 2);
        assert_eq!(t.len(), 1);
    }
}
