//! Frames shared since a fork. A fork child's anonymous pages are its parent's frames until one
//! of them writes (copy-on-write) or lets its copy go: the kernel's RssAnon counts such a frame
//! in each process, the tree holds it once. Each shared page carries the frame it maps, named
//! by the fork that first shared it and the address it had there; the tree counts each frame
//! that some space still maps once (docs/schema.md, "The tree's figure").

use std::collections::HashMap;
use std::ops::Range;

use rangemap::RangeMap;

/// The frame a shared page maps: `group` names the fork that first shared it, and the page was
/// at `address - shift` (wrapping) in the space it was shared from. Adjacent pages of one group
/// and one shift map adjacent frames, so a run of them stays one range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub group: u64,
    pub shift: u64,
}

impl Frame {
    /// Where the frames of `range` (pages of a space, mapping this run) were first shared.
    pub fn origin(&self, range: &Range<u64>) -> Range<u64> {
        range.start.wrapping_sub(self.shift)..range.end.wrapping_sub(self.shift)
    }

    /// The same frames, mapped `by` bytes higher (an mremap's move, wrapping).
    pub fn moved(self, by: u64) -> Self {
        Self {
            shift: self.shift.wrapping_add(by),
            ..self
        }
    }
}

/// A space started or stopped mapping shared frames: the tree's count of them changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameChange {
    Mapped(Frame, Range<u64>),
    Unmapped(Frame, Range<u64>),
}

/// How many spaces map each shared frame, and the bytes of those some space still maps.
#[derive(Clone, Debug, Default)]
pub struct SharedFrames {
    mappers: HashMap<u64, RangeMap<u64, u32>>,
    pub bytes: u64,
}

impl SharedFrames {
    pub fn apply(&mut self, change: FrameChange) {
        match change {
            FrameChange::Mapped(frame, pages) => self.count(frame, pages, 1),
            FrameChange::Unmapped(frame, pages) => self.count(frame, pages, -1),
        }
    }

    /// Adds `by` to the mappers of the frames of `pages` (mapping `frame`'s run).
    fn count(&mut self, frame: Frame, pages: Range<u64>, by: i64) {
        let origin = frame.origin(&pages);
        if origin.start >= origin.end {
            return;
        }
        let counts = self.mappers.entry(frame.group).or_default();
        let mut pieces: Vec<(Range<u64>, u32)> = counts
            .overlapping(&origin)
            .map(|(r, n)| (r.start.max(origin.start)..r.end.min(origin.end), *n))
            .collect();
        pieces.extend(counts.gaps(&origin).map(|r| (r, 0)));
        for (r, n) in pieces {
            let len = r.end - r.start;
            let after = (i64::from(n) + by).max(0) as u32;
            match (n, after) {
                (0, 0) => continue,
                (0, _) => self.bytes += len,
                (_, 0) => self.bytes -= len,
                _ => {}
            }
            if after == 0 {
                counts.remove(r);
            } else {
                counts.insert(r, after);
            }
        }
        if counts.is_empty() {
            self.mappers.remove(&frame.group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Frame = Frame { group: 1, shift: 0 };

    #[test]
    fn a_frame_is_counted_once_while_any_space_maps_it() {
        let mut frames = SharedFrames::default();
        frames.apply(FrameChange::Mapped(F, 0x1000..0x5000));
        frames.apply(FrameChange::Mapped(F, 0x1000..0x5000));
        assert_eq!(frames.bytes, 0x4000);
        frames.apply(FrameChange::Unmapped(F, 0x1000..0x3000));
        assert_eq!(frames.bytes, 0x4000);
        frames.apply(FrameChange::Unmapped(F, 0x1000..0x5000));
        assert_eq!(frames.bytes, 0x2000);
        frames.apply(FrameChange::Unmapped(F, 0x3000..0x5000));
        assert_eq!(frames.bytes, 0);
        assert!(frames.mappers.is_empty());
    }

    #[test]
    fn moved_pages_still_map_the_frames_they_mapped() {
        let mut frames = SharedFrames::default();
        frames.apply(FrameChange::Mapped(F, 0x1000..0x3000));
        let moved = F.moved(0x10_0000);
        frames.apply(FrameChange::Mapped(moved, 0x10_1000..0x10_3000));
        assert_eq!(frames.bytes, 0x2000);
        frames.apply(FrameChange::Unmapped(F, 0x1000..0x3000));
        assert_eq!(frames.bytes, 0x2000);
        // Moved down, below where they were shared from: the shift wraps.
        let down = F.moved(0u64.wrapping_sub(0x1000));
        assert_eq!(down.origin(&(0..0x1000)), 0x1000..0x2000);
    }
}
