//! Discovery documents and `/version`.

use serde_json::{Value, json};

use crate::resources::Registry;

/// The Kubernetes version kubesim reports (the one its behaviour follows).
pub const KUBE_VERSION: (&str, &str) = ("1", "34");

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": KUBE_VERSION.0,
        "minor": KUBE_VERSION.1,
        "gitVersion": format!("v{}.{}.0-kubesim", KUBE_VERSION.0, KUBE_VERSION.1),
        "gitCommit": "kubesim",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    reg.groups().iter().find(|(g, _)| g == name).map(|(g, vs)| {
        let mut doc = group_doc(g, vs);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        doc
    })
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resources(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let entries: Vec<Value> = reg
        .all()
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .flat_map(|t| t.discovery_entries())
        .collect();
    if entries.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": entries,
    }))
}
