//! Which process of one trace is which of the other: by program, then by order of birth.
//!
//! A process's program is its file name (`cc1`), and where several processes of a trace run the
//! same program, the argument that tells it from the others (`cc1 first_unit.c`): the first one
//! not all of them have, preferring one that names a file (not an option, not `-o`'s output).
//! A process alone gets the first file it names. The report labels its processes by the same
//! rule (page/js/data.js, `label`).

use std::collections::{BTreeMap, HashMap};

use crate::model::processes::Process;

use super::side::Program;

/// What a process is called when compared: its program, and the argument that tells it apart.
pub(crate) fn labels(processes: &[&Process]) -> Vec<String> {
    let mut by_program: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in processes.iter().enumerate() {
        by_program.entry(p.short_name()).or_default().push(i);
    }
    let mut labels = vec![String::new(); processes.len()];
    for (program, group) in by_program {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for &i in &group {
            let mut args: Vec<&str> = processes[i]
                .argv
                .iter()
                .skip(1)
                .map(String::as_str)
                .collect();
            args.sort_unstable();
            args.dedup();
            for a in args {
                *counts.entry(a).or_default() += 1;
            }
        }
        for &i in &group {
            let args: Vec<&str> = processes[i]
                .argv
                .iter()
                .skip(1)
                .map(String::as_str)
                .collect();
            let apart: Vec<(&str, Option<&str>)> = args
                .iter()
                .enumerate()
                .map(|(n, a)| (*a, n.checked_sub(1).map(|p| args[p])))
                .filter(|(a, _)| group.len() == 1 || counts[a] < group.len())
                .collect();
            let not_output =
                |a: &str, before: Option<&str>| !a.starts_with('-') && before != Some("-o");
            let file_like =
                |a: &str, before| not_output(a, before) && a.len() > 1 && a.contains(['.', '/']);
            let mut pick = apart.iter().find(|(a, b)| file_like(a, *b));
            if pick.is_none() && group.len() > 1 {
                pick = apart
                    .iter()
                    .find(|(a, b)| not_output(a, *b))
                    .or(apart.first());
            }
            let mut label = program.to_string();
            if let Some((arg, before)) = pick {
                let arg = if file_like(arg, *before) && !arg.contains(char::is_whitespace) {
                    arg.rsplit('/').find(|s| !s.is_empty()).unwrap_or(arg)
                } else {
                    arg
                };
                label.push(' ');
                label.extend(arg.chars().take(40));
            }
            labels[i] = label;
        }
    }
    labels
}

/// Pairs the processes of `a` with those of `b` (each in order of birth): first those whose
/// labels are the same, the first with the first; then, of those left, those of the same
/// program (an argument that differs from run to run, such as a temporary file's name, leaves
/// the label different). Pairs of indices, in `a`'s order; then what is left of each.
pub(crate) fn pair(a: &[Program], b: &[Program]) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
    let mut taken_a = vec![false; a.len()];
    let mut taken_b = vec![false; b.len()];
    let mut pairs = Vec::new();
    let by_label = |i: usize, j: usize| a[i].name == b[j].name;
    let by_program = |i: usize, j: usize| a[i].program == b[j].program;
    for same in [&by_label as &dyn Fn(usize, usize) -> bool, &by_program] {
        for (i, taken) in taken_a.iter_mut().enumerate() {
            if *taken {
                continue;
            }
            if let Some(j) = (0..b.len()).find(|&j| !taken_b[j] && same(i, j)) {
                *taken = true;
                taken_b[j] = true;
                pairs.push((i, j));
            }
        }
    }
    pairs.sort_unstable();
    let left = |taken: &[bool]| (0..taken.len()).filter(|&i| !taken[i]).collect();
    (pairs, left(&taken_a), left(&taken_b))
}
