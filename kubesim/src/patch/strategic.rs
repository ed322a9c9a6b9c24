//! Kubernetes strategic merge patch (`application/strategic-merge-patch+json`).

use serde_json::{Map, Value};

use super::{ListStrategy, PatchError, list_strategy};

const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge patch to `target`.
///
/// Lists are merged by the merge keys of the core types (see the module
/// table); directives `$patch` (`replace`/`delete`/`merge`), `$retainKeys`,
/// `$deleteFromPrimitiveList/<field>` are honoured and `$setElementOrder/<field>` is ignored.
pub fn strategic_merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let patch = patch.as_object().ok_or_else(|| {
        PatchError::Malformed("strategic merge patch must be a JSON object".into())
    })?;
    let target = target
        .as_object()
        .ok_or_else(|| PatchError::InvalidTarget("object to patch is not a JSON object".into()))?;
    // A top-level `$patch: delete` leaves nothing to keep, so the result is the empty object.
    Ok(Value::Object(merge_map(target, patch)?.unwrap_or_default()))
}

fn patch_directive(patch: &Map<String, Value>) -> Result<Option<&str>, PatchError> {
    match patch.get("$patch") {
        None => Ok(None),
        Some(Value::String(s)) => match s.as_str() {
            "replace" | "delete" | "merge" => Ok(Some(s)),
            other => Err(PatchError::InvalidDirective(format!(
                "Unknown patch type: {other}"
            ))),
        },
        Some(other) => Err(PatchError::InvalidDirective(format!(
            "$patch must be a string, got {other}"
        ))),
    }
}

/// Returns `None` when the patch asks for the map to be deleted.
fn merge_map(
    original: &Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch_directive(patch)? {
        Some("delete") => return Ok(None),
        Some("replace") => {
            let mut rest = patch.clone();
            rest.remove("$patch");
            // Merging into an empty map strips any nested directives from the replacement.
            return merge_map(&Map::new(), &rest);
        }
        _ => {}
    }

    let mut result = original.clone();
    if let Some(keys) = patch.get("$retainKeys") {
        let keys = keys
            .as_array()
            .filter(|a| a.iter().all(Value::is_string))
            .ok_or_else(|| {
                PatchError::InvalidDirective("$retainKeys must be a list of strings".into())
            })?;
        result.retain(|k, _| keys.iter().any(|rk| rk.as_str() == Some(k)));
    }

    // Deletions first so a patch that both removes and re-adds values ends with them present.
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let doomed = pv
                .as_array()
                .ok_or_else(|| PatchError::InvalidDirective(format!("{k} must be a list")))?;
            if let Some(Value::Array(list)) = result.get_mut(field) {
                list.retain(|v| !doomed.contains(v));
            }
        }
    }

    for (k, pv) in patch {
        if k == "$patch"
            || k == "$retainKeys"
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        let merged = match (result.get(k), pv) {
            (_, Value::Null) => None,
            (Some(Value::Object(o)), Value::Object(p)) => merge_map(o, p)?.map(Value::Object),
            (_, Value::Object(p)) => merge_map(&Map::new(), p)?.map(Value::Object),
            (Some(Value::Array(o)), Value::Array(p)) => Some(Value::Array(merge_list(k, o, p)?)),
            (_, Value::Array(p)) => Some(Value::Array(merge_list(k, &[], p)?)),
            (_, scalar) => Some(scalar.clone()),
        };
        match merged {
            Some(v) => {
                result.insert(k.clone(), v);
            }
            None => {
                result.remove(k);
            }
        }
    }
    Ok(Some(result))
}

fn is_replace_marker(v: &Value) -> bool {
    v.get("$patch").and_then(Value::as_str) == Some("replace")
}

fn merge_list(field: &str, original: &[Value], patch: &[Value]) -> Result<Vec<Value>, PatchError> {
    if patch.iter().any(is_replace_marker) {
        let mut out = Vec::new();
        for v in patch.iter().filter(|v| !is_replace_marker(v)) {
            match v {
                Value::Object(m) => {
                    if let Some(m) = merge_map(&Map::new(), m)? {
                        out.push(Value::Object(m));
                    }
                }
                other => out.push(other.clone()),
            }
        }
        return Ok(out);
    }
    match list_strategy(field, &[original, patch]) {
        ListStrategy::Atomic => Ok(patch.to_vec()),
        ListStrategy::Set => {
            let mut out = original.to_vec();
            for v in patch {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(out)
        }
        ListStrategy::Keyed(key) => merge_keyed_list(key, original, patch),
    }
}

fn merge_keyed_list(
    key: &str,
    original: &[Value],
    patch: &[Value],
) -> Result<Vec<Value>, PatchError> {
    let mut out = original.to_vec();
    for pe in patch {
        let missing = || PatchError::MissingMergeKey {
            element: pe.to_string(),
            key: key.to_string(),
        };
        let pm = pe.as_object().ok_or_else(missing)?;
        let kv = pm.get(key).ok_or_else(missing)?;
        if patch_directive(pm)? == Some("delete") {
            out.retain(|e| e.get(key) != Some(kv));
            continue;
        }
        match out.iter().position(|e| e.get(key) == Some(kv)) {
            Some(i) => {
                let base = out[i].as_object().cloned().unwrap_or_default();
                match merge_map(&base, pm)? {
                    Some(m) => out[i] = Value::Object(m),
                    None => {
                        out.remove(i);
                    }
                }
            }
            None => {
                if let Some(m) = merge_map(&Map::new(), pm)? {
                    out.push(Value::Object(m));
                }
            }
        }
    }
    Ok(out)
}
