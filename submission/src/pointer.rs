//! JSON pointer look-ups (RFC 6901) over built objects and API answers, without the copy
//! `serde_json::Value::pointer` makes of every token to unescape it (a tenth of a fresh
//! submission's allocations went there). The pointers read here are constants without escapes;
//! one with `~` goes to `Value::pointer`.

use serde_json::Value;

/// What `value.pointer(pointer)` finds, without allocating when `pointer` holds no `~`.
pub fn at<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.contains('~') {
        return value.pointer(pointer);
    }
    if pointer.is_empty() {
        return Some(value);
    }
    pointer
        .strip_prefix('/')?
        .split('/')
        .try_fold(value, |target, token| match target {
            Value::Object(map) => map.get(token),
            Value::Array(list) => index(token).and_then(|i| list.get(i)),
            _ => None,
        })
}

/// An array index token as `Value::pointer` reads one: no sign, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// The string at `pointer`, or `""` when there is none.
pub fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    at(value, pointer).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_what_value_pointer_finds() {
        let object = json!({
            "kind": "Pod",
            "metadata": {"name": "d", "labels": {"a/b": "1", "c~d": "2"}, "": {"x": 3}},
            "list": [{"uid": "u0"}, {"uid": "u1"}],
        });
        let pointers = [
            "",
            "/",
            "/kind",
            "/metadata/name",
            "/metadata/labels/a~1b",
            "/metadata/labels/c~0d",
            "/metadata//x",
            "/list/1/uid",
            "/list/01/uid",
            "/list/+1/uid",
            "/list/2",
            "/kind/x",
            "kind",
            "/missing/deeper",
        ];
        for pointer in pointers {
            assert_eq!(at(&object, pointer), object.pointer(pointer), "{pointer:?}");
        }
        assert_eq!(text(&object, "/metadata/name"), "d");
        assert_eq!(text(&object, "/list"), "");
    }
}
