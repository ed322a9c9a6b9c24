//! What an update changes: whether it is a no-op (kept without a new resourceVersion) and
//! whether it bumps `metadata.generation`.

use serde_json::Value;

use crate::resources::ResourceType;

/// Types whose API strategy maintains `metadata.generation` (ConfigMaps, Services, Namespaces
/// and the like have none).
pub(super) fn tracks_generation(rt: &ResourceType) -> bool {
    rt.custom
        || matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("", "pods")
                | ("apiextensions.k8s.io", "customresourcedefinitions")
                | ("networking.k8s.io", "networkpolicies" | "ingresses")
                | ("apps", "deployments" | "replicasets")
                | ("policy", "poddisruptionbudgets")
        )
}

/// Whether two objects are equal but for `metadata.resourceVersion` (compared in place: a write
/// would otherwise copy both objects just to ask).
pub(super) fn same_but_resource_version(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let without_rv = |m: &'_ serde_json::Map<String, Value>| {
        m.len() - usize::from(m.contains_key("resourceVersion"))
    };
    a.len() == b.len()
        && a.iter().all(|(key, av)| match (key.as_str(), b.get(key)) {
            (_, None) => false,
            ("metadata", Some(bv)) => match (av.as_object(), bv.as_object()) {
                (Some(am), Some(bm)) => {
                    without_rv(am) == without_rv(bm)
                        && am
                            .iter()
                            .filter(|(k, _)| *k != "resourceVersion")
                            .all(|(k, v)| bm.get(k) == Some(v))
                }
                _ => av == bv,
            },
            (_, Some(bv)) => av == bv,
        })
}

pub(super) fn spec_changed(current: &Value, proposed: &Value) -> bool {
    // Generation tracks the desired state: everything but metadata and status. Compared in
    // place: every update passes here, and copying both objects to strip them cost more than
    // the rest of the write.
    const IGNORED: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];
    let (Some(a), Some(b)) = (current.as_object(), proposed.as_object()) else {
        return current != proposed;
    };
    let desired = |m: &'_ serde_json::Map<String, Value>| {
        m.iter()
            .filter(|(k, _)| !IGNORED.contains(&k.as_str()))
            .count()
    };
    desired(a) != desired(b)
        || a.iter()
            .filter(|(k, _)| !IGNORED.contains(&k.as_str()))
            .any(|(k, v)| b.get(k) != Some(v))
}
