//! The recent Warning events of each pod, from one watch of core/v1 Events selected by
//! `involvedObject.kind=Pod,type=Warning`: what holds a driver pending (`FailedMount`,
//! `FailedScheduling` are only in events) is a look-up, not a LIST per pending driver every few
//! seconds (which, with many drivers waiting for room, would be a steady stream of LISTs).
//!
//! Fed with the reflector's semantics (`Init` starts a buffer, `InitDone` swaps it in, `Apply`
//! and `Delete` edit in place). Only what the look-up needs is kept, a few warnings per pod;
//! the API server deletes events after their TTL (1 h by default), and their deletions remove
//! them here. Synchronous and free of I/O.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube_runtime::watcher::Event as WatchEvent;

use crate::state_machine::PendingReason;

/// The watch's field selector.
pub const SELECTOR: &str = "involvedObject.kind=Pod,type=Warning";

/// Warnings kept per pod, the newest: the look-up needs only the latest, and a pod that keeps
/// warning (a series) updates one event rather than adding more.
const PER_POD: usize = 8;

#[derive(Debug, Clone)]
struct Warning {
    /// The event's namespace and name, to undo it when it goes.
    key: (String, String),
    at: Option<Timestamp>,
    reason: String,
    message: String,
}

type Map = HashMap<String, Vec<Warning>>;

#[derive(Debug, Default)]
struct Inner {
    live: Map,
    buffer: Option<Map>,
}

/// The index; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct PodWarnings {
    inner: Arc<RwLock<Inner>>,
}

/// The pod uid an event is about, and what is kept of it; `None` for anything else.
fn warning_of(event: &Event) -> Option<(String, Warning)> {
    if event.type_.as_deref() != Some("Warning")
        || event.involved_object.kind.as_deref() != Some("Pod")
    {
        return None;
    }
    let uid = event.involved_object.uid.clone()?;
    let at = event
        .last_timestamp
        .as_ref()
        .or(event.first_timestamp.as_ref())
        .map(|t| t.0)
        .or(event.event_time.as_ref().map(|t| t.0));
    Some((
        uid,
        Warning {
            key: key(event),
            at,
            reason: event.reason.clone().unwrap_or_default(),
            message: event.message.clone().unwrap_or_default(),
        },
    ))
}

fn key(event: &Event) -> (String, String) {
    (event.namespace().unwrap_or_default(), event.name_any())
}

fn insert(map: &mut Map, event: &Event) {
    remove(map, event);
    let Some((uid, warning)) = warning_of(event) else {
        return;
    };
    let warnings = map.entry(uid).or_default();
    warnings.push(warning);
    if warnings.len() > PER_POD {
        warnings.sort_by_key(|w| std::cmp::Reverse(w.at));
        warnings.truncate(PER_POD);
    }
}

fn remove(map: &mut Map, event: &Event) {
    let Some(uid) = event.involved_object.uid.as_deref() else {
        return;
    };
    let key = key(event);
    if let Some(warnings) = map.get_mut(uid) {
        warnings.retain(|w| w.key != key);
        if warnings.is_empty() {
            map.remove(uid);
        }
    }
}

impl PodWarnings {
    /// Applies one watcher event, as a reflector would.
    pub fn apply(&self, event: &WatchEvent<Event>) {
        // A panic under the lock cannot leave the map worse than stale; keep serving it.
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        match event {
            WatchEvent::Apply(e) => insert(&mut inner.live, e),
            WatchEvent::Delete(e) => remove(&mut inner.live, e),
            WatchEvent::Init => inner.buffer = Some(Map::default()),
            WatchEvent::InitApply(e) => insert(inner.buffer.get_or_insert_with(Map::default), e),
            WatchEvent::InitDone => inner.live = inner.buffer.take().unwrap_or_default(),
        }
    }

