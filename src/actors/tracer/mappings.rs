//! Mappings: how a new or re-read mapping is written to its space's lane, and how it is followed:
//! registered with the space's userfaultfd, or by scans of its page tables (scans.rs), with the
//! pages already present in it.

use std::ops::Range;
use std::time::Instant;

use super::Tracer;
use super::shadow::Marks;
use crate::actors::lane::PagesAtExit;
use crate::event::{Event, Follow, MapCause, MapKind, PageState, SiteId, SpaceId, WarningKind};
use crate::kernel::procfs::{self, MapsEntry};
use crate::test_hooks::{self, Fault};

/// Where a new mapping is, and who made it.
pub(super) struct MapAt {
    pub(super) pid: i32,
    pub(super) tid: i32,
    pub(super) space: SpaceId,
    pub(super) range: Range<u64>,
    /// Set when the line is not the syscall's own change (a range described again).
    pub(super) cause: Option<MapCause>,
    /// The call stack of the syscall whose change it is (`--stacks`).
    pub(super) site: Option<SiteId>,
}

/// A mapping to be written, as the syscall or `/proc/PID/maps` describes it.
pub(super) struct NewMapping {
    pub(super) prot: String,
    pub(super) kind: MapKind,
    pub(super) path: Option<String>,
    /// How it is followed: registered with the space's userfaultfd, or scanned; None if not.
    pub(super) follow: Option<Follow>,
}

impl Tracer {
    /// Sends `at.range` (all or part of a `/proc/PID/maps` entry) to its lane as that mapping,
    /// registered if it is private anonymous memory; whether it is tracked.
    pub(super) fn send_maps_entry(&mut self, at: MapAt, entry: &MapsEntry) -> bool {
        // The whole mapping, never a part: registering part of an unregistered mapping (another
        // thread's, not reported yet) would split it, and the program could then see EFAULT from
        // an mremap that spans the two halves.
        let follow = if entry.is_private_anon() {
            let grows_down = self.grows_down(at.space, entry);
            self.follow(
                at.space,
                at.pid,
                entry.start..entry.end,
                at.range.clone(),
                grows_down,
            )
        } else {
            None
        };
        let mapping = NewMapping {
            prot: entry.prot.rwx().to_string(),
            kind: stream_kind(entry),
            path: stream_path(entry),
            follow,
        };
        self.send_map(at, mapping)
    }

    /// Whether a mapping grows down: the main stack, or one the space knows was mapped
    /// `MAP_GROWSDOWN` (`/proc/PID/maps` does not say), by it or by a parent before a fork.
    pub(super) fn grows_down(&self, space: SpaceId, entry: &MapsEntry) -> bool {
        entry.path == "[stack]"
            || self
                .spaces
                .get(&space)
                .is_some_and(|s| s.shadow.overlaps(Marks::STACK, &(entry.start..entry.end)))
    }

    /// Follows a private anonymous mapping, of which a line describes `described`: by scans if
    /// it may get huge pages (scans.rs), or registered (whole) with the space's userfaultfd;
    /// None if it cannot be followed. Only what the line describes is followed by scans: the
    /// rest of the mapping may be another syscall's, not reported yet. `pid` is a process of
    /// the space, to read its mappings through.
    pub(super) fn follow(
        &mut self,
        space: SpaceId,
        pid: i32,
        mapping: Range<u64>,
        described: Range<u64>,
        grows_down: bool,
    ) -> Option<Follow> {
        // `--region`, `--min-size`: a mapping not selected is not followed at all. One the
        // stream has already, in part or whole (described again, grown in place, a fork child's
        // copy), is followed as it was: the choice is made once, as it is made.
        // A stack left out is still one: its growth is looked for (stack_growth.rs).
        if grows_down && let Some(s) = self.spaces.get_mut(&space) {
            s.shadow.add(mapping.clone(), Marks::STACK);
        }
        if self.config.selection.selects_ranges() {
            let selection = &self.config.selection;
            let s = self.spaces.get_mut(&space)?;
            let chosen = s.shadow.chosen_for(&mapping);
            if !chosen.unwrap_or_else(|| selection.selects_range(&mapping)) {
                s.shadow.leave_out(described);
                return None;
            }
        }
        if self.scans_follow(space, &mapping, grows_down)
            || self.merged_into_scanned(space, pid, &mapping)
            || self.merged_into_unselected(space, pid, &mapping)
        {
            let sample = self.config.sample;
            let s = self.spaces.get_mut(&space)?;
            s.shadow.add(described, Marks::SCANNED);
            self.control.hasten_tick(sample);
            Some(Follow::Scans)
        } else {
            self.register(space, mapping).then_some(Follow::Faults)
        }
    }

