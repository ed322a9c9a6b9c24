//! What the machine renders: the kubelet's part of the pod's `status` and each container's
//! status entry.

use serde_json::{Value, json};

use super::{Container, Kind, Machine, State, Terminated};
use crate::kubelet::phase::pod_phase;
use crate::meta;

impl Machine {
    /// The pod phase now.
    #[cfg(test)]
    pub fn phase(&self, uid: &str) -> crate::kubelet::phase::Phase {
        let (init, main) = self.container_statuses(uid);
        pod_phase(&self.spec, &main, &init, self.deleting && self.finished)
    }

    /// `initContainerStatuses` and `containerStatuses`.
    pub fn container_statuses(&self, uid: &str) -> (Vec<Value>, Vec<Value>) {
        (
            self.init.iter().map(|c| container_status(c, uid)).collect(),
            self.main.iter().map(|c| container_status(c, uid)).collect(),
        )
    }

    /// The part of `status` the kubelet owns (conditions without transition times; the shell
    /// merges them into the current object).
    pub fn render(&self, uid: &str, pod_ip: &str, host_ip: &str, start_time: &str) -> Value {
        let (init, main) = self.container_statuses(uid);
        let phase = pod_phase(&self.spec, &main, &init, self.deleting && self.finished);
        let unready = |list: &[&Container]| -> Vec<String> {
            list.iter()
                .filter(|c| !c.is_ready())
                .map(|c| c.name.clone())
                .collect()
        };
        let incomplete: Vec<String> = self
            .init
            .iter()
            .filter(|c| !(c.is_ready() || (c.kind == Kind::Init && self.initialized)))
            .map(|c| c.name.clone())
            .collect();
        let watched: Vec<&Container> = self
            .init
            .iter()
            .filter(|c| c.kind == Kind::Sidecar)
            .chain(self.main.iter())
            .collect();
        let not_ready = unready(&watched);
        let cond = |kind: &str, ok: bool, reason: &str, message: String| {
            if ok {
                json!({"type": kind, "status": "True", "lastProbeTime": null})
            } else {
                json!({"type": kind, "status": "False", "lastProbeTime": null,
                       "reason": reason, "message": message})
            }
        };
        let list = |names: &[String]| format!("[{}]", names.join(" "));
        let ready_cond = |kind: &str| {
            if phase.is_terminal() {
                json!({"type": kind, "status": "False", "lastProbeTime": null, "reason": "PodCompleted"})
            } else {
                cond(
                    kind,
                    not_ready.is_empty(),
                    "ContainersNotReady",
                    format!("containers with unready status: {}", list(&not_ready)),
                )
            }
        };
        // Values are moved in, not interpolated: `json!` copies a `Value` it is given through
        // the serializer, and a status is rendered on every change of every pod.
        let conditions = vec![
            cond("PodReadyToStartContainers", self.mounted, "", String::new()),
            if self.init.is_empty() {
                // Without init containers Kubernetes reports the pod initialized at once.
                json!({"type": "Initialized", "status": "True", "lastProbeTime": null})
            } else {
                cond(
                    "Initialized",
                    self.initialized,
                    "ContainersNotInitialized",
                    format!("containers with incomplete status: {}", list(&incomplete)),
                )
            },
            ready_cond("Ready"),
            ready_cond("ContainersReady"),
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null}),
        ];
        let mut status = json!({
            "phase": phase.as_str(),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": start_time,
        });
        status["conditions"] = Value::Array(conditions);
        status["containerStatuses"] = Value::Array(main);
        if !self.init.is_empty() {
            status["initContainerStatuses"] = Value::Array(init);
        }
        if let Some(conds) = status["conditions"].as_array_mut() {
            for c in conds.iter_mut().filter_map(Value::as_object_mut) {
                if c.get("reason").and_then(Value::as_str) == Some("") {
                    c.remove("reason");
                    c.remove("message");
                }
            }
        }
        status
    }
}

pub(super) fn container_id(uid: &str, name: &str, instance: u64) -> String {
    format!("kubesim://{uid}-{name}-{instance}")
}

pub(super) fn terminated_json(t: &Terminated, uid: &str, name: &str) -> Value {
    let mut v = json!({
        "exitCode": t.exit_code,
        "reason": t.reason,
        "startedAt": meta::rfc3339(t.started_at),
        "finishedAt": meta::rfc3339(t.finished_at),
        "containerID": container_id(uid, name, t.instance),
    });
    if let Some(m) = &t.message {
        v["message"] = json!(m);
    }
    v
}

/// `{key: value}`, the value moved in (`json!` would copy it).
fn keyed(key: &str, value: Value) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(key.to_owned(), value);
    Value::Object(m)
}

/// One entry of `containerStatuses` / `initContainerStatuses`.
pub fn container_status(c: &Container, uid: &str) -> Value {
    let state = match &c.state {
        State::Waiting { reason, message } => {
            let mut w = json!({"reason": reason});
            if let Some(m) = message {
                w["message"] = json!(m);
            }
            keyed("waiting", w)
        }
        State::Running { started_at, .. } => {
            json!({"running": {"startedAt": meta::rfc3339(*started_at)}})
        }
        State::Terminated(t) => keyed("terminated", terminated_json(t, uid, &c.name)),
    };
    let last = match &c.last {
        Some(t) => keyed("terminated", terminated_json(t, uid, &c.name)),
        None => json!({}),
    };
    let mut v = json!({
        "name": c.name,
        "image": c.image,
        "imageID": if c.instance > 0 { format!("kubesim://{}", c.image) } else { String::new() },
        "ready": c.is_ready(),
        "started": c.is_started(),
        "restartCount": c.restarts,
    });
    v["state"] = state;
    v["lastState"] = last;
    if c.instance > 0 {
        v["containerID"] = json!(container_id(uid, &c.name, c.instance));
    }
    v
}
