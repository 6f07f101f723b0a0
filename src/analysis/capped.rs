//! A list that keeps its first and its most recent items and counts what it dropped between:
//! how per-flow timelines, open lists and findings stay bounded whatever the capture holds.

use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct Capped<T> {
    head: Vec<T>,
    tail: VecDeque<T>,
    head_cap: usize,
    tail_cap: usize,
    dropped: u64,
}

impl<T> Capped<T> {
    /// Keeps at most `cap` items: the first half and the latest half (at least one of each).
    pub fn new(cap: usize) -> Self {
        let head_cap = (cap / 2).max(1);
        let tail_cap = cap.saturating_sub(head_cap).max(1);
        Capped {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap,
            dropped: 0,
        }
    }

    pub fn push(&mut self, item: T) {
        // Exact growth: most lists hold a few items and there are many of them (one per flow).
        if self.head.len() < self.head_cap {
            self.head.reserve_exact(1);
            self.head.push(item);
            return;
        }
        if self.tail.len() >= self.tail_cap {
            self.tail.pop_front();
            self.dropped += 1;
        } else {
            self.tail.reserve_exact(1);
        }
        self.tail.push_back(item);
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.head.iter().chain(self.tail.iter())
    }

    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> {
        self.head.iter_mut().chain(self.tail.iter_mut())
    }

    pub fn last(&self) -> Option<&T> {
        self.tail.back().or(self.head.last())
    }

    /// Items held now.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items dropped from the middle to stay within the cap.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Items ever pushed.
    pub fn total(&self) -> u64 {
        self.len() as u64 + self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::Capped;

    #[test]
    fn keeps_first_and_latest_and_counts_the_rest() {
        let mut c = Capped::new(4);
        for i in 0..10 {
            c.push(i);
        }
        assert_eq!(c.iter().copied().collect::<Vec<_>>(), vec![0, 1, 8, 9]);
        assert_eq!(c.dropped(), 6);
        assert_eq!(c.total(), 10);
        assert_eq!(c.last(), Some(&9));
    }

    #[test]
    fn under_the_cap_keeps_everything_in_order() {
        let mut c = Capped::new(8);
        for i in 0..5 {
            c.push(i);
        }
        assert_eq!(c.iter().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        assert_eq!(c.dropped(), 0);
    }
}
