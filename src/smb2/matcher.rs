//! Request ↔ response matching by (connection, MessageId), with a bounded table of requests
//! still waiting for their (final) response.

use std::collections::{HashMap, VecDeque};

use crate::net::ConnId;

/// Key of an outstanding request.
pub type MsgKey = (ConnId, u64);

/// Outstanding requests, each with caller data `V`. At most `capacity` entries: inserting into a
/// full table evicts the oldest request, which is returned so the caller can say so.
#[derive(Debug)]
pub struct PendingTable<V> {
    map: HashMap<MsgKey, (u64, V)>,
    /// Insertion order (key, generation); entries whose generation no longer matches are stale.
    order: VecDeque<(MsgKey, u64)>,
    generation: u64,
    capacity: usize,
}

impl<V> PendingTable<V> {
    pub fn new(capacity: usize) -> Self {
        PendingTable {
            map: HashMap::new(),
            order: VecDeque::new(),
            generation: 0,
            capacity: capacity.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Record a request. Returns a request pushed out: the one it replaces (same MessageId:
    /// a retransmission or a reused id), or the oldest one when the table is full.
    pub fn insert(&mut self, key: MsgKey, value: V) -> Option<(MsgKey, V)> {
        self.generation += 1;
        let replaced = self
            .map
            .insert(key, (self.generation, value))
            .map(|(_, v)| (key, v));
        self.order.push_back((key, self.generation));
        if replaced.is_some() {
            self.compact();
            return replaced;
        }
        let evicted = if self.map.len() > self.capacity {
            self.pop_oldest()
        } else {
            None
        };
        self.compact();
        evicted
    }

    pub fn get(&self, key: &MsgKey) -> Option<&V> {
        self.map.get(key).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &MsgKey) -> Option<&mut V> {
        self.map.get_mut(key).map(|(_, v)| v)
    }

    /// The first outstanding request (oldest first) for which `f` holds.
    pub fn find(&self, mut f: impl FnMut(&MsgKey, &V) -> bool) -> Option<MsgKey> {
        self.order
            .iter()
            .filter(|(key, gen)| self.map.get(key).is_some_and(|(g, _)| g == gen))
            .find(|(key, _)| self.map.get(key).is_some_and(|(_, v)| f(key, v)))
            .map(|(key, _)| *key)
    }

    /// Take the request answered by a final response.
    pub fn remove(&mut self, key: &MsgKey) -> Option<V> {
        let v = self.map.remove(key).map(|(_, v)| v);
        self.compact();
        v
    }

    /// Remove every request of a connection (it closed), oldest first.
    pub fn remove_conn(&mut self, conn: ConnId) -> Vec<(MsgKey, V)> {
        let mut out = Vec::new();
        let order = std::mem::take(&mut self.order);
        for (key, gen) in order {
            if key.0 == conn && self.map.get(&key).is_some_and(|(g, _)| *g == gen) {
                if let Some((_, v)) = self.map.remove(&key) {
                    out.push((key, v));
                }
            } else {
                self.order.push_back((key, gen));
            }
        }
        self.compact();
        out
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
            if self.map.get(&key).is_some_and(|(g, _)| *g == gen) {
                return self.map.remove(&key).map(|(_, v)| (key, v));
            }
        }
        None
    }

    /// Drop stale order entries so the queue stays proportional to the table.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order
                .retain(|(key, gen)| map.get(key).is_some_and(|(g, _)| g == gen));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_table_evicts_oldest_and_stays_bounded() {
        let mut t = PendingTable::new(2);
        let c = ConnId(0);
        assert!(t.insert((c, 1), "a").is_none());
        assert!(t.insert((c, 2), "b").is_none());
        assert_eq!(t.insert((c, 3), "c"), Some(((c, 1), "a")));
        assert_eq!(t.remove(&(c, 2)), Some("b"));
        assert_eq!(t.len(), 1);
        for i in 10..1000 {
            t.insert((c, i), "x");
            t.remove(&(c, i));
        }
        assert!(t.order.len() <= 2 * t.map.len() + 65);
        assert_eq!(t.drain(), vec![((c, 3), "c")]);
    }

    #[test]
    fn same_message_id_replaces() {
        let mut t = PendingTable::new(4);
        let c = ConnId(1);
        t.insert((c, 7), 1);
        assert_eq!(t.insert((c, 7), 2), Some(((c, 7), 1)));
        assert_eq!(t.get(&(c, 7)), Some(&2));
        assert_eq!(t.remove_conn(c), vec![((c, 7), 2)]);
        assert!(t.is_empty());
    }
}
