//! Object metadata helpers: timestamps, uids, generated names and typed accessors over JSON.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// A copy of an object's fields but `skip`, taken one by one: a write that replaces some
/// top-level fields (a status write, a controller's upsert) copies only what it keeps.
pub fn fields_except(obj: &Value, skip: &[&str]) -> Map<String, Value> {
    obj.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Current time as Kubernetes writes it (RFC 3339, whole seconds, UTC).
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// Current time with microseconds (the `MicroTime` of events and leases).
pub fn now_micro() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let base = format_secs(d.as_secs());
    format!("{}.{:06}Z", base.trim_end_matches('Z'), d.subsec_micros())
}

/// Formats a time as RFC 3339 with whole seconds.
pub fn rfc3339(t: SystemTime) -> String {
    format_secs(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs())
}

fn format_secs(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    // Digit by digit rather than through `format!`: every write stamps a time or two.
    let mut out = String::with_capacity(20);
    match u64::try_from(y) {
        Ok(y) if y <= 9999 => push_digits(&mut out, y, 4),
        _ => out.push_str(&y.to_string()),
    }
    for (n, sep) in [
        (u64::from(m), '-'),
        (u64::from(d), '-'),
        (rem / 3600, 'T'),
        ((rem % 3600) / 60, ':'),
        (rem % 60, ':'),
    ] {
        out.push(sep);
        push_digits(&mut out, n, 2);
    }
    out.push('Z');
    out
}

/// Appends the last `width` decimal digits of `n`, zero-padded.
fn push_digits(out: &mut String, n: u64, width: u32) {
    for i in (0..width).rev() {
        out.push(char::from(b'0' + (n / 10u64.pow(i) % 10) as u8));
    }
}

/// Formats seconds since the Unix epoch as RFC 3339 with whole seconds (times before 1970 clamp
/// to the epoch).
pub fn format_unix(secs: i64) -> String {
    format_secs(secs.max(0).unsigned_abs())
}

/// Seconds since the epoch and nanoseconds of an RFC 3339 time (`2024-01-02T03:04:05Z`,
/// optionally with a fraction and a `+hh:mm` offset); `None` when it is not one.
pub fn parse_rfc3339(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut n: u64 = frac[..digits.min(9)].parse().ok()?;
        for _ in digits.min(9)..9 {
            n *= 10;
        }
        nanos = n as u32;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let hh: i64 = o[1..3].parse().ok()?;
            let mm: i64 = o[4..6].parse().ok()?;
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (hh * 3600 + mm * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    Some((days * 86_400 + h * 3600 + mi * 60 + se - offset, nanos))
}

// Howard Hinnant's civil-to-days algorithm, the inverse of `civil_from_days`.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// Howard Hinnant's days-to-civil algorithm: avoids a date crate for one conversion.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A fresh object uid.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The 5-character suffix Kubernetes appends to a `generateName` (no vowels, no confusable digits).
pub fn generated_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes[..5]
        .iter()
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// `metadata` of an object, created if absent.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object")
}

/// A string field of `metadata`, or `""`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// JSON pointer look-ups without allocation (`submission::pointer`): `Value::pointer` unescapes
/// every token of the path into a new `String`, a few thousand instructions a look-up, and every
/// write and controller step makes dozens.
pub trait At {
    /// The value at the JSON pointer `path`, as [`Value::pointer`] finds it.
    fn at(&self, path: &str) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, path: &str) -> Option<&Value> {
        submission::pointer::at(self, path)
    }
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

/// `metadata.uid`.
pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.at("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.at("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// `metadata.labels` (empty when absent).
pub fn labels(obj: &Value) -> &Map<String, Value> {
    static NONE: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    obj.at("/metadata/labels")
        .and_then(Value::as_object)
        .unwrap_or(&NONE)
}

/// `metadata.annotations` value for a key.
pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_finds_what_json_pointers_find() {
        let v = serde_json::json!({"a": {"b": [10, {"c": 1}], "x/y": 2, "m~n": 3, "": 4},
                                   "01": 5, "1": 6});
        for path in [
            "",
            "/a",
            "/a/b",
            "/a/b/0",
            "/a/b/1/c",
            "/a/b/2",
            "/a/b/01",
            "/a/b/+1",
            "/a/b/-1",
            "/a/x~1y",
            "/a/m~0n",
            "/a/",
            "/01",
            "/1",
            "a",
            "/a/b/1/c/d",
            "/nope",
        ] {
            assert_eq!(v.at(path), v.pointer(path), "{path}");
        }
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_secs(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_secs(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(format_secs(4_102_444_800), "2100-01-01T00:00:00Z");
    }

    #[test]
    fn parses_what_it_formats_and_offsets() {
        for secs in [0u64, 1_709_251_199, 4_102_444_800, 951_782_400] {
            assert_eq!(parse_rfc3339(&format_secs(secs)), Some((secs as i64, 0)));
        }
        assert_eq!(
            parse_rfc3339("2024-02-29T23:59:59.123456Z"),
            Some((1_709_251_199, 123_456_000))
        );
        assert_eq!(
            parse_rfc3339("2024-03-01T01:59:59+02:00"),
            Some((1_709_251_199, 0))
        );
        for bad in [
            "",
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T23:59:59",
            "x024-02-29T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn generated_suffix_is_five_safe_chars() {
        let s = generated_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
