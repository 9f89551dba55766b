//! The closing table on stderr, for a person: one row per process, by its own last argv.

use std::fmt::Write as _;

use humansize::{BINARY, format_size};

use crate::event::{ProcessSummary, RunTotals};
use crate::model::processes::{argv_line, pressure_lines};

/// The argv column shows at most this many characters: longer ones lose their middle.
const ARGV_CHARS: usize = 80;

/// The table's rows unless `--summary all`: the largest processes. A run through a shell shim or
/// a build makes tens or thousands of short processes that would bury them.
pub const SUMMARY_ROWS: usize = 10;

/// The closing table. Without first touches followed (`--no-faults`), the figures they give are
/// "not measured", never 0.
/// Under `--faults scan` (`totals.unseen` set), first touches are not counted one by one: the
/// pages the scans found and the most they can have missed are said instead; under `records`
/// (`records`), both: the first touches the kernel recorded, and what the scans found.
/// The rows are the processes largest first (by peak resident memory, in exit order among
/// equals), at most `rows` of them (None: every one), and a line for the rest.
pub fn human_summary(
    processes: &[ProcessSummary],
    totals: &RunTotals,
    faults: bool,
    records: bool,
    rows: Option<usize>,
) -> String {
    let mut s = String::new();
    let measured = |figure: String| if faults { figure } else { "-".to_string() };
    // Under scans no first touch is seen one by one; under fault records each recorded one is.
    let touches_seen = totals.unseen.is_none() || records;
    let touches_measured = |figure: String| {
        if faults && touches_seen {
            figure
        } else {
            "-".to_string()
        }
    };
    // What "resident" means comes first: it is not the RSS `time -v` or `ps` give.
    let touches = if faults {
        let found = match &totals.unseen {
            None => format!("{} first touches", totals.faults),
            Some(u) => format!(
                "{}{} found {} faults' pages (a huge page as one); at most {} pages came and \
                 went between scans unseen ({} minor faults by the kernel's count, file and \
                 copy-on-write ones included)",
                if records {
                    format!(
                        "{} first touches named by the kernel's records of them; ",
                        totals.faults
                    )
                } else {
                    String::new()
                },
                // Under records, pages made and dropped between two scans are found by their
                // records alone.
                if records {
                    "scans and records"
                } else {
                    "scans"
                },
                u.found,
                u.at_most,
                u.faults
            ),
        };
        format!(
            "{found}; resident (private anonymous memory, followed page by page): \
             peak {} in one space (a page shared since a fork counted in each process, as \
             RssAnon does), {} in the whole tree at once (each frame once)",
            format_size(totals.peak_resident_bytes, BINARY),
            format_size(totals.tree_peak_resident_bytes, BINARY)
        )
    } else {
        "first touches and resident memory not measured (--no-faults)".to_string()
    };
    let _ = writeln!(
        s,
        "mevi-actors: {} process(es), {} address space(s), {touches}; mevi-actors itself: {}",
        totals.processes,
        totals.spaces,
        format_size(totals.tracer_peak_rss_bytes, BINARY)
    );
    if let Some(n) = totals.not_selected_spaces {
        let _ = writeln!(
            s,
            "mevi-actors: --only: {} of {} address space(s) followed; the other {n} ran programs \
             not selected (their layout is in the stream, their pages are not)",
            totals.spaces.saturating_sub(n),
            totals.spaces
        );
    }
    if let Some(t) = &totals.threads_not_selected {
        let _ = writeln!(
            s,
            "mevi-actors: --threads: {} first touches of threads not selected were followed and \
             counted, their {} resident line(s) not written",
            t.first_touches, t.lines
        );
    }
    if totals.warnings > 0 {
        let _ = writeln!(
            s,
            "mevi-actors: {} warning(s): the stream's `warning` lines say what happened and what it affects",
            totals.warnings
        );
    }
    if let Some(v) = &totals.verify {
        let mut also = String::new();
        if v.failed_points > 0 {
            let _ = write!(also, " (at {} checks)", v.failed_points);
        }
        if v.skipped_points > 0 {
            let _ = write!(
                also,
                ", {} skipped (process gone, a thread that would not stop, or io_uring workers)",
                v.skipped_points
            );
        }
        if v.unchecked_points > 0 {
            let _ = write!(also, ", {} could not be run", v.unchecked_points);
        }
        if v.unfollowed_spaces > 0 {
            let _ = write!(also, ", {} space(s) not followed", v.unfollowed_spaces);
        }
        if v.unchecked_spaces > 0 {
            let _ = write!(also, ", {} space(s) never checked", v.unchecked_spaces);
        }
        if totals.not_selected_spaces.is_some() || totals.mappings_selected {
            also.push_str(", of what --only, --region and --min-size select");
        }
        if v.inexact_warnings > 0 {
            let _ = write!(
                also,
                ", {} warning(s) that leave the stream inexact",
                v.inexact_warnings
            );
        }
        let _ = writeln!(
            s,
            "mevi-actors: verify: {} checks against the kernel, {} pages checked, {} mismatched{also}",
            v.points, v.checked_pages, v.mismatched_pages,
        );
    }
    let mut largest: Vec<&ProcessSummary> = processes.iter().collect();
    // Stable: without resident figures (--no-faults) the rows stay in exit order.
    largest.sort_by_key(|p| std::cmp::Reverse(p.peak_resident_bytes));
    let rest = largest.split_off(rows.unwrap_or(usize::MAX).min(largest.len()));
    let ends: Vec<String> = largest.iter().map(|p| end(p)).collect();
    let end_width = ends.iter().map(|e| e.len()).max().unwrap_or(0).max(3);
    let _ = writeln!(
        s,
        "{:>8} {:>11} {:>11} {:>9} {:>6} {:>6} {:>9}  {:<end_width$}  argv",
        "pid", "peak", "final", "faults", "maps", "unmaps", "lifetime", "end"
    );
    for (p, end) in largest.iter().zip(ends) {
        let _ = writeln!(
            s,
            "{:>8} {:>11} {:>11} {:>9} {:>6} {:>6} {:>8.3}s  {:<end_width$}  {}",
            p.pid,
            measured(format_size(p.peak_resident_bytes, BINARY)),
            measured(format_size(p.resident_bytes, BINARY)),
            touches_measured(p.faults.to_string()),
            p.maps,
            p.unmaps,
            p.lifetime_ns as f64 / 1e9,
            end,
            // An exec with an empty argv leaves only the name to show.
            if p.argv.is_empty() {
                argv_column(p.name.as_slice())
            } else {
                argv_column(&p.argv)
            }
        );
    }
    if !rest.is_empty() {
        let peaks = if faults {
            let added: u64 = rest.iter().map(|p| p.peak_resident_bytes).sum();
            format!(
                ", {} at most each, {} their peaks added up",
                format_size(rest[0].peak_resident_bytes, BINARY),
                format_size(added, BINARY)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{:>8} … and {} more process(es){peaks}; `--summary all` lists every one",
            "",
            rest.len()
        );
    }
    // Under pressure: what of each process's pages left memory and came back, and who the OOM
    // killer took, below the table: for every process, in the table or not.
    for p in processes {
        let trips = [p.swapped_out_bytes, p.swapped_in_bytes, p.reclaimed_bytes];
        for line in pressure_lines(p.pid, trips, p.oom.as_ref()) {
            let _ = writeln!(s, "{line}");
        }
    }
    s
}

/// How the process ended: `exit 0`, `SIGKILL`, or `-` when its end was not seen.
fn end(p: &ProcessSummary) -> String {
    match (&p.status, &p.signal) {
        (_, Some(sig)) => sig.clone(),
        (Some(code), None) => format!("exit {code}"),
        (None, None) => "-".into(),
    }
}

/// [`argv_line`] in at most [`ARGV_CHARS`] characters. A longer one loses its middle, as whole
/// words: the program and its last arguments are what tell one process from another (`cc1 …
/// -o /tmp/ccX.s`, the script a shim runs), then its first arguments as room allows. When not
/// even the program and the last word fit, the line's own start and end are kept.
fn argv_column(argv: &[String]) -> String {
    const GAP: &str = " … ";
    let text = argv_line(argv);
    let len = |s: &str| s.chars().count();
    if len(&text) <= ARGV_CHARS {
        return text;
    }
    let words: Vec<String> = argv
        .iter()
        .map(|a| argv_line(std::slice::from_ref(a)))
        .collect();
    let mut used = len(&words[0]) + len(GAP);
    // The last word, then more of the end up to half the room left, then words after the
    // program, then the end again with what room is left.
    let (mut head, mut tail) = (1, words.len());
    let half = used + ARGV_CHARS.saturating_sub(used) / 2;
    let take_tail = |used: &mut usize, tail: &mut usize, head: usize, upto: usize| {
        while *tail > head {
            let more = len(&words[*tail - 1]) + usize::from(*tail < words.len());
            if *used + more > upto && (*tail < words.len() || *used + more > ARGV_CHARS) {
                break;
            }
            *used += more;
            *tail -= 1;
        }
    };
    take_tail(&mut used, &mut tail, head, half);
    if tail < words.len() {
        while head < tail && used + len(&words[head]) < ARGV_CHARS {
            used += len(&words[head]) + 1;
            head += 1;
        }
        take_tail(&mut used, &mut tail, head, ARGV_CHARS);
        return format!(
            "{}{GAP}{}",
            words[..head].join(" "),
            words[tail..].join(" ")
        );
    }
    let chars: Vec<char> = text.chars().collect();
    let end = (ARGV_CHARS - 1) / 2;
    let start = ARGV_CHARS - 1 - end;
    let mut short: String = chars[..start].iter().collect();
    short.push('…');
    short.extend(&chars[chars.len() - end..]);
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::VerifyTotals;

    fn row(pid: i32, argv: &[&str], status: Option<i32>, signal: Option<&str>) -> ProcessSummary {
        ProcessSummary {
            name: None,
            pid,
            argv: argv.iter().map(|a| a.to_string()).collect(),
            resident_bytes: 4096,
            peak_resident_bytes: 8192,
            faults: 2,
            maps: 3,
            unmaps: 1,
            lifetime_ns: 1_500_000,
            status,
            signal: signal.map(str::to_string),
            oom: None,
            swapped_out_bytes: 0,
            swapped_in_bytes: 0,
            reclaimed_bytes: 0,
        }
    }

    #[test]
    fn pages_under_pressure_and_an_oom_kill_are_said_below_the_table() {
        let mut p = row(7, &["/bin/eater"], None, Some("SIGKILL"));
        p.swapped_out_bytes = 8 << 20;
        p.reclaimed_bytes = 4096;
        p.oom = Some(crate::event::OomKill {
            cgroup: Some("/box".into()),
            limit: Some(32 << 20),
            log: None,
        });
        let text = human_summary(&[p], &RunTotals::default(), true, false, None);
        assert!(
            text.contains("       7 pressure: 8 MiB swapped out, 4 KiB reclaimed after MADV_FREE"),
            "{text}"
        );
        assert!(
            text.contains(
                "       7 killed by the kernel's OOM killer in memory cgroup /box (limit 32 MiB)"
            ),
            "{text}"
        );
    }

    fn table(processes: &[ProcessSummary]) -> Vec<String> {
        human_summary(processes, &RunTotals::default(), true, false, None)
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_long_utf8_argv_is_cut_on_a_character_boundary() {
        // One word too long for the column, of multibyte characters: cutting by bytes would
        // panic.
        let arg = format!("{}{}", "a".repeat(45), "é".repeat(80));
        let lines = table(&[row(1, &["/bin/prog", &arg], Some(0), None)]);
        let argv = lines[1].split("  ").last().unwrap();
        assert_eq!(argv.chars().count(), ARGV_CHARS, "{argv}");
        assert!(argv.starts_with("/bin/prog aaaa"), "{argv}");
        assert!(argv.ends_with("éé"), "{argv}");
        assert!(argv.contains('…'), "{argv}");
    }

    #[test]
    fn a_long_argv_keeps_its_program_and_last_arguments() {
        let cc1 = [
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
            "-quiet",
            "-imultiarch",
            "x86_64-linux-gnu",
            "src/parse.c",
            "-quiet",
            "-dumpdir",
            "build/",
            "-dumpbase",
            "parse.c",
            "-dumpbase-ext",
            ".c",
            "-mtune=generic",
            "-march=x86-64",
            "-O2",
            "-o",
            "/tmp/ccXYZ123.s",
        ];
        let text = argv_column(&cc1.map(String::from));
        assert!(text.chars().count() <= ARGV_CHARS, "{text}");
        assert!(
            text.starts_with("/usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet"),
            "{text}"
        );
        assert!(text.ends_with(" -O2 -o /tmp/ccXYZ123.s"), "{text}");
        assert!(text.contains(" … "), "{text}");
        // Whole words only on each side of the cut.
        let (head, tail) = text.split_once(" … ").unwrap();
        assert!(cc1.join(" ").starts_with(head), "{text}");
        assert!(cc1.join(" ").ends_with(tail), "{text}");
    }

    #[test]
    fn the_largest_processes_come_first_and_the_rest_in_one_line() {
        let mut processes: Vec<ProcessSummary> = (1..=14)
            .map(|pid| row(pid, &["/bin/sh"], Some(0), None))
            .collect();
        for (i, p) in processes.iter_mut().enumerate() {
            p.peak_resident_bytes = (i as u64 % 5 + 1) << 20;
        }
        let text = human_summary(
            &processes,
            &RunTotals::default(),
            true,
            false,
            Some(SUMMARY_ROWS),
        );
        let lines: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(lines.len(), SUMMARY_ROWS + 1, "{text}");
        let pids: Vec<i32> = lines[..SUMMARY_ROWS]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        // Peaks 5 MiB (pids 5 and 10), 4 MiB (4, 9, 14), 3 MiB (3, 8, 13), 2 MiB (2, 7, …).
        assert_eq!(pids, [5, 10, 4, 9, 14, 3, 8, 13, 2, 7]);
        assert_eq!(
            lines[SUMMARY_ROWS].trim_start(),
            "… and 4 more process(es), 2 MiB at most each, 5 MiB their peaks added up; \
             `--summary all` lists every one"
        );
        let all = human_summary(&processes, &RunTotals::default(), true, false, None);
        assert_eq!(all.lines().skip(2).count(), 14, "{all}");
        assert!(!all.contains("more process"), "{all}");
    }

    #[test]
    fn a_short_argv_is_whole_and_control_characters_are_escaped() {
        let lines = table(&[row(1, &["bash", "-c", "echo é\ntrue"], Some(0), None)]);
        assert_eq!(lines.len(), 2, "one row: {lines:?}");
        assert!(lines[1].ends_with("bash -c echo é\\ntrue"), "{}", lines[1]);
    }

    #[test]
    fn every_row_names_its_end_and_the_columns_line_up() {
        let lines = table(&[
            row(1, &["/bin/p1"], Some(0), None),
            row(22, &["/bin/p2"], None, Some("SIGVTALRM")),
            row(333, &["/bin/p3"], None, None),
            row(4444444, &["/bin/p4"], Some(255), None),
        ]);
        assert!(lines[0].starts_with("     pid"));
        assert!(lines[1].contains("  exit 0 "));
        assert!(lines[2].contains("  SIGVTALRM  "));
        assert!(lines[3].contains("  -  "));
        assert!(lines[4].contains("  exit 255 "));
        // The argv column starts at the same place in every row, after the widest end.
        let col = lines[0].find("argv").unwrap();
        for line in &lines[1..] {
            assert!(line[..col].ends_with("  "), "{lines:#?}");
            assert!(line[col..].starts_with("/bin/p"), "{lines:#?}");
        }
    }

    #[test]
    fn the_verify_line_names_what_could_not_be_checked() {
        let totals = RunTotals {
            warnings: 2,
            verify: Some(VerifyTotals {
                points: 5,
                failed_points: 0,
                skipped_points: 1,
                unchecked_points: 2,
                inexact_warnings: 1,
                unfollowed_spaces: 1,
                unchecked_spaces: 1,
                checked_pages: 100,
                mismatched_pages: 0,
            }),
            ..RunTotals::default()
        };
        let text = human_summary(&[], &totals, true, false, None);
        assert!(text.contains("2 warning(s)"), "{text}");
        assert!(text.contains("1 skipped (process gone"), "{text}");
        assert!(text.contains("2 could not be run"), "{text}");
        assert!(text.contains("1 space(s) not followed"), "{text}");
        assert!(text.contains("1 space(s) never checked"), "{text}");
        assert!(
            text.contains("1 warning(s) that leave the stream inexact"),
            "{text}"
        );
    }
}
