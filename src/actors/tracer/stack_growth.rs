//! Where no fault goes through us (`--faults scan`, or a stack `--region` or `--min-size` left
//! out): how far each stack of a space has grown, found by asking the kernel for the mapping
//! just below it (kernel/vmas.rs).

use std::ops::Range;

use super::Tracer;
use super::shadow::Marks;
use crate::event::{Event, Follow, MapKind, PageState, SpaceId};

impl Tracer {
    /// For a space followed by scans, or a stack the selection left out (written untracked,
    /// not followed): writes how far each stack of the space has grown since it was
    /// last looked at (a `map` line of the grown part, not resident, as the lane writes a growth
    /// under faults), and follows the grown part by scans from then on. The mapping that holds
    /// the page just below a stack is asked for: if it also holds the stack's first page, the
    /// stack grew down to its start; if it ends there, another mapping lies below. Looked for
    /// before every scan of the space, so the growth's line comes before any page in it, and
    /// before a check (the stream must have the grown part, even with no page left in it).
    pub(super) fn find_stack_growth(&mut self, pid: i32, space: SpaceId) {
        let Some(s) = self.spaces.get_mut(&space) else {
            return;
        };
        // An attached space's growth is in its sampled layout (attach.rs).
        let Some(vmas) = s.vmas.as_ref().filter(|_| s.sampled().is_none()) else {
            return;
        };
        let stacks: Vec<Range<u64>> = s.shadow.ranges(Marks::STACK).into_iter().collect();
        for (i, stack) in stacks.iter().enumerate() {
            // Under faults, a stack followed grows through the lane; one left out, here.
            let left_out = s.shadow.contains(Marks::LEFT_OUT, stack.start);
            if !s.scans_only() && !left_out {
                continue;
            }
            let Some(below) = stack.start.checked_sub(1) else {
                continue;
            };
            let vma = match vmas.covering(below) {
                Ok(Some(vma)) if vma.range.end > stack.start => vma,
                Ok(_) => continue,
                Err(e) => {
                    tracing::debug!(space, ?stack, "looking for a stack's growth: {e}");
                    continue;
                }
            };
            // Never into another stack below (two that meet are one mapping to the kernel).
            let floor = i.checked_sub(1).map_or(0, |j| stacks[j].end);
            let grown = vma.range.start.max(floor)..stack.start;
            if grown.is_empty() {
                continue;
            }
            match left_out {
                true => {
                    s.shadow.add(grown.clone(), Marks::STACK);
                    s.shadow.leave_out(grown.clone());
                }
                false => {
                    s.shadow.add(grown.clone(), Marks::STACK | Marks::SCANNED);
                    s.shadow.described(grown.clone(), true, &[]);
                    if s.records_at_stops() && vma.prot.rwx().contains('w') {
                        s.shadow.add(grown.clone(), Marks::WRITABLE);
                    }
                }
            }
            s.lane.observed(Event::Map {
                pid,
                tid: pid,
                space,
                start: grown.start,
                end: grown.end,
                prot: vma.prot.rwx().to_string(),
                kind: MapKind::Stack,
                path: None,
                tracked: !left_out,
                state: (!left_out).then_some(PageState::NotResident),
                follow: if left_out {
                    Follow::default()
                } else {
                    Follow::Scans
                },
                site: None,
                cause: None,
            });
        }
    }
}
