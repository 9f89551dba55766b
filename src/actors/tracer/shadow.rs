//! The tracer's shadow of one space: what it follows there beside the stream, as one map of
//! small mark sets over address ranges. Which ranges are followed by scans and which of their
//! pages the stream has (scans.rs), which mappings grow down, what the stream tracks or the
//! selection left out, and what it has in swap, freed lazily or sharing a frame with another
//! space (pressure.rs, shared.rs). A layout change describes, forgets, discards or moves all of
//! it at once, an `mremap` by the one rule the replay uses too (`model::remap`).

use std::ops::{BitOr, Range};

use rangemap::{RangeMap, RangeSet};

use crate::kernel::procfs::{self, MapsEntry, PopulatedRun};
use crate::model::remap::Remap;

/// A small set of marks on a range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Marks(u16);

impl Marks {
    pub(super) const NONE: Marks = Marks(0);
    /// Followed by scans of the page tables rather than by the userfaultfd (scans.rs).
    pub(super) const SCANNED: Marks = Marks(1);
    /// A page followed by scans that the stream has as resident.
    pub(super) const SEEN: Marks = Marks(1 << 1);
    /// A mapping that grows down (a stack), whatever follows it.
    pub(super) const STACK: Marks = Marks(1 << 2);
    /// The stream tracks it (`map` and `brk` lines with `tracked` true).
    pub(super) const TRACKED: Marks = Marks(1 << 3);
    /// Private anonymous memory `--region` or `--min-size` left out: described again, moved,
    /// grown or copied by a fork, it stays out (as a tracked range stays in).
    pub(super) const LEFT_OUT: Marks = Marks(1 << 4);
    /// A tracked page the stream has in swap (`evicted` with `how` `swap`).
    pub(super) const SWAPPED: Marks = Marks(1 << 5);
    /// A tracked page freed with `MADV_FREE`, present then and resident in the stream since:
    /// the kernel may reclaim it at any time.
    pub(super) const LAZY: Marks = Marks(1 << 6);
    /// A tracked page that may map a frame another process maps too: a fork's copies, until a
    /// read finds them the space's own (shared.rs).
    pub(super) const SHARED: Marks = Marks(1 << 7);
    /// A shared page the last timed read found of the space's own, not written yet: a timed
    /// read writes a page only when the one before found it so too (shared.rs).
    pub(super) const EXCLUSIVE_SEEN: Marks = Marks(1 << 8);
    /// `--faults records`: a tracked range whose protection lets a fault there make a page
    /// (writable, no protection key), and so a record there a page resident (unread).
    pub(super) const WRITABLE: Marks = Marks(1 << 9);
    /// `--faults records`: advised `MADV_HUGEPAGE`, where one fault may make a huge page.
    pub(super) const HUGE_ADVISED: Marks = Marks(1 << 10);
    /// `--faults records`: a fault there may fail or wait on the program whatever the
    /// protection says, until the mapping is replaced: guard markers (`MADV_GUARD_INSTALL`),
    /// the program's own userfaultfd, a protection key (which a plain `mprotect` keeps).
    pub(super) const MAY_REFUSE: Marks = Marks(1 << 11);

    /// What scans keep.
    const SCANS: Marks = Marks(Self::SCANNED.0 | Self::SEEN.0 | Self::STACK.0);
    /// What the mappings' protection and advice keep.
    const LAYOUT: Marks = Marks(Self::WRITABLE.0 | Self::HUGE_ADVISED.0 | Self::MAY_REFUSE.0);
    /// What the stream's tracking keeps.
    const PRESSURE: Marks =
        Marks(Self::TRACKED.0 | Self::LEFT_OUT.0 | Self::SWAPPED.0 | Self::LAZY.0 | Self::SHARED.0);

    fn has(self, marks: Marks) -> bool {
        self.0 & marks.0 != 0
    }

    fn without(self, marks: Marks) -> Marks {
        Marks(self.0 & !marks.0)
    }

    fn only(self, marks: Marks) -> Marks {
        Marks(self.0 & marks.0)
    }

    fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Marks {
    type Output = Marks;

    fn bitor(self, other: Marks) -> Marks {
        Marks(self.0 | other.0)
    }
}

/// The part of `r` within `range`.
fn clip(r: &Range<u64>, range: &Range<u64>) -> Range<u64> {
    r.start.max(range.start)..r.end.min(range.end)
}

/// How many marks a set can hold.
const MARKS: usize = 12;

/// One space's shadow.
#[derive(Clone, Debug, Default)]
pub(super) struct Shadow {
    marks: RangeMap<u64, Marks>,
    /// The bytes that have each mark: whether a space has any of a mark is asked at every
    /// syscall and tick, and must not walk thousands of mappings.
    bytes: [u64; MARKS],
}

impl Shadow {
    /// Changes the marks of every part of `range` (holes included, as no marks) by `change`.
    fn update(&mut self, range: Range<u64>, change: impl Fn(Marks) -> Marks) {
        if range.is_empty() {
            return;
        }
        let mut parts: Vec<(Range<u64>, Marks)> = self
            .marks
            .overlapping(&range)
            .map(|(r, m)| (clip(r, &range), *m))
            .collect();
        parts.extend(self.marks.gaps(&range).map(|gap| (gap, Marks::NONE)));
        for (part, was) in parts {
            let now = change(was);
            if now == was {
                continue;
            }
            let len = part.end - part.start;
            for (bit, bytes) in self.bytes.iter_mut().enumerate() {
                match (was.0 >> bit & 1, now.0 >> bit & 1) {
                    (0, 1) => *bytes += len,
                    (1, 0) => *bytes -= len,
                    _ => {}
                }
            }
            match now.is_empty() {
                true => self.marks.remove(part),
                false => self.marks.insert(part, now),
            }
        }
    }

    /// Marks all of `range` with `marks`.
    pub(super) fn add(&mut self, range: Range<u64>, marks: Marks) {
        self.update(range, |m| m | marks);
    }

    /// Takes `marks` off all of `range`.
    pub(super) fn remove(&mut self, range: Range<u64>, marks: Marks) {
        self.update(range, |m| m.without(marks));
    }

    /// Marks all of `range` with `add`, and takes `remove` off it.
    pub(super) fn update_marks(&mut self, range: Range<u64>, add: Marks, remove: Marks) {
        self.update(range, |m| m.without(remove) | add);
    }

    /// Gives `mark` to the ranges of `set` and to no other.
    pub(super) fn replace(&mut self, mark: Marks, set: &RangeSet<u64>) {
        self.remove(0..u64::MAX, mark);
        for r in set.iter() {
            self.add(r.clone(), mark);
        }
    }

    /// Every range that has `mark`, joined.
    pub(super) fn ranges(&self, mark: Marks) -> RangeSet<u64> {
        self.marked(mark).collect()
    }

    fn marked(&self, mark: Marks) -> impl Iterator<Item = Range<u64>> + '_ {
        let any = self.any(mark);
        self.marks
            .iter()
            .take_while(move |_| any)
            .filter(move |(_, m)| m.has(mark))
            .map(|(r, _)| r.clone())
    }

    /// The parts of `range` that have `mark`, joined.
    pub(super) fn within(&self, mark: Marks, range: &Range<u64>) -> Vec<Range<u64>> {
        // An empty range has no part (rangemap would give the range around it).
        if range.is_empty() {
            return Vec::new();
        }
        let set: RangeSet<u64> = self
            .marks
            .overlapping(range)
            .filter(|(_, m)| m.has(mark))
            .map(|(r, _)| clip(r, range))
            .collect();
        set.into_iter().collect()
    }

    /// The parts of the ranges of `within` that have `mark`.
    pub(super) fn within_set(&self, mark: Marks, within: &RangeSet<u64>) -> RangeSet<u64> {
        within.iter().flat_map(|w| self.within(mark, w)).collect()
    }

    /// Whether some of `range` has `mark`.
    pub(super) fn overlaps(&self, mark: Marks, range: &Range<u64>) -> bool {
        self.marks.overlapping(range).any(|(_, m)| m.has(mark))
    }

    /// Whether all of `range` has `mark` (an empty range, trivially).
    pub(super) fn covers(&self, mark: Marks, range: &Range<u64>) -> bool {
        range.is_empty() || self.within(mark, range) == [range.clone()]
    }

    /// Whether the page at `addr` has `mark`.
    pub(super) fn contains(&self, mark: Marks, addr: u64) -> bool {
        self.marks.get(&addr).is_some_and(|m| m.has(mark))
    }

