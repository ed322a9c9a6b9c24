use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("an RFC 3339 instant")
}

fn next(expression: &str, zone: &str, after: &str) -> Option<String> {
    CronSchedule::parse(expression, zone)
        .expect("parses")
        .next_after(at(after))
        .map(|t| t.to_string())
}

/// (expression, zone, after, expected next), all instants in UTC.
#[test]
fn next_run_for_every_kind_of_expression() {
    let cases: &[(&str, &str, &str, Option<&str>)] = &[
        // Plain fields; strictly after.
        (
            "0 9 * * *",
            "UTC",
            "2026-12-01T08:59:59Z",
            Some("2026-12-01T09:00:00Z"),
        ),
        (
            "0 9 * * *",
            "UTC",
            "2026-12-01T09:00:00Z",
            Some("2026-12-02T09:00:00Z"),
        ),
        // Steps, ranges and day names: office hours every quarter hour.
        (
            "*/15 9-17 * * MON-FRI",
            "UTC",
            "2026-12-01T17:50:00Z",
            Some("2026-12-02T09:00:00Z"),
        ),
        (
            "*/15 9-17 * * MON-FRI",
            "UTC",
            "2026-12-04T17:45:00Z",
            Some("2026-12-07T09:00:00Z"),
        ),
        // `a/n` runs from a to the field's end.
        (
            "1/20 * * * *",
            "UTC",
            "2026-12-01T10:21:00Z",
            Some("2026-12-01T10:41:00Z"),
        ),
        (
            "1/20 * * * *",
            "UTC",
            "2026-12-01T10:41:00Z",
            Some("2026-12-01T11:01:00Z"),
        ),
        // Lists and month names, in any case.
        (
            "0 12 1 jan,JUL *",
            "UTC",
            "2026-12-01T00:00:00Z",
            Some("2027-01-01T12:00:00Z"),
        ),
        // Both day fields restricted: either matches (Friday the 4th comes before the 13th).
        (
            "0 0 13 * FRI",
            "UTC",
            "2026-12-01T00:00:00Z",
            Some("2026-12-04T00:00:00Z"),
        ),
        // One day field `*`: the other alone decides.
        (
            "0 0 13 * *",
            "UTC",
            "2026-12-01T00:00:00Z",
            Some("2026-12-13T00:00:00Z"),
        ),
        (
            "0 0 * * FRI",
            "UTC",
            "2026-12-04T00:00:00Z",
            Some("2026-12-11T00:00:00Z"),
        ),
        // `?` is `*`.
        (
            "0 0 ? * SUN",
            "UTC",
            "2026-12-01T00:00:00Z",
            Some("2026-12-06T00:00:00Z"),
        ),
        // A leap day waits for the leap year; a date that never exists never runs.
        (
            "0 0 29 2 *",
            "UTC",
            "2026-03-01T00:00:00Z",
            Some("2028-02-29T00:00:00Z"),
        ),
        ("0 0 30 2 *", "UTC", "2026-03-01T00:00:00Z", None),
        // Descriptors.
        (
            "@hourly",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2026-12-01T11:00:00Z"),
        ),
        (
            "@daily",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2026-12-02T00:00:00Z"),
        ),
        (
            "@midnight",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2026-12-02T00:00:00Z"),
        ),
        (
            "@weekly",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2026-12-06T00:00:00Z"),
        ),
        (
            "@monthly",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2027-01-01T00:00:00Z"),
        ),
        (
            "@yearly",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2027-01-01T00:00:00Z"),
        ),
        (
            "@annually",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2027-01-01T00:00:00Z"),
        ),
        // `@every`: whole seconds from the second `after` falls in, whatever the zone.
        (
            "@every 1h30m",
            "Asia/Tokyo",
            "2026-12-01T10:00:00.5Z",
            Some("2026-12-01T11:30:00Z"),
        ),
        (
            "@every 1.5h",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2026-12-01T11:30:00Z"),
        ),
        (
            "@every 500ms",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2026-12-01T10:00:01Z"),
        ),
        (
            "@every 90s",
            "UTC",
            "2026-12-01T10:00:00Z",
            Some("2026-12-01T10:01:30Z"),
        ),
        // A zone: 09:00 in Tokyo is 00:00 UTC.
        (
            "0 9 * * *",
            "Asia/Tokyo",
            "2026-11-30T23:59:00Z",
            Some("2026-12-01T00:00:00Z"),
        ),
        // The expression's own zone overrides spec.timeZone.
        (
            "CRON_TZ=Asia/Tokyo 0 9 * * *",
            "UTC",
            "2026-12-01T00:00:00Z",
            Some("2026-12-02T00:00:00Z"),
        ),
        (
            "TZ=Asia/Tokyo 0 9 * * *",
            "America/New_York",
            "2026-11-30T23:59:00Z",
            Some("2026-12-01T00:00:00Z"),
        ),
    ];
    for (expression, zone, after, expected) in cases {
        assert_eq!(
            next(expression, zone, after).as_deref(),
            *expected,
            "{expression} in {zone} after {after}"
        );
    }
}

