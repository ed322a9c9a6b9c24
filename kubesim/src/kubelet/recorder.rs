//! The kubelet's event recorder: events about a pod or one of its containers, a repeat
//! counted on the first one.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{Kubelet, PodEntry};
use crate::meta;
use crate::store::{Part, WriteOpts};

impl Kubelet {
    /// Records an event about the pod (or one of its containers, by `fieldPath`); a repeat of
    /// the same event raises its count, as the kubelet's recorder does.
    pub(super) fn record_event(
        &self,
        e: &mut PodEntry,
        kind: &str,
        reason: &str,
        message: &str,
        field_path: Option<&str>,
    ) {
        let now = meta::now_rfc3339();
        let key = (
            reason.to_string(),
            message.to_string(),
            field_path.unwrap_or("").to_string(),
        );
        if let Some((name, count)) = e.events.get_mut(&key) {
            *count += 1;
            let count = *count;
            let bumped = self.store.modify(
                &self.events_rt,
                &e.ns,
                name,
                Part::Main,
                &WriteOpts::default(),
                |cur| {
                    let mut next = cur.clone();
                    next["count"] = json!(count);
                    next["lastTimestamp"] = json!(now);
                    Ok(next)
                },
            );
            if bumped.is_ok() {
                return;
            }
        }
        let (name, event) = PodEvent {
            ns: &e.ns,
            pod: &e.name,
            uid: &e.uid,
            field_path,
            kind,
            reason,
            message,
        }
        .object("kubelet", Some(&e.node), &now);
        match self
            .store
            .create(&self.events_rt, &e.ns, event, &WriteOpts::default())
        {
            Ok(_) => {
                e.events.insert(key, (name, 1));
            }
            Err(err) => tracing::debug!(pod = %e.name, error = %err, "could not record event"),
        }
    }
}

/// A new core/v1 event about a pod (or one of its containers).
pub(super) struct PodEvent<'a> {
    pub(super) ns: &'a str,
    pub(super) pod: &'a str,
    pub(super) uid: &'a str,
    /// The container's `fieldPath`, for an event about one container.
    pub(super) field_path: Option<&'a str>,
    /// `Normal` or `Warning`.
    pub(super) kind: &'a str,
    pub(super) reason: &'a str,
    pub(super) message: &'a str,
}

impl PodEvent<'_> {
    /// The event's name (`<pod>.<nanoseconds in hex>`, as client-go's recorder names them) and
    /// object, reported by `component` (on `host`, for a node's component).
    pub(super) fn object(&self, component: &str, host: Option<&str>, now: &str) -> (String, Value) {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let name = format!("{}.{nanos:x}", self.pod);
        let mut involved = json!({"apiVersion": "v1", "kind": "Pod", "name": self.pod,
                                  "namespace": self.ns, "uid": self.uid});
        if let Some(f) = self.field_path {
            involved["fieldPath"] = json!(f);
        }
        let mut event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": self.ns},
            "involvedObject": involved,
            "reason": self.reason,
            "message": self.message,
            "type": self.kind,
            "source": {"component": component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": component,
        });
        if let Some(host) = host {
            event["source"]["host"] = json!(host);
            event["reportingInstance"] = json!(host);
        }
        (name, event)
    }
}
