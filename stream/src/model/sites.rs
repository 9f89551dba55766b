//! Which call site (the `site` line of a `run --stacks` trace) made each range of every live
//! space, and which frames of a stack are the system's: the rules of docs/schema.md,
//! "replay --by-site", in one place for `replay --by-site` and the report's flame graph.

use std::collections::HashMap;
use std::ops::Range;

use rangemap::{RangeMap, RangeSet};

use crate::event::{Event, ForkKind, Frame, Line, MapCause, SiteId, SpaceId, Truncated};

use super::remap::Remap;
use super::{AddressSpace, Replay};

/// What bytes are counted under: a site, or none ("(no stack)": lines without a `site`).
pub type Key = Option<SiteId>;

/// A frame of libc, the dynamic loader, an allocator or a language runtime: not where the
/// program's own code asked for memory (docs/schema.md, "replay --by-site"; the report's flame graph folds them the same way).
pub fn is_system_frame(frame: &Frame) -> bool {
    const MODULES: &[&str] = &[
        "libc.so",
        "libc-",
        "ld-linux",
        "ld-musl",
        "libpthread",
        "libstdc++",
        "libgcc_s",
        "libjemalloc",
        "libtcmalloc",
        "libmimalloc",
    ];
    const FUNCTIONS: &[&str] = &[
        "malloc",
        "calloc",
        "realloc",
        "free",
        "__libc_",
        "_int_",
        "sysmalloc",
        "__GI_",
        "__mmap",
        "mmap",
        "__munmap",
        "munmap",
        "__brk",
        "brk",
        "__sbrk",
        "sbrk",
        "mremap",
        "madvise",
        "operator new",
        "__rust_",
        "__rdl_",
        "__rg_",
        "alloc::",
        "core::",
        "std::",
        "<alloc::",
        "<core::",
        "<std::",
        // node and V8: the C++ runtime, its builtins, and what its JIT map calls its stubs.
        "v8::",
        "node::",
        "Builtins_",
        "Builtin:",
        "Stub:",
        "BytecodeHandler:",
        "RegExp:",
    ];
    let module = frame
        .module
        .as_deref()
        .map(|path| path.rsplit('/').next().unwrap_or(path));
    // Rust's standard library, built into the program: its source says so, where a name cannot
    // (`<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem` is std's, `<MyType as
    // core::fmt::Display>::fmt` the program's).
    let rust_std = |file: &str| file.starts_with("/rustc/") && file.contains("/library/");
    // node's own JavaScript (its module loader): named `JS:~Module._load node:internal/...`
    // in its JIT map.
    let node_internal = |f: &str| f.starts_with("JS:") && f.contains(" node:");
    module.is_some_and(|name| MODULES.iter().any(|p| name.starts_with(p)))
        || frame
            .function
            .as_deref()
            .is_some_and(|f| FUNCTIONS.iter().any(|p| f.starts_with(p)) || node_internal(f))
        || frame.file.as_deref().is_some_and(rust_std)
}

/// A `site` line: its frames, innermost first, and why it stops short of the root, if it does.
#[derive(Clone, Debug, Default)]
pub struct Stack {
    pub frames: Vec<Frame>,
    pub truncated: Option<Truncated>,
}

impl Stack {
    /// The stack a `site` line describes, and its id.
    pub fn of_site_line(event: &Event) -> Option<(SiteId, Stack)> {
        let Event::Site {
            id,
            frames,
            truncated,
        } = event
        else {
            return None;
        };
        let stack = Stack {
            frames: frames.clone(),
            truncated: *truncated,
        };
        Some((*id, stack))
    }

    /// The frame that stands for the stack: the innermost user frame, or, when every frame is a
    /// system frame, the outermost one. None for a stack without frames.
    pub fn user_frame(&self) -> Option<usize> {
        let innermost_user = self.frames.iter().position(|f| !is_system_frame(f));
        innermost_user.or(self.frames.len().checked_sub(1))
    }
}

/// The sites of one live space's ranges.
#[derive(Clone, Debug, Default)]
struct SpaceSites {
    /// The site of each range mapped by a line that had one; a range not here has none.
    sites: RangeMap<u64, SiteId>,
    /// The ranges of the change being written, a `map` or `brk` line and the `split` lines that
    /// continue it: bytes a `split` line maps again (the heap pages present when the break
    /// moved) count once as mapped.
    change: RangeSet<u64>,
}

