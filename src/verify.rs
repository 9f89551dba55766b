//! `--verify`: the stream so far, replayed, compared page by page with the kernel's page tables
//! at a point where the space is quiescent (every thread stopped, its userfaultfd drained, every
//! earlier line applied). The kernel's side is read here, for the state actor (on a blocking
//! thread, which the actor awaits before its next line), while the tracer waits for the answer
//! before it lets any thread of the space run again.

use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use crate::event::{KernelPage, Mismatch, SpaceId, StreamPage};
use crate::kernel::procfs::{self, Pagemap};
use crate::model::AddressSpace;
use crate::test_hooks::{self, Fault};

/// At most this many mismatch runs are written in one `verify` line; the counts cover all.
pub const FIRST_MISMATCHES: usize = 8;

/// What the state actor needs to read the kernel's side of a check, and how it says it is done.
/// It travels beside the `verify` line through the lane and the sequencer, so that the check
/// happens exactly after every line that came before it.
#[derive(Clone, Debug)]
pub struct Probe {
    /// A process living in the space, stopped.
    pub pid: i32,
    /// The space's own pagemap, opened when the space was made (bound to that mm).
    pub pagemap: Option<Arc<Pagemap>>,
    /// Told once the check is done; the tracer resumes the space's threads then.
    pub done: SyncSender<()>,
}

/// The kernel's page tables over a space's private anonymous mappings: each a list of ranges in
/// address order, apart or touching (a check is a walk along them, not a search in each).
#[derive(Debug, Default)]
pub struct KernelView {
    pub anon: Vec<Range<u64>>,
    pub present: Vec<Range<u64>>,
    pub swapped: Vec<Range<u64>>,
}

/// Why the kernel's side of a check could not be read.
#[derive(Debug)]
pub enum Unreadable {
    /// The process lost its mm while being checked (killed): there is nothing to compare with,
    /// and nothing is wrong with the stream.
    Gone(io::Error),
    /// Anything else: a check that could not run, which `--verify` counts as a failure.
    Failed(io::Error),
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::Gone(e) => write!(f, "the process is gone ({e})"),
            Unreadable::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl Unreadable {
    /// ESRCH and ENOENT (its `/proc` directory gone) mean the process died; the rest is a failure.
    fn from_io(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ESRCH | libc::ENOENT) => Unreadable::Gone(e),
            _ => Unreadable::Failed(e),
        }
    }
}

impl KernelView {
    /// Reads `space`'s side through the probe. Blocking: `/proc` reads and pagemap scans.
    pub fn read(probe: &Probe, space: SpaceId) -> Result<Self, Unreadable> {
        if test_hooks::fails(Fault::Pagemap, Some(space)) {
            return Err(Unreadable::Failed(io::Error::other(
                "test hook: the space's page tables cannot be read",
            )));
        }
        let Some(pagemap) = &probe.pagemap else {
            return Err(Unreadable::Failed(io::Error::other(
                "the space's pagemap could not be opened",
            )));
        };
        let mut view = KernelView::default();
        let (mappings, anon) = procfs::read_private_anon(probe.pid).map_err(Unreadable::from_io)?;
        // A live mm always has a mapping (its stack at least): empty maps mean the process lost
        // its mm (killed while being checked), and there is nothing to compare with.
        if mappings == 0 {
            return Err(Unreadable::Gone(io::Error::from_raw_os_error(libc::ESRCH)));
        }
        // Read together, not with a scan each: a check of 60,000 mappings costs a few calls.
        for (_, runs) in pagemap.populated_each(&anon) {
            for run in runs.map_err(Unreadable::from_io)? {
                match run.swapped {
                    true => view.swapped.push(run.range),
                    false => view.present.push(run.range),
                }
            }
        }
        view.anon = anon;
        Ok(view)
    }
}

/// A walk along ranges in address order (`RangeMap`, `RangeSet` or `KernelView` order), asked
/// about addresses that never go down: each range is passed once.
struct Walk<I: Iterator<Item = (Range<u64>, T)>, T> {
    ranges: std::iter::Peekable<I>,
}

impl<I: Iterator<Item = (Range<u64>, T)>, T: Copy> Walk<I, T> {
    fn new(ranges: I) -> Self {
        Self {
            ranges: ranges.peekable(),
        }
    }

    /// Passes the ranges that end at or before `addr`.
    fn skip_to(&mut self, addr: u64) {
        while self.ranges.next_if(|(r, _)| r.end <= addr).is_some() {}
    }

    /// The value of the range that holds `addr`, if any.
    fn at(&mut self, addr: u64) -> Option<T> {
        self.skip_to(addr);
        self.ranges
            .peek()
            .filter(|(r, _)| r.start <= addr)
            .map(|&(_, v)| v)
    }

    /// The first range start or end above `addr`.
    fn next_cut(&mut self, addr: u64) -> Option<u64> {
        self.skip_to(addr);
        self.ranges
            .peek()
            .map(|(r, _)| if r.start > addr { r.start } else { r.end })
    }
}

/// A walk along a set's ranges.
fn walk_set<'a>(
    ranges: impl Iterator<Item = &'a Range<u64>>,
) -> Walk<impl Iterator<Item = (Range<u64>, ())>, ()> {
    Walk::new(ranges.map(|r| (r.clone(), ())))
}

/// The result of one comparison.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub checked_pages: u64,
    pub mismatched_pages: u64,
    pub first_mismatches: Vec<Mismatch>,
}

