//! Request ↔ response matching by (connection, MessageId), with a bounded table of requests
//! still waiting for their (final) response.

use std::collections::{BTreeMap, VecDeque};

use crate::budget::{Kind, Share};
use crate::net::{ConnId, ConnSlots};

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

/// Requests a connection's lane holds; more outstanding at once go to the spill map.
const LANE: usize = 8;

/// Where a connection's first outstanding requests are found: (MessageId, slot) pairs, in no
/// order. Most connections have a few requests outstanding at a time, so a response is matched
/// by a scan of a few ids instead of a search of every connection's requests.
#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    len: usize,
    ids: [(u64, usize); LANE],
}

impl Lane {
    fn position(&self, id: u64) -> Option<usize> {
        self.ids.get(..self.len)?.iter().position(|&(m, _)| m == id)
    }

    /// Take the entry at `i` (the last one fills its place).
    fn swap_remove(&mut self, i: usize) -> Option<usize> {
        let (_, slot) = *self.ids.get(i)?;
        self.len -= 1;
        self.ids[i] = self.ids[self.len];
        Some(slot)
    }

    fn push(&mut self, id: u64, slot: usize) -> bool {
        match self.ids.get_mut(self.len) {
            Some(free) => {
                *free = (id, slot);
                self.len += 1;
                true
            }
            None => false,
        }
    }
}

/// Outstanding requests, each with caller data `V` and its variable bytes. Bounded by a memory
/// share (`Kind::Pending`: entries at their cost plus the bytes the caller charges): inserting
/// into a full table evicts the oldest requests, which are handed to the caller to count.
///
/// Entries live in slots (reused); each is found through its connection's lane or, past the
/// lane (many outstanding, or a connection whose lane another holds), through the spill map,
/// keyed in order so the requests of one connection are found without a scan of the rest.
#[derive(Debug)]
pub struct PendingTable<V> {
    slots: Vec<Slot<V>>,
    free: Vec<usize>,
    lanes: ConnSlots<Lane>,
    spill: BTreeMap<MsgKey, usize>,
    /// Insertion order (slot, generation); entries whose slot no longer holds that generation
    /// are stale.
    order: VecDeque<(usize, u64)>,
    generation: u64,
    len: usize,
    share: Share,
}

#[derive(Debug)]
struct Slot<V> {
    key: MsgKey,
    generation: u64,
    bytes: usize,
    /// `None`: a free slot.
    value: Option<V>,
}

