//! The pure part of an update: the body's preconditions, the subresource's merge, admission
//! and generation, apart from the store's bookkeeping (resourceVersion, events, removal).
//!
//! A pod status write, the kubelet's every step, has a path of its own that does only what
//! concerns the status ([`pod_status`]); [`updated`] is the general path and, in debug builds
//! and the tests, the fast path's oracle.

use serde_json::{Value, json};

use super::change::{spec_changed, tracks_generation};
use super::{Part, WriteOpts, check_kind};
use crate::admission;
use crate::api_error::ApiError;
use crate::meta::At;
use crate::meta::{self, metadata_mut};
use crate::resources::ResourceType;

/// What [`pod_status`] made of a write.
#[derive(Debug)]
pub(super) enum Fast {
    /// Not a write it takes: the body back, for [`updated`].
    NotTaken(Value),
    /// Its answer: the object to store, or `None` when nothing changes (no event, the same
    /// resourceVersion), as [`updated`] and `same_but_resource_version` would have answered.
    Done(Result<Option<Value>, ApiError>),
}

/// A write to a pod's status subresource, doing only what concerns the status: the spec and
/// metadata are the stored pod's (the API server's pod status strategy resets them), so the
/// checks and defaults that read only them give the answer they gave when the pod was stored
/// (see [`admission::admit_pod_status`]), and the pod is copied only when its status changes.
pub(super) fn pod_status(
    rt: &ResourceType,
    ns: &str,
    name: &str,
    current: &Value,
    proposed: Value,
    part: Part,
    opts: &WriteOpts,
) -> Fast {
    if !takes(rt, current, part, opts) {
        return Fast::NotTaken(proposed);
    }
    // The general path is the definition: in debug builds (the tests' and CI's), every status
    // write is checked against it.
    #[cfg(debug_assertions)]
    let oracle = updated(rt, ns, name, current, proposed.clone(), part)
        .map(|p| (!super::same_but_resource_version(current, &p)).then_some(p));
    let fast = status_only(rt, ns, name, current, proposed);
    #[cfg(debug_assertions)]
    debug_assert_eq!(
        fast, oracle,
        "pod status write of {ns}/{name}: fast path differs"
    );
    Fast::Done(fast)
}

/// Whether [`pod_status`] answers as [`updated`] for this write without running its spec and
/// metadata checks: a non-dry-run status write to a stored pod whose top-level fields are the
/// Pod type's, of this type's `apiVersion` and `kind` and without `metadata.selfLink` (so the
/// general path's rewrites of those are no-ops; stored pods always are so).
fn takes(rt: &ResourceType, current: &Value, part: Part, opts: &WriteOpts) -> bool {
    const POD_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];
    let Some(obj) = current.as_object() else {
        return false;
    };
    part == Part::Status
        && !opts.dry_run
        && rt.status_subresource
        && !rt.custom
        && rt.group.is_empty()
        && rt.plural == "pods"
        && obj.keys().all(|k| POD_FIELDS.contains(&k.as_str()))
        && obj.get("apiVersion").and_then(Value::as_str) == Some(rt.api_version().as_str())
        && obj.get("kind").and_then(Value::as_str) == Some(rt.kind.as_str())
        && obj
            .get("metadata")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.contains_key("selfLink"))
}

fn status_only(
    rt: &ResourceType,
    ns: &str,
    name: &str,
    current: &Value,
    mut proposed: Value,
) -> Result<Option<Value>, ApiError> {
    check_body(rt, ns, name, current, &proposed)?;
    let status = proposed.as_object_mut().and_then(|o| o.remove("status"));
    let status = admission::admit_pod_status(rt, status, current);
    if current.get("status") == status.as_ref() {
        return Ok(None);
    }
    Ok(Some(with_status(current, status)))
}

/// `current` with `status` for its status (none: without one). Everything but the status is
/// the current object's; the status being replaced is not copied first.
fn with_status(current: &Value, status: Option<Value>) -> Value {
    let mut object = meta::fields_except(current, &["status"]);
    if let Some(s) = status {
        object.insert("status".into(), s);
    }
    Value::Object(object)
}

/// The body's own preconditions: an object of this type, naming this object, at the current
/// resourceVersion if it names one.
fn check_body(
    rt: &ResourceType,
    ns: &str,
    name: &str,
    current: &Value,
    proposed: &Value,
) -> Result<(), ApiError> {
    if !proposed.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    check_kind(rt, proposed)?;
    let body_name = meta::name(proposed);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = meta::meta_str(proposed, "namespace");
    if rt.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let body_rv = meta::meta_str(proposed, "resourceVersion");
    if !body_rv.is_empty() && body_rv != meta::meta_str(current, "resourceVersion") {
        return Err(ApiError::stale(&rt.group, &rt.plural, name));
    }
    Ok(())
}

/// The object an update of `current` with `proposed` stores (before its resourceVersion), or
/// why it is refused.
pub(super) fn updated(
    rt: &ResourceType,
    ns: &str,
    name: &str,
    current: &Value,
    mut proposed: Value,
    part: Part,
) -> Result<Value, ApiError> {
    check_body(rt, ns, name, current, &proposed)?;
    // Subresource semantics: a status write keeps everything but status; a main write keeps
    // status when the type has a status subresource.
    if rt.status_subresource {
        match part {
            Part::Status => {
                let status = proposed.as_object_mut().and_then(|o| o.remove("status"));
                proposed = with_status(current, status);
            }
            Part::Main => match current.get("status") {
                Some(s) => proposed["status"] = s.clone(),
                None => {
                    if let Some(o) = proposed.as_object_mut() {
                        o.remove("status");
                    }
                }
            },
        }
    }
    {
        // Server-owned metadata is never taken from the client.
        let cur_md = current.get("metadata").unwrap_or(&Value::Null);
        let md = metadata_mut(&mut proposed);
        for key in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ] {
            match cur_md.get(key) {
                Some(v) => md.insert(key.into(), v.clone()),
                None => md.remove(key),
            };
        }
        md.remove("selfLink");
    }
    if meta::is_deleting(current) {
        let before = meta::finalizers(current);
        let added = meta::finalizers(&proposed)
            .into_iter()
            .any(|f| !before.contains(&f));
        if added {
            return Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: no new finalizers can be added if the object is being deleted",
                rt.qualified()
            )));
        }
    }
    admission::admit_update(rt, &mut proposed, current)?;
    if tracks_generation(rt) && spec_changed(current, &proposed) {
        let generation = current
            .at("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        metadata_mut(&mut proposed).insert("generation".into(), json!(generation + 1));
    }
    proposed["apiVersion"] = json!(rt.api_version());
    proposed["kind"] = json!(rt.kind);
    Ok(proposed)
}

#[cfg(test)]
mod tests;
