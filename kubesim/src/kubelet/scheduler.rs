//! The scheduler: binds pending pods to the least-loaded healthy node their selector fits,
//! and reports a pod no node fits as a real scheduler does (`Unschedulable`, `FailedScheduling`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::recorder::PodEvent;
use super::{Kubelet, State};
use crate::api_error::ApiError;
use crate::meta;
use crate::meta::At;
use crate::store::{Part, WriteOpts};

impl Kubelet {
    /// Binds unscheduled pods, least-loaded healthy node first.
    pub(super) fn schedule(&self, st: &mut State) {
        if st.unscheduled.is_empty() {
            return;
        }
        // Unfinished pods per node, as the kubelet keeps count of them.
        let active = st.active.clone();
        let mut load: Vec<(usize, usize)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_partitioned())
            .map(|(i, _)| (active[i], i))
            .collect();
        if load.is_empty() {
            return;
        }
        // Each node's labels, as the Node objects say now (users may label nodes).
        let labels: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                self.store
                    .get_shared("", "nodes", "", &n.name)
                    .and_then(|o| o.at("/metadata/labels").cloned())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let mut waiting = BTreeMap::new();
        for ((ns, name), uid) in std::mem::take(&mut st.unscheduled) {
            // The pod's nodeSelector: only nodes carrying every one of its labels fit, as with
            // the real scheduler; a pod no healthy node fits stays Pending and is tried again.
            let selector = self
                .store
                .get_shared("", "pods", &ns, &name)
                .and_then(|p| p.at("/spec/nodeSelector").cloned())
                .and_then(|s| s.as_object().cloned())
                .unwrap_or_default();
            let fits = |i: usize| selector.iter().all(|(k, v)| labels[i].get(k) == Some(v));
            let Some(slot) = load.iter_mut().filter(|(_, i)| fits(*i)).min() else {
                self.mark_unschedulable(&ns, &name, &uid, load.len());
                waiting.insert((ns, name), uid);
                continue;
            };
            let node = self.nodes[slot.1].name.clone();
            let result = self.store.modify_shared(
                &self.pods_rt,
                &ns,
                &name,
                Part::Main,
                &WriteOpts::default(),
                |cur| {
                    let bound = cur
                        .at("/spec/nodeName")
                        .and_then(Value::as_str)
                        .is_some_and(|n| !n.is_empty());
                    if meta::uid(cur) != uid || bound || meta::is_deleting(cur) {
                        return Err(ApiError::conflict(
                            "",
                            "pods",
                            &name,
                            "the pod changed before binding",
                        ));
                    }
                    let mut next = cur.clone();
                    next["spec"]["nodeName"] = json!(node);
                    Ok(next)
                },
            );
            match result {
                Ok(pod) => {
                    slot.0 += 1;
                    // Take the pod on now so this tick's status write carries PodScheduled
                    // together with the kubelet's first status.
                    self.observe(st, &pod);
                }
                Err(e) if e.code == 404 || e.code == 409 => {}
                Err(e) => tracing::warn!(pod = %name, ns = %ns, error = %e, "binding failed"),
            }
        }
        st.unscheduled.extend(waiting);
    }

    /// A pod no node fits, as the scheduler reports it: the `PodScheduled` condition `False`
    /// with reason `Unschedulable` and the fit error as its message, and a `FailedScheduling`
    /// Warning event; both once, when the condition is first written.
    /// `healthy` of the nodes are reachable (none of them fits); the others carry the
    /// unreachable taint.
    pub(super) fn mark_unschedulable(&self, ns: &str, name: &str, uid: &str, healthy: usize) {
        let nodes = self.nodes.len();
        let mut reasons = Vec::new();
        if healthy > 0 {
            reasons.push(format!(
                "{healthy} node(s) didn't match Pod's node affinity/selector"
            ));
        }
        if nodes > healthy {
            reasons.push(format!(
                "{} node(s) had untolerated taint {{node.kubernetes.io/unreachable: }}",
                nodes - healthy
            ));
        }
        // The scheduler lists the reasons sorted, then what preemption found.
        reasons.sort();
        let message = format!(
            "0/{nodes} nodes are available: {}. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling.",
            reasons.join(", ")
        );
        let now = meta::now_rfc3339();
        let written = self.store.modify(
            &self.pods_rt,
            ns,
            name,
            Part::Status,
            &WriteOpts::default(),
            |cur| {
                let conditions = cur
                    .at("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let marked = conditions
                    .iter()
                    .any(|c| c["type"] == "PodScheduled" && c["status"] == "False");
                if meta::uid(cur) != uid || marked {
                    return Err(ApiError::conflict("", "pods", name, "nothing to mark"));
                }
                let mut next = cur.clone();
                let mut kept: Vec<Value> = conditions
                    .into_iter()
                    .filter(|c| c["type"] != "PodScheduled")
                    .collect();
                kept.push(json!({"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "message": message,
                    "lastProbeTime": null, "lastTransitionTime": now}));
                next["status"]["conditions"] = json!(kept);
                if next["status"].get("phase").is_none() {
                    next["status"]["phase"] = json!("Pending");
                }
                Ok(next)
            },
        );
        if written.is_err() {
            return;
        }
        let (_, event) = PodEvent {
            ns,
            pod: name,
            uid,
            field_path: None,
            kind: "Warning",
            reason: "FailedScheduling",
            message: &message,
        }
        .object("default-scheduler", None, &now);
        if let Err(err) = self
            .store
            .create(&self.events_rt, ns, event, &WriteOpts::default())
        {
            tracing::debug!(pod = %name, error = %err, "could not record event");
        }
    }
}