impl<V> PendingTable<V> {
    /// A table of at most `max_bytes` (entries at `Kind::Pending`'s cost plus their bytes).
    pub fn new(max_bytes: usize) -> Self {
        PendingTable {
            slots: Vec::new(),
            free: Vec::new(),
            lanes: ConnSlots::default(),
            spill: BTreeMap::new(),
            order: VecDeque::new(),
            generation: 0,
            len: 0,
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

    /// Record a request holding `bytes` variable bytes. The requests pushed out go to
    /// `evicted`, in this order: the one it replaces (same MessageId: a retransmission or a
    /// reused id), then the oldest ones while the share is full. (A callback, not a returned
    /// list: nearly every insert evicts nothing, and an empty list still cost its building,
    /// walk and drop.)
    ///
    /// The request is made by `value` once there is room, in its slot: made before, it was
    /// copied twice on its way there.
    pub fn insert(
        &mut self,
        key: MsgKey,
        bytes: usize,
        value: impl FnOnce() -> V,
        mut evicted: impl FnMut(MsgKey, V, Evicted),
    ) {
        // `take`, spelled out: its look-up (which nearly always finds nothing) is then made
        // here, without a call.
        if let Some(old) = self.unindex(&key).and_then(|slot| self.release_cold(slot)) {
            evicted(key, old, Evicted::Replaced);
        }
        while !self.share.fits(1, bytes) {
            match self.pop_oldest() {
                Some((k, v)) => evicted(k, v, Evicted::Full),
                None => break,
            }
        }
        self.generation += 1;
        self.share.charge(1, bytes);
        let slot = self.store(key, bytes, value);
        self.index(key, slot);
        self.order.push_back((slot, self.generation));
        self.len += 1;
        self.compact();
    }

    pub fn get(&self, key: &MsgKey) -> Option<&V> {
        let slot = self.locate(key)?;
        self.slots.get(slot)?.value.as_ref()
    }

    pub fn get_mut(&mut self, key: &MsgKey) -> Option<&mut V> {
        let slot = self.locate(key)?;
        self.slots.get_mut(slot)?.value.as_mut()
    }

    /// The first outstanding request (oldest first) for which `f` holds.
    pub fn find(&self, mut f: impl FnMut(&MsgKey, &V) -> bool) -> Option<MsgKey> {
        self.order
            .iter()
            .filter_map(|&(slot, gen)| self.live(slot, gen))
            .find(|s| s.value.as_ref().is_some_and(|v| f(&s.key, v)))
            .map(|s| s.key)
    }

    /// Take the request answered by a final response.
    pub fn remove(&mut self, key: &MsgKey) -> Option<V> {
        let v = self.take(key);
        self.compact();
        v
    }

    /// The request answered by a final response, read by `f` where it lies, then forgotten
    /// (dropped in its slot: taken out with `remove`, it was copied twice on the way).
    pub fn remove_with<R>(&mut self, key: &MsgKey, f: impl FnOnce(&V) -> R) -> Option<R> {
        let r = self.unindex(key).and_then(|slot| {
            let r = self.slots.get(slot)?.value.as_ref().map(f);
            self.discard(slot);
            r
        });
        self.compact();
        r
    }

    /// Remove every request of a connection (it closed), oldest first.
    pub fn remove_conn(&mut self, conn: ConnId) -> Vec<(MsgKey, V)> {
        let mut slots: Vec<usize> = Vec::new();
        if let Some(lane) = self.lanes.remove(conn) {
            slots.extend(lane.ids.iter().take(lane.len).map(|&(_, s)| s));
        }
        let spilled: Vec<MsgKey> = self
            .spill
            .range((conn, 0)..=(conn, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        slots.extend(spilled.iter().filter_map(|k| self.spill.remove(k)));
        let mut out: Vec<(u64, MsgKey, V)> = slots
            .into_iter()
            .filter_map(|slot| {
                let (key, generation) = self.slots.get(slot).map(|s| (s.key, s.generation))?;
                Some((generation, key, self.release(slot)?))
            })
            .collect();
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
        self.slots.clear();
        self.free.clear();
        out
    }

    /// The slot of `key`: in its connection's lane, else in the spill map.
    fn locate(&self, key: &MsgKey) -> Option<usize> {
        let in_lane = self.lanes.get(key.0).and_then(|lane| {
            let i = lane.position(key.1)?;
            lane.ids.get(i).map(|&(_, s)| s)
        });
        match in_lane {
            Some(slot) => Some(slot),
            None if self.spill.is_empty() => None,
            None => self.spill.get(key).copied(),
        }
    }

    /// Find `key` where `locate` would and forget it there; returns its slot.
    fn unindex(&mut self, key: &MsgKey) -> Option<usize> {
        if let Some(lane) = self.lanes.get_mut(key.0) {
            if let Some(i) = lane.position(key.1) {
                return lane.swap_remove(i);
            }
        }
        if self.spill.is_empty() {
            return None;
        }
        self.spill.remove(key)
    }

    /// Index a new entry: in its connection's lane if it has room (or is free), else spilled.
    fn index(&mut self, key: MsgKey, slot: usize) {
        let lane = self.lanes.slot_mut(key.0);
        let placed = match lane {
            Some((c, l)) if *c == key.0 => l.push(key.1, slot),
            Some((_, l)) if l.len > 0 => false,
            _ => {
                let mut l = Lane::default();
                let placed = l.push(key.1, slot);
                *lane = Some((key.0, l));
                placed
            }
        };
        if !placed {
            self.spill.insert(key, slot);
        }
    }

    /// Put a new entry (of this generation) in a free slot, or a new one.
    fn store(&mut self, key: MsgKey, bytes: usize, value: impl FnOnce() -> V) -> usize {
        let generation = self.generation;
        match self.free.pop() {
            Some(slot) if slot < self.slots.len() => {
                let s = &mut self.slots[slot];
                // Empty already (it is free): the new value is then written in place.
                s.value = None;
                *s = Slot {
                    key,
                    generation,
                    bytes,
                    value: Some(value()),
                };
                slot
            }
            _ => {
                self.slots.push(Slot {
                    key,
                    generation,
                    bytes,
                    value: Some(value()),
                });
                self.slots.len() - 1
            }
        }
    }

    /// Empty an (already unindexed) slot: its value, its bytes back to the share. (The value
    /// is returned as taken: built into a new `Some`, it was copied twice more.)
    fn release(&mut self, slot: usize) -> Option<V> {
        let s = self.slots.get_mut(slot)?;
        let v = s.value.take();
        if v.is_some() {
            let bytes = s.bytes;
            self.freed(slot, bytes);
        }
        v
    }

    /// Slot `slot`, whose entry of `bytes` was just emptied, is free.
    fn freed(&mut self, slot: usize, bytes: usize) {
        self.share.release(1, bytes);
        self.free.push(slot);
        self.len -= 1;
    }

    /// `release`, out of line: for the rare request that replaces another.
    #[inline(never)]
    fn release_cold(&mut self, slot: usize) -> Option<V> {
        self.release(slot)
    }

    /// `release` without handing the value back.
    fn discard(&mut self, slot: usize) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        if s.value.is_some() {
            s.value = None;
            let bytes = s.bytes;
            self.freed(slot, bytes);
        }
    }

    fn take(&mut self, key: &MsgKey) -> Option<V> {
        let slot = self.unindex(key)?;
        self.release(slot)
    }

    /// The entry an order item names, if it is still there.
    fn live(&self, slot: usize, gen: u64) -> Option<&Slot<V>> {
        self.slots
            .get(slot)
            .filter(|s| s.generation == gen && s.value.is_some())
    }

    fn pop_oldest(&mut self) -> Option<(MsgKey, V)> {
        while let Some((slot, gen)) = self.order.pop_front() {
            if let Some(key) = self.live(slot, gen).map(|s| s.key) {
                return self.take(&key).map(|v| (key, v));
            }
        }
        None
    }

    /// Drop stale order entries so the queue stays proportional to the table.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.len + 64 {
            let slots = &self.slots;
            self.order.retain(|&(slot, gen)| {
                slots
                    .get(slot)
                    .is_some_and(|s| s.generation == gen && s.value.is_some())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COST: usize = Kind::Pending.entry_cost();

    /// Insert, collecting what was pushed out.
    fn put<V>(
        t: &mut PendingTable<V>,
        key: MsgKey,
        v: V,
        bytes: usize,
    ) -> Vec<(MsgKey, V, Evicted)> {
        let mut out = Vec::new();
        t.insert(key, bytes, || v, |k, v, why| out.push((k, v, why)));
        out
    }

    #[test]
    fn full_table_evicts_oldest_and_stays_bounded() {
        let mut t = PendingTable::new(2 * COST);
        let c = ConnId(0);
        assert!(put(&mut t, (c, 1), "a", 0).is_empty());
        assert!(put(&mut t, (c, 2), "b", 0).is_empty());
        assert_eq!(
            put(&mut t, (c, 3), "c", 0),
            vec![((c, 1), "a", Evicted::Full)]
        );
        assert_eq!(t.remove(&(c, 2)), Some("b"));
        assert_eq!(t.len(), 1);
        for i in 10..1000 {
            put(&mut t, (c, i), "x", 0);
            t.remove(&(c, i));
        }
        assert!(t.order.len() <= 2 * t.len() + 65);
        assert_eq!(t.drain(), vec![((c, 3), "c")]);
        assert_eq!(t.share().used(), 0);
    }

    #[test]
    fn remove_with_reads_the_request_then_forgets_it() {
        let mut t = PendingTable::new(4 * COST);
        let (a, b) = (ConnId(1), ConnId(2));
        put(&mut t, (a, 1), String::from("one"), 3);
        put(&mut t, (b, 1), String::from("two"), 3);
        assert_eq!(t.remove_with(&(a, 1), |v| v.len()), Some(3));
        assert_eq!(t.remove_with(&(a, 1), |v| v.len()), None, "forgotten");
        assert_eq!(t.get(&(a, 1)), None);
        assert_eq!((t.len(), t.share().used()), (1, COST + 3));
        // Its slot is taken again.
        put(&mut t, (a, 2), String::from("three"), 5);
        assert_eq!(t.slots.len(), 2);
        assert_eq!(
            t.drain(),
            vec![((b, 1), "two".into()), ((a, 2), "three".into())]
        );
    }

    #[test]
    fn bytes_count_against_the_share() {
        let mut t = PendingTable::new(3 * COST);
        let c = ConnId(0);
        put(&mut t, (c, 1), "a", 0);
        put(&mut t, (c, 2), "b", 0);
        // A request with a long name takes the room of two.
        let out = put(&mut t, (c, 3), "c", COST);
        assert_eq!(out, vec![((c, 1), "a", Evicted::Full)]);
        assert_eq!(t.share().used(), 3 * COST);
    }

    #[test]
    fn same_message_id_replaces() {
        let mut t = PendingTable::new(4 * COST);
        let c = ConnId(1);
        put(&mut t, (c, 7), 1, 0);
        assert_eq!(
            put(&mut t, (c, 7), 2, 0),
            vec![((c, 7), 1, Evicted::Replaced)]
        );
        assert_eq!(t.get(&(c, 7)), Some(&2));
        put(&mut t, (ConnId(2), 1), 3, 0);
        put(&mut t, (ConnId(0), 9), 4, 0);
        put(&mut t, (c, 5), 5, 0);
        assert_eq!(t.remove_conn(c), vec![((c, 7), 2), ((c, 5), 5)]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn requests_past_a_lane_or_on_a_taken_lane_are_spilled_and_still_matched_in_order() {
        let mut t = PendingTable::new(100 * COST);
        let (a, c) = (ConnId(1), ConnId(2));
        // Shares a's lane (numbers 64 apart).
        let b = ConnId(1 + crate::net::CONN_SLOTS as u32);
        for id in 0..12u64 {
            assert!(put(&mut t, (a, id), id, 0).is_empty());
        }
        assert!(put(&mut t, (b, 5), 105, 0).is_empty());
        assert!(put(&mut t, (c, 0), 200, 0).is_empty());
        assert_eq!(t.spill.len(), 4 + 1, "a's ids 8..12 and b's");
        assert_eq!(t.get(&(a, 10)), Some(&10));
        assert_eq!(t.get(&(b, 5)), Some(&105));
        assert_eq!(t.get(&(b, 0)), None);
        assert_eq!(t.remove(&(a, 3)), Some(3));
        assert_eq!(t.remove(&(a, 3)), None);
        // A spilled id sent again is replaced like one in the lane.
        assert_eq!(
            put(&mut t, (a, 10), 1010, 0),
            vec![((a, 10), 10, Evicted::Replaced)]
        );
        assert_eq!(
            put(&mut t, (a, 1), 1001, 0),
            vec![((a, 1), 1, Evicted::Replaced)]
        );
        assert_eq!(t.find(|_, v| *v > 1000), Some((a, 10)));
        assert_eq!(t.len(), 13);
        let left = t.remove_conn(a);
        let ids: Vec<u64> = left.iter().map(|((_, i), _)| *i).collect();
        assert_eq!(ids, [0, 2, 4, 5, 6, 7, 8, 9, 11, 10, 1], "oldest first");
        assert_eq!(left.last(), Some(&((a, 1), 1001)));
        // a's lane is free again: b takes it; its spilled request is still found.
        assert!(put(&mut t, (b, 6), 106, 0).is_empty());
        assert_eq!(t.get(&(b, 5)), Some(&105));
        assert_eq!(t.remove(&(b, 6)), Some(106));
        assert_eq!(t.drain(), vec![((b, 5), 105), ((c, 0), 200)]);
        assert_eq!((t.len(), t.share().used()), (0, 0));
    }

    #[test]
    fn a_full_table_evicts_the_oldest_whether_in_a_lane_or_spilled() {
        let mut t = PendingTable::new(3 * COST);
        let (a, c) = (ConnId(0), ConnId(7));
        let b = ConnId(crate::net::CONN_SLOTS as u32);
        put(&mut t, (a, 1), "a1", 0);
        put(&mut t, (b, 1), "b1", 0);
        put(&mut t, (a, 2), "a2", 0);
        assert_eq!(
            put(&mut t, (c, 1), "c1", 0),
            vec![((a, 1), "a1", Evicted::Full)]
        );
        assert_eq!(
            put(&mut t, (c, 2), "c2", 0),
            vec![((b, 1), "b1", Evicted::Full)]
        );
        assert!(t.spill.is_empty());
        // Replaced first, then the oldest, as before.
        assert_eq!(
            put(&mut t, (c, 2), "c2'", COST),
            vec![
                ((c, 2), "c2", Evicted::Replaced),
                ((a, 2), "a2", Evicted::Full)
            ]
        );
        assert_eq!(t.get(&(a, 2)), None);
        assert_eq!(t.drain(), vec![((c, 1), "c1"), ((c, 2), "c2'")]);
    }
}
