//! The few JDK behaviours whose exact output ends up in the driver objects, and timestamps.

/// `String.split(sep)` for a one-char literal separator: trailing empty strings are dropped.
pub(crate) fn split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    // Java gives [""] for "", which the loop above emptied.
    if parts.is_empty() && s.is_empty() {
        parts.push("");
    }
    parts
}

/// `Double.parseDouble`: surrounding whitespace (chars up to U+0020) ignored, an optional
/// `d`/`f` suffix allowed.
pub(crate) fn parse_double(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let t = t
        .strip_suffix(['d', 'D', 'f', 'F'])
        .filter(|rest| !rest.is_empty() && !rest.ends_with(['e', 'E', '+', '-']))
        .unwrap_or(t);
    match t {
        "NaN" | "+NaN" | "-NaN" => return Some(f64::NAN),
        "Infinity" | "+Infinity" => return Some(f64::INFINITY),
        "-Infinity" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    // Rust also accepts "inf", "nan" and "infinity" spelled otherwise; Java does not.
    if t.chars()
        .any(|c| c.is_ascii_alphabetic() && !matches!(c, 'e' | 'E'))
    {
        return None;
    }
    t.parse().ok()
}

/// `Double.toString`: the shortest digits that round-trip, in plain notation for
/// 10^-3 <= |x| < 10^7 (always with a fractional part) and as `d.dddE±n` otherwise.
pub(crate) fn double_to_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let abs = x.abs();
    if (1e-3..1e7).contains(&abs) {
        let plain = format!("{x}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        // Rust's `{:e}` gives the same shortest digits as `1.5e-4` / `1e7`.
        let sci = format!("{x:e}");
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_owned()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exponent}")
    }
}

/// One `key=value` line of `Properties.store(Writer, …)`: backslash, tab, newline, carriage
/// return and form feed escaped, `=`, `:`, `#` and `!` backslash-escaped, spaces escaped
/// everywhere in keys but only at the start of values; other characters written as they are.
pub(crate) fn push_property(out: &mut String, key: &str, value: &str) {
    escape_into(out, key, true);
    out.push('=');
    escape_into(out, value, false);
    out.push('\n');
}

fn escape_into(out: &mut String, s: &str, escape_space: bool) {
    for (i, c) in s.chars().enumerate() {
        match c {
            ' ' if i == 0 || escape_space => out.push_str("\\ "),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

/// `new Date(ms).toString()` in UTC: `Sat Nov 29 13:43:00 UTC 2025`.
pub(crate) fn date_to_string(epoch_ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = epoch_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let month_name = MONTHS[(month - 1) as usize];
    format!(
        "{weekday} {month_name} {day:02} {:02}:{:02}:{:02} UTC {year}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// RFC 3339 UTC timestamp with second precision, for the error body's `timestamp`.
pub fn rfc3339(epoch_ms: i64) -> String {
    let secs = epoch_ms.div_euclid(1000);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil: (year, month 1-12, day 1-31) of days since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_drops_trailing_empties_like_java() {
        assert_eq!(split("a:b", ':'), vec!["a", "b"]);
        assert_eq!(split("a:b:", ':'), vec!["a", "b"]);
        assert_eq!(split("a::", ':'), vec!["a"]);
        assert_eq!(split(":b", ':'), vec!["", "b"]);
        assert_eq!(split("", ':'), vec![""]);
    }

    #[test]
    fn doubles_print_like_java() {
        for (x, s) in [
            (0.1, "0.1"),
            (0.4, "0.4"),
            (1.0, "1.0"),
            (0.25, "0.25"),
            (1e7, "1.0E7"),
            (1.5e-4, "1.5E-4"),
            (123.0, "123.0"),
        ] {
            assert_eq!(double_to_string(x), s);
        }
        assert_eq!(parse_double(" 0.25d"), Some(0.25));
        assert_eq!(parse_double("inf"), None);
        assert_eq!(parse_double("abc"), None);
    }

    #[test]
    fn properties_escape_like_java() {
        let mut out = String::new();
        push_property(&mut out, "spark.master", "k8s://http://h:1");
        push_property(&mut out, "a b", " x y=z!#");
        push_property(&mut out, "n", "é\tq");
        assert_eq!(
            out,
            "spark.master=k8s\\://http\\://h\\:1\na\\ b=\\ x y\\=z\\!\\#\nn=é\\tq\n"
        );
    }

    #[test]
    fn dates_print_like_java_in_utc() {
        assert_eq!(date_to_string(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(rfc3339(1_764_423_780_000), "2025-11-29T13:43:00Z");
        assert_eq!(
            date_to_string(1_764_423_780_000),
            "Sat Nov 29 13:43:00 UTC 2025"
        );
    }
}
