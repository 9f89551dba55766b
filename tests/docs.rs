//! The docs against the tree: every "where things are" list names each file of the rooms it
//! describes and no file that is gone, and every stream line docs/schema.md shows is a `Line`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use mevi_actors::event::{Event, Line};
use serde_json::Value;

fn crate_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    fs::read_to_string(crate_root().join(relative))
        .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
}

/// Every `.rs` file under `dir` (relative to the crate root), as paths relative to the crate root.
fn rust_files_under(dir: &str) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, found: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).unwrap();
                found.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(crate_root(), &crate_root().join(dir), &mut found);
    found
}

/// The `.rs` names written in backticks in `text`, resolved against `room` (a folder ending in
/// `/`); a name that starts with `src/` or `stream/` is already from the crate root.
fn named_rust_files(text: &str, room: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| quoted.ends_with(".rs") && !quoted.contains(' '))
        .map(|name| {
            if name.starts_with("src/") || name.starts_with("stream/") {
                name.to_string()
            } else {
                format!("{room}{name}")
            }
        })
        .collect()
}

fn exists(relative: &str) -> bool {
    crate_root().join(relative).is_file()
}

/// docs/architecture.md, "Where things are": a table whose first column is a folder (`src/x/`,
/// a room: every `.rs` file under it, in no deeper room, must be named in its row) or a file.
/// Every `.rs` file under src/ and stream/src/ (the stream's crate) must be in a room or have a
/// row, and every file a row names
/// must exist.
#[test]
fn docs_architecture_where_things_are_lists_every_file() {
    let doc = read("docs/architecture.md");
    let section = doc
        .split("\n## Where things are\n")
        .nth(1)
        .expect("docs/architecture.md has no \"## Where things are\" section")
        .split("\n## ")
        .next()
        .unwrap();
    // First column (the folder or file, in backticks) -> the rest of the row.
    let mut rows: BTreeMap<String, String> = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let (first, rest) = row[1..]
            .split_once('|')
            .expect("a table row with two columns");
        let path = first.trim().trim_matches('`').to_string();
        rows.insert(path, rest.to_string());
    }
    assert!(
        !rows.is_empty(),
        "no rows found in docs/architecture.md's \"Where things are\""
    );

    let mut problems = Vec::new();
    for (path, text) in &rows {
        let room = if path.ends_with('/') {
            path.as_str()
        } else {
            "src/"
        };
        if !crate_root().join(path).exists() {
            problems.push(format!("row `{path}` names a path that does not exist"));
        }
        for named in named_rust_files(text, room) {
            if !exists(&named) {
                problems.push(format!("row `{path}` names {named}, which does not exist"));
            }
        }
    }
    let rooms: Vec<&String> = rows
        .keys()
        .filter(|p| (p.starts_with("src/") || p.starts_with("stream/")) && p.ends_with('/'))
        .collect();
    let files = rust_files_under("src")
        .into_iter()
        .chain(rust_files_under("stream/src"));
    for file in files {
        if rows.contains_key(&file) {
            continue;
        }
        // The deepest room the file is in: the row that must name it.
        match rooms
            .iter()
            .filter(|room| file.starts_with(room.as_str()))
            .max_by_key(|r| r.len())
        {
            Some(room) if named_rust_files(&rows[*room], room).contains(&file) => {}
            Some(room) => problems.push(format!(
                "{file} is not named in the `{room}` row (write `{}` there, with what it holds)",
                &file[room.len()..]
            )),
            None => problems.push(format!("{file} is in no room and has no row of its own")),
        }
    }
    assert!(
        problems.is_empty(),
        "docs/architecture.md, \"Where things are\", does not match src/:\n  {}",
        problems.join("\n  ")
    );
}

/// The leading `//!` comment of `module`, from `marker` on: its list of the room's files.
fn module_doc_list(module: &str, marker: &str) -> String {
    let source = read(module);
    let doc: Vec<&str> = source
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!"))
        .collect();
    let doc = doc.join("\n");
    let at = doc
        .find(marker)
        .unwrap_or_else(|| panic!("{module}'s leading comment has no \"{marker}\" list"));
    doc[at..].to_string()
}

