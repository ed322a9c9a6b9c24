//! LimitRange and ResourceQuota admission, and quota usage kept in `status`, inside the store's
//! lock.
//!
//! Admission runs in the API server's order: LimitRanger's defaults, then its `min`/`max`,
//! then ResourceQuota (`admit_quota`). Usage is charged when the object is committed and given
//! back when it is deleted or, for a pod, when it reaches Succeeded or Failed (`account`): the
//! same lock as the write, so two creations racing for the last unit of a quota cannot both
//! pass, and `status.used` is exact at every resourceVersion (the real API server charges at
//! admission with a compare-and-swap and its quota controller gives back within seconds).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{Event, EventType, Inner};
use crate::api_error::ApiError;
use crate::meta::At;
use crate::resource_quota::{self as rq, ResourceList};
use crate::resources::ResourceType;
use crate::{limit_range, meta};

fn is_core(rt: &ResourceType, plural: &str) -> bool {
    rt.group.is_empty() && rt.plural == plural && !rt.custom
}

/// The API server's admission refusal: `pods "x" is forbidden: <why>`.
fn forbidden(rt: &ResourceType, name: &str, why: &str) -> ApiError {
    ApiError::forbidden_details(
        format!("{} \"{name}\" is forbidden: {why}", rt.qualified()),
        name,
        &rt.group,
        &rt.plural,
    )
}

/// The quota's resources that concern objects of this type.
fn restricted(rt: &ResourceType, hard: &ResourceList) -> BTreeSet<String> {
    hard.keys()
        .filter(|k| rq::handles(&rt.group, &rt.plural, k))
        .cloned()
        .collect()
}

/// Without the zero entries (they change no quota).
fn non_zero(list: ResourceList) -> ResourceList {
    list.into_iter().filter(|(_, q)| !q.is_zero()).collect()
}

/// The type a quota resource counts (`requests.cpu` → pods, `count/deployments.apps` →
/// deployments in apps).
fn counted_type(resource: &str) -> (String, String) {
    match resource.strip_prefix("count/") {
        Some(rest) => match rest.split_once('.') {
            Some((plural, group)) => (group.to_string(), plural.to_string()),
            None => (String::new(), rest.to_string()),
        },
        None if rq::handles("", "pods", resource) => (String::new(), "pods".into()),
        None => (String::new(), resource.to_string()),
    }
}