/// Which site mapped each range of every live space, by the rules of docs/schema.md,
/// "replay --by-site" (they follow the replay's own, as `model` applies them). Fed every line
/// beside the replay: `before` it applies the line, `after`.
#[derive(Debug, Default)]
pub struct Sites {
    spaces: HashMap<SpaceId, SpaceSites>,
    /// What a `redescribe` unmap took away, in which space: the `map` lines after it describe the
    /// same memory again and get it back.
    redescribed: Option<(SpaceId, RangeMap<u64, SiteId>)>,
    /// The space the line between `before` and `after` ends: its sites go with it.
    ending: Option<SpaceId>,
}

impl Sites {
    /// The site of each range of `space` that has one.
    pub fn of(&self, space: SpaceId) -> Option<&RangeMap<u64, SiteId>> {
        self.spaces.get(&space).map(|s| &s.sites)
    }

    /// `line` is about to be applied to `replay`; the space it ends, if it ends one (its sites
    /// are still here until `after`).
    pub fn before(&mut self, replay: &Replay, line: &Line) -> Option<SpaceId> {
        self.ending = ending_space(replay, &line.event);
        self.ending
    }

    /// `line` has been applied to `replay`: applies it here; the bytes it maps anew, and under
    /// what.
    pub fn after(&mut self, replay: &Replay, line: &Line) -> Option<(Key, u64)> {
        let mapped = self.apply(line, replay);
        if let Some(space) = self.ending.take() {
            self.spaces.remove(&space);
        }
        mapped
    }

    fn apply(&mut self, line: &Line, replay: &Replay) -> Option<(Key, u64)> {
        let event = &line.event;
        if inverted(event) {
            // Not applied by the replay either.
            return None;
        }
        if let Some((space, _)) = &self.redescribed
            && event.space() == Some(*space)
            && !matches!(event, Event::Map { cause: Some(_), .. })
        {
            self.redescribed = None;
        }
        match *event {
            Event::Exec { space, .. } => {
                self.spaces.insert(space, SpaceSites::default());
                None
            }
            Event::Fork {
                kind: ForkKind::Fork,
                space,
                child_space,
                ..
            } => {
                let sites = self
                    .spaces
                    .get(&space)
                    .map(|s| s.sites.clone())
                    .unwrap_or_default();
                let child = SpaceSites {
                    sites,
                    change: RangeSet::new(),
                };
                self.spaces.insert(child_space, child);
                None
            }
            Event::Map {
                space,
                start,
                end,
                cause,
                site,
                ..
            } => self.map(line.seq, space, start..end, cause, site, replay),
            Event::Unmap {
                space,
                start,
                end,
                cause,
                ..
            } => {
                let s = self.spaces.entry(space).or_default();
                if cause == Some(MapCause::Redescribe) {
                    self.redescribed = Some((space, within(&s.sites, &(start..end))));
                }
                set(&mut s.sites, start..end, None);
                None
            }
            Event::Remap {
                space,
                old_start,
                old_end,
                new_start,
                new_end,
                dontunmap,
                site,
                ..
            } => {
                let s = self.spaces.entry(space).or_default();
                s.remap(old_start..old_end, new_start..new_end, dontunmap, site)
            }
            Event::Brk {
                space,
                old,
                new,
                site,
                ..
            } => {
                let s = self.spaces.entry(space).or_default();
                if new > old {
                    set(&mut s.sites, old..new, site);
                    s.change = RangeSet::new();
                    s.change.insert(old..new);
                    Some((site, new - old))
                } else {
                    set(&mut s.sites, new..old, None);
                    None
                }
            }
            _ => None,
        }
    }

    fn map(
        &mut self,
        seq: u64,
        space: SpaceId,
        range: Range<u64>,
        cause: Option<MapCause>,
        site: Option<SiteId>,
        replay: &Replay,
    ) -> Option<(Key, u64)> {
        if range.is_empty() {
            return None;
        }
        // As the replay does: lines with a cause after a `redescribe` unmap bring back what it
        // took away.
        let redescribed = match cause {
            Some(_) => self
                .redescribed
                .take_if(|(s, _)| *s == space)
                .map(|(_, before)| before),
            None => None,
        };
        let now = replay.spaces.get(&space);
        let s = self.spaces.entry(space).or_default();
        match (cause, redescribed) {
            (_, Some(before)) => {
                s.describe_again(range, &before, seq, now);
                self.redescribed = Some((space, before));
                None
            }
            (Some(MapCause::Redescribe), None) => {
                let before = within(&s.sites, &range);
                s.describe_again(range, &before, seq, now);
                None
            }
            (Some(MapCause::Split), None) => {
                let fresh: u64 = s.change.gaps(&range).map(|r| r.end - r.start).sum();
                set(&mut s.sites, range.clone(), site);
                s.change.insert(range);
                Some((site, fresh))
            }
            (None, None) => {
                set(&mut s.sites, range.clone(), site);
                s.change = RangeSet::new();
                s.change.insert(range.clone());
                Some((site, range.end - range.start))
            }
        }
    }
}