    /// Whether any range has one of `marks`.
    pub(super) fn any(&self, marks: Marks) -> bool {
        self.bytes
            .iter()
            .enumerate()
            .any(|(bit, &bytes)| marks.0 >> bit & 1 == 1 && bytes > 0)
    }

    /// A fork child's, with what it inherits: the same ranges followed by scans, growing down,
    /// tracked, left out and freed lazily (its snapshot's lines then keep what is still
    /// there), every tracked page shared with its parent. Nothing seen yet; what was in swap is
    /// described as resident, and found in swap again by the next look.
    pub(super) fn inheriting(parent: &Shadow) -> Shadow {
        let kept = Marks::SCANNED
            | Marks::STACK
            | Marks::TRACKED
            | Marks::LEFT_OUT
            | Marks::LAZY
            | Marks::LAYOUT;
        let mut child = Shadow::default();
        for (r, m) in parent.marks.iter() {
            let mut marks = m.only(kept);
            if m.has(Marks::TRACKED) {
                marks = marks | Marks::SHARED;
            }
            child.add(r.clone(), marks);
        }
        child
    }

    /// The parent's side of a fork: every page it tracks is shared with the child's copy now.
    pub(super) fn forked(&mut self) {
        self.replace(Marks::SHARED, &self.ranges(Marks::TRACKED));
        self.remove(0..u64::MAX, Marks::EXCLUSIVE_SEEN);
    }

    /// The pages of `range`, followed by scans, are as a line described them: those of
    /// `present` are the stream's.
    pub(super) fn scanned_as(&mut self, range: Range<u64>, present: &[Range<u64>]) {
        self.remove(range.clone(), Marks::SEEN);
        for p in present {
            self.add(clip(p, &range), Marks::SEEN);
        }
    }

    /// A line described `range` (`tracked` or not) with `present` its pages there: none in
    /// swap as far as the stream is concerned, and only those present still freed lazily.
    pub(super) fn described(&mut self, range: Range<u64>, tracked: bool, present: &[Range<u64>]) {
        if range.is_empty() {
            return;
        }
        self.remove(range.clone(), Marks::SWAPPED);
        if tracked {
            self.update(range.clone(), |m| {
                m.without(Marks::LEFT_OUT) | Marks::TRACKED
            });
            for (run, present) in procfs::split_by_presence(range, present) {
                if !present {
                    self.remove(run, Marks::LAZY);
                }
            }
        } else {
            self.remove(range, Marks::TRACKED | Marks::SHARED | Marks::LAZY);
        }
    }

    /// `range` is no longer mapped: nothing of it is followed any more.
    pub(super) fn forget(&mut self, range: Range<u64>) {
        self.remove(range, Marks::SCANS | Marks::PRESSURE | Marks::LAYOUT);
    }

    /// `range` is no longer followed by scans.
    pub(super) fn forget_scanned(&mut self, range: Range<u64>) {
        self.remove(range, Marks::SCANS);
    }

    /// What the stream tracked or left out of `range` is gone: a hole is no mapping any more.
    pub(super) fn forget_tracking(&mut self, range: Range<u64>) {
        self.remove(range, Marks::PRESSURE);
    }

    /// The pages of `range` are about to be described again: none is in swap or freed lazily
    /// as far as the stream is concerned (a look finds them again). Frames they share stay
    /// shared (the description keeps its pages).
    pub(super) fn forget_pages(&mut self, range: Range<u64>) {
        self.remove(range, Marks::SWAPPED | Marks::LAZY);
    }

    /// The selection left `range` out (it is described untracked).
    pub(super) fn leave_out(&mut self, range: Range<u64>) {
        self.update(range, |m| m.without(Marks::PRESSURE) | Marks::LEFT_OUT);
    }

    /// A discard dropped every page of `range` absent at its exit (`present_at_exit`), and
    /// every swap entry there; a page there now was made after it, the space's own.
    pub(super) fn discarded(&mut self, range: Range<u64>, present_at_exit: &[Range<u64>]) {
        self.remove(range.clone(), Marks::SWAPPED | Marks::SHARED);
        for (run, present) in procfs::split_by_presence(range, present_at_exit) {
            if !present {
                self.remove(run, Marks::SEEN | Marks::LAZY);
            }
        }
    }

