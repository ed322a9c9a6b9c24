//! Events: one storage, two views, as the API server serves them.
//!
//! The API server keeps every Event once (the internal `core.Event`, whose fields are core/v1's)
//! and serves it both as `v1` `Event` (what `kubectl describe` and the kubelet read and write)
//! and as `events.k8s.io/v1` `Event` (what kube-runtime's `Recorder` and client-go's new
//! recorder write), converting field by field (`pkg/apis/events/v1/conversion.go`):
//!
//! | events.k8s.io/v1 | core/v1 |
//! |---|---|
//! | `note` | `message` |
//! | `regarding` | `involvedObject` |
//! | `reportingController` | `reportingComponent` |
//! | `deprecatedSource` | `source` |
//! | `deprecatedFirstTimestamp` | `firstTimestamp` |
//! | `deprecatedLastTimestamp` | `lastTimestamp` |
//! | `deprecatedCount` | `count` |
//!
//! `metadata`, `eventTime`, `series` (`count`, `lastObservedTime`), `action`, `reason`,
//! `related`, `reportingInstance` and `type` are the same in both. kubesim stores the core/v1
//! form; the `events.k8s.io` type is a [`crate::resources::View`] of it. Both share names,
//! uids and resourceVersions, and a watch on either sees every write through both.
//!
//! Pure functions over JSON, no I/O.

use serde_json::{Map, Value, json};

use crate::api_error::{Cause, cause};
use crate::meta::At;

/// (events.k8s.io/v1 name, core/v1 name) of the fields whose names differ.
const RENAMED: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// The longest `reportingInstance`, `action` and `reason` the API server takes.
const SHORT_FIELD_LIMIT: usize = 128;
/// The longest `note` the API server takes.
const NOTE_LIMIT: usize = 1024;

