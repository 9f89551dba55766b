//! A raw thread (LTP `clone10`, issue 25): made by `clone` with `CLONE_SETTLS` on a malloc'd
//! stack, it says it is done and leaves by the raw `exit` syscall, and its process frees the
//! stack as soon as it hears, before the thread has left. The thread's last call is the first
//! touch of its stack's next page: untraced the kernel serves it at once, and the process's
//! free comes long after. Under the default mode that touch waits for the lane, and the thread
//! once woken for a CPU; the free ran first in about one run in six (SIGSEGV). Runs are many
//! since a failure is one run in many.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mevi_actors::event::Event;

use crate::util::{Traced, run_within, scratch, workload};

/// One run's patience: a traced run takes about a tenth of a second.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// `mevi-actors run FLAGS -o STREAM -- program`, with the stream where `stream` says.
fn traced_run(
    flags: &[&str],
    stream: &std::path::Path,
    program: &std::path::Path,
) -> (i32, String, String) {
    let mut cmd = Command::new(crate::util::bin());
    cmd.arg("run")
        .args(flags)
        .arg("--no-summary")
        .arg("-o")
        .arg(stream)
        .arg("--")
        .arg(program);
    run_within(&mut cmd, RUN_TIMEOUT)
}

/// `runs` traced runs, a few at a time (the machine's CPUs busy, as in a test suite, which is
/// also where the race showed): each must end as the untraced run did. The failures, said.
fn runs_as_untraced(
    flags: &[&str],
    runs: usize,
    program: &std::path::Path,
    untraced: &str,
) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < runs {
                    let (status, stdout, stderr) =
                        traced_run(flags, std::path::Path::new("/dev/null"), program);
                    if status != 0 || stdout != untraced {
                        failures.lock().unwrap().push(format!(
                            "{flags:?}: status {status}, stdout {stdout:?}, stderr {stderr}"
                        ));
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

/// 200 runs under the default mode and 50 under `--verify --verify-every 20` all end as the
/// untraced one (exit 0, the same lines; a SIGSEGV of the test process is exit 2 and a line),
/// and the thread's touch of its stack's next page is one the lane resolved. The many runs are
/// made with `--no-stacks`: this build's unwinder (unoptimized) costs half a second of CPU per
/// run, and the race is the same without it (71d5a96 with `--no-stacks`: 11 of 200 runs).
#[test]
fn a_raw_thread_freed_as_it_leaves_runs_as_untraced() {
    let program = workload("u25_raw_thread");
    let untraced = Command::new(&program).output().unwrap();
    assert!(untraced.status.success(), "{untraced:?}");
    let untraced = String::from_utf8(untraced.stdout).unwrap();
    assert_eq!(untraced, "iteration 1: tls 100\npassed 1\n");

    // The path the race took: the raw thread's own first touch, through the lane.
    let stream = scratch("raw-thread");
    let (status, stdout, stderr) = traced_run(&[], &stream, &program);
    let t = Traced::read(&stream, status, stdout, stderr);
    assert_eq!(
        (t.status, t.stdout.as_str()),
        (0, untraced.as_str()),
        "{}",
        t.stderr
    );
    let raw_thread = t
        .lines
        .iter()
        .find_map(|l| match l.event {
            Event::Thread { child, .. } => Some(child),
            _ => None,
        })
        .expect("a thread line for the raw thread");
    let touched = t
        .lines
        .iter()
        .any(|l| matches!(l.event, Event::Resident { tid: Some(tid), .. } if tid == raw_thread));
    assert!(
        touched,
        "the raw thread's first touch is resolved by the lane"
    );

    let began = Instant::now();
    let mut failures = runs_as_untraced(&["--no-stacks"], 200, &program, &untraced);
    failures.extend(runs_as_untraced(
        &["--no-stacks", "--verify", "--verify-every", "20"],
        50,
        &program,
        &untraced,
    ));
    eprintln!("250 traced runs in {:?}", began.elapsed());
    assert!(
        failures.is_empty(),
        "{} of 250 runs did not end as untraced:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
