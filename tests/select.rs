//! `run --only GLOB`: the pages of the programs selected are followed; the others' processes,
//! execs, exits and mappings are in the stream, with no page.

use std::ffi::OsString;
use std::time::Duration;

use mevi_actors::event::Event;

use crate::util::{run_bounded, trace_within, workload};

const HANG: Duration = Duration::from_secs(120);

/// A shell runs two programs, one selected: the shell and the other are written (their `exec`
/// lines say `"followed":false`) with no page, the selected one page by page, as its own page
/// tables say; `--verify` checks it alone and agrees; the summary says how many were followed.
#[test]
fn only_the_selected_program_has_its_pages_followed() {
    let one_thread = workload("one_thread");
    let threads_region = workload("threads_region");
    let script = format!(
        "{} > /dev/null; {} 2 > /dev/null",
        one_thread.display(),
        threads_region.display()
    );
    let program: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
    for how in ["uffd", "scan"] {
        let flags = ["--faults", how, "--only", "one_thread", "--verify"];
        let t = trace_within(&flags, &program, HANG);
        assert_eq!(t.status, 0, "{how}: {}", t.evidence());
        let execs: Vec<(String, bool, u64)> = t
            .lines
            .iter()
            .filter_map(|l| match &l.event {
                Event::Exec {
                    path,
                    followed,
                    space,
                    ..
                } => Some((
                    path.rsplit('/').next().unwrap().to_string(),
                    *followed,
                    *space,
                )),
                _ => None,
            })
            .collect();
        let followed: Vec<&str> = execs.iter().filter(|e| e.1).map(|e| e.0.as_str()).collect();
        assert_eq!(followed, ["one_thread"], "{how}: {execs:?}");
        assert_eq!(execs.len(), 3, "{how}: {execs:?}");
        // Pages only in the selected program's space, and every range elsewhere untracked.
        let selected = execs.iter().find(|e| e.1).unwrap().2;
        for l in &t.lines {
            match &l.event {
                Event::Resident { space, .. } => assert_eq!(*space, selected, "{how}: {l:?}"),
                Event::Map {
                    space,
                    tracked: true,
                    ..
                } => assert_eq!(*space, selected, "{how}: {l:?}"),
                _ => {}
            }
        }
        let (_, totals) = t.summary();
        assert_eq!(totals.not_selected_spaces, Some(2), "{how}");
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{how}: {}", t.evidence());
        assert!(v.points > 0, "{how}: nothing was checked");
        assert!(
            t.stderr.contains("1 of 3 address space(s) followed"),
            "{}",
            t.stderr
        );
    }
}

/// A pattern that is not one: a usage error.
#[test]
fn only_with_a_bad_pattern_is_a_usage_error() {
    let (status, stdout, stderr) =
        run_bounded(std::process::Command::new(crate::util::bin()).args([
            "run",
            "--only",
            "[",
            "--",
            "/bin/true",
        ]));
    assert_eq!(status, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("not a shell pattern"), "{stderr}");
}