    /// The pages of `range` left memory (reclaimed): a page made there again is to be found.
    pub(super) fn dropped(&mut self, range: Range<u64>) {
        self.remove(range, Marks::SEEN);
    }

    /// The pages of `range` written as resident that `runs` (what is present now) no longer
    /// has: seen no more, and returned.
    pub(super) fn gone(&mut self, range: &Range<u64>, runs: &[PopulatedRun]) -> RangeSet<u64> {
        let mut gone: RangeSet<u64> = self.within(Marks::SEEN, range).into_iter().collect();
        for run in runs {
            gone.remove(run.range.clone());
        }
        for r in gone.iter() {
            self.dropped(r.clone());
        }
        gone
    }

    /// `MADV_FREE` over `range`, whose pages `present` were present at its exit: those the
    /// stream tracks may be reclaimed from here on.
    pub(super) fn freed_lazily(&mut self, range: Range<u64>, present: &[Range<u64>]) {
        for p in present {
            for tracked in self.within(Marks::TRACKED, &clip(p, &range)) {
                self.add(tracked, Marks::LAZY);
            }
        }
    }

    /// An `mremap` moved `old` to `new` (DONTUNMAP: leaving `old` mapped, tracked and empty).
    /// What is tracked, left out, in swap, freed lazily or shared moves along; what is followed
    /// by scans moves with the pages seen there and its growing down. A range followed by
    /// faults leaves its growing down behind: the lane forgets it, and under faults a stack's
    /// growth is the lane's. The part of `new` beyond the old length is the mapping at the old
    /// end grown: tracked or left out as it, followed by scans (and growing down) as it.
    pub(super) fn moved(&mut self, remap: &Remap, dontunmap: bool) {
        let (old, new) = (remap.old.clone(), remap.new.clone());
        let scanned = self.overlaps(Marks::SCANNED, &old);
        let tail = remap
            .old_last()
            .and_then(|last| self.marks.get(&last).copied())
            .unwrap_or_default();
        let carried = match scanned {
            true => Marks::SCANS | Marks::PRESSURE | Marks::LAYOUT,
            false => Marks::PRESSURE | Marks::LAYOUT,
        };
        let pieces: Vec<(Range<u64>, Marks)> = self
            .marks
            .overlapping(&old)
            .filter_map(|(r, m)| remap.shifted(r).map(|to| (to, m.only(carried))))
            .collect();
        self.remove(old.clone(), Marks::STACK);
        match dontunmap {
            true => self.remove(
                old.clone(),
                Marks::SEEN | Marks::SWAPPED | Marks::LAZY | Marks::SHARED,
            ),
            false => self.forget(old.clone()),
        }
        self.remove(new.clone(), Marks::PRESSURE | Marks::LAYOUT);
        match (scanned, remap.in_place()) {
            // In place, a range not followed by scans grew into free space.
            (false, true) => self.forget_scanned(old.end.min(new.end)..new.end),
            _ => self.forget_scanned(new.clone()),
        }
        for (to, marks) in pieces {
            self.add(to, marks);
        }
        if let Some(grown) = remap.grown() {
            let mut marks = Marks::NONE;
            if tail.has(Marks::SCANNED) {
                marks = marks | tail.only(Marks::SCANNED | Marks::STACK);
            }
            marks = marks | tail.only(Marks::LAYOUT);
            if tail.has(Marks::TRACKED) {
                marks = marks | Marks::TRACKED;
            } else if tail.has(Marks::LEFT_OUT) {
                marks = marks | Marks::LEFT_OUT;
            }
            self.add(grown, marks);
        }
    }

    /// Keeps followed by scans (and seen) only what lies in a private anonymous mapping of
    /// `maps`: the ranges of `within` where a hole or another mapping is now are followed no
    /// more.
    pub(super) fn keep_private_anon(&mut self, within: &RangeSet<u64>, maps: &[MapsEntry]) {
        for range in within.iter() {
            let mut gone: RangeSet<u64> = std::iter::once(range.clone()).collect();
            for m in maps.iter().filter(|m| m.is_private_anon()) {
                gone.remove(m.start..m.end);
            }
            for part in gone.iter() {
                self.forget_scanned(part.clone());
            }
        }
    }

