//! Request ↔ response matching by (connection, MessageId), with a bounded table of requests
//! still waiting for their (final) response.

use std::collections::{HashMap, VecDeque};

use foldhash::fast::RandomState;

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
#[derive(Debug)]
pub struct PendingTable<V> {
    /// By connection, then MessageId: the requests of a closing connection are taken at once,
    /// without a scan of the rest. Hashed (every request and final response looks one up):
    /// foldhash, seeded per run (the ids are the peers'), not SipHash. Nothing is iterated in
    /// hash order: what leaves several at a time leaves oldest first (by generation).
    conns: HashMap<ConnId, HashMap<u64, Entry<V>, RandomState>, RandomState>,
    /// Requests in `conns`.
    len: usize,
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
            conns: HashMap::default(),
            len: 0,
            order: VecDeque::new(),
            generation: 0,
            share: Share::new(Kind::Pending, max_bytes),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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
        self.generation += 1;
        let entry = Entry {
            generation: self.generation,
            bytes,
            value,
        };
        // In the table before room is made, found by one lookup: the oldest requests are taken
        // from `order`, which gets this one only after them, so it is never one of them.
        match self.conns.entry(key.0).or_default().insert(key.1, entry) {
            Some(old) => {
                self.share.release(1, old.bytes);
                out.push((key, old.value, Evicted::Replaced));
            }
            None => self.len += 1,
        }
        while !self.share.fits(1, bytes) {
            match self.pop_oldest() {
                Some((k, v)) => out.push((k, v, Evicted::Full)),
                None => break,
            }
        }
        self.share.charge(1, bytes);
        self.order.push_back((key, self.generation));
        self.compact();
        out
    }

    pub fn get(&self, key: &MsgKey) -> Option<&V> {
        self.entry(key).map(|e| &e.value)
    }

    pub fn get_mut(&mut self, key: &MsgKey) -> Option<&mut V> {
        let e = self.conns.get_mut(&key.0)?.get_mut(&key.1)?;
        Some(&mut e.value)
    }

    fn entry(&self, key: &MsgKey) -> Option<&Entry<V>> {
        self.conns.get(&key.0)?.get(&key.1)
    }

    /// `key` holds the request `order` listed with generation `gen` (not a stale listing).
    fn is_live(&self, key: &MsgKey, gen: u64) -> bool {
        self.entry(key).is_some_and(|e| e.generation == gen)
    }

    /// The first outstanding request (oldest first) for which `f` holds.
    pub fn find(&self, mut f: impl FnMut(&MsgKey, &V) -> bool) -> Option<MsgKey> {
        self.order
            .iter()
            .filter(|(key, gen)| self.is_live(key, *gen))
            .find(|(key, _)| self.get(key).is_some_and(|v| f(key, v)))
            .map(|(key, _)| *key)
    }

    /// Take the request answered by a final response.
    pub fn remove(&mut self, key: &MsgKey) -> Option<V> {
        let v = self.take(key);
        self.compact();
        v
    }

    fn take(&mut self, key: &MsgKey) -> Option<V> {
        let e = self.conns.get_mut(&key.0)?.remove(&key.1)?;
        self.len -= 1;
        self.share.release(1, e.bytes);
        Some(e.value)
    }

    /// Remove every request of a connection (it closed), oldest first.
    pub fn remove_conn(&mut self, conn: ConnId) -> Vec<(MsgKey, V)> {
        let requests = self.conns.remove(&conn).unwrap_or_default();
        let mut out: Vec<(u64, MsgKey, V)> = Vec::with_capacity(requests.len());
        for (id, e) in requests {
            self.share.release(1, e.bytes);
            out.push((e.generation, (conn, id), e.value));
        }
        self.len -= out.len();
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
        self.conns.clear();
        out
    }

    fn pop_oldest(&mut self) -> Option<(MsgKey, V)> {
        while let Some((key, gen)) = self.order.pop_front() {
            if self.is_live(&key, gen) {
                return self.take(&key).map(|v| (key, v));
            }
        }
        None
    }

    /// Drop stale order entries so the queue stays proportional to the table. Inline: asked
    /// at every insert and removal, it rarely has anything to do.
    #[inline]
    fn compact(&mut self) {
        if self.order.len() > 2 * self.len + 64 {
            self.drop_stale();
        }
    }

    fn drop_stale(&mut self) {
        let mut order = std::mem::take(&mut self.order);
        order.retain(|(key, gen)| self.is_live(key, *gen));
        self.order = order;
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
        assert!(t.order.len() <= 2 * t.len() + 65);
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