impl Inner {
    /// The stored objects of `group`/`plural` in namespace `ns`.
    fn in_namespace(&self, group: &str, plural: &str, ns: &str) -> Vec<Arc<Value>> {
        self.objects
            .get(&(group.to_string(), plural.to_string()))
            .map(|m| {
                m.range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// LimitRanger (pods: defaults, then `min`/`max`) and ResourceQuota admission of a new,
    /// admitted and named object.
    pub(super) fn admit_quota(
        &self,
        rt: &ResourceType,
        ns: &str,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        if !rt.namespaced || rt.custom {
            return Ok(());
        }
        let name = meta::name(obj).to_string();
        if is_core(rt, "pods") {
            let ranges: Vec<Value> = self
                .in_namespace("", "limitranges", ns)
                .iter()
                .map(|r| Value::clone(r))
                .collect();
            if !ranges.is_empty() {
                limit_range::apply_defaults(obj, &ranges);
                // The QoS class is the pod's after the defaults, as the API server computes
                // it after mutating admission.
                obj["status"]["qosClass"] = json!(crate::admission::qos_class(obj));
                limit_range::validate(obj, &ranges).map_err(|why| forbidden(rt, &name, &why))?;
            }
        }
        let quotas = self.in_namespace("", "resourcequotas", ns);
        if quotas.is_empty() {
            return Ok(());
        }
        let usage = rq::usage(&rt.group, &rt.plural, obj);
        for quota in quotas.iter().filter(|q| rq::is_scope_free(q)) {
            let quota_name = meta::name(quota);
            let hard = rq::resource_list(quota.at("/spec/hard"));
            let restricted = restricted(rt, &hard);
            if restricted.is_empty() {
                continue;
            }
            if is_core(rt, "pods") {
                rq::pod_constraints(&restricted, obj).map_err(|why| {
                    forbidden(rt, &name, &format!("failed quota: {quota_name}: {why}"))
                })?;
            }
            let requested = non_zero(rq::mask(&usage, &restricted));
            if requested.is_empty() {
                continue;
            }
            let used = rq::resource_list(quota.at("/status/used"));
            rq::check(quota_name, &hard, &used, &requested)
                .map_err(|why| forbidden(rt, &name, &why))?;
        }
        Ok(())
    }

    /// Keeps the namespace's quotas' `status.used` in step with a change from `old` to `new`
    /// (either absent for a creation or a removal); a quota created or given new `hard` is
    /// counted afresh.
    pub(super) fn account(
        &mut self,
        tx: &broadcast::Sender<Arc<Event>>,
        rt: &ResourceType,
        ns: &str,
        old: Option<&Value>,
        new: Option<&Value>,
    ) {
        if !rt.namespaced || rt.custom {
            return;
        }
        // A quota counts itself afresh; the others count it like any object.
        let itself = is_core(rt, "resourcequotas")
            .then(|| new.or(old).map(meta::name))
            .flatten();
        if let Some(new) = new.filter(|_| itself.is_some())
            && old.map(|o| o.at("/spec/hard")) != Some(new.at("/spec/hard"))
        {
            self.recount(tx, ns, new);
        }
        let quotas = self.in_namespace("", "resourcequotas", ns);
        if quotas.is_empty() {
            return;
        }
        let usage_of = |o: Option<&Value>| {
            o.map(|o| rq::usage(&rt.group, &rt.plural, o))
                .unwrap_or_default()
        };
        let (before, after) = (usage_of(old), usage_of(new));
        if before == after {
            return;
        }
        let delta = rq::subtract(&after, &before);
        for quota in quotas.iter().filter(|q| rq::is_scope_free(q)) {
            if itself == Some(meta::name(quota)) {
                continue;
            }
            let hard = rq::resource_list(quota.at("/spec/hard"));
            let change = non_zero(rq::mask(&delta, &restricted(rt, &hard)));
            if change.is_empty() {
                continue;
            }
            let used = rq::add(&rq::resource_list(quota.at("/status/used")), &change);
            self.write_quota_status(tx, quota, &hard, &used);
        }
    }

    /// Counts a quota's usage from the objects in its namespace.
    fn recount(&mut self, tx: &broadcast::Sender<Arc<Event>>, ns: &str, quota: &Value) {
        let hard = rq::resource_list(quota.at("/spec/hard"));
        let mut used: ResourceList = hard
            .keys()
            .map(|k| (k.clone(), submission::quantity::Quantity::ZERO))
            .collect();
        if rq::is_scope_free(quota) {
            let types: BTreeSet<(String, String)> = hard.keys().map(|k| counted_type(k)).collect();
            for (group, plural) in types {
                for obj in self.in_namespace(&group, &plural, ns) {
                    let usage = rq::usage(&group, &plural, &obj);
                    let mine = rq::mask(
                        &usage,
                        hard.keys().filter(|k| rq::handles(&group, &plural, k)),
                    );
                    used = rq::add(&used, &mine);
                }
            }
        }
        self.write_quota_status(tx, quota, &hard, &used);
    }

    fn write_quota_status(
        &mut self,
        tx: &broadcast::Sender<Arc<Event>>,
        quota: &Value,
        hard: &ResourceList,
        used: &ResourceList,
    ) {
        let Some(rt) = self.registry.find("", "v1", "resourcequotas") else {
            return;
        };
        let status = json!({"hard": rq::to_json(hard), "used": rq::to_json(used)});
        if quota.get("status") == Some(&status) {
            return;
        }
        let mut next = quota.clone();
        next["status"] = status;
        let ns = meta::meta_str(quota, "namespace").to_string();
        let name = meta::name(quota).to_string();
        self.commit(tx, &rt, &ns, &name, EventType::Modified, next);
    }
}

#[cfg(test)]
mod tests;
