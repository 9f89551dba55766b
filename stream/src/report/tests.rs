//! Each record kind reads back as written, and the decoder's state follows.

use super::decode::Decoder;
use super::format::{KeySpace, Piece, Record, Run, SitePiece, UNTOUCHED, WRITTEN, ZERO};
use super::wire::{Cursor, Reader};

fn piece(gap: u64, len: u64, path: Option<u64>) -> Piece {
    Piece {
        gap,
        len,
        kind: 4,
        tracked: true,
        prot: 0,
        path,
        made_seq: 12,
        made_t_ns: 3_000_000,
        made_tid: -1,
    }
}

fn runs() -> Vec<Run> {
    vec![
        Run {
            len: 4096,
            state: WRITTEN,
        },
        Run {
            len: 8192,
            state: ZERO,
        },
        Run {
            len: 4096 * 5 + 100,
            state: UNTOUCHED,
        },
    ]
}

/// Every kind, in an order a real stream could have, with odd (unaligned) values too.
fn every_kind() -> Vec<Record> {
    let len = 4096 * 8 + 100;
    vec![
        Record::PageSize(4096),
        Record::String("rw-p".into()),
        Record::String("/lib/libc.so.6".into()),
        Record::Create {
            t_ns: 5,
            space: 3,
            copy_of: None,
        },
        Record::Live { t_ns: 5, space: 3 },
        Record::Space(3),
        Record::Range {
            t_ns: 70,
            start: 0x7f00_0000_0000,
            len,
            pieces: vec![
                piece(0, 4096 * 2, Some(1)),
                piece(4096, 4096 * 5 + 100, None),
            ],
            runs: runs(),
            sites: vec![
                SitePiece {
                    gap: 0,
                    len: 4096,
                    site: 7,
                },
                SitePiece {
                    gap: 8192,
                    len: 4096 * 5 + 100,
                    site: 9,
                },
            ],
        },
        Record::Pages {
            t_ns: 71,
            start: 0x7f00_0000_0000,
            len,
            runs: runs(),
        },
        Record::Pages {
            t_ns: 90,
            start: 0x1000,
            len: 4096,
            runs: vec![Run {
                len: 4096,
                state: WRITTEN,
            }],
        },
        Record::Create {
            t_ns: 95,
            space: 4,
            copy_of: Some(3),
        },
        Record::Ended { t_ns: 99, space: 3 },
        Record::Keyframe {
            t_ns: 100,
            page: 4096,
            strings: vec!["rw-p".into(), "/lib/libc.so.6".into()],
            spaces: vec![KeySpace {
                space: 4,
                live: true,
                peak_resident_bytes: 1 << 20,
                start: 0x7f00_0000_0000,
                len,
                pieces: vec![piece(0, len, Some(1))],
                runs: runs(),
                sites: vec![SitePiece {
                    gap: 4096,
                    len: 4096,
                    site: 7,
                }],
            }],
        },
        Record::Pages {
            t_ns: 120,
            start: 0xffff_ffff_ff60_0000,
            len: 4096,
            runs: vec![Run {
                len: 4096,
                state: ZERO,
            }],
        },
    ]
}

#[test]
fn every_record_kind_reads_back_as_written() {
    let (mut bytes, mut cursor) = (Vec::new(), Cursor::default());
    let records = every_kind();
    for r in &records {
        r.write(&mut bytes, &mut cursor);
    }
    let (mut reader, mut cursor) = (Reader::new(&bytes, 0), Cursor::default());
    for r in &records {
        assert_eq!(&Record::read(&mut reader, &mut cursor).unwrap(), r);
    }
    assert!(reader.done());
}

#[test]
fn cut_or_unknown_bytes_are_errors_not_panics() {
    let (mut bytes, mut cursor) = (Vec::new(), Cursor::default());
    for r in every_kind() {
        r.write(&mut bytes, &mut cursor);
    }
    for cut in 0..bytes.len() {
        let mut d = Decoder::new(&bytes[..cut]);
        let _ = d.advance_to(u64::MAX);
    }
    assert!(Decoder::new(&[200]).advance_to(0).is_err());
}

#[test]
fn the_decoder_follows_each_kind_and_stops_at_the_time() {
    let (mut bytes, mut cursor) = (Vec::new(), Cursor::default());
    for r in every_kind() {
        r.write(&mut bytes, &mut cursor);
    }
    let base = 0x7f00_0000_0000u64;
    let mut d = Decoder::new(&bytes);
    d.advance_to(70).unwrap();
    let s = &d.spaces[&3];
    assert!(s.live);
    let maps: Vec<_> = s
        .state
        .mappings
        .iter()
        .map(|(r, m)| (r.clone(), m.path.clone()))
        .collect();
    assert_eq!(
        maps,
        [
            (base..base + 8192, Some("/lib/libc.so.6".to_string())),
            (base + 12288..base + 4096 * 8 + 100, None)
        ]
    );
    assert_eq!(s.state.resident_bytes, 3 * 4096);
    assert_eq!(s.state.zero_in(base..base + 4096 * 9), 8192);
    let sites = |s: &super::decode::DecodedSpace| {
        s.sites
            .iter()
            .map(|(r, &id)| (r.clone(), id))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        sites(s),
        [
            (base..base + 4096, 7),
            (base + 12288..base + 4096 * 8 + 100, 9)
        ]
    );
    d.advance_to(90).unwrap();
    assert_eq!(d.spaces[&3].state.resident_bytes, 4 * 4096);
    d.advance_to(95).unwrap();
    assert_eq!(d.spaces[&4].state.resident_bytes, 4 * 4096, "a fork's copy");
    assert_eq!(sites(&d.spaces[&4]), sites(&d.spaces[&3]), "with its sites");
    assert_eq!(d.spaces[&4].state.peak_resident_bytes, 4 * 4096);
    assert!(!d.spaces[&4].live, "made, but no process in it yet");
    d.advance_to(99).unwrap();
    assert!(!d.spaces[&3].live);
    assert_eq!(d.spaces[&3].state.resident_bytes, 0);
    assert!(d.spaces[&3].sites.is_empty());
    assert_eq!(
        d.spaces[&3].state.peak_resident_bytes,
        4 * 4096,
        "the peak stays"
    );
    d.advance_to(100).unwrap();
    assert!(!d.spaces.contains_key(&3), "a keyframe lists what is there");
    assert_eq!(d.spaces[&4].state.peak_resident_bytes, 1 << 20);
    assert_eq!(sites(&d.spaces[&4]), [(base + 4096..base + 8192, 7)]);
    assert_eq!(d.t_ns, 100);
}