/// New York, 2026: clocks jump from 02:00 EST to 03:00 EDT on March 8 (07:00Z) and fall back
/// from 02:00 EDT to 01:00 EST on November 1 (06:00Z).
#[test]
fn daylight_saving_changes_run_each_wall_clock_time_once() {
    let ny = "America/New_York";
    let cases: &[(&str, &str, &str)] = &[
        // Ordinary day before the jump: 02:30 EST.
        ("30 2 * * *", "2026-03-06T12:00:00Z", "2026-03-07T07:30:00Z"),
        // 02:30 does not exist on March 8: shifted forward by the jump, 03:30 EDT, once.
        ("30 2 * * *", "2026-03-07T12:00:00Z", "2026-03-08T07:30:00Z"),
        ("30 2 * * *", "2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"),
        // 03:30 exists and is the same instant: one run, not two.
        ("30 3 * * *", "2026-03-07T12:00:00Z", "2026-03-08T07:30:00Z"),
        // 01:30 happens twice on November 1: the first (EDT) runs...
        ("30 1 * * *", "2026-10-31T12:00:00Z", "2026-11-01T05:30:00Z"),
        // ...and the second (EST, 06:30Z) does not.
        ("30 1 * * *", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"),
        // Hourly through the repeated hour: 01:00 EDT, then 02:00 EST.
        ("0 * * * *", "2026-11-01T04:30:00Z", "2026-11-01T05:00:00Z"),
        ("0 * * * *", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"),
        // Measured from inside the second 01:xx hour, the next is 02:00 EST.
        ("30 1 * * *", "2026-11-01T06:10:00Z", "2026-11-02T06:30:00Z"),
        (
            "*/20 * * * *",
            "2026-11-01T06:10:00Z",
            "2026-11-01T07:00:00Z",
        ),
        // `@every` ignores the zone's clock changes: a constant interval.
        ("@every 1h", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"),
    ];
    for (expression, after, expected) in cases {
        assert_eq!(
            next(expression, ny, after).as_deref(),
            Some(*expected),
            "{expression} after {after}"
        );
    }
}

#[test]
fn bad_schedules_are_refused_with_their_kind() {
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("   ", "empty"),
        ("CRON_TZ=UTC", "empty"),
        ("* * * *", "field_count"),
        ("0 0 * * * *", "field_count"),
        ("60 * * * *", "out_of_range"),
        ("* 24 * * *", "out_of_range"),
        ("* * 0 * *", "out_of_range"),
        ("* * * 13 *", "out_of_range"),
        ("* * * * 7", "out_of_range"),
        ("*/0 * * * *", "field"),
        ("5-1 * * * *", "field"),
        ("a * * * *", "field"),
        ("* * * FOO *", "field"),
        ("1-2-3 * * * *", "field"),
        ("@fortnightly", "unknown_descriptor"),
        ("@every", "unknown_descriptor"),
        ("@every x", "duration"),
        ("@every 5", "duration"),
        ("@every 1d", "duration"),
        ("CRON_TZ=Mars/Olympus_Mons * * * * *", "time_zone"),
    ];
    for (expression, kind) in cases {
        let error = CronSchedule::parse(expression, "UTC").expect_err(expression);
        assert_eq!(error.kind(), *kind, "{expression}: {error}");
    }
    assert_eq!(
        CronSchedule::parse("* * * * *", "Nowhere/City")
            .expect_err("unknown zone")
            .kind(),
        "time_zone"
    );
}

#[test]
fn the_default_zones_are_the_process_zone_and_utc() {
    assert!(time_zone("").is_ok());
    assert!(time_zone("Local").is_ok());
    assert_eq!(time_zone("UTC").expect("utc"), TimeZone::UTC);
    assert!(time_zone("Europe/Berlin").is_ok());
}

#[test]
fn go_durations_parse_like_go() {
    let cases: &[(&str, Option<u128>)] = &[
        ("0", Some(0)),
        ("1s", Some(1_000_000_000)),
        ("1h30m", Some(5_400_000_000_000)),
        ("1.5h", Some(5_400_000_000_000)),
        ("2m3.5s", Some(123_500_000_000)),
        ("300ms", Some(300_000_000)),
        ("10us", Some(10_000)),
        ("10µs", Some(10_000)),
        ("7ns", Some(7)),
        ("", None),
        ("5", None),
        ("1d", None),
        ("h", None),
        ("-1s", None),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_go_duration(text), *expected, "{text}");
    }
}