    /// Under `--region` or `--min-size`: whether the kernel merged a new range into a mapping
    /// beside it that is not followed (left out by the selection: `malloc(200000)` then
    /// `malloc(50000000)`). Registering the new part would split what the program sees as one
    /// mapping (and an `mremap` over both would then fail), so it is followed by scans, which
    /// split nothing: the buffers the option exists for are kept. The mappings are read only
    /// when one beside it was left out.
    fn merged_into_unselected(&self, space: SpaceId, pid: i32, range: &Range<u64>) -> bool {
        if !self.config.selection.selects_ranges() {
            return false;
        }
        let Some(s) = self.spaces.get(&space) else {
            return false;
        };
        let beside_left_out = s
            .shadow
            .contains(Marks::LEFT_OUT, range.start.saturating_sub(1))
            || s.shadow.contains(Marks::LEFT_OUT, range.end);
        if !beside_left_out {
            return false;
        }
        let Ok(maps) = procfs::read_maps(pid) else {
            return false;
        };
        maps.iter()
            .find(|m| m.start <= range.start && range.start < m.end)
            .is_some_and(|m| m.start < range.start || range.end < m.end)
    }

    /// Registers a range with the space's userfaultfd again after the syscall that moved or
    /// grew it (or that it was given back to the kernel for), unless it is followed by scans:
    /// then it is made sure not to be (a description while the syscall ran may have registered
    /// the mapping where it landed, before it was known to be followed by scans).
    pub(super) fn register_again(&self, space: SpaceId, range: Range<u64>) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        if !s.shadow.overlaps(Marks::SCANNED, &range) {
            // What the stream tracks there: a mapping not selected (`--region`, `--min-size`)
            // stays unregistered where it went.
            let tracked = s.shadow.within(Marks::TRACKED, &range);
            for part in tracked {
                self.register(space, part);
            }
        } else if let Some(uffd) = s.uffd()
            && let Err(e) = uffd.unregister(range.start, range.end)
        {
            tracing::debug!(space, ?range, "a range followed by scans: {e}");
        }
    }

    /// Registers a range with the space's userfaultfd; whether it is now followed. A space
    /// whose page tables cannot be read registers nothing: its pages present at each change
    /// would be unknown (its creation's warning said so).
    pub(super) fn register(&self, space: SpaceId, range: Range<u64>) -> bool {
        let Some(uffd) = self
            .spaces
            .get(&space)
            .filter(|s| s.pagemap.is_some())
            .and_then(|s| s.uffd())
        else {
            return false;
        };
        match uffd.register(range.start, range.end) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(space, ?range, "not tracked: {e}");
                false
            }
        }
    }

    /// Sends a new mapping to its lane; whether it is tracked. Its pages can already be present
    /// (`MAP_POPULATE`, locked memory, a space seen for the first time, or a touch by another
    /// thread before the range was registered): for a tracked range the lane reads which, in its
    /// own order (docs/ordering.md). A range whose pages cannot be read is unregistered and
    /// written untracked.
    pub(super) fn send_map(&mut self, at: MapAt, mapping: NewMapping) -> bool {
        let MapAt {
            pid,
            tid,
            space: space_id,
            range,
            cause,
            site,
        } = at;
        if !self.spaces.contains_key(&space_id) {
            tracing::debug!(space_id, "a mapping for a space that is gone");
            return false;
        }
        let at_exit = mapping
            .follow
            .and_then(|f| self.present_in_followed(f, pid, tid, space_id, range.clone()));
        let tracked = at_exit.is_some();
        let present = at_exit.as_ref().map_or(&[][..], |a| &a.present[..]);
        let Some(space) = self.spaces.get_mut(&space_id) else {
            return false;
        };
        if cause.is_none() {
            // A new mapping: no advice or guard of what was there before.
            space
                .shadow
                .remove(range.clone(), Marks::HUGE_ADVISED | Marks::MAY_REFUSE);
        }
        space.shadow.described(range.clone(), tracked, present);
        let writable = tracked && mapping.prot.contains('w');
        let described = range.clone();
        let event = Event::Map {
            pid,
            tid,
            space: space_id,
            start: range.start,
            end: range.end,
            prot: mapping.prot,
            kind: mapping.kind,
            path: mapping.path,
            tracked,
            state: tracked.then_some(PageState::NotResident),
            follow: mapping.follow.filter(|_| tracked).unwrap_or_default(),
            cause,
            // The program's own change has the syscall's stack; a range described again, none.
            site,
        };
        space.lane.mapped(event, at_exit);
        self.note_protection(space_id, described, writable);
        tracked
    }

    /// The pages present now in a range just followed. A registered one whose pages cannot be
    /// read is unregistered again; a scanned one's are what the stream has there from now on
    /// (scans.rs), and one whose pages cannot be read is followed no more.
    pub(super) fn present_in_followed(
        &mut self,
        follow: Follow,
        pid: i32,
        tid: i32,
        space: SpaceId,
        range: Range<u64>,
    ) -> Option<PagesAtExit> {
        match follow {
            Follow::Faults => self.present_or_unregister(pid, tid, space, range),
            Follow::Scans => {
                let pages = self.present_at(pid, tid, space, range.clone());
                if let Some(s) = self.spaces.get_mut(&space) {
                    match &pages {
                        Some(pages) => s.shadow.scanned_as(range, &pages.present),
                        None => s.shadow.forget_scanned(range),
                    }
                }
                pages
            }
        }
    }

    /// The pages of a registered range present now; if they cannot be read, the range is
    /// unregistered again, so that nothing about it is claimed.
    pub(super) fn present_or_unregister(
        &self,
        pid: i32,
        tid: i32,
        space: SpaceId,
        range: Range<u64>,
    ) -> Option<PagesAtExit> {
        let pages = self.present_at(pid, tid, space, range.clone());
        if pages.is_none()
            && let Some(uffd) = self.spaces.get(&space).and_then(|s| s.uffd())
            && let Err(e) = uffd.unregister(range.start, range.end)
        {
            tracing::warn!(
                space,
                ?range,
                "unregistering a range whose pages are unknown: {e}"
            );
        }
        pages
    }

    /// The pages of a range present now, read while `tid`, the thread that changed the range,
    /// is stopped. A read that fails is tried once more; then the range's pages are unknown,
    /// which a `warning` line says (never "none present"). None without a word for a space
    /// whose pagemap could not be opened (its creation's warning said so), or that is gone.
    pub(super) fn present_at(
        &self,
        pid: i32,
        tid: i32,
        space: SpaceId,
        range: Range<u64>,
    ) -> Option<PagesAtExit> {
        let pagemap = self.spaces.get(&space)?.pagemap.as_ref()?;
        let read = || -> std::io::Result<PagesAtExit> {
            let read_at = Instant::now();
            if test_hooks::fails(Fault::Pagemap, Some(space)) {
                return Err(std::io::Error::other("injected by MEVI_TEST_FAULT"));
            }
            let present = pagemap.populated_runs(range.clone())?;
            Ok(PagesAtExit {
                read_at,
                present,
                stopped: Some(tid),
            })
        };
        match read().or_else(|_| read()) {
            Ok(pages) => Some(pages),
            // The address space is gone (its last thread died meanwhile): nothing of it will be
            // checked or shown any more, and its lines are about to end.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                tracing::debug!(space, "page tables of a space that is gone");
                None
            }
            Err(e) => {
                self.warn(
                    Some(pid),
                    Some(space),
                    WarningKind::PagesUnknown,
                    format!(
                        "the page tables of {:#x}-{:#x} could not be read ({e}): its pages are \
                         unknown",
                        range.start, range.end
                    ),
                );
                None
            }
        }
    }
}

