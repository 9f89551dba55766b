//! Names that are bytes (issue 26): a mapped file whose name is not UTF-8 leaves /proc/PID/maps
//! readable, its space followed exactly, and its map lines naming it as the stream writes such
//! a name: each byte that is not UTF-8 as U+FFFD.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use mevi_actors::event::{Event, MapKind};

use crate::util::{PAGE, scratch, trace, workload};

/// A file named in Latin-1 ("caf\xe9.bin") mapped shared and read beside anonymous memory that a
/// process and its fork child write: in both modes both spaces agree with their own page tables
/// (truth lines and `--verify`), no warning is written, and every map line of the file, the
/// parent's from its mmap and the child's from the maps read at its fork, names it exactly.
#[test]
fn a_file_named_in_latin_1_is_mapped_and_followed_exactly() {
    let dir = scratch("latin-1");
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = OsString::from(&dir);
    file.push(OsStr::from_bytes(b"/caf\xe9.bin"));
    let written = format!(
        "{}/caf\u{fffd}.bin",
        dir.to_str().expect("a UTF-8 scratch dir")
    );
    let program = workload("u26_latin1_map");
    for mode in ["uffd", "scan", "records"] {
        let t = trace(
            &["--faults", mode, "--verify"],
            &[program.as_os_str(), file.as_os_str()],
        );
        assert_eq!(t.status, 0, "{mode}: {}", t.stderr);
        t.assert_matches_kernel();
        let warnings = t.warnings();
        assert!(warnings.is_empty(), "{mode}: {warnings:?}");
        let v = t.verify_totals();
        assert!(v.checked_pages >= 64, "{mode}: {v:?}");
        assert_eq!(v.mismatched_pages, 0, "{mode}: {v:?}");

        let of_the_file: Vec<_> = t
            .lines
            .iter()
            .filter_map(|l| match &l.event {
                Event::Map {
                    space,
                    start,
                    end,
                    prot,
                    kind,
                    path: Some(path),
                    tracked,
                    ..
                } if path.contains("/caf") => {
                    Some((*space, end - start, prot, *kind, path, *tracked))
                }
                _ => None,
            })
            .collect();
        for &(_, len, prot, kind, path, tracked) in &of_the_file {
            assert_eq!(
                (len, prot.as_str(), kind, path, tracked),
                (4 * PAGE, "r--", MapKind::File, &written, false),
                "{mode}"
            );
        }
        let mut spaces: Vec<_> = of_the_file.iter().map(|m| m.0).collect();
        spaces.dedup();
        assert_eq!(
            spaces.len(),
            2,
            "{mode}: the file's map lines {of_the_file:?}"
        );
    }
    std::fs::remove_file(&file).unwrap();
}
