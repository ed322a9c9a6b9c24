use std::io::Cursor;

use super::*;

fn at(secs: u64, nanos: u32) -> SystemTime {
    UNIX_EPOCH + Duration::new(1_700_000_000 + secs, nanos)
}

#[test]
fn timestamps_have_nine_fraction_digits_as_the_kubelet_writes_them() {
    assert_eq!(timestamp(at(0, 0)), "2023-11-14T22:13:20.000000000Z");
    assert_eq!(timestamp(at(1, 5_000)), "2023-11-14T22:13:21.000005000Z");
}

#[test]
fn records_read_back_as_written() {
    let cases: [(Stream, &[u8], &str); 3] = [
        (Stream::Stdout, b"hello\n", " stdout F hello\n"),
        (Stream::Stderr, b"oops\n", " stderr F oops\n"),
        (Stream::Stdout, b"part", " stdout P part\n"),
    ];
    for (stream, content, tail) in cases {
        let rec = record(at(2, 7), stream, content);
        let text = String::from_utf8(rec.clone()).unwrap();
        assert!(text.starts_with("2023-11-14T22:13:22.000000007Z"), "{text}");
        assert!(text.ends_with(tail), "{text}");
        let entry = parse(&rec).expect("a record");
        assert_eq!(entry.at, at(2, 7));
        assert_eq!(entry.content, content);
    }
    assert_eq!(parse(b"not a record\n"), None);
    assert_eq!(parse(b"2023-11-14T22:13:22Z stdin F x\n"), None);
}

#[test]
fn the_writer_skips_old_lines_prefixes_timestamps_and_cuts_at_the_limit() {
    let entries = [
        Entry {
            at: at(1, 0),
            content: b"one\n",
        },
        Entry {
            at: at(2, 0),
            content: b"two\n",
        },
        Entry {
            at: at(3, 0),
            content: b"three\n",
        },
    ];
    let cases: [(ReadOptions, &str); 4] = [
        (ReadOptions::default(), "one\ntwo\nthree\n"),
        (
            ReadOptions {
                since: Some(at(2, 0)),
                ..ReadOptions::default()
            },
            "two\nthree\n",
        ),
        (
            ReadOptions {
                limit_bytes: Some(6),
                ..ReadOptions::default()
            },
            "one\ntw",
        ),
        (
            ReadOptions {
                timestamps: true,
                since: Some(at(3, 0)),
                ..ReadOptions::default()
            },
            "2023-11-14T22:13:23.000000000Z three\n",
        ),
    ];
    for (opts, want) in cases {
        let mut w = Writer::new(&opts);
        let mut out = Vec::new();
        for e in &entries {
            if w.write(e, &mut out) == Flow::Full {
                break;
            }
        }
        assert_eq!(String::from_utf8(out).unwrap(), want, "{opts:?}");
    }
}

#[test]
fn the_limit_ends_the_output_exactly_at_its_last_byte() {
    let mut w = Writer::new(&ReadOptions {
        limit_bytes: Some(4),
        ..ReadOptions::default()
    });
    let mut out = Vec::new();
    let e = Entry {
        at: at(1, 0),
        content: b"one\n",
    };
    assert_eq!(w.write(&e, &mut out), Flow::Full);
    assert_eq!(w.write(&e, &mut out), Flow::Full);
    assert_eq!(out, b"one\n");
}

#[test]
fn tail_finds_the_start_of_the_last_lines() {
    let cases: [(&str, u64, &str); 7] = [
        ("a\nb\nc\n", 0, ""),
        ("a\nb\nc\n", 1, "c\n"),
        ("a\nb\nc\n", 2, "b\nc\n"),
        ("a\nb\nc\n", 3, "a\nb\nc\n"),
        ("a\nb\nc\n", 9, "a\nb\nc\n"),
        ("a\nb\nc", 1, "c"),
        ("", 2, ""),
    ];
    for (text, n, want) in cases {
        let mut f = Cursor::new(text.as_bytes().to_vec());
        let start = tail_start(&mut f, n).unwrap();
        assert_eq!(
            &text[usize::try_from(start).unwrap()..],
            want,
            "{text:?} tail {n}"
        );
    }
}

#[test]
fn tail_reads_across_blocks_of_a_long_log() {
    let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let mut f = Cursor::new(text.clone().into_bytes());
    let start = usize::try_from(tail_start(&mut f, 15_000).unwrap()).unwrap();
    assert!(text[start..].starts_with("line 5000\n"));
    assert_eq!(text[start..].lines().count(), 15_000);
}

#[test]
fn a_scripted_container_logs_its_start_each_second_and_its_exit() {
    let ended = ScriptedLog {
        container: "main".into(),
        started_at: at(10, 0),
        ended: Some((at(13, 0), 3)),
    };
    let lines: Vec<(SystemTime, String)> = (0..ended.len_at(at(100, 0)))
        .map(|i| ended.line(i))
        .collect();
    assert_eq!(
        lines,
        vec![
            (at(10, 0), "kubesim: container main started\n".to_string()),
            (
                at(11, 0),
                "kubesim: container main running for 1s\n".to_string()
            ),
            (
                at(12, 0),
                "kubesim: container main running for 2s\n".to_string()
            ),
            (
                at(13, 0),
                "kubesim: container main exited with code 3\n".to_string()
            ),
        ]
    );
    assert_eq!(ended.next_at(at(100, 0)), None);

    let running = ScriptedLog {
        ended: None,
        ..ended.clone()
    };
    assert_eq!(running.len_at(at(10, 0)), 1);
    assert_eq!(running.len_at(at(12, 500)), 3);
    assert_eq!(running.next_at(at(12, 500)), Some(at(13, 0)));

    let quick = ScriptedLog {
        ended: Some((at(10, 300), 0)),
        ..ended
    };
    assert_eq!(quick.len_at(at(11, 0)), 2);
    assert_eq!(
        quick.line(1).1,
        "kubesim: container main exited with code 0\n"
    );
}
