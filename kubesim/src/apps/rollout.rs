//! The pure rules of the Deployment and ReplicaSet controllers, as Kubernetes' controllers
//! apply them: the pod-template hash, how far a rolling update may scale the new ReplicaSet up
//! and the old ones down, which pods go first, and the status each controller reports.

use crate::meta::At;
use serde_json::{Map, Value, json};

/// Label on ReplicaSets and their pods naming the template they were made from.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// Annotation with a Deployment's (and its ReplicaSets') rollout revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Annotation: the Deployment's replicas when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// Annotation: replicas plus surge at that time.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The `pod-template-hash` of a pod template: an FNV-1a hash of the template, printed in
/// decimal and each digit mapped to the alphabet of generated names (as Kubernetes'
/// `rand.SafeEncodeString` does), so it is stable for equal templates.
pub fn pod_template_hash(template: &Value) -> String {
    let mut text = String::new();
    canonical(template, &mut text);
    let hash = text.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// A template without the `pod-template-hash` label (how a ReplicaSet's template is compared
/// with its Deployment's).
pub fn without_hash(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty()
            && let Some(md) = t.get_mut("metadata").and_then(Value::as_object_mut)
        {
            md.remove("labels");
        }
    }
    t
}

/// An int-or-percent value (`maxSurge`, `maxUnavailable`) resolved against `total`.
pub fn resolve(v: Option<&Value>, total: i64, round_up: bool) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(pct) => {
                let x = pct * total;
                if round_up {
                    (x + 99).div_euclid(100)
                } else {
                    x.div_euclid(100)
                }
            }
            None => s.parse().unwrap_or(0),
        },
        _ => 0,
    }
}

/// `(maxSurge, maxUnavailable)` of a rolling Deployment with `replicas` (never both 0; a
/// Recreate Deployment has neither).
pub fn fenceposts(deployment: &Value, replicas: i64) -> (i64, i64) {
    if deployment.at("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate") {
        return (0, 0);
    }
    let ru = deployment.at("/spec/strategy/rollingUpdate");
    let surge = resolve(ru.and_then(|r| r.get("maxSurge")), replicas, true);
    let unavailable = resolve(ru.and_then(|r| r.get("maxUnavailable")), replicas, false);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable.min(replicas))
    }
}