    /// The latest Warning event about the pod with `uid`, as what holds it pending.
    pub fn latest(&self, uid: &str) -> Option<PendingReason> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner
            .live
            .get(uid)?
            .iter()
            .max_by_key(|w| w.at)
            .map(|w| PendingReason {
                reason: w.reason.clone(),
                message: w.message.clone(),
            })
    }

    /// Pods with warnings kept (for tests and metrics).
    pub fn pods(&self) -> usize {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(name: &str, pod_uid: &str, reason: &str, at: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "pi-driver", "uid": pod_uid},
            "type": "Warning",
            "reason": reason,
            "message": format!("{reason} happened"),
            "lastTimestamp": at,
        }))
        .unwrap()
    }

    #[test]
    fn the_latest_warning_of_a_pod_is_what_holds_it() {
        let w = PodWarnings::default();
        w.apply(&WatchEvent::Apply(event(
            "e1",
            "pod-1",
            "FailedScheduling",
            "2026-01-01T00:00:01Z",
        )));
        w.apply(&WatchEvent::Apply(event(
            "e2",
            "pod-1",
            "FailedMount",
            "2026-01-01T00:00:05Z",
        )));
        w.apply(&WatchEvent::Apply(event(
            "e3",
            "pod-2",
            "BackOff",
            "2026-01-01T00:00:09Z",
        )));
        let latest = w.latest("pod-1").unwrap();
        assert_eq!(
            (latest.reason.as_str(), latest.message.as_str()),
            ("FailedMount", "FailedMount happened")
        );
        assert_eq!(w.latest("pod-3"), None);
        // A series update of an older event makes it the latest again.
        w.apply(&WatchEvent::Apply(event(
            "e1",
            "pod-1",
            "FailedScheduling",
            "2026-01-01T00:00:07Z",
        )));
        assert_eq!(w.latest("pod-1").unwrap().reason, "FailedScheduling");
        // Expired events go.
        w.apply(&WatchEvent::Delete(event(
            "e1",
            "pod-1",
            "",
            "2026-01-01T00:00:07Z",
        )));
        assert_eq!(w.latest("pod-1").unwrap().reason, "FailedMount");
        w.apply(&WatchEvent::Delete(event(
            "e2",
            "pod-1",
            "",
            "2026-01-01T00:00:05Z",
        )));
        assert_eq!(w.latest("pod-1"), None);
        assert_eq!(w.pods(), 1);
    }

    #[test]
    fn normal_events_and_other_kinds_are_not_kept() {
        let w = PodWarnings::default();
        let mut normal = event("n", "pod-1", "Scheduled", "2026-01-01T00:00:01Z");
        normal.type_ = Some("Normal".into());
        w.apply(&WatchEvent::Apply(normal));
        let mut node = event("x", "node-1", "NodeNotReady", "2026-01-01T00:00:01Z");
        node.involved_object.kind = Some("Node".into());
        w.apply(&WatchEvent::Apply(node));
        assert_eq!(w.pods(), 0);
    }

    #[test]
    fn a_pod_keeps_only_its_newest_warnings() {
        let w = PodWarnings::default();
        for i in 0..20 {
            w.apply(&WatchEvent::Apply(event(
                &format!("e{i}"),
                "pod-1",
                &format!("R{i}"),
                &format!("2026-01-01T00:00:{i:02}Z"),
            )));
        }
        let inner = w.inner.read().unwrap();
        assert_eq!(inner.live["pod-1"].len(), PER_POD);
        drop(inner);
        assert_eq!(w.latest("pod-1").unwrap().reason, "R19");
    }

    #[test]
    fn a_relist_swaps_in_whole() {
        let w = PodWarnings::default();
        w.apply(&WatchEvent::Apply(event(
            "old",
            "pod-1",
            "FailedMount",
            "2026-01-01T00:00:01Z",
        )));
        w.apply(&WatchEvent::Init);
        w.apply(&WatchEvent::InitApply(event(
            "new",
            "pod-2",
            "FailedScheduling",
            "2026-01-01T00:00:02Z",
        )));
        assert!(w.latest("pod-1").is_some(), "no half listing");
        w.apply(&WatchEvent::InitDone);
        assert_eq!(w.latest("pod-1"), None);
        assert_eq!(w.latest("pod-2").unwrap().reason, "FailedScheduling");
    }
}
