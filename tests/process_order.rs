//! Process order across processes (docs/schema.md, "Process order"): real process trees whose
//! children race their parents to the stream.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use mevi_actors::event::Event;

use crate::util::{Traced, scratch, trace};

/// Asserts, on the stream of a run that ended normally:
/// - no line about a pid comes before the line announcing it (the first `exec`, or the `fork`
///   naming it `child`), and none comes after its `exit`;
/// - every process that was announced has its `exit`;
/// - every summary row has the process's own argv (its last `exec`'s, or its creator's at the
///   `fork` if it never exec'd) and the status or signal of its `exit`;
/// - no `warning`, and the replay finds no problem.
///
/// Returns each pid's own argv, for the caller's own checks.
fn assert_process_order(t: &Traced) -> HashMap<i32, Vec<String>> {
    assert_eq!(t.status, 0, "the run failed:\n{}", t.stderr);
    assert!(
        t.replay.warnings.is_empty(),
        "warnings: {:#?}",
        t.replay.warnings
    );
    assert!(t.replay.problems.is_empty(), "{:#?}", t.replay.problems);
    let mut live: HashSet<i32> = HashSet::new();
    let mut exited: HashMap<i32, (Option<i32>, Option<String>)> = HashMap::new();
    let mut argv: HashMap<i32, Vec<String>> = HashMap::new();
    let mut first_exec = true;
    let mut summary = None;
    for line in &t.lines {
        let event = &line.event;
        if let Event::Exec { pid, .. } = event
            && first_exec
        {
            first_exec = false;
            live.insert(*pid);
        }
        if let Some(pid) = event.pid() {
            assert!(
                live.contains(&pid),
                "seq {}: a line about pid {pid} {}: {event:?}",
                line.seq,
                if exited.contains_key(&pid) {
                    "after its exit"
                } else {
                    "before its announcement"
                }
            );
        }
        match event {
            Event::Exec { pid, argv: a, .. } => {
                argv.insert(*pid, a.clone());
            }
            Event::Fork { pid, child, .. } => {
                let creator = argv.get(pid).cloned().unwrap_or_default();
                argv.insert(*child, creator);
                live.insert(*child);
                exited.remove(child);
            }
            Event::Exit {
                pid,
                status,
                signal,
                ..
            } => {
                live.remove(pid);
                exited.insert(*pid, (*status, signal.clone()));
            }
            Event::Summary { processes, .. } => summary = Some(processes.clone()),
            _ => {}
        }
    }
    assert!(live.is_empty(), "processes with no exit line: {live:?}");
    let rows = summary.expect("a summary line");
    assert_eq!(
        rows.iter().map(|r| r.pid).collect::<HashSet<_>>(),
        argv.keys().copied().collect::<HashSet<_>>(),
        "one summary row per process"
    );
    for row in &rows {
        assert_eq!(row.argv, argv[&row.pid], "the argv of pid {}", row.pid);
        let end = (row.status, row.signal.clone());
        assert_eq!(end, exited[&row.pid], "the end of pid {}", row.pid);
        assert!(
            row.status.is_some() || row.signal.is_some(),
            "pid {} has no status",
            row.pid
        );
    }
    argv
}

/// Whether some process's own argv starts with a program named `name` (any directory).
fn ran(argv: &HashMap<i32, Vec<String>>, name: &str) -> bool {
    argv.values().any(|a| {
        a.first()
            .and_then(|p| Path::new(p).file_name())
            .is_some_and(|f| f == name)
    })
}

#[test]
fn a_shell_loop_of_command_substitutions_keeps_process_order() {
    let t = trace(
        &[],
        &[
            "bash",
            "-c",
            "for i in $(seq 20); do x=$(readlink /nonexist); /bin/true; done",
        ],
    );
    let argv = assert_process_order(&t);
    // bash, seq, 20 readlinks, 20 trues, and the subshells of $(...).
    assert!(argv.len() >= 42, "{} processes", argv.len());
    assert!(ran(&argv, "seq") && ran(&argv, "readlink") && ran(&argv, "true"));
}

#[test]
fn gcc_compiling_one_file_keeps_process_order_and_names_cc1() {
    let dir = scratch("gcc");
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("small.c");
    std::fs::write(
        &source,
        "int square(int x) { return x * x; }\nint main(void) { return square(3) - 9; }\n",
    )
    .unwrap();
    let object = dir.join("small.o");
    let t = trace(
        &[],
        &[
            "gcc".as_ref(),
            "-O2".as_ref(),
            "-c".as_ref(),
            source.as_os_str(),
            "-o".as_ref(),
            object.as_os_str(),
        ],
    );
    let argv = assert_process_order(&t);
    assert!(object.exists(), "gcc made no object:\n{}", t.stderr);
    // The compiler proper and the assembler each under their own name, not gcc's.
    assert!(ran(&argv, "cc1"), "{argv:#?}");
    assert!(ran(&argv, "as"), "{argv:#?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn make_j2_of_four_files_keeps_process_order() {
    if !crate::util::installed("make") {
        return;
    }
    let dir = scratch("make");
    std::fs::create_dir_all(&dir).unwrap();
    let mut makefile = String::from("prog: main.o one.o two.o three.o\n\tcc -o $@ $^\n");
    for (name, body) in [
        ("one", "int one(void) { return 1; }"),
        ("two", "int two(void) { return 2; }"),
        ("three", "int three(void) { return 3; }"),
        (
            "main",
            "int one(void); int two(void); int three(void);\n\
             int main(void) { return one() + two() + three() - 6; }",
        ),
    ] {
        std::fs::write(dir.join(format!("{name}.c")), format!("{body}\n")).unwrap();
        makefile.push_str(&format!("{name}.o: {name}.c\n\tcc -O2 -c -o $@ $<\n"));
    }
    std::fs::write(dir.join("Makefile"), makefile).unwrap();
    let t = trace(
        &[],
        &[
            "make".as_ref(),
            "-j2".as_ref(),
            "-C".as_ref(),
            dir.as_os_str(),
        ],
    );
    let argv = assert_process_order(&t);
    assert!(
        dir.join("prog").exists(),
        "make built nothing:\n{}",
        t.stderr
    );
    assert!(
        ran(&argv, "make") && ran(&argv, "cc1") && ran(&argv, "ld"),
        "{argv:#?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