impl SpaceSites {
    /// `range` described again (the replay has applied its line, `seq`): each part keeps the
    /// site `before` gave it where the replay keeps the maker of its mapping (the same memory);
    /// what the line made anew has none.
    fn describe_again(
        &mut self,
        range: Range<u64>,
        before: &RangeMap<u64, SiteId>,
        seq: u64,
        now: Option<&AddressSpace>,
    ) {
        set(&mut self.sites, range.clone(), None);
        let Some(now) = now else {
            return;
        };
        for (r, m) in now.mappings.overlapping(&range) {
            if m.made.seq == seq {
                continue;
            }
            let part = clip(r, &range);
            for (b, site) in before.overlapping(&part) {
                set(&mut self.sites, clip(b, &part), Some(*site));
            }
        }
    }

    /// A `remap`: the sites move with the range (the source of a `dontunmap` keeps its own); a
    /// grown tail is the remap's (else the moved range's end's), and is mapped anew.
    fn remap(
        &mut self,
        old: Range<u64>,
        new: Range<u64>,
        dontunmap: bool,
        site: Option<SiteId>,
    ) -> Option<(Key, u64)> {
        let remap = Remap::new(old.clone(), new.clone());
        let moved = remap.carried(&self.sites);
        // The site of the old range's last byte, for a grown tail that has none of its own.
        let at_end = old
            .end
            .checked_sub(1)
            .filter(|last| old.contains(last))
            .and_then(|last| self.sites.get(&last).copied());
        if !dontunmap {
            set(&mut self.sites, old, None);
        }
        set(&mut self.sites, new, None);
        for (r, s) in moved {
            set(&mut self.sites, r, Some(s));
        }
        let tail = remap.grown()?;
        let key = site.or(at_end);
        set(&mut self.sites, tail.clone(), key);
        Some((key, tail.end - tail.start))
    }
}

/// Gives `range` to `site`, or takes it from every site.
fn set(sites: &mut RangeMap<u64, SiteId>, range: Range<u64>, site: Option<SiteId>) {
    if range.is_empty() {
        return;
    }
    match site {
        Some(site) => sites.insert(range, site),
        None => sites.remove(range),
    }
}

pub fn clip(r: &Range<u64>, within: &Range<u64>) -> Range<u64> {
    r.start.max(within.start)..r.end.min(within.end)
}

/// The sites within `range`.
fn within(sites: &RangeMap<u64, SiteId>, range: &Range<u64>) -> RangeMap<u64, SiteId> {
    let mut part = RangeMap::new();
    for (r, s) in sites.overlapping(range) {
        set(&mut part, clip(r, range), Some(*s));
    }
    part
}

/// A line whose range ends before it starts: the replay does not apply it.
fn inverted(event: &Event) -> bool {
    match *event {
        Event::Map { start, end, .. }
        | Event::Unmap { start, end, .. }
        | Event::Discard { start, end, .. }
        | Event::Resident { start, end, .. } => end < start,
        Event::Remap {
            old_start,
            old_end,
            new_start,
            new_end,
            ..
        } => old_end < old_start || new_end < new_start,
        _ => false,
    }
}

/// The space whose last process this line takes away (its `exit`, or its `exec` of a new
/// program): the replay ends it.
fn ending_space(replay: &Replay, event: &Event) -> Option<SpaceId> {
    let pid = match event {
        Event::Exit { pid, .. } | Event::Exec { pid, .. } => *pid,
        _ => return None,
    };
    let space = *replay.process_space.get(&pid)?;
    let last = replay
        .process_space
        .values()
        .filter(|&&s| s == space)
        .count()
        == 1;
    (last && event.creates_space() != Some(space)).then_some(space)
}
