//! A value per recent connection, found by the low bits of its number: connections are numbered
//! in the order they are first seen, so the ones in use at the same time mostly fall in distinct
//! slots, and looking one up is an index and one compare, not a search. A fixed number of
//! slots: a connection whose slot another took is not here, and the caller looks further (its
//! map) — a front for a table, not the table.

use super::ConnId;

/// Slots there are (a power of two): connections interleaving in a capture past this share slots.
pub const CONN_SLOTS: usize = 64;

#[derive(Clone, Debug)]
pub struct ConnSlots<T> {
    /// Inline: a lookup is an index into the owner, not through a pointer first.
    slots: [Option<(ConnId, T)>; CONN_SLOTS],
}

impl<T> Default for ConnSlots<T> {
    fn default() -> Self {
        ConnSlots {
            slots: std::array::from_fn(|_| None),
        }
    }
}

#[inline]
fn index(conn: ConnId) -> usize {
    conn.0 as usize & (CONN_SLOTS - 1)
}

impl<T> ConnSlots<T> {
    /// The value of `conn`, if its slot holds it.
    #[inline]
    pub fn get(&self, conn: ConnId) -> Option<&T> {
        match &self.slots[index(conn)] {
            Some((c, v)) if *c == conn => Some(v),
            _ => None,
        }
    }

    #[inline]
    pub fn get_mut(&mut self, conn: ConnId) -> Option<&mut T> {
        match &mut self.slots[index(conn)] {
            Some((c, v)) if *c == conn => Some(v),
            _ => None,
        }
    }

    /// Put `conn`'s value in its slot; returns what the slot held for another connection.
    #[inline]
    pub fn set(&mut self, conn: ConnId, value: T) -> Option<(ConnId, T)> {
        self.slots[index(conn)]
            .replace((conn, value))
            .filter(|(c, _)| *c != conn)
    }

    /// The slot `conn` falls in, whoever holds it (to take it only when it is free, say).
    #[inline]
    pub fn slot_mut(&mut self, conn: ConnId) -> &mut Option<(ConnId, T)> {
        &mut self.slots[index(conn)]
    }

    /// Forget `conn`'s value; returns it.
    #[inline]
    pub fn remove(&mut self, conn: ConnId) -> Option<T> {
        let slot = &mut self.slots[index(conn)];
        match slot {
            Some((c, _)) if *c == conn => slot.take().map(|(_, v)| v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_sharing_a_slot_displace_each_other() {
        let mut s = ConnSlots::default();
        assert_eq!(s.set(ConnId(3), "a"), None);
        assert_eq!(s.set(ConnId(4), "b"), None);
        assert_eq!(s.set(ConnId(3), "c"), None, "its own value is not reported");
        assert_eq!(s.get(ConnId(3)), Some(&"c"));
        // 3 + 64 lands on 3's slot.
        let far = ConnId(3 + CONN_SLOTS as u32);
        assert_eq!(s.get(far), None);
        assert_eq!(s.set(far, "d"), Some((ConnId(3), "c")));
        assert_eq!(s.get(ConnId(3)), None);
        assert_eq!(s.remove(ConnId(3)), None, "not its slot any more");
        assert_eq!(s.remove(far), Some("d"));
        if let Some(v) = s.get_mut(ConnId(4)) {
            *v = "e";
        }
        assert_eq!(s.get(ConnId(4)), Some(&"e"));
    }
}
