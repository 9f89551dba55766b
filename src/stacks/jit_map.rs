//! Names for code in no file: the map a JIT writes of the code it made, one line per function,
//! `START SIZE NAME` (hex start and size): node's `--perf-basic-prof` (with
//! `--interpreted-frames-native-stack` for functions it has not compiled yet), a JVM's perf map
//! agent, python 3.12's `-X perf`. The JIT appends as it compiles; a range given again later is
//! code made anew there, and the later line wins. The file is read from where the last reading
//! stopped, each time a new site needs a name from it.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Arc;

/// One process's map, as read so far.
#[derive(Default)]
struct JitMap {
    /// By start: the end and the name.
    code: BTreeMap<u64, (u64, String)>,
    /// Bytes read, up to the last whole line.
    read: u64,
}

impl JitMap {
    /// Reads what the JIT appended since the last reading.
    fn read_more(&mut self, file: &File) {
        let Ok(size) = file.metadata().map(|m| m.len()) else {
            return;
        };
        if size <= self.read {
            return;
        }
        let mut bytes = vec![0; (size - self.read) as usize];
        let Ok(n) = file.read_at(&mut bytes, self.read) else {
            return;
        };
        bytes.truncate(n);
        // A line the JIT is still writing is read next time.
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in String::from_utf8_lossy(&bytes[..whole]).lines() {
            if let Some((start, end, name)) = parse(line) {
                self.code.insert(start, (end, name.to_string()));
            }
        }
        self.read += whole as u64;
    }

    fn name(&self, addr: u64) -> Option<&str> {
        let (_, (end, name)) = self.code.range(..=addr).next_back()?;
        (addr < *end).then_some(name.as_str())
    }
}

/// `7f3a1c0043c0 1a8 JS:*allocate /app/main.js:12:3`.
fn parse(line: &str) -> Option<(u64, u64, &str)> {
    let mut parts = line.splitn(3, ' ');
    let start = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
    let size = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
    let name = parts.next()?.trim();
    (!name.is_empty()).then_some((start, start.checked_add(size)?, name))
}

/// Every process's map met so far, by file (device and inode: the same file, however opened).
#[derive(Default)]
pub struct JitMaps {
    maps: HashMap<(u64, u64), JitMap>,
}

impl JitMaps {
    /// The name `file` gives the code at `addr`, reading what was appended to it first.
    pub fn name(&mut self, file: &Arc<File>, addr: u64) -> Option<String> {
        let meta = file.metadata().ok()?;
        let map = self.maps.entry((meta.dev(), meta.ino())).or_default();
        if map.name(addr).is_none() {
            map.read_more(file);
        }
        map.name(addr).map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_names_its_ranges_the_latest_line_first() {
        let mut map = JitMap::default();
        let path = std::env::temp_dir().join(format!("jit-map-test-{}", std::process::id()));
        std::fs::write(
            &path,
            "1000 100 JS:*old\n2000 10 Builtin:X\n1000 80 JS:*new\n3000 1",
        )
        .unwrap();
        let file = File::open(&path).unwrap();
        map.read_more(&file);
        assert_eq!(map.name(0x1010), Some("JS:*new"));
        assert_eq!(map.name(0x1090), None, "past the newer, shorter range");
        assert_eq!(map.name(0x2005), Some("Builtin:X"));
        // The line being written is not read yet; once whole, it is.
        assert_eq!(map.name(0x3000), None);
        std::fs::write(
            &path,
            "1000 100 JS:*old\n2000 10 Builtin:X\n1000 80 JS:*new\n3000 10 JS:late\n",
        )
        .unwrap();
        map.read_more(&file);
        assert_eq!(map.name(0x3004), Some("JS:late"));
        std::fs::remove_file(path).ok();
    }
}