/// How the stream names a `/proc/PID/maps` entry.
pub(super) fn stream_kind(entry: &MapsEntry) -> MapKind {
    match entry.path.as_encoded_bytes() {
        b"[heap]" => MapKind::Heap,
        b"[stack]" => MapKind::Stack,
        p if p.starts_with(b"/anon_hugepage") => MapKind::Hugetlb,
        _ if entry.is_shared_memory() => MapKind::Shmem,
        b"" => MapKind::Anon,
        // Named anonymous memory (prctl PR_SET_VMA_ANON_NAME): `[anon:NAME]`.
        p if p.starts_with(b"[anon:") => MapKind::Anon,
        _ => MapKind::File,
    }
}

/// The path the stream reports for a `/proc/PID/maps` entry, if it has one. The stream is
/// UTF-8: a name that is not is written lossily (U+FFFD for each bad sequence), here only.
pub(super) fn stream_path(entry: &MapsEntry) -> Option<String> {
    (!entry.path.is_empty() && !matches!(entry.path.as_encoded_bytes(), b"[heap]" | b"[stack]"))
        .then(|| entry.path.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_entries_get_the_streams_kind_and_path() {
        let text = "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n\
                    7f0000000000-7f0000001000 r-xp 00001000 fd:01 1234   /usr/lib/libc.so.6\n\
                    7f0000002000-7f0000003000 rw-s 00000000 00:01 5      /dev/zero (deleted)\n\
                    7f0000004000-7f0000005000 ---p 00000000 00:00 0 \n\
                    7f0000006000-7f0000007000 rw-s 00000000 00:01 9      /memfd:pool (deleted)\n\
                    7f0000008000-7f0000009000 rw-p 00000000 00:00 0      [anon:arena]\n";
        let m = crate::kernel::procfs::parse_maps(text.as_bytes());
        let kinds: Vec<MapKind> = m.iter().map(stream_kind).collect();
        assert_eq!(
            kinds,
            vec![
                MapKind::Heap,
                MapKind::File,
                MapKind::Shmem,
                MapKind::Anon,
                MapKind::Shmem,
                MapKind::Anon
            ]
        );
        assert_eq!(stream_path(&m[0]), None);
        assert_eq!(stream_path(&m[1]).as_deref(), Some("/usr/lib/libc.so.6"));
        assert_eq!(stream_path(&m[5]).as_deref(), Some("[anon:arena]"));
    }
}
