//! Deletion: graceful pod termination, finalizers and propagation policies, and what removing
//! an object does to the store itself (a CRD takes its resources with it).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{DeleteOpts, Event, EventType, Inner, ObjKey, type_key};
use crate::api_error::ApiError;
use crate::meta::At;
use crate::meta::{self, metadata_mut};
use crate::resources::ResourceType;

impl Inner {
    /// Whether an object being deleted has nothing left holding it.
    pub(super) fn ready_to_remove(&self, rt: &ResourceType, obj: &Value) -> bool {
        if !meta::finalizers(obj).is_empty() {
            return false;
        }
        if rt.group.is_empty() && rt.plural == "namespaces" {
            let spec_finalizers = obj
                .at("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            return !spec_finalizers;
        }
        if rt.group.is_empty() && rt.plural == "pods" {
            return obj
                .at("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                == 0;
        }
        true
    }

    pub(super) fn delete(
        &mut self,
        tx: &broadcast::Sender<Arc<Event>>,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<Value, ApiError> {
        let current = self
            .object(rt, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        if let Some(uid) = &opts.uid
            && uid != meta::uid(&current)
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(&current)
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && rv != meta::meta_str(&current, "resourceVersion")
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta::meta_str(&current, "resourceVersion")
                ),
            ));
        }
        if opts.dry_run {
            return Ok(current);
        }
        let mut next = current.clone();
        let mut finalizers = meta::finalizers(&current);
        let deleting = meta::is_deleting(&current);
        if !deleting {
            match opts.propagation.as_deref() {
                Some("Foreground") => push_unique(&mut finalizers, "foregroundDeletion"),
                Some("Orphan") => push_unique(&mut finalizers, "orphan"),
                _ => {}
            }
        }
        let is_pod = rt.group.is_empty() && rt.plural == "pods";
        let grace = if is_pod {
            pod_grace_period(&current, opts.grace_period)
        } else {
            0
        };
        let is_ns = rt.group.is_empty() && rt.plural == "namespaces";
        if deleting && grace >= current_grace(&current) {
            // Deletion already under way and not being shortened: nothing changes.
            return Ok(current);
        }
        let held_by_namespace_finalizers = is_ns
            && current
                .at("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
        if !deleting && finalizers.is_empty() && grace == 0 && !held_by_namespace_finalizers {
            // Nothing holds the object: it goes at once, and watchers see its last state.
            self.commit(tx, rt, ns, name, EventType::Deleted, current.clone());
            self.after_remove(tx, rt, &current);
            return Ok(current);
        }
        {
            let md = metadata_mut(&mut next);
            if !finalizers.is_empty() {
                md.insert("finalizers".into(), json!(finalizers));
            }
            if !deleting {
                md.insert("deletionTimestamp".into(), json!(meta::now_rfc3339()));
            }
            md.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        if is_ns {
            next["status"]["phase"] = json!("Terminating");
        }
        if self.ready_to_remove(rt, &next) {
            self.commit(tx, rt, ns, name, EventType::Deleted, next.clone());
            self.after_remove(tx, rt, &next);
            return Ok(next);
        }
        Ok(Value::clone(&self.commit(
            tx,
            rt,
            ns,
            name,
            EventType::Modified,
            next,
        )))
    }

    /// Effects of removing an object that belong to the store itself (CRD removal).
    pub(super) fn after_remove(
        &mut self,
        tx: &broadcast::Sender<Arc<Event>>,
        rt: &ResourceType,
        obj: &Value,
    ) {
        if rt.group == "apiextensions.k8s.io"
            && rt.plural == "customresourcedefinitions"
            && let Some(custom) = crate::resources::from_crd(obj)
        {
            let objs: Vec<(ObjKey, Value)> = self
                .objects
                .get(&type_key(&custom))
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), Value::clone(v)))
                        .collect()
                })
                .unwrap_or_default();
            for ((ns, name), o) in objs {
                self.commit(tx, &custom, &ns, &name, EventType::Deleted, o);
            }
            self.registry.unregister(&custom.group, &custom.plural);
        }
    }
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

fn current_grace(obj: &Value) -> i64 {
    obj.at("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(i64::MAX)
}

/// Pods on a node get graceful termination; unscheduled or finished pods go at once, as in
/// Kubernetes' pod strategy.
fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let scheduled = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod.at("/status/phase").and_then(Value::as_str);
    if !scheduled || matches!(phase, Some("Succeeded" | "Failed")) {
        return 0;
    }
    requested
        .or_else(|| {
            pod.at("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}
