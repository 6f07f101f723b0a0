//! Request ↔ response matching by (connection, MessageId), with a bounded table of requests
//! still waiting for their (final) response.

use std::collections::{BTreeMap, VecDeque};

use crate::budget::{Kind, Share};
use crate::net::ConnId;

/// Key of an outstanding request.
pub type MsgKey = (ConnId, u64);

/// Why a request left the table without its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// The same (connection, MessageId) was sent again: a retransmission or a reused id.
    Replaced,
    /// The table's memory share was full: the oldest request made room.
    Full,
}

/// Outstanding requests, each with caller data `V` and its variable bytes. Bounded by a memory
/// share (`Kind::Pending`: entries at their cost plus the bytes the caller charges): inserting
/// into a full table evicts the oldest requests, which are returned so the caller can count them.
/// Keyed in order, so the requests of one connection are found without a scan of the rest.
#[derive(Debug)]
pub struct PendingTable<V> {
    map: BTreeMap<MsgKey, Entry<V>>,
    /// Insertion order (key, generation); entries whose generation no longer matches are stale.
    order: VecDeque<(MsgKey, u64)>,
    generation: u64,
    share: Share,
}

#[derive(Debug)]
struct Entry<V> {
    generation: u64,
    bytes: usize,
    value: V,
}

impl<V> PendingTable<V> {
    /// A table of at most `max_bytes` (entries at `Kind::Pending`'s cost plus their bytes).
    pub fn new(max_bytes: usize) -> Self {
        PendingTable {
            map: BTreeMap::new(),
            order: VecDeque::new(),
            generation: 0,
            share: Share::new(Kind::Pending, max_bytes),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The table's memory share (drops counted by the caller through `share_mut`).
    pub fn share(&self) -> &Share {
        &self.share
    }

    pub fn share_mut(&mut self) -> &mut Share {
        &mut self.share
    }

    /// Record a request holding `bytes` variable bytes. Returns the requests pushed out: the
    /// one it replaces (same MessageId: a retransmission or a reused id), and the oldest ones
    /// when the share is full.
    pub fn insert(&mut self, key: MsgKey, value: V, bytes: usize) -> Vec<(MsgKey, V, Evicted)> {
        let mut out = Vec::new();
        if let Some(old) = self.take(&key) {
            out.push((key, old, Evicted::Replaced));
        }
        while !self.share.fits(1, bytes) {
            match self.pop_oldest() {
                Some((k, v)) => out.push((k, v, Evicted::Full)),
                None => break,
            }
        }
        self.generation += 1;
        self.share.charge(1, bytes);
        self.map.insert(
            key,
            Entry {
                generation: self.generation,
                bytes,
                value,
            },
        );
        self.order.push_back((key, self.generation));
        self.compact();
        out
    }

    pub fn get(&self, key: &MsgKey) -> Option<&V> {
        self.map.get(key).map(|e| &e.value)
    }

    pub fn get_mut(&mut self, key: &MsgKey) -> Option<&mut V> {
        self.map.get_mut(key).map(|e| &mut e.value)
    }

    /// The first outstanding request (oldest first) for which `f` holds.
    pub fn find(&self, mut f: impl FnMut(&MsgKey, &V) -> bool) -> Option<MsgKey> {
        self.order
            .iter()
            .filter(|(key, gen)| self.map.get(key).is_some_and(|e| e.generation == *gen))
            .find(|(key, _)| self.map.get(key).is_some_and(|e| f(key, &e.value)))
            .map(|(key, _)| *key)
    }

    /// Take the request answered by a final response.
    pub fn remove(&mut self, key: &MsgKey) -> Option<V> {
        let v = self.take(key);
        self.compact();
        v
    }

    fn take(&mut self, key: &MsgKey) -> Option<V> {
        let e = self.map.remove(key)?;
        self.share.release(1, e.bytes);
        Some(e.value)
    }

    /// Remove every request of a connection (it closed), oldest first.
    pub fn remove_conn(&mut self, conn: ConnId) -> Vec<(MsgKey, V)> {
        let keys: Vec<MsgKey> = self
            .map
            .range((conn, 0)..=(conn, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        let mut out: Vec<(u64, MsgKey, V)> = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(e) = self.map.remove(&key) {
                self.share.release(1, e.bytes);
                out.push((e.generation, key, e.value));
            }
        }
        out.sort_unstable_by_key(|(g, _, _)| *g);
        self.compact();
        out.into_iter().map(|(_, k, v)| (k, v)).collect()
    }

    /// Everything still outstanding, oldest first (end of capture).
    pub fn drain(&mut self) -> Vec<(MsgKey, V)> {
        let mut out = Vec::new();
        while let Some(kv) = self.pop_oldest() {
            out.push(kv);
        }
        self.order.clear();
        out
    }

    fn pop_oldest(&mut self) -> Option<(MsgKey, V)> {
        while let Some((key, gen)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.generation == gen) {
                return self.take(&key).map(|v| (key, v));
            }
        }
        None
    }

    /// Drop stale order entries so the queue stays proportional to the table.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order
                .retain(|(key, gen)| map.get(key).is_some_and(|e| e.generation == *gen));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COST: usize = Kind::Pending.entry_cost();

    #[test]
    fn full_table_evicts_oldest_and_stays_bounded() {
        let mut t = PendingTable::new(2 * COST);
        let c = ConnId(0);
        assert!(t.insert((c, 1), "a", 0).is_empty());
        assert!(t.insert((c, 2), "b", 0).is_empty());
        assert_eq!(t.insert((c, 3), "c", 0), vec![((c, 1), "a", Evicted::Full)]);
        assert_eq!(t.remove(&(c, 2)), Some("b"));
        assert_eq!(t.len(), 1);
        for i in 10..1000 {
            t.insert((c, i), "x", 0);
            t.remove(&(c, i));
        }
        assert!(t.order.len() <= 2 * t.map.len() + 65);
        assert_eq!(t.drain(), vec![((c, 3), "c")]);
        assert_eq!(t.share().used(), 0);
    }

    #[test]
    fn bytes_count_against_the_share() {
        let mut t = PendingTable::new(3 * COST);
        let c = ConnId(0);
        t.insert((c, 1), "a", 0);
        t.insert((c, 2), "b", 0);
        // A request with a long name takes the room of two.
        let out = t.insert((c, 3), "c", COST);
        assert_eq!(out, vec![((c, 1), "a", Evicted::Full)]);
        assert_eq!(t.share().used(), 3 * COST);
    }

    #[test]
    fn same_message_id_replaces() {
        let mut t = PendingTable::new(4 * COST);
        let c = ConnId(1);
        t.insert((c, 7), 1, 0);
        assert_eq!(t.insert((c, 7), 2, 0), vec![((c, 7), 1, Evicted::Replaced)]);
        assert_eq!(t.get(&(c, 7)), Some(&2));
        t.insert((ConnId(2), 1), 3, 0);
        t.insert((ConnId(0), 9), 4, 0);
        t.insert((c, 5), 5, 0);
        assert_eq!(t.remove_conn(c), vec![((c, 7), 2), ((c, 5), 5)]);
        assert_eq!(t.len(), 2);
    }
}