/// Renames the fields of `obj` by `pairs` (from → to) and sets its `apiVersion`. A field that
/// carries the other version's name is not a field of this version, and is dropped as decoding
/// into the Go type drops it.
fn convert(
    obj: Value,
    api_version: &str,
    pairs: impl Iterator<Item = (&'static str, &'static str)>,
) -> Value {
    let Value::Object(mut from) = obj else {
        return obj;
    };
    let pairs: Vec<(&str, &str)> = pairs.collect();
    for (_, to) in &pairs {
        from.remove(*to);
    }
    let mut out = Map::new();
    for (key, value) in from {
        let renamed = pairs
            .iter()
            .find(|(f, _)| *f == key)
            .map_or(key, |(_, to)| (*to).to_string());
        out.insert(renamed, value);
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// An `events.k8s.io/v1` Event as kubesim stores it (core/v1). `involvedObject` and `source`
/// are structs in Go and always present in what the API server answers, so they are stored
/// empty when the event has none.
pub fn to_core(event: Value) -> Value {
    let mut core = convert(event, "v1", RENAMED.into_iter());
    if let Some(o) = core.as_object_mut() {
        o.entry("involvedObject").or_insert_with(|| json!({}));
        o.entry("source").or_insert_with(|| json!({}));
    }
    core
}

/// A stored (core/v1) Event as `events.k8s.io/v1` serves it.
pub fn to_events_v1(core: Value) -> Value {
    convert(
        core,
        "events.k8s.io/v1",
        RENAMED.into_iter().map(|(events, core)| (core, events)),
    )
}

/// The checks the API server makes on an Event created through `events.k8s.io/v1` (and not
/// through core/v1, for compatibility), on its stored form; field paths are the stored
/// (internal) names, as the API server reports them.
pub fn validate_create_v1(core: &Value) -> Vec<Cause> {
    let text = |field: &str| core.get(field).and_then(Value::as_str).unwrap_or("");
    let set = |field: &str| core.get(field).is_some_and(|v| !v.is_null());
    let mut causes = Vec::new();
    let required = |causes: &mut Vec<Cause>, field: &str| {
        causes.push(cause("FieldValueRequired", field, "Required value"))
    };
    if !set("eventTime") {
        required(&mut causes, "eventTime");
    }
    let kind = text("type");
    if kind != "Normal" && kind != "Warning" {
        causes.push(cause(
            "FieldValueInvalid",
            "type",
            format!("Invalid value: \"\": has invalid value: {kind}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if set(field) {
            causes.push(cause(
                "FieldValueInvalid",
                field,
                "Invalid value: \"\": needs to be unset",
            ));
        }
    }
    if core.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        causes.push(cause(
            "FieldValueInvalid",
            "count",
            "Invalid value: \"\": needs to be unset",
        ));
    }
    let source = |f: &str| core.at(&format!("/source/{f}")).and_then(Value::as_str);
    if source("component").is_some_and(|s| !s.is_empty())
        || source("host").is_some_and(|s| !s.is_empty())
    {
        causes.push(cause(
            "FieldValueInvalid",
            "source",
            "Invalid value: \"\": needs to be unset",
        ));
    }
    if let Some(series) = core.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            causes.push(cause(
                "FieldValueInvalid",
                "series.count",
                "Invalid value: \"\": should be at least 2",
            ));
        }
        if series.get("lastObservedTime").is_none_or(Value::is_null) {
            required(&mut causes, "series.lastObservedTime");
        }
    }
    if text("reportingComponent").is_empty() {
        required(&mut causes, "reportingController");
    }
    if text("reportingInstance").is_empty() {
        required(&mut causes, "reportingInstance");
    }
    for field in ["action", "reason"] {
        if text(field).is_empty() {
            required(&mut causes, field);
        }
    }
    for field in ["reportingInstance", "action", "reason"] {
        if text(field).len() > SHORT_FIELD_LIMIT {
            causes.push(cause(
                "FieldValueInvalid",
                field,
                format!("Invalid value: \"\": can have at most {SHORT_FIELD_LIMIT} characters"),
            ));
        }
    }
    if text("message").len() > NOTE_LIMIT {
        causes.push(cause(
            "FieldValueInvalid",
            "message",
            format!("Invalid value: \"\": can have at most {NOTE_LIMIT} characters"),
        ));
    }
    let ns = core
        .at("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let regarding_ns = core
        .at("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if regarding_ns.is_empty() && ns != "default" && ns != "kube-system" {
        causes.push(cause(
            "FieldValueInvalid",
            "involvedObject.namespace",
            "Invalid value: \"\": does not match event.namespace",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_v1() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "app.1", "namespace": "spark", "resourceVersion": "7"},
            "eventTime": "2026-12-01T10:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2026-12-01T10:05:00.000000Z"},
            "reportingController": "sparkoperator.k8s.io/operator",
            "reportingInstance": "operator-0",
            "action": "Submit", "reason": "SparkApplicationSubmitted", "type": "Normal",
            "regarding": {"kind": "SparkApplication", "name": "app", "namespace": "spark"},
            "related": {"kind": "Pod", "name": "app-driver", "namespace": "spark"},
            "note": "submitted",
            "deprecatedSource": {"component": "old", "host": "h"},
            "deprecatedFirstTimestamp": "2026-12-01T09:00:00Z",
            "deprecatedLastTimestamp": "2026-12-01T09:30:00Z",
            "deprecatedCount": 4,
        })
    }

    #[test]
    fn every_field_maps_as_the_api_servers_conversion_does() {
        let core = to_core(events_v1());
        assert_eq!(
            core,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "app.1", "namespace": "spark", "resourceVersion": "7"},
                "eventTime": "2026-12-01T10:00:00.000000Z",
                "series": {"count": 3, "lastObservedTime": "2026-12-01T10:05:00.000000Z"},
                "reportingComponent": "sparkoperator.k8s.io/operator",
                "reportingInstance": "operator-0",
                "action": "Submit", "reason": "SparkApplicationSubmitted", "type": "Normal",
                "involvedObject": {"kind": "SparkApplication", "name": "app", "namespace": "spark"},
                "related": {"kind": "Pod", "name": "app-driver", "namespace": "spark"},
                "message": "submitted",
                "source": {"component": "old", "host": "h"},
                "firstTimestamp": "2026-12-01T09:00:00Z",
                "lastTimestamp": "2026-12-01T09:30:00Z",
                "count": 4,
            })
        );
        assert_eq!(
            to_events_v1(core),
            events_v1(),
            "a round trip changes nothing"
        );
    }

    #[test]
    fn the_other_versions_names_are_not_fields() {
        let mut e = events_v1();
        e["message"] = json!("not an events.k8s.io field");
        assert_eq!(to_core(e)["message"], "submitted");
        let core = json!({"apiVersion": "v1", "kind": "Event", "message": "m", "note": "x"});
        assert_eq!(to_events_v1(core)["note"], "m");
    }

    #[test]
    fn an_event_without_a_subject_reads_with_empty_structs_in_core() {
        let core = to_core(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n"}));
        assert_eq!(core["involvedObject"], json!({}));
        assert_eq!(core["source"], json!({}));
    }

    #[test]
    fn creates_through_events_v1_are_checked_strictly() {
        let valid = {
            let mut e = events_v1();
            for f in [
                "deprecatedSource",
                "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp",
                "deprecatedCount",
            ] {
                e.as_object_mut().unwrap().remove(f);
            }
            e
        };
        assert_eq!(validate_create_v1(&to_core(valid.clone())), vec![]);
        let fields = |mutate: &dyn Fn(&mut Value)| {
            let mut e = valid.clone();
            mutate(&mut e);
            validate_create_v1(&to_core(e))
                .into_iter()
                .map(|c| c.field)
                .collect::<Vec<_>>()
        };
        type Mutation<'a> = &'a dyn Fn(&mut Value);
        let table: [(Mutation, &[&str]); 8] = [
            (&|e| e["eventTime"] = Value::Null, &["eventTime"]),
            (&|e| e["type"] = json!("Info"), &["type"]),
            (&|e| e["deprecatedCount"] = json!(2), &["count"]),
            (
                &|e| e["deprecatedSource"] = json!({"component": "c"}),
                &["source"],
            ),
            (
                &|e| e["series"] = json!({"count": 1}),
                &["series.count", "series.lastObservedTime"],
            ),
            (
                &|e| {
                    e.as_object_mut().unwrap().remove("reportingController");
                    e.as_object_mut().unwrap().remove("action");
                },
                &["reportingController", "action"],
            ),
            (&|e| e["note"] = json!("x".repeat(1025)), &["message"]),
            (
                &|e| e["regarding"] = json!({"kind": "Node", "name": "n"}),
                &["involvedObject.namespace"],
            ),
        ];
        for (mutate, want) in table {
            assert_eq!(fields(mutate), want);
        }
    }
}
