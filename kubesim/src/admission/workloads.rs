//! Validation and defaulting of the types beyond the core group: Deployments and ReplicaSets
//! (`apps/v1`), RBAC roles and bindings, PodDisruptionBudgets, with the field errors and
//! defaults the API server gives.

use serde_json::{Map, Value, json};

use super::{default_pod_spec, set_default, validate_pod};
use crate::api_error::{Cause, cause};
use crate::meta::At;
use crate::resources::ResourceType;
use crate::selector::LabelSelector;

/// Field errors of a new or changed object of one of these types.
pub fn validate(rt: &ResourceType, obj: &Value, causes: &mut Vec<Cause>) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments" | "replicasets") => validate_workload(rt, obj, causes),
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => validate_rules(obj, causes),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            validate_binding(obj, causes)
        }
        ("policy", "poddisruptionbudgets")
            if obj.at("/spec/minAvailable").is_some()
                && obj.at("/spec/maxUnavailable").is_some() =>
        {
            causes.push(cause(
                "FieldValueInvalid",
                "spec",
                "Invalid value: policy.PodDisruptionBudgetSpec{...}: minAvailable and maxUnavailable cannot be both set",
            ));
        }
        _ => {}
    }
}

/// Field errors of an update that only updates may have (immutable fields).
pub fn validate_update(rt: &ResourceType, obj: &Value, current: &Value, causes: &mut Vec<Cause>) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments" | "replicasets")
            if obj.at("/spec/selector") != current.at("/spec/selector") =>
        {
            causes.push(cause(
                "FieldValueInvalid",
                "spec.selector",
                format!(
                    "Invalid value: {}: field is immutable",
                    obj.at("/spec/selector").cloned().unwrap_or(Value::Null)
                ),
            ));
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings")
            if obj.get("roleRef") != current.get("roleRef") =>
        {
            causes.push(cause(
                "FieldValueInvalid",
                "roleRef",
                format!(
                    "Invalid value: {}: cannot change roleRef",
                    obj.get("roleRef").cloned().unwrap_or(Value::Null)
                ),
            ));
        }
        _ => {}
    }
}

fn int_or_percent(v: Option<&Value>) -> Option<bool> {
    match v? {
        Value::Number(n) => Some(n.as_i64() == Some(0)),
        Value::String(s) => Some(s == "0" || s == "0%"),
        _ => None,
    }
}