    /// `--faults records`: the pages of `within` a recorded fault would have made resident, which
    /// the stream does not have: followed by scans, tracked and writable, not seen, in swap,
    /// freed lazily, shared with another space nor refusing, and (`huge_advised_too` false) not
    /// advised huge pages, whose one fault may have made a whole frame.
    pub(super) fn unread(&self, within: &RangeSet<u64>, huge_advised_too: bool) -> RangeSet<u64> {
        let mut pages = self.within_set(Marks::SCANNED, within);
        for mark in [Marks::TRACKED, Marks::WRITABLE] {
            let without: Vec<Range<u64>> =
                pages.iter().flat_map(|r| self.gaps_of(mark, r)).collect();
            for r in without {
                pages.remove(r);
            }
        }
        let mut not =
            Marks::SEEN | Marks::SWAPPED | Marks::LAZY | Marks::SHARED | Marks::MAY_REFUSE;
        if !huge_advised_too {
            not = not | Marks::HUGE_ADVISED;
        }
        let taken: Vec<Range<u64>> = pages
            .iter()
            .flat_map(|r| {
                self.marks
                    .overlapping(r)
                    .filter(|(_, m)| m.has(not))
                    .map(|(p, _)| clip(p, r))
            })
            .collect();
        for r in taken {
            pages.remove(r);
        }
        pages
    }

    /// The parts of `range` without `mark`.
    fn gaps_of(&self, mark: Marks, range: &Range<u64>) -> Vec<Range<u64>> {
        let with: RangeSet<u64> = self.within(mark, range).into_iter().collect();
        with.gaps(range).collect()
    }

    /// The pages followed by scans that no scan found yet: not resident in the stream.
    pub(super) fn unseen(&self) -> RangeSet<u64> {
        let seen = self.ranges(Marks::SEEN);
        self.ranges(Marks::SCANNED)
            .iter()
            .flat_map(|f| seen.gaps(f))
            .collect()
    }