/// The `spec.replicas` of a workload (1 when unset, as defaulted).
pub fn spec_replicas(obj: &Value) -> i64 {
    obj.at("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// A number of `status`.
pub fn status_count(obj: &Value, field: &str) -> i64 {
    obj.get("status")
        .and_then(|s| s.get(field))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// How many replicas the new ReplicaSet of a rolling update may have now: up to the
/// Deployment's replicas, as long as all ReplicaSets together stay within replicas + surge.
pub fn new_rs_replicas(replicas: i64, max_surge: i64, all_spec_sum: i64, new_spec: i64) -> i64 {
    if new_spec >= replicas {
        return replicas;
    }
    let max_total = replicas + max_surge;
    if all_spec_sum >= max_total {
        return new_spec;
    }
    let up = (max_total - all_spec_sum).min(replicas - new_spec);
    new_spec + up
}

/// One ReplicaSet as the rollout rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsCounts {
    /// Name.
    pub name: String,
    /// `spec.replicas`.
    pub spec: i64,
    /// `status.availableReplicas`.
    pub available: i64,
}

/// New `spec.replicas` for old ReplicaSets (oldest first) of a rolling update: first their
/// unavailable pods, then available ones as long as `replicas - maxUnavailable` stay
/// available. Returns only the ReplicaSets that change.
pub fn scale_down_old(
    replicas: i64,
    max_unavailable: i64,
    new: &RsCounts,
    old: &[RsCounts],
) -> Vec<(String, i64)> {
    let old_sum: i64 = old.iter().map(|r| r.spec).sum();
    if old_sum == 0 {
        return Vec::new();
    }
    let all_sum = old_sum + new.spec;
    let min_available = replicas - max_unavailable;
    let new_unavailable = new.spec - new.available;
    let max_scaled_down = all_sum - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut specs: Vec<i64> = old.iter().map(|r| r.spec).collect();
    // Unhealthy replicas first: they add nothing to availability.
    let mut cleaned = 0;
    for (i, r) in old.iter().enumerate() {
        if cleaned >= max_scaled_down {
            break;
        }
        if specs[i] == 0 || specs[i] <= r.available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(specs[i] - r.available);
        specs[i] -= down;
        cleaned += down;
    }
    // Then available ones, keeping the minimum available.
    let available: i64 = new.available + old.iter().map(|r| r.available).sum::<i64>();
    if available > min_available {
        let total_down = available - min_available;
        let mut done = 0;
        for s in specs.iter_mut() {
            if done >= total_down {
                break;
            }
            if *s == 0 {
                continue;
            }
            let down = (*s).min(total_down - done);
            *s -= down;
            done += down;
        }
    }
    old.iter()
        .zip(specs)
        .filter(|(r, s)| r.spec != *s)
        .map(|(r, s)| (r.name.clone(), s))
        .collect()
}

/// Whether a pod counts for its ReplicaSet: not finished and not being deleted.
pub fn is_active(pod: &Value) -> bool {
    let phase = pod.at("/status/phase").and_then(Value::as_str);
    pod.at("/metadata/deletionTimestamp").is_none()
        && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn ready_since(pod: &Value) -> Option<i64> {
    let c = pod
        .at("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    if c.get("status").and_then(Value::as_str) != Some("True") {
        return None;
    }
    let t = c
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .unwrap_or("");
    Some(crate::meta::parse_rfc3339(t).map(|(s, _)| s).unwrap_or(0))
}

/// Whether a pod is ready.
pub fn is_ready(pod: &Value) -> bool {
    ready_since(pod).is_some()
}

/// Whether a pod has been ready for `min_ready_seconds` at `now` (Unix seconds); when not yet,
/// the second it will be.
pub fn available_at(pod: &Value, min_ready_seconds: i64) -> Option<i64> {
    ready_since(pod).map(|since| since + min_ready_seconds.max(0))
}

/// Which `n` active pods a ReplicaSet scaling down deletes first: unscheduled before
/// scheduled, pending before running, not ready before ready, newer before older.
pub fn pods_to_delete(pods: &[&Value], n: usize) -> Vec<String> {
    let mut ranked: Vec<&Value> = pods.to_vec();
    let key = |p: &Value| {
        let scheduled = p
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase_rank = match p.at("/status/phase").and_then(Value::as_str) {
            Some("Pending") | None => 0,
            Some("Unknown") => 1,
            _ => 2,
        };
        let created = p
            .at("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(crate::meta::parse_rfc3339)
            .map(|(s, _)| s)
            .unwrap_or(0);
        (
            scheduled,
            phase_rank,
            is_ready(p),
            std::cmp::Reverse(created),
        )
    };
    ranked.sort_by_key(|p| key(p));
    ranked
        .into_iter()
        .take(n)
        .map(|p| crate::meta::name(p).to_string())
        .collect()
}

/// Whether a pod's labels carry every label of the template (`fullyLabeledReplicas`).
fn fully_labeled(pod: &Value, template_labels: &Map<String, Value>) -> bool {
    let labels = crate::meta::labels(pod);
    template_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// A ReplicaSet's status from its active pods at `now` (Unix seconds), keeping its
/// conditions; `failure` is the message of a failed pod creation or deletion (the
/// `ReplicaFailure` condition), if any.
pub fn replica_set_status(
    rs: &Value,
    active: &[&Value],
    now: i64,
    now_text: &str,
    failure: Option<(&str, &str)>,
) -> Value {
    let min_ready = rs
        .at("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let template_labels = rs
        .at("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut status = json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": active.iter().filter(|p| fully_labeled(p, &template_labels)).count(),
        "readyReplicas": active.iter().filter(|p| is_ready(p)).count(),
        "availableReplicas": active.iter().filter(|p| available_at(p, min_ready).is_some_and(|t| t <= now)).count(),
        "observedGeneration": rs.at("/metadata/generation").cloned().unwrap_or(json!(1)),
    });
    let mut conditions: Vec<Value> = rs
        .at("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("ReplicaFailure"));
    if let Some((reason, message)) = failure {
        conditions.push(
            json!({"type": "ReplicaFailure", "status": "True", "reason": reason,
            "message": message, "lastTransitionTime": now_text}),
        );
    }
    if !conditions.is_empty() {
        status["conditions"] = json!(conditions);
    }
    // Zero counts are omitted, as Go's omitempty does.
    if let Some(o) = status.as_object_mut() {
        o.retain(|k, v| k == "replicas" || v.as_i64() != Some(0));
    }
    status
}

/// Sets a Deployment condition as Kubernetes does: unchanged when status and reason are the
/// same; the transition time kept when only the reason changes.
pub fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let current = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        .cloned();
    let mut transition = now.to_string();
    if let Some(c) = &current {
        let same_status = c.get("status").and_then(Value::as_str) == Some(status);
        if same_status && c.get("reason").and_then(Value::as_str) == Some(reason) {
            return;
        }
        if same_status {
            transition = c
                .get("lastTransitionTime")
                .and_then(Value::as_str)
                .unwrap_or(now)
                .to_string();
        }
    }
    conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some(kind));
    conditions.push(
        json!({"type": kind, "status": status, "lastUpdateTime": now,
        "lastTransitionTime": transition, "reason": reason, "message": message}),
    );
}

/// A Deployment's status from its ReplicaSets (the new one, if any, and the old ones).
pub fn deployment_status(d: &Value, new_rs: Option<&Value>, old: &[&Value], now: &str) -> Value {
    let replicas = spec_replicas(d);
    let (_, max_unavailable) = fenceposts(d, replicas);
    let all: Vec<&Value> = new_rs.into_iter().chain(old.iter().copied()).collect();
    let sum = |f: &dyn Fn(&Value) -> i64| all.iter().map(|r| f(r)).sum::<i64>();
    let available = sum(&|r| status_count(r, "availableReplicas"));
    let total_spec = sum(&spec_replicas);
    let mut status = json!({
        "observedGeneration": d.at("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": sum(&|r| status_count(r, "replicas")),
        "updatedReplicas": new_rs.map(|r| status_count(r, "replicas")).unwrap_or(0),
        "readyReplicas": sum(&|r| status_count(r, "readyReplicas")),
        "availableReplicas": available,
        "unavailableReplicas": (total_spec - available).max(0),
    });
    let mut conditions: Vec<Value> = d
        .at("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if available >= replicas - max_unavailable {
        set_condition(
            &mut conditions,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            now,
        );
    } else {
        set_condition(
            &mut conditions,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            now,
        );
    }
    let field = |f: &str| status.get(f).and_then(Value::as_i64).unwrap_or(0);
    let complete = field("updatedReplicas") == replicas
        && field("replicas") == replicas
        && available == replicas;
    if let Some(rs) = new_rs {
        let name = crate::meta::name(rs);
        if complete {
            set_condition(
                &mut conditions,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                &format!("ReplicaSet \"{name}\" has successfully progressed."),
                now,
            );
        } else {
            let counts = [
                "replicas",
                "updatedReplicas",
                "readyReplicas",
                "availableReplicas",
            ];
            let progressing = counts.iter().any(|f| status_count(d, f) != field(f));
            let has = conditions
                .iter()
                .any(|c| c.get("type") == Some(&json!("Progressing")));
            if progressing || !has {
                // Progress refreshes the condition's update time.
                let kept = conditions
                    .iter()
                    .find(|c| {
                        c.get("type") == Some(&json!("Progressing"))
                            && c.get("status") == Some(&json!("True"))
                    })
                    .and_then(|c| c.get("lastTransitionTime").cloned());
                conditions.retain(|c| c.get("type") != Some(&json!("Progressing")));
                set_condition(
                    &mut conditions,
                    "Progressing",
                    "True",
                    "ReplicaSetUpdated",
                    &format!("ReplicaSet \"{name}\" is progressing."),
                    now,
                );
                if let (Some(t), Some(c)) = (kept, conditions.last_mut()) {
                    c["lastTransitionTime"] = t;
                }
            }
        }
    }
    // Available first, then Progressing, as the API server shows them.
    conditions.sort_by_key(|c| c.get("type") != Some(&json!("Available")));
    status["conditions"] = json!(conditions);
    if let Some(o) = status.as_object_mut() {
        o.retain(|k, v| {
            matches!(k.as_str(), "observedGeneration" | "conditions") || v.as_i64() != Some(0)
        });
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_templates_hash_alike_and_label_changes_do_not_matter_to_comparison() {
        let a = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}});
        let b = json!({"spec": {"containers": [{"image": "i:1", "name": "c"}]}, "metadata": {"labels": {"app": "x"}}});
        assert_eq!(pod_template_hash(&a), pod_template_hash(&b));
        let c = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i:2"}]}});
        assert_ne!(pod_template_hash(&a), pod_template_hash(&c));
        let h = pod_template_hash(&a);
        assert!(
            h.len() >= 9
                && h.chars()
                    .all(|ch| "bcdfghjklmnpqrstvwxz2456789".contains(ch)),
            "{h}"
        );
        let mut labelled = a.clone();
        labelled["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(h);
        assert_eq!(without_hash(&labelled), a);
    }

    #[test]
    fn fenceposts_resolve_percentages_as_kubernetes_does() {
        let d = |surge: Value, unavail: Value| {
            json!({"spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavail}}}})
        };
        let cases = [
            (d(json!("25%"), json!("25%")), 4, (1, 1)),
            (d(json!("25%"), json!("25%")), 2, (1, 0)),
            (d(json!("25%"), json!("25%")), 10, (3, 2)),
            (d(json!(0), json!(0)), 3, (0, 1)),
            (d(json!(1), json!(0)), 3, (1, 0)),
            (d(json!("50%"), json!(5)), 2, (1, 2)),
            (
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
                3,
                (0, 0),
            ),
        ];
        for (dep, replicas, want) in cases {
            assert_eq!(fenceposts(&dep, replicas), want, "{dep} x{replicas}");
        }
    }

    #[test]
    fn a_rolling_update_surges_then_scales_old_down_within_unavailability() {
        // 2 replicas, surge 1, unavailable 0: the new ReplicaSet may grow by one at a time.
        assert_eq!(new_rs_replicas(2, 1, 2, 0), 1);
        assert_eq!(new_rs_replicas(2, 1, 3, 1), 1, "at the surge limit");
        assert_eq!(new_rs_replicas(2, 1, 2, 1), 2);
        assert_eq!(new_rs_replicas(2, 1, 5, 3), 2, "never above replicas");
        let rs = |name: &str, spec, available| RsCounts {
            name: name.into(),
            spec,
            available,
        };
        // New pod not available yet: nothing of the old may go.
        assert!(scale_down_old(2, 0, &rs("new", 1, 0), &[rs("old", 2, 2)]).is_empty());
        // New pod available: one old one may go.
        assert_eq!(
            scale_down_old(2, 0, &rs("new", 1, 1), &[rs("old", 2, 2)]),
            vec![("old".into(), 1)]
        );
        // Unavailable old pods go first, as far as the surge allows.
        assert_eq!(
            scale_down_old(2, 1, &rs("new", 1, 1), &[rs("old", 2, 0)]),
            vec![("old".into(), 0)]
        );
        assert_eq!(
            scale_down_old(2, 0, &rs("new", 1, 1), &[rs("old", 2, 0)]),
            vec![("old".into(), 1)]
        );
        // Oldest first.
        assert_eq!(
            scale_down_old(2, 1, &rs("new", 2, 2), &[rs("a", 1, 1), rs("b", 1, 1)]),
            vec![("a".into(), 0), ("b".into(), 0)]
        );
    }

    #[test]
    fn scaling_down_deletes_unscheduled_pending_and_newest_pods_first() {
        let pod = |name: &str, node: &str, phase: &str, ready: bool, created: &str| {
            json!({"metadata": {"name": name, "creationTimestamp": created},
                "spec": {"nodeName": node},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
        };
        let pods = [
            pod("old-ready", "n", "Running", true, "2024-01-01T00:00:00Z"),
            pod("new-ready", "n", "Running", true, "2024-01-02T00:00:00Z"),
            pod("unready", "n", "Running", false, "2024-01-01T00:00:00Z"),
            pod("pending", "n", "Pending", false, "2024-01-01T00:00:00Z"),
            pod("unscheduled", "", "Pending", false, "2024-01-01T00:00:00Z"),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        assert_eq!(
            pods_to_delete(&refs, 5),
            [
                "unscheduled",
                "pending",
                "unready",
                "new-ready",
                "old-ready"
            ]
        );
    }

    #[test]
    fn deployment_status_reports_availability_and_progress() {
        let d = json!({"metadata": {"generation": 2}, "spec": {"replicas": 2, "strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}});
        let new_rs = json!({"metadata": {"name": "web-abc"}, "spec": {"replicas": 2},
            "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}});
        let s = deployment_status(&d, Some(&new_rs), &[], "2024-01-01T00:00:00Z");
        assert_eq!(s["replicas"], 2);
        assert_eq!(s["updatedReplicas"], 2);
        assert_eq!(s["availableReplicas"], 2);
        assert_eq!(s["observedGeneration"], 2);
        assert!(s.get("unavailableReplicas").is_none());
        assert_eq!(s["conditions"][0]["type"], "Available");
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][1]["reason"], "NewReplicaSetAvailable");
        assert_eq!(
            s["conditions"][1]["message"],
            "ReplicaSet \"web-abc\" has successfully progressed."
        );
        let starting = json!({"metadata": {"name": "web-abc"}, "spec": {"replicas": 2}, "status": {"replicas": 2}});
        let s = deployment_status(&d, Some(&starting), &[], "2024-01-01T00:00:00Z");
        assert_eq!(s["unavailableReplicas"], 2);
        assert_eq!(s["conditions"][0]["status"], "False");
        assert_eq!(s["conditions"][1]["reason"], "ReplicaSetUpdated");
    }
}