/// Compares a replayed space with the kernel's view of it.
///
/// Checked: every page of a tracked mapping (the stream claims to know its state: resident,
/// swapped out, or neither), and every page
/// of a private anonymous mapping the stream does not have at all (a mapping it missed). Pages of
/// mappings the stream knows but does not track (files, shared memory, failed registration) have
/// no page state in the stream and are skipped.
pub fn compare(space: &AddressSpace, kernel: &KernelView, page_size: u64) -> Comparison {
    // One walk along every side at once, from one range end to the next: linear in the ranges
    // of both sides, where a search at each would add a logarithm of 60,000 mappings to each.
    let mut mappings = Walk::new(space.mappings.iter().map(|(r, m)| (r.clone(), m.tracked)));
    let mut resident = walk_set(space.resident.iter());
    let mut swapped = walk_set(space.swapped.iter());
    let mut anon = walk_set(kernel.anon.iter());
    let mut present = walk_set(kernel.present.iter());
    let mut kernel_swapped = walk_set(kernel.swapped.iter());
    let mut out = Comparison::default();
    let mut last: Option<Mismatch> = None;
    let mut b = 0;
    loop {
        let a = b;
        let next = [
            mappings.next_cut(a),
            resident.next_cut(a),
            swapped.next_cut(a),
            anon.next_cut(a),
            present.next_cut(a),
            kernel_swapped.next_cut(a),
        ];
        let Some(cut) = next.into_iter().flatten().min() else {
            break;
        };
        b = cut;
        let stream = match mappings.at(a) {
            None => StreamPage::Unmapped,
            Some(false) => continue,
            Some(true) if resident.at(a).is_some() => StreamPage::Resident,
            Some(true) if swapped.at(a).is_some() => StreamPage::Swapped,
            Some(true) => StreamPage::NotResident,
        };
        let kernel_page = if anon.at(a).is_none() {
            KernelPage::Unmapped
        } else if present.at(a).is_some() {
            KernelPage::Present
        } else if kernel_swapped.at(a).is_some() {
            KernelPage::Swapped
        } else {
            KernelPage::Absent
        };
        let agree = matches!(
            (stream, kernel_page),
            (StreamPage::Resident, KernelPage::Present)
                | (StreamPage::Swapped, KernelPage::Swapped)
                | (StreamPage::NotResident, KernelPage::Absent)
                | (StreamPage::Unmapped, KernelPage::Unmapped)
        );
        if stream == StreamPage::Unmapped && kernel_page == KernelPage::Unmapped {
            continue;
        }
        let pages = (b - a) / page_size;
        out.checked_pages += pages;
        if agree {
            continue;
        }
        out.mismatched_pages += pages;
        match &mut last {
            Some(m) if m.end == a && m.stream == stream && m.kernel == kernel_page => m.end = b,
            _ => {
                if let Some(m) = last.take() {
                    push_first(&mut out.first_mismatches, m);
                }
                last = Some(Mismatch {
                    start: a,
                    end: b,
                    stream,
                    kernel: kernel_page,
                });
            }
        }
    }
    if let Some(m) = last {
        push_first(&mut out.first_mismatches, m);
    }
    out
}

fn push_first(first: &mut Vec<Mismatch>, m: Mismatch) {
    if first.len() < FIRST_MISMATCHES {
        first.push(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::MapKind;
    use crate::model::Mapping;

    const P: u64 = 4096;

    fn anon(tracked: bool) -> Mapping {
        Mapping {
            kind: MapKind::Anon,
            prot: "rw-".into(),
            path: None,
            tracked,
            made: Default::default(),
        }
    }

    #[test]
    fn every_kind_of_disagreement_is_counted_and_located() {
        let mut space = AddressSpace::default();
        space.mappings.insert(0..8 * P, anon(true));
        space.mappings.insert(8 * P..10 * P, anon(false));
        space.resident.insert(0..2 * P);
        space.resident.insert(4 * P..5 * P);
        let mut kernel = KernelView::default();
        kernel.anon.push(0..10 * P);
        kernel.anon.push(20 * P..22 * P);
        kernel.present.push(0..3 * P); // page 2: kernel present, stream not
        kernel.present.push(9 * P..10 * P); // untracked: skipped
        kernel.present.push(21 * P..22 * P); // a mapping the stream missed
        // page 4: stream resident, kernel absent
        let c = compare(&space, &kernel, P);
        assert_eq!(c.checked_pages, 8 + 2);
        assert_eq!(c.mismatched_pages, 1 + 1 + 2);
        let at: Vec<(u64, StreamPage, KernelPage)> = c
            .first_mismatches
            .iter()
            .map(|m| (m.start / P, m.stream, m.kernel))
            .collect();
        assert_eq!(
            at,
            vec![
                (2, StreamPage::NotResident, KernelPage::Present),
                (4, StreamPage::Resident, KernelPage::Absent),
                (20, StreamPage::Unmapped, KernelPage::Absent),
                (21, StreamPage::Unmapped, KernelPage::Present),
            ]
        );
    }

    #[test]
    fn agreement_is_zero_mismatches() {
        let mut space = AddressSpace::default();
        space.mappings.insert(0..4 * P, anon(true));
        space.resident.insert(P..3 * P);
        let mut kernel = KernelView::default();
        kernel.anon.push(0..4 * P);
        kernel.present.push(P..3 * P);
        let c = compare(&space, &kernel, P);
        assert_eq!((c.checked_pages, c.mismatched_pages), (4, 0));
    }
}