    /// What was chosen for a mapping already known, in part or whole: followed (some of it is
    /// tracked), left out, or None for a mapping new to the stream.
    pub(super) fn chosen_for(&self, mapping: &Range<u64>) -> Option<bool> {
        if self.overlaps(Marks::TRACKED, mapping) {
            Some(true)
        } else if self.overlaps(Marks::LEFT_OUT, mapping) {
            Some(false)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    /// Page numbers to a set of address ranges.
    fn set(pages: &[(u64, u64)]) -> RangeSet<u64> {
        pages.iter().map(|&(s, e)| s * P..e * P).collect()
    }

    fn pages(p: &[(u64, u64)]) -> Vec<Range<u64>> {
        set(p).into_iter().collect()
    }

    fn remap(old: (u64, u64), new: (u64, u64)) -> Remap {
        Remap::new(old.0 * P..old.1 * P, new.0 * P..new.1 * P)
    }

    /// A shadow whose `scanned` ranges are followed by scans and `stacks` grow down.
    fn scanned(scanned: &[(u64, u64)], stacks: &[(u64, u64)]) -> Shadow {
        let mut s = Shadow::default();
        for r in set(scanned).iter() {
            s.add(r.clone(), Marks::SCANNED);
        }
        for r in set(stacks).iter() {
            s.add(r.clone(), Marks::STACK);
        }
        s
    }

    #[test]
    fn a_move_takes_the_advice_and_the_pages_seen_along() {
        let mut s = scanned(&[(0x10, 0x20)], &[]);
        s.scanned_as(0x10 * P..0x20 * P, &pages(&[(0x11, 0x12), (0x1f, 0x20)]));
        // Moved and grown by 8 pages: the tail is the same mapping, with no page seen.
        s.moved(&remap((0x10, 0x20), (0x40, 0x58)), false);
        assert_eq!(s.ranges(Marks::SCANNED), set(&[(0x40, 0x58)]));
        assert_eq!(s.ranges(Marks::SEEN), set(&[(0x41, 0x42), (0x4f, 0x50)]));
    }

    /// What a recorded fault surely made and the stream does not have: tracked, writable,
    /// followed by scans, and neither seen, in swap, freed lazily, shared nor advised huge
    /// pages (unless the policy makes none); moved, the marks go along.
    #[test]
    fn unread_pages_are_those_a_fault_surely_made_that_the_stream_has_not() {
        let mut s = scanned(&[(0x10, 0x40)], &[]);
        s.described(0x10 * P..0x40 * P, true, &[]);
        s.add(0x10 * P..0x38 * P, Marks::WRITABLE);
        s.scanned_as(0x10 * P..0x40 * P, &pages(&[(0x10, 0x12)]));
        s.add(0x14 * P..0x15 * P, Marks::SWAPPED);
        s.add(0x16 * P..0x17 * P, Marks::SHARED);
        s.add(0x18 * P..0x20 * P, Marks::HUGE_ADVISED);
        s.add(0x21 * P..0x22 * P, Marks::MAY_REFUSE);
        let all = set(&[(0, 0x100)]);
        let unread = set(&[
            (0x12, 0x14),
            (0x15, 0x16),
            (0x17, 0x18),
            (0x20, 0x21),
            (0x22, 0x38),
        ]);
        assert_eq!(s.unread(&all, false), unread);
        let mut with_huge = unread.clone();
        with_huge.insert(0x18 * P..0x20 * P);
        assert_eq!(s.unread(&all, true), with_huge);
        s.moved(&remap((0x20, 0x40), (0x80, 0xa0)), false);
        assert_eq!(
            s.unread(&all, false),
            set(&[
                (0x12, 0x14),
                (0x15, 0x16),
                (0x17, 0x18),
                (0x80, 0x81),
                (0x82, 0x98)
            ])
        );
    }

    #[test]
    fn a_stack_moved_still_grows_down_where_it_went() {
        let mut s = scanned(&[(0x10, 0x20)], &[(0x10, 0x20)]);
        s.moved(&remap((0x10, 0x20), (0x40, 0x48)), false);
        assert_eq!(s.ranges(Marks::STACK), set(&[(0x40, 0x48)]));
    }

    #[test]
    fn a_move_of_part_of_a_range_leaves_the_rest() {
        let mut s = scanned(&[(0x10, 0x20)], &[]);
        s.scanned_as(0x10 * P..0x20 * P, &pages(&[(0x10, 0x20)]));
        // The first 4 pages moved, shrunk to 2; DONTUNMAP would leave them mapped but empty.
        s.moved(&remap((0x10, 0x14), (0x40, 0x42)), true);
        assert_eq!(s.ranges(Marks::SCANNED), set(&[(0x10, 0x20), (0x40, 0x42)]));
        assert_eq!(s.ranges(Marks::SEEN), set(&[(0x14, 0x20), (0x40, 0x42)]));
    }

    #[test]
    fn a_move_of_a_range_followed_by_faults_leaves_no_scan_where_it_went() {
        let mut s = scanned(&[(0x10, 0x20)], &[]);
        s.moved(&remap((0x30, 0x34), (0x10, 0x14)), false);
        // The destination was mapped over: not followed by scans any more.
        assert_eq!(s.ranges(Marks::SCANNED), set(&[(0x14, 0x20)]));
    }

    #[test]
    fn a_discard_forgets_only_the_pages_absent_at_its_exit() {
        let mut s = scanned(&[(0x10, 0x20)], &[]);
        s.scanned_as(0x10 * P..0x20 * P, &pages(&[(0x10, 0x20)]));
        // Another thread touched 0x12 again before the exit: still there, still seen.
        s.discarded(0x10 * P..0x14 * P, &pages(&[(0x12, 0x13)]));
        assert_eq!(s.ranges(Marks::SEEN), set(&[(0x12, 0x13), (0x14, 0x20)]));
    }

    #[test]
    fn a_move_takes_swapped_and_lazy_pages_along_and_grows_the_tracked_tail() {
        let mut s = Shadow::default();
        s.described(0x10 * P..0x20 * P, true, &pages(&[(0x10, 0x20)]));
        s.add(0x11 * P..0x12 * P, Marks::SWAPPED);
        s.freed_lazily(0x1e * P..0x20 * P, &pages(&[(0x1f, 0x20)]));
        s.moved(&remap((0x10, 0x20), (0x40, 0x58)), false);
        assert_eq!(s.ranges(Marks::TRACKED), set(&[(0x40, 0x58)]));
        assert_eq!(s.ranges(Marks::SWAPPED), set(&[(0x41, 0x42)]));
        assert_eq!(s.ranges(Marks::LAZY), set(&[(0x4f, 0x50)]));
    }

    #[test]
    fn a_description_clears_swap_and_keeps_lazy_pages_still_present() {
        let mut parent = Shadow::default();
        parent.add(0x10 * P..0x14 * P, Marks::LAZY);
        let mut s = Shadow::inheriting(&parent);
        s.add(0x10 * P..0x11 * P, Marks::SWAPPED);
        s.described(0x10 * P..0x20 * P, true, &pages(&[(0x12, 0x13)]));
        assert!(!s.any(Marks::SWAPPED));
        assert_eq!(s.ranges(Marks::LAZY), set(&[(0x12, 0x13)]));
        s.described(0x10 * P..0x20 * P, false, &[]);
        assert!(!s.any(Marks::LAZY) && !s.any(Marks::TRACKED));
    }

    #[test]
    fn a_discard_drops_every_swap_entry_and_the_lazy_pages_it_dropped() {
        let mut s = Shadow::default();
        s.described(0x10 * P..0x20 * P, true, &pages(&[(0x10, 0x20)]));
        s.add(0x10 * P..0x14 * P, Marks::SWAPPED);
        s.freed_lazily(0x14 * P..0x18 * P, &pages(&[(0x14, 0x18)]));
        s.discarded(0x10 * P..0x18 * P, &pages(&[(0x12, 0x13), (0x15, 0x16)]));
        assert!(!s.any(Marks::SWAPPED));
        assert_eq!(s.ranges(Marks::LAZY), set(&[(0x15, 0x16)]));
    }

    /// `--region`/`--min-size`: what was left out stays out when moved and grown, and in a fork
    /// child.
    #[test]
    fn what_is_left_out_stays_out() {
        let mut s = Shadow::default();
        s.leave_out(0x10 * P..0x20 * P);
        s.moved(&remap((0x10, 0x20), (0x40, 0x60)), false);
        assert_eq!(s.chosen_for(&(0x40 * P..0x60 * P)), Some(false));
        assert_eq!(s.chosen_for(&(0x58 * P..0x60 * P)), Some(false));
        let child = Shadow::inheriting(&s);
        assert_eq!(child.chosen_for(&(0x40 * P..0x41 * P)), Some(false));
        assert_eq!(child.chosen_for(&(0x70 * P..0x71 * P)), None);
    }

    #[test]
    fn what_has_a_mark_is_counted_as_marks_come_and_go() {
        let mut s = Shadow::default();
        s.add(0x10 * P..0x20 * P, Marks::TRACKED | Marks::SEEN);
        s.add(0x18 * P..0x28 * P, Marks::TRACKED);
        s.remove(0x10 * P..0x14 * P, Marks::SEEN);
        assert!(s.any(Marks::TRACKED) && s.any(Marks::SEEN) && !s.any(Marks::SWAPPED));
        s.forget(0x00..0x30 * P);
        assert!(!s.any(Marks::TRACKED | Marks::SEEN));
        assert!(s.marks.is_empty());
    }

    /// `madvise(p, 0, ...)` inside a marked range: nothing of it is marked, and all of it is.
    #[test]
    fn an_empty_range_has_no_part_and_is_covered() {
        let mut s = scanned(&[(0x10, 0x20)], &[]);
        let empty = 0x18 * P..0x18 * P;
        assert!(s.within(Marks::SCANNED, &empty).is_empty());
        assert!(s.covers(Marks::SCANNED, &empty));
        s.remove(empty.clone(), Marks::SCANNED);
        s.discarded(empty, &[]);
        assert_eq!(s.ranges(Marks::SCANNED), set(&[(0x10, 0x20)]));
    }

    #[test]
    fn a_fork_shares_what_is_tracked_and_seen_is_the_parents() {
        let mut parent = scanned(&[(0x10, 0x20)], &[]);
        parent.described(0x10 * P..0x30 * P, true, &[]);
        parent.scanned_as(0x10 * P..0x20 * P, &pages(&[(0x10, 0x12)]));
        let child = Shadow::inheriting(&parent);
        parent.forked();
        for s in [&parent, &child] {
            assert_eq!(s.ranges(Marks::SHARED), set(&[(0x10, 0x30)]));
            assert_eq!(s.ranges(Marks::SCANNED), set(&[(0x10, 0x20)]));
        }
        assert_eq!(parent.ranges(Marks::SEEN), set(&[(0x10, 0x12)]));
        assert!(!child.any(Marks::SEEN));
    }
}
