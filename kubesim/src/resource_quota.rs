//! ResourceQuota as the API server's quota admission and the quota evaluators count it:
//! what an object consumes, which of a quota's resources concern it, the "must specify"
//! constraint for pods, and the check against `hard` with the API server's refusal text.
//!
//! Only scope-free matching: a quota with `scopes` or a `scopeSelector` is not enforced (and
//! counts nothing), rather than enforced on the wrong objects.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::meta::At;
use submission::quantity::Quantity;

/// Resource names and quantities (`requests.cpu: 500m`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// The resources whose use by a pod is compute: a quota on one of them needs every container
/// to say how much it uses.
const COMPUTE: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// The core types that also have a short quota name (`configmaps` for `count/configmaps`).
const SHORT_NAMES: [&str; 6] = [
    "configmaps",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "services",
];

/// A resource list from JSON (`spec.hard`, `resources.requests`); values that are not
/// quantities are left out (validation refuses them before they are stored).
pub fn resource_list(v: Option<&Value>) -> ResourceList {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), quantity_of(v)?)))
        .collect()
}

/// A quantity as JSON carries it: a string, or a number (which Go's decoder also takes).
pub fn quantity_of(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// A resource list as JSON, each quantity in its canonical form.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, q)| (k.clone(), Value::String(q.to_string())))
            .collect::<Map<String, Value>>(),
    )
}

/// `a + b` over the union of their names.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, q) in b {
        let sum = out.get(k).copied().unwrap_or(Quantity::ZERO) + *q;
        out.insert(k.clone(), sum);
    }
    out
}

/// `a - b` over the union of their names.
pub fn subtract(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, q) in b {
        let diff = out.get(k).copied().unwrap_or(Quantity::ZERO) - *q;
        out.insert(k.clone(), diff);
    }
    out
}

/// Only the names in `names`.
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a String>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|n| Some((n.clone(), *list.get(n)?)))
        .collect()
}

/// The API server's `prettyPrint`: `name=quantity` sorted by name, joined by commas.
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, q)| format!("{k}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The object-count name of a type: `count/configmaps`, `count/deployments.apps`.
fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// Whether a quota resource name concerns objects of this type (the evaluator's
/// `MatchingResources`).
pub fn handles(group: &str, plural: &str, resource: &str) -> bool {
    if resource == count_name(group, plural) {
        return true;
    }
    if !group.is_empty() {
        return false;
    }
    if plural == "pods" {
        return resource == "pods" || COMPUTE.contains(&resource);
    }
    resource == plural && SHORT_NAMES.contains(&plural)
}

/// Whether a quota takes part in admission: one without scopes (scoped quotas are not
/// modelled).
pub fn is_scope_free(quota: &Value) -> bool {
    let scopes = quota
        .at("/spec/scopes")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty());
    !scopes && quota.at("/spec/scopeSelector").is_none_or(Value::is_null)
}

/// What an object of this type consumes (the evaluators' `Usage`).
pub fn usage(group: &str, plural: &str, obj: &Value) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert(count_name(group, plural), Quantity::units(1));
    if group.is_empty() && SHORT_NAMES.contains(&plural) {
        out.insert(plural.to_string(), Quantity::units(1));
    }
    if group.is_empty() && plural == "pods" && !is_terminal(obj) {
        // Compute and `pods` follow the pod's life; `count/pods` counts it while stored.
        out.insert("pods".into(), Quantity::units(1));
        let (requests, limits) = pod_resources(obj);
        for res in ["cpu", "memory"] {
            if let Some(q) = requests.get(res) {
                out.insert(res.to_string(), *q);
                out.insert(format!("requests.{res}"), *q);
            }
            if let Some(q) = limits.get(res) {
                out.insert(format!("limits.{res}"), *q);
            }
        }
    }
    out
}

/// Succeeded and Failed pods consume no compute, as in Kubernetes.
fn is_terminal(pod: &Value) -> bool {
    matches!(
        pod.at("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

/// A pod's containers, then its init containers.
pub fn containers(pod: &Value) -> impl Iterator<Item = &Value> {
    ["containers", "initContainers"]
        .into_iter()
        .flat_map(|field| {
            pod.get("spec")
                .and_then(|s| s.get(field))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
}

fn container_resources(c: &Value, field: &str) -> ResourceList {
    resource_list(c.at(&format!("/resources/{field}")))
}

/// A pod's requests and limits: its containers and native sidecars together, or the largest
/// init container (with the sidecars started before it) when that is more, resource by
/// resource (`resourcehelper.PodRequests`/`PodLimits`).
pub fn pod_resources(pod: &Value) -> (ResourceList, ResourceList) {
    let list = |field: &str| {
        pod.at(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let containers = list("containers");
    let inits = list("initContainers");
    let mut out = Vec::new();
    for field in ["requests", "limits"] {
        let mut sum = ResourceList::new();
        for c in &containers {
            sum = add(&sum, &container_resources(c, field));
        }
        let mut sidecars = ResourceList::new();
        let mut init_peak = ResourceList::new();
        for c in &inits {
            let own = container_resources(c, field);
            if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
                sidecars = add(&sidecars, &own);
                sum = add(&sum, &own);
            } else {
                let during = add(&sidecars, &own);
                for (k, q) in during {
                    let peak = init_peak.entry(k).or_insert(Quantity::ZERO);
                    *peak = (*peak).max(q);
                }
            }
        }
        for (k, q) in init_peak {
            let total = sum.entry(k).or_insert(Quantity::ZERO);
            *total = (*total).max(q);
        }
        out.push(sum);
    }
    let limits = out.pop().unwrap_or_default();
    let requests = out.pop().unwrap_or_default();
    (requests, limits)
}

/// The pod evaluator's `Constraints`: a quota on cpu or memory needs every container to set
/// it (`must specify limits.cpu for: main; requests.memory for: main,sidecar`).
pub fn pod_constraints(restricted: &BTreeSet<String>, pod: &Value) -> Result<(), String> {
    let required: BTreeSet<&str> = restricted
        .iter()
        .map(String::as_str)
        .filter(|r| COMPUTE.contains(r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in containers(pod) {
        let requests = container_resources(c, "requests");
        let limits = container_resources(c, "limits");
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        for r in &required {
            let set = match *r {
                "cpu" | "requests.cpu" => requests.contains_key("cpu"),
                "memory" | "requests.memory" => requests.contains_key("memory"),
                "limits.cpu" => limits.contains_key("cpu"),
                _ => limits.contains_key("memory"),
            };
            if !set {
                missing.entry(r).or_default().insert(name.to_string());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// Checks one quota for an object consuming `requested` (its usage masked to the quota's
/// resources): the usage after admission, or the API server's refusal text.
pub fn check(
    name: &str,
    hard: &ResourceList,
    used: &ResourceList,
    requested: &ResourceList,
) -> Result<ResourceList, String> {
    let new_used = add(used, requested);
    let exceeded: Vec<&String> = requested
        .keys()
        .filter(|k| match (new_used.get(*k), hard.get(*k)) {
            (Some(u), Some(h)) => u > h,
            _ => false,
        })
        .collect();
    if exceeded.is_empty() {
        return Ok(new_used);
    }
    Err(format!(
        "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
        pretty(&mask(requested, exceeded.iter().copied())),
        pretty(&mask(used, exceeded.iter().copied())),
        pretty(&mask(hard, exceeded.iter().copied())),
    ))
}

#[cfg(test)]
mod tests;
