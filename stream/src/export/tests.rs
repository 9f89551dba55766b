//! The profile's tables: each entry once, inlined calls folded into their location, and the
//! program's file first.

use crate::event::Frame;
use crate::model::sites::Stack;

use super::profile::Tables;

fn frame(module: &str, offset: u64, function: &str, inlined: bool) -> Frame {
    Frame {
        module: Some(module.into()),
        build_id: Some(format!("{:x}", module.len())),
        offset: Some(offset),
        function: Some(function.into()),
        file: Some("a.c".into()),
        line: Some(7),
        inlined,
        ..Frame::default()
    }
}

#[test]
fn an_inlined_call_is_a_line_of_its_callers_location() {
    let mut t = Tables::default();
    let stack = Stack {
        frames: vec![
            frame("/lib/libc.so.6", 0x100, "mmap_inner", true),
            frame("/lib/libc.so.6", 0x100, "mmap", false),
            frame("/bin/prog", 0x2000, "main", false),
        ],
        truncated: None,
    };
    let ids = t.stack(&stack);
    assert_eq!(ids.len(), 2, "two addresses, two locations");
    // The same stack again: the same locations, nothing added.
    assert_eq!(t.stack(&stack), ids);
    let (mappings, locations) = t.take_mappings_and_locations(Some("/bin/prog"));
    assert_eq!(locations.len(), 2);
    let inner = &locations[0];
    assert_eq!(
        inner.line.len(),
        2,
        "the inlined call first, its caller last"
    );
    assert!(inner.line[0].function_id != inner.line[1].function_id);
    // The program's file is mapping 1, whatever came first; each address gives its frame's
    // offset back as a symbolizer reads it: address - memory_start + file_offset.
    assert_eq!(mappings.len(), 2);
    let program = &mappings[0];
    assert_eq!((program.id, locations[1].mapping_id), (1, 1));
    let offset = |l: &super::proto::Location, m: &super::proto::Mapping| {
        l.address - m.memory_start + m.file_offset
    };
    assert_eq!(offset(&locations[1], program), 0x2000);
    assert_eq!(
        program.file_offset, 0x2000,
        "from the page of its lowest frame"
    );
    let libc = &mappings[1];
    assert_eq!(inner.mapping_id, libc.id);
    assert_eq!(offset(inner, libc), 0x100);
    assert!(inner.address < libc.memory_limit);
    assert!(libc.has_functions && libc.has_line_numbers && libc.has_inline_frames);
    assert!(!program.has_inline_frames);
}

#[test]
fn a_frame_without_a_name_leaves_its_file_to_a_symbolizer() {
    let mut t = Tables::default();
    let mut unnamed = frame("/bin/prog", 0x30, "f", false);
    unnamed.function = None;
    t.stack(&Stack {
        frames: vec![unnamed],
        truncated: None,
    });
    let (mappings, locations) = t.take_mappings_and_locations(None);
    assert!(locations[0].line.is_empty());
    assert!(!mappings[0].has_functions);
}
