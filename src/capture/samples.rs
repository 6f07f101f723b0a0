//! A few timings of which the median decides a trial (the chunk helper's over a file's
//! chunks, the map's against the chunks over a run's files): one that waited for the core
//! (another process, an interrupt) does not decide.

/// Up to `N` samples, and their median.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Samples<const N: usize> {
    values: [u64; N],
    len: usize,
}

impl<const N: usize> Default for Samples<N> {
    fn default() -> Self {
        Samples {
            values: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> Samples<N> {
    /// Adds `value` where there is room (once all `N` are in, nothing changes). Returns the
    /// median when this one filled them, else `None`.
    pub(crate) fn push(&mut self, value: u64) -> Option<u64> {
        let slot = self.values.get_mut(self.len)?;
        *slot = value;
        self.len += 1;
        if self.len < N {
            return None;
        }
        self.median()
    }

    /// The median of the samples in (of an even number, the upper of the two in the middle);
    /// `None` before the first.
    pub(crate) fn median(&self) -> Option<u64> {
        let mut sorted = self.values;
        let sorted = sorted.get_mut(..self.len)?;
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_of_the_samples_in_and_one_outlier_does_not_move_it() {
        let mut s = Samples::<4>::default();
        assert_eq!(s.median(), None);
        assert_eq!(s.push(300), None);
        assert_eq!(s.median(), Some(300));
        assert_eq!(s.push(9_000), None);
        assert_eq!(s.push(200), None);
        assert_eq!(s.median(), Some(300), "200, 300, 9,000");
        assert_eq!(s.push(250), Some(300), "filled: 200, 250, 300, 9,000");
        assert_eq!(s.push(1), None, "full");
        assert_eq!(s.median(), Some(300));
    }
}
