//! The meta's table of call stacks (the `site` lines of a `run --stacks` trace), for the page's
//! flame graph and the address-space view's hover (docs/report.md, "The meta"): each distinct
//! string and each distinct frame once, stacks as lists of frame indices.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::event::{Frame, SiteId, Truncated};
use crate::model::sites::is_system_frame;

/// `flags` of a frame: a system frame (libc, the loader, an allocator, a runtime: the rule of
/// `replay --by-site`), one inlined into the next, one in no file (`at` is an address).
pub const SYSTEM: u8 = 1;
pub const INLINED: u8 = 2;
pub const NO_MODULE: u8 = 4;

/// `[function, file, line, module, at, flags]`: strings as indices into `strings`; `at` is the
/// offset in `module`, or the address when there is no module.
pub type FrameRow = (
    Option<u32>,
    Option<u32>,
    Option<u32>,
    Option<u32>,
    Option<u64>,
    u8,
);

#[derive(Debug, Default, Serialize)]
pub struct Stacks {
    pub strings: Vec<String>,
    pub frames: Vec<FrameRow>,
    /// `[id, truncated, frames]`, frames innermost first, in the order of the site lines.
    pub sites: Vec<(SiteId, Option<Truncated>, Vec<u32>)>,
    #[serde(skip)]
    string_at: HashMap<String, u32>,
    #[serde(skip)]
    frame_at: HashMap<Frame, u32>,
    #[serde(skip)]
    ids: HashSet<SiteId>,
}

impl Stacks {
    /// A `site` line (a second line with the same id changes nothing: ids name one stack).
    pub fn add(&mut self, id: SiteId, frames: &[Frame], truncated: Option<Truncated>) {
        if !self.ids.insert(id) {
            return;
        }
        let frames = frames.iter().map(|f| self.frame(f)).collect();
        self.sites.push((id, truncated, frames));
    }

    fn frame(&mut self, frame: &Frame) -> u32 {
        if let Some(&i) = self.frame_at.get(frame) {
            return i;
        }
        let mut flags = 0;
        if is_system_frame(frame) {
            flags |= SYSTEM;
        }
        if frame.inlined {
            flags |= INLINED;
        }
        if frame.module.is_none() {
            flags |= NO_MODULE;
        }
        let row = (
            frame.function.as_deref().map(|s| self.string(s)),
            frame.file.as_deref().map(|s| self.string(s)),
            frame.line,
            frame.module.as_deref().map(|s| self.string(s)),
            frame.offset.or(frame.addr),
            flags,
        );
        let i = self.frames.len() as u32;
        self.frames.push(row);
        self.frame_at.insert(frame.clone(), i);
        i
    }

    fn string(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.string_at.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.to_string());
        self.string_at.insert(s.to_string(), i);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, module: &str, offset: u64) -> Frame {
        Frame {
            module: Some(module.into()),
            offset: Some(offset),
            function: Some(function.into()),
            file: Some("/src/a.c".into()),
            line: Some(12),
            ..Frame::default()
        }
    }

    #[test]
    fn strings_and_frames_are_kept_once_and_system_frames_are_flagged() {
        let mut stacks = Stacks::default();
        let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let mmap = frame("__mmap", libc, 0x100);
        let a = frame("alloc_a", "/w/prog", 0x10);
        let b = frame("alloc_b", "/w/prog", 0x20);
        let main = frame("main", "/w/prog", 0x30);
        let jit = Frame {
            addr: Some(0x7f00_0000_1000),
            ..Frame::default()
        };
        stacks.add(1, &[mmap.clone(), a, main.clone()], None);
        stacks.add(2, &[mmap, b, main, jit], Some(Truncated::Unwind));
        stacks.add(1, &[], None);
        assert_eq!(stacks.sites.len(), 2, "a site is described once");
        assert_eq!(stacks.sites[0].2, vec![0, 1, 2]);
        assert_eq!(stacks.sites[1].2, vec![0, 3, 2, 4]);
        assert_eq!(stacks.sites[1].1, Some(Truncated::Unwind));
        assert_eq!(stacks.frames.len(), 5);
        // "/src/a.c" once, libc, the program, four functions.
        assert_eq!(stacks.strings.len(), 7, "{:?}", stacks.strings);
        assert_eq!(stacks.frames[0].5, SYSTEM, "__mmap in libc is the system's");
        assert_eq!(stacks.frames[1].5, 0);
        assert_eq!(
            stacks.frames[4],
            (None, None, None, None, Some(0x7f00_0000_1000), NO_MODULE)
        );
        let json = serde_json::to_value(&stacks).unwrap();
        assert_eq!(json["sites"][1][1], "unwind");
        let function = json["frames"][1][0].as_u64().unwrap() as usize;
        assert_eq!(json["strings"][function], "alloc_a", "a string's index");
        assert!(json.get("ids").is_none());
    }
}
