//! LimitRange as the API server's LimitRanger admission applies it to a new pod: the defaults
//! of `Container` items (`default` limits, `defaultRequest` requests) filled in where a
//! container sets none, then `min` and `max` of `Container` and `Pod` items enforced, with the
//! plugin's texts. Also the defaults a LimitRange item gets when it is stored.
//!
//! Not modelled: `maxLimitRequestRatio`, and `PersistentVolumeClaim` items.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::meta::At;
use crate::resource_quota::{ResourceList, containers, pod_resources, resource_list};
use submission::quantity::Quantity;

/// The annotation saying what the plugin set.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The defaults of a stored LimitRange (`SetDefaults_LimitRangeItem`): a `Container` item's
/// `default` is its `max` where unset, its `defaultRequest` its `default`, else its `min`.
pub fn default_limit_range(obj: &mut Value) {
    let Some(items) = obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let get = |item: &Map<String, Value>, k: &str| {
            item.get(k)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let mut default = get(item, "default");
        let mut default_request = get(item, "defaultRequest");
        for (k, v) in get(item, "max") {
            default.entry(k).or_insert(v);
        }
        for (k, v) in default.iter().chain(get(item, "min").iter()) {
            default_request.entry(k.clone()).or_insert(v.clone());
        }
        if !default.is_empty() {
            item.insert("default".into(), Value::Object(default));
        }
        if !default_request.is_empty() {
            item.insert("defaultRequest".into(), Value::Object(default_request));
        }
    }
}

fn items<'a>(ranges: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    ranges
        .iter()
        .flat_map(|r| {
            r.at("/spec/limits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(kind))
}

/// Fills in the containers' missing requests and limits from the `Container` items, and notes
/// what it set in the [`ANNOTATION`] (`LimitRanger plugin set: cpu request for container
/// main; cpu, memory limit for container main`).
pub fn apply_defaults(pod: &mut Value, ranges: &[Value]) {
    let mut defaults = (Map::new(), Map::new());
    for item in items(ranges, "Container") {
        for (field, into) in [
            ("defaultRequest", &mut defaults.0),
            ("default", &mut defaults.1),
        ] {
            for (k, v) in item
                .get(field)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    if defaults.0.is_empty() && defaults.1.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for (field, what) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(list) = pod
            .pointer_mut(&format!("/spec/{field}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in list.iter_mut().filter_map(Value::as_object_mut) {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let resources = c.entry("resources").or_insert_with(|| json!({}));
            for (bucket, default, noun) in [
                ("requests", &defaults.0, "request"),
                ("limits", &defaults.1, "limit"),
            ] {
                let Some(r) = resources.as_object_mut() else {
                    continue;
                };
                let list = r.entry(bucket).or_insert_with(|| json!({}));
                let Some(list) = list.as_object_mut() else {
                    continue;
                };
                let mut set: Vec<&String> = Vec::new();
                for (k, v) in default {
                    if !list.contains_key(k) {
                        list.insert(k.clone(), v.clone());
                        set.push(k);
                    }
                }
                if !set.is_empty() {
                    set.sort();
                    let names: Vec<&str> = set.iter().map(|s| s.as_str()).collect();
                    notes.push(format!("{} {noun} for {what} {name}", names.join(", ")));
                }
            }
        }
    }
    if !notes.is_empty() {
        let md = pod
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
        if let Some(Value::Object(md)) = md {
            let annotations = md.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(
                    ANNOTATION.into(),
                    json!(format!("LimitRanger plugin set: {}", notes.join("; "))),
                );
            }
        }
    }
}

/// Which bound an item sets.
#[derive(Clone, Copy)]
enum Bound {
    /// `min`: the request must be set and not below it, nor the limit when set.
    Min,
    /// `max`: the limit must be set and not above it, nor the request when set.
    Max,
}

/// The plugin's `minConstraint` and `maxConstraint`.
fn constraint(
    bound: Bound,
    kind: &str,
    resource: &str,
    enforced: Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (word, first, second) = match bound {
        Bound::Min => ("minimum", ("request", requests), ("limit", limits)),
        Bound::Max => ("maximum", ("limit", limits), ("request", requests)),
    };
    let beyond = |q: &Quantity| match bound {
        Bound::Min => *q < enforced,
        Bound::Max => *q > enforced,
    };
    let per = format!("{word} {resource} usage per {kind} is {enforced}");
    match (first.1.get(resource), second.1.get(resource)) {
        (None, _) => Some(format!("{per}.  No {} is specified", first.0)),
        (Some(q), _) if beyond(q) => Some(format!("{per}, but {} is {q}", first.0)),
        (_, Some(q)) if beyond(q) => Some(format!("{per}, but {} is {q}", second.0)),
        _ => None,
    }
}

/// The refusals of `min` and `max` for one set of requests and limits.
fn enforce(
    item: &Value,
    kind: &str,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Vec<String> {
    let mut errs = Vec::new();
    for (field, bound) in [("min", Bound::Min), ("max", Bound::Max)] {
        for (resource, enforced) in resource_list(item.get(field)) {
            errs.extend(constraint(
                bound, kind, &resource, enforced, requests, limits,
            ));
        }
    }
    errs
}

/// Enforces `min` and `max` on the pod's containers (`Container` items) and on the pod as a
/// whole (`Pod` items); the refusal is the plugin's aggregate text (one error alone, several
/// as `[a, b]`).
pub fn validate(pod: &Value, ranges: &[Value]) -> Result<(), String> {
    let mut errs = Vec::new();
    for item in items(ranges, "Container") {
        for c in containers(pod) {
            let requests = resource_list(c.at("/resources/requests"));
            let limits = resource_list(c.at("/resources/limits"));
            errs.extend(enforce(item, "Container", &requests, &limits));
        }
    }
    for item in items(ranges, "Pod") {
        let (requests, limits) = pod_resources(pod);
        errs.extend(enforce(item, "Pod", &requests, &limits));
    }
    // The same refusal from two ranges is said once, as an aggregate of a set would.
    let mut seen = BTreeSet::new();
    errs.retain(|e| seen.insert(e.clone()));
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

#[cfg(test)]
mod tests;
