//! Numbers and byte strings written one after another, read back in the same order.

/// Appends `v` in LEB128 (seven bits a byte, the low ones first): a small number takes a byte.
pub(super) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends the length of `b`, then `b`.
pub(super) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// `v` as the narrower type it was written from.
pub(super) fn narrow<T: TryFrom<u64> + Default>(v: u64) -> T {
    T::try_from(v).unwrap_or_default()
}

/// The most bytes [`put`] writes.
pub(super) const MAX_NUMBER: usize = 10;

/// Reads what [`put`] and [`put_bytes`] wrote (and bytes appended as they were), in the same
/// order. Past the end it reads zeros and empty strings: it never gets there, what it reads
/// being read as it was written.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes` from `pos` on.
    pub(super) fn at(bytes: &'a [u8], pos: usize) -> Reader<'a> {
        Reader { bytes, pos }
    }

    /// Where the next read begins.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    pub(super) fn number(&mut self) -> u64 {
        let mut v = 0;
        let mut shift = 0;
        while let Some(&b) = self.bytes.get(self.pos) {
            self.pos += 1;
            if shift < u64::BITS {
                v |= u64::from(b & 0x7f) << shift;
            }
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        v
    }

    /// A number written from a narrower type.
    pub(super) fn narrow<T: TryFrom<u64> + Default>(&mut self) -> T {
        narrow(self.number())
    }

    pub(super) fn bytes(&mut self) -> &'a [u8] {
        let len = usize::try_from(self.number()).unwrap_or(usize::MAX);
        self.take(len)
    }

    /// `N` bytes appended as they were.
    pub(super) fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0; N];
        let b = self.take(N);
        a[..b.len()].copy_from_slice(b);
        a
    }

    fn take(&mut self, len: usize) -> &'a [u8] {
        let end = self.pos.saturating_add(len).min(self.bytes.len());
        let b = self.bytes.get(self.pos..end).unwrap_or_default();
        self.pos = end.max(self.pos);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_strings_come_back_in_order() {
        let numbers = [0, 1, 0x7f, 0x80, 300, u64::from(u32::MAX), u64::MAX];
        let mut out = Vec::new();
        for n in numbers {
            put(&mut out, n);
        }
        put_bytes(&mut out, b"vm01");
        out.extend_from_slice(&[10, 0, 0, 1]);
        // One byte up to 127, two up to 16,383, ten for the largest.
        assert_eq!(out.len(), 1 + 1 + 1 + 2 + 2 + 5 + MAX_NUMBER + 5 + 4);
        let mut r = Reader::at(&out, 0);
        for n in numbers {
            assert_eq!(r.number(), n);
        }
        assert_eq!(r.bytes(), b"vm01");
        assert_eq!(r.array::<4>(), [10, 0, 0, 1]);
        assert_eq!(r.pos(), out.len());
        // Past the end: zeros, nothing, and no move.
        assert_eq!(
            (r.number(), r.bytes(), r.array::<2>()),
            (0, &b""[..], [0, 0])
        );
        assert_eq!(r.narrow::<u16>(), 0);
        assert_eq!(r.pos(), out.len());
    }

    #[test]
    fn a_number_too_wide_for_its_type_reads_as_zero() {
        let mut out = Vec::new();
        put(&mut out, 70_000);
        put(&mut out, 65_535);
        let mut r = Reader::at(&out, 0);
        assert_eq!((r.narrow::<u16>(), r.narrow::<u16>()), (0, 65_535));
    }
}
