//! The one rule of an `mremap`: which part of the old range moves, where it lands, and what of
//! the new range is the old mapping grown. The replay's model, its sites and the tracer's
//! shadow of each space all move their ranges by it, so that they cannot drift apart.

use std::ops::Range;

use rangemap::RangeMap;

/// An `mremap` of `old` to `new` (in place when they start at the same address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remap {
    pub old: Range<u64>,
    pub new: Range<u64>,
}

impl Remap {
    pub fn new(old: Range<u64>, new: Range<u64>) -> Self {
        Self { old, new }
    }

    fn old_len(&self) -> u64 {
        self.old.end - self.old.start
    }

    fn new_len(&self) -> u64 {
        self.new.end - self.new.start
    }

    /// The part of the old range that moves: its first pages, as many as the new range has
    /// (a shrinking move drops the rest).
    pub fn source(&self) -> Range<u64> {
        self.old.start..self.old.start + self.old_len().min(self.new_len())
    }

    /// The values `map` holds over the part that moves, where they land (read before the
    /// move changes `map`).
    pub fn carried<V: Clone + Eq>(&self, map: &RangeMap<u64, V>) -> Vec<(Range<u64>, V)> {
        map.overlapping(&self.source())
            .filter_map(|(r, v)| Some((self.shifted(r)?, v.clone())))
            .collect()
    }

    /// Where the part of `r` that moves lands, if any of it moves.
    pub fn shifted(&self, r: &Range<u64>) -> Option<Range<u64>> {
        let source = self.source();
        let (start, end) = (r.start.max(source.start), r.end.min(source.end));
        (start < end).then(|| self.shift(start)..self.shift(end))
    }

    /// An address of the moving part, where it lands.
    fn shift(&self, addr: u64) -> u64 {
        addr - self.old.start + self.new.start
    }

    /// The part of the new range beyond the old length: the mapping at the old end, grown.
    pub fn grown(&self) -> Option<Range<u64>> {
        (self.new_len() > self.old_len()).then(|| self.new.start + self.old_len()..self.new.end)
    }

    /// The old range's last address, whose mapping a grown part continues.
    pub fn old_last(&self) -> Option<u64> {
        self.old.end.checked_sub(1).filter(|_| !self.old.is_empty())
    }

    /// Whether it grows or shrinks where it is.
    pub fn in_place(&self) -> bool {
        self.old.start == self.new.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grown_move_shifts_every_part_and_names_the_tail() {
        let r = Remap::new(0x10..0x20, 0x40..0x58);
        assert_eq!(r.shifted(&(0x08..0x12)), Some(0x40..0x42));
        assert_eq!(r.shifted(&(0x1f..0x30)), Some(0x4f..0x50));
        assert_eq!(r.shifted(&(0x20..0x30)), None);
        assert_eq!(r.grown(), Some(0x50..0x58));
        assert_eq!(r.old_last(), Some(0x1f));
    }

    #[test]
    fn a_shrinking_move_drops_what_is_beyond_the_new_length() {
        let r = Remap::new(0x10..0x20, 0x40..0x44);
        assert_eq!(r.source(), 0x10..0x14);
        assert_eq!(r.shifted(&(0x12..0x18)), Some(0x42..0x44));
        assert_eq!(r.shifted(&(0x14..0x18)), None);
        assert_eq!(r.grown(), None);
    }
}