fn validate_workload(rt: &ResourceType, obj: &Value, causes: &mut Vec<Cause>) {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let selector = spec.get("selector");
    let parsed = selector.and_then(LabelSelector::from_label_selector);
    match (selector, &parsed) {
        (None, _) | (Some(Value::Null), _) => causes.push(cause(
            "FieldValueRequired",
            "spec.selector",
            "Required value",
        )),
        (Some(_), None) => causes.push(cause(
            "FieldValueInvalid",
            "spec.selector",
            "Invalid value: the selector has an unknown operator",
        )),
        (Some(_), Some(sel)) if sel.is_empty() => causes.push(cause(
            "FieldValueInvalid",
            "spec.selector",
            "Invalid value: \"\": empty selector is invalid for deployment",
        )),
        (Some(_), Some(sel)) => {
            let labels = spec
                .at("/template/metadata/labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if !sel.matches(&labels) {
                causes.push(cause(
                    "FieldValueInvalid",
                    "spec.template.metadata.labels",
                    format!(
                        "Invalid value: {}: `selector` does not match template `labels`",
                        Value::Object(labels)
                    ),
                ));
            }
        }
    }
    if let Some(r) = spec.get("replicas")
        && r.as_i64().is_none_or(|n| n < 0)
    {
        causes.push(cause(
            "FieldValueInvalid",
            "spec.replicas",
            format!("Invalid value: {r}: must be greater than or equal to 0"),
        ));
    }
    let template_pod = json!({"spec": spec.at("/template/spec").cloned().unwrap_or(Value::Null)});
    let mut pod_causes = Vec::new();
    validate_pod(&template_pod, &mut pod_causes);
    for mut c in pod_causes {
        c.field = format!("spec.template.{}", c.field);
        causes.push(c);
    }
    if let Some(p) = spec
        .at("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        && p != "Always"
    {
        causes.push(cause(
            "FieldValueNotSupported",
            "spec.template.spec.restartPolicy",
            format!("Unsupported value: \"{p}\": supported values: \"Always\""),
        ));
    }
    if rt.plural == "deployments" {
        let strategy = spec.at("/strategy/type").and_then(Value::as_str);
        if let Some(t) = strategy
            && !matches!(t, "RollingUpdate" | "Recreate")
        {
            causes.push(cause(
                "FieldValueNotSupported",
                "spec.strategy.type",
                format!(
                    "Unsupported value: \"{t}\": supported values: \"Recreate\", \"RollingUpdate\""
                ),
            ));
        }
        let surge0 = int_or_percent(spec.at("/strategy/rollingUpdate/maxSurge"));
        let unavail0 = int_or_percent(spec.at("/strategy/rollingUpdate/maxUnavailable"));
        if strategy != Some("Recreate") && surge0 == Some(true) && unavail0 == Some(true) {
            causes.push(cause(
                "FieldValueInvalid",
                "spec.strategy.rollingUpdate.maxUnavailable",
                "Invalid value: 0: may not be 0 when `maxSurge` is 0",
            ));
        }
    }
}

fn validate_rules(obj: &Value, causes: &mut Vec<Cause>) {
    for (i, r) in obj
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let empty = |f: &str| r.get(f).and_then(Value::as_array).is_none_or(Vec::is_empty);
        if empty("verbs") {
            causes.push(cause(
                "FieldValueRequired",
                format!("rules[{i}].verbs"),
                "Required value: verbs must contain at least one value",
            ));
        }
        if empty("nonResourceURLs") && empty("resources") {
            causes.push(cause(
                "FieldValueRequired",
                format!("rules[{i}].resources"),
                "Required value: resource rules must supply at least one resource",
            ));
        }
    }
}

fn validate_binding(obj: &Value, causes: &mut Vec<Cause>) {
    let kind = obj.at("/roleRef/kind").and_then(Value::as_str);
    let name = obj
        .at("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !matches!(kind, Some("Role" | "ClusterRole")) {
        causes.push(cause(
            "FieldValueNotSupported",
            "roleRef.kind",
            format!(
                "Unsupported value: \"{}\": supported values: \"Role\", \"ClusterRole\"",
                kind.unwrap_or("")
            ),
        ));
    }
    if name.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "roleRef.name",
            "Required value",
        ));
    }
    for (i, s) in obj
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let k = s.get("kind").and_then(Value::as_str).unwrap_or("");
        if !matches!(k, "User" | "Group" | "ServiceAccount") {
            causes.push(cause(
                "FieldValueNotSupported",
                format!("subjects[{i}].kind"),
                format!("Unsupported value: \"{k}\": supported values: \"ServiceAccount\", \"User\", \"Group\""),
            ));
        }
        if s.get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            causes.push(cause(
                "FieldValueRequired",
                format!("subjects[{i}].name"),
                "Required value",
            ));
        }
    }
}

fn default_template(spec: &mut Map<String, Value>) {
    if let Some(pod_spec) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        default_pod_spec(pod_spec);
    }
}

/// Fills the defaults the API server gives these types.
pub fn default(rt: &ResourceType, obj: &mut Value) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => {
            let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
                return;
            };
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
            let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
            if let Some(s) = strategy.as_object_mut() {
                set_default(s, "type", json!("RollingUpdate"));
                if s.get("type") == Some(&json!("RollingUpdate")) {
                    let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
                    if let Some(ru) = ru.as_object_mut() {
                        set_default(ru, "maxSurge", json!("25%"));
                        set_default(ru, "maxUnavailable", json!("25%"));
                    }
                }
            }
            default_template(spec);
        }
        ("apps", "replicasets") => {
            let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
                return;
            };
            set_default(spec, "replicas", json!(1));
            default_template(spec);
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            if let Some(subjects) = obj.get_mut("subjects").and_then(Value::as_array_mut) {
                for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some("User" | "Group") = s.get("kind").and_then(Value::as_str) {
                        set_default(s, "apiGroup", json!("rbac.authorization.k8s.io"));
                    }
                }
            }
        }
        _ => {}
    }
}
