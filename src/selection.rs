//! What `run` is asked to follow: `--only` (programs), `--threads` (threads' first touches),
//! `--region` and `--min-size` (mappings). Decided where the thing is made, so that what is not
//! selected costs as little as it can: a program not selected gets no userfaultfd and no scans;
//! a mapping not selected is not registered nor read.

use std::ops::Range;

use crate::kernel::procfs;

#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// `--only GLOB`: the programs whose memory is followed (argv[0], its file name, or the
    /// process's `comm`); empty: every program's.
    pub only: Vec<glob::Pattern>,
    /// `--threads GLOB`: the threads whose `resident` lines are written (by their name); empty:
    /// every thread's.
    pub threads: Vec<glob::Pattern>,
    /// `--region START-END`: only private anonymous mappings overlapping one of these are
    /// followed; empty: wherever they are.
    pub regions: Vec<Range<u64>>,
    /// `--min-size SIZE`: only mappings at least this long, as made, are followed.
    pub min_size: u64,
}

impl Selection {
    /// Whether a private anonymous mapping made as `range` (an `mmap`'s, one `brk`'s growth, a
    /// snapshot's mapping) is followed.
    pub fn selects_range(&self, range: &Range<u64>) -> bool {
        let in_region = self.regions.is_empty()
            || self
                .regions
                .iter()
                .any(|r| r.start < range.end && range.start < r.end);
        in_region && range.end - range.start >= self.min_size
    }

    /// Whether some mapping may be left out (`--region`, `--min-size`).
    pub fn selects_ranges(&self) -> bool {
        !self.regions.is_empty() || self.min_size > 0
    }
}

/// `--threads`: whether a thread is selected, by its name as it touches (read while it waits in
/// its fault: it may rename itself at any time, and end soon after).
#[derive(Debug)]
pub struct ThreadNames {
    patterns: Vec<glob::Pattern>,
}

impl ThreadNames {
    pub fn new(patterns: Vec<glob::Pattern>) -> Self {
        Self { patterns }
    }

    /// Whether the thread `tid`, waiting in a fault, has a selected name now: a read of its
    /// `comm` at each fault (a few microseconds), the cost of `--threads`. A thread whose name
    /// cannot be read (gone) is written: nothing is left out that was not chosen to be.
    pub fn selects_now(&self, tid: i32) -> bool {
        procfs::comm(tid, tid).is_none_or(|name| self.selects(&name))
    }

    /// Whether a thread named `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| p.matches(name))
    }
}

/// `--region START-END`: two addresses, hexadecimal with `0x` or decimal, START below END.
pub fn parse_region(text: &str) -> Result<Range<u64>, String> {
    let (start, end) = text
        .split_once('-')
        .ok_or("not START-END (two addresses, such as 0x7f0000000000-0x7f0010000000)")?;
    let address = |a: &str| {
        let a = a.trim();
        match a.strip_prefix("0x").or_else(|| a.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => a.parse(),
        }
        .map_err(|e| format!("{a:?} is not an address: {e}"))
    };
    let (start, end) = (address(start)?, address(end)?);
    if start >= end {
        return Err(format!("{start:#x} is not below {end:#x}"));
    }
    Ok(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_hex_or_decimal_and_start_below_end() {
        assert_eq!(parse_region("0x1000-0x3000"), Ok(0x1000..0x3000));
        assert_eq!(parse_region("4096-8192"), Ok(4096..8192));
        assert!(parse_region("0x3000-0x1000").is_err());
        assert!(parse_region("0x1000").is_err());
        assert!(parse_region("0xzz-0x10").is_err());
    }

    #[test]
    fn a_mapping_is_selected_by_overlap_and_size() {
        let s = Selection {
            regions: std::iter::once(0x10000..0x20000).collect(),
            min_size: 0x2000,
            ..Selection::default()
        };
        assert!(s.selects_range(&(0xf000..0x11000)));
        assert!(
            !s.selects_range(&(0x20000..0x30000)),
            "touching is not overlapping"
        );
        assert!(!s.selects_range(&(0x10000..0x11000)), "too small");
        assert!(Selection::default().selects_range(&(0..0x1000)));
    }
}
