//! PATCH semantics of the Kubernetes API: JSON merge patch (RFC 7386), JSON
//! patch (RFC 6902), strategic merge patch, server-side apply and the
//! `metadata.managedFields` bookkeeping for ordinary writes.
//!
//! Everything here is pure `serde_json::Value` in, `Value` out; the HTTP layer
//! owns content types, body parsing, preconditions and storage.

mod apply;
mod created;
mod fieldset;
mod strategic;

use serde_json::Value;

pub use apply::{apply, created_entries, record_update};
pub use created::{CreatedFields, created_fields};
pub use strategic::strategic_merge_patch;

/// Why a merge/JSON/strategic patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document has the wrong shape (e.g. JSON patch that is not an op array).
    #[error("malformed patch: {0}")]
    Malformed(String),
    /// A JSON patch `test` operation did not match.
    #[error("json patch test operation failed: {0}")]
    TestFailed(String),
    /// A JSON patch operation could not be applied (e.g. path does not exist).
    #[error("json patch operation failed: {0}")]
    Failed(String),
    /// The object being patched is not a JSON object.
    #[error("invalid patch target: {0}")]
    InvalidTarget(String),
    /// A strategic merge patch list element lacks the list's merge key.
    #[error("map: {element} does not contain declared merge key: {key}")]
    MissingMergeKey {
        /// The offending list element, JSON-encoded.
        element: String,
        /// The merge key of the list.
        key: String,
    },
    /// A `$patch`, `$retainKeys` or `$deleteFromPrimitiveList` directive is unusable.
    #[error("invalid strategic merge patch directive: {0}")]
    InvalidDirective(String),
}

impl PatchError {
    /// Stable machine-readable name of the error variant.
    pub fn kind(&self) -> &'static str {
        match self {
            PatchError::Malformed(_) => "malformed",
            PatchError::TestFailed(_) => "test_failed",
            PatchError::Failed(_) => "failed",
            PatchError::InvalidTarget(_) => "invalid_target",
            PatchError::MissingMergeKey { .. } => "missing_merge_key",
            PatchError::InvalidDirective(_) => "invalid_directive",
        }
    }
}

/// Why a server-side apply was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The applied configuration or the stored object is unusable (HTTP 400/422).
    #[error("{0}")]
    Invalid(String),
    /// Fields in the applied configuration are owned by other managers with different values (HTTP 409).
    #[error("{}", conflict_message(conflicts))]
    Conflict {
        /// `(manager, field path)` pairs, e.g. `("kubectl", ".spec.replicas")`.
        conflicts: Vec<(String, String)>,
    },
}

impl ApplyError {
    /// Stable machine-readable name of the error variant.
    pub fn kind(&self) -> &'static str {
        match self {
            ApplyError::Invalid(_) => "invalid",
            ApplyError::Conflict { .. } => "conflict",
        }
    }
}

/// Mirrors the apiserver's wording so clients that print the Status message look familiar.
fn conflict_message(conflicts: &[(String, String)]) -> String {
    match conflicts {
        [(manager, path)] => {
            format!("Apply failed with 1 conflict: conflict with \"{manager}\": {path}")
        }
        _ => {
            let mut managers: Vec<&str> = Vec::new();
            for (m, _) in conflicts {
                if !managers.contains(&m.as_str()) {
                    managers.push(m);
                }
            }
            let groups: Vec<String> = managers
                .iter()
                .map(|m| {
                    let paths: Vec<String> = conflicts
                        .iter()
                        .filter(|(cm, _)| cm == m)
                        .map(|(_, p)| format!("- {p}"))
                        .collect();
                    format!("conflicts with \"{m}\":\n{}", paths.join("\n"))
                })
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                groups.join("\n")
            )
        }
    }
}

/// RFC 7386 JSON merge patch: objects merge recursively, `null` deletes, anything else replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut doc = target.clone();
    json_patch::merge(&mut doc, patch);
    doc
}

/// RFC 6902 JSON patch; `patch` must be an array of operations.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_array() {
        return Err(PatchError::Malformed(
            "json patch must be an array of operations".into(),
        ));
    }
    let ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| PatchError::Malformed(e.to_string()))?;
    let mut doc = target.clone();
    json_patch::patch(&mut doc, &ops).map_err(|e| match e.kind {
        json_patch::PatchErrorKind::TestFailed => PatchError::TestFailed(e.to_string()),
        _ => PatchError::Failed(e.to_string()),
    })?;
    Ok(doc)
}

/// How a list field is merged by strategic merge patch and server-side apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Elements are objects identified by this key.
    Keyed(&'static str),
    /// Elements are primitives merged as a set.
    Set,
    /// The list is replaced as a whole.
    Atomic,
}

/// Merge strategy for a list, by field name, mirroring the `patchMergeKey`
/// tags of the core types kubesim serves. `ports` is ambiguous by name alone
/// (container vs Service ports), so the elements decide.
fn list_strategy(field: &str, lists: &[&[Value]]) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "secrets"
        | "resourceClaims" => ListStrategy::Keyed("name"),
        "volumeMounts" => ListStrategy::Keyed("mountPath"),
        "ownerReferences" => ListStrategy::Keyed("uid"),
        "conditions" => ListStrategy::Keyed("type"),
        "podIPs" | "hostIPs" => ListStrategy::Keyed("ip"),
        "ports" => {
            let container = lists
                .iter()
                .flat_map(|l| l.iter())
                .any(|e| e.get("containerPort").is_some());
            ListStrategy::Keyed(if container { "containerPort" } else { "port" })
        }
        "finalizers" => ListStrategy::Set,
        _ => ListStrategy::Atomic,
    }
}

#[cfg(test)]
mod tests;