/// The rooms whose `mod.rs` lists its files in its leading comment: every `.rs` file of the
/// room but `mod.rs` itself ("this file") must be named there, and every name must exist.
#[test]
fn docs_module_comments_list_every_file_of_their_room() {
    let lists = [
        ("src/actors/tracer/", "The rooms:"),
        ("src/actors/lane/", "The files:"),
    ];
    let mut problems = Vec::new();
    for (room, marker) in lists {
        let module = format!("{room}mod.rs");
        let named = named_rust_files(&module_doc_list(&module, marker), room);
        for file in named.iter().filter(|f| !exists(f)) {
            problems.push(format!("{module} names {file}, which does not exist"));
        }
        for file in rust_files_under(room) {
            if file != module && !named.contains(&file) {
                problems.push(format!(
                    "{file} is not named in {module}'s \"{marker}\" list (write `{}` there)",
                    &file[room.len()..]
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "a module comment does not match its room:\n  {}",
        problems.join("\n  ")
    );
}

/// A field the example has and the parsed line does not give back: a field the type does not
/// know (serde passes over unknown fields), unless it is a default the writer leaves out.
fn fields_lost(written: &Value, parsed: &Value, at: &str, lost: &mut Vec<String>) {
    match (written, parsed) {
        (Value::Object(written), Value::Object(parsed)) => {
            for (key, value) in written {
                let here = format!("{at}.{key}");
                match parsed.get(key) {
                    Some(back) => fields_lost(value, back, &here, lost),
                    None if matches!(value, Value::Bool(false)) => {}
                    None => lost.push(here),
                }
            }
        }
        (Value::Array(written), Value::Array(parsed)) if written.len() == parsed.len() => {
            for (i, (value, back)) in written.iter().zip(parsed).enumerate() {
                fields_lost(value, back, &format!("{at}[{i}]"), lost);
            }
        }
        _ if written == parsed => {}
        _ => lost.push(format!("{at} (written {written}, read back {parsed})")),
    }
}

/// Every stream line in a fenced block of docs/schema.md (a line that starts with `{` and has
/// an `ev`) parses as a `Line` (or, without `seq`, an `Event`) and keeps every field it shows.
/// Lines without `ev` are `replay --json` output, not the stream.
#[test]
fn docs_schema_examples_parse_as_events() {
    let doc = read("docs/schema.md");
    let mut in_block = false;
    let mut parsed = 0;
    let mut problems = Vec::new();
    for (number, text) in doc.lines().enumerate() {
        let number = number + 1;
        if text.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let text = text.trim();
        if !in_block || !text.starts_with('{') {
            continue;
        }
        let written: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                problems.push(format!("docs/schema.md:{number}: not JSON ({e})"));
                continue;
            }
        };
        if written.get("ev").is_none() {
            continue;
        }
        let back = if written.get("seq").is_some() {
            serde_json::from_value::<Line>(written.clone())
                .map(|l| serde_json::to_value(l).unwrap())
        } else {
            serde_json::from_value::<Event>(written.clone())
                .map(|e| serde_json::to_value(e).unwrap())
        };
        match back {
            Ok(back) => {
                parsed += 1;
                let mut lost = Vec::new();
                fields_lost(&written, &back, "", &mut lost);
                if !lost.is_empty() {
                    problems.push(format!(
                        "docs/schema.md:{number}: fields the stream's types do not read: {}",
                        lost.join(", ")
                    ));
                }
            }
            Err(e) => problems.push(format!("docs/schema.md:{number}: not an event: {e}")),
        }
    }
    assert!(!in_block, "docs/schema.md: a fenced block is not closed");
    assert!(
        parsed >= 30,
        "only {parsed} stream lines found in docs/schema.md's examples"
    );
    assert!(
        problems.is_empty(),
        "docs/schema.md's examples:\n  {}",
        problems.join("\n  ")
    );
}
