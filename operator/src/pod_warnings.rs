//! The recent Warning events of each pod, from one watch of core/v1 Events selected by
//! `involvedObject.kind=Pod,type=Warning`: what holds a driver pending (`FailedMount`,
//! `FailedScheduling` are only in events) is a look-up, not a LIST per pending driver every few
//! seconds (which, with many drivers waiting for room, would be a steady stream of LISTs).
//!
//! Fed with the reflector's semantics ([`Relisted`]). Only what the look-up needs is kept, a few
//! warnings per pod;
//! the API server deletes events after their TTL (1 h by default), and their deletions remove
//! them here. Synchronous and free of I/O.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube_runtime::watcher::Event as WatchEvent;

use crate::pod_index::{Indexed, Relisted};
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

/// Pod uid → its newest warnings.
#[derive(Debug, Default)]
struct Map(HashMap<String, Vec<Warning>>);

/// The index; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct PodWarnings {
    inner: Arc<RwLock<Relisted<Map>>>,
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

impl Indexed<Event> for Map {
    fn insert(&mut self, event: &Event) {
        self.remove(event);
        let Some((uid, warning)) = warning_of(event) else {
            return;
        };
        let warnings = self.0.entry(uid).or_default();
        warnings.push(warning);
        if warnings.len() > PER_POD {
            warnings.sort_by_key(|w| std::cmp::Reverse(w.at));
            warnings.truncate(PER_POD);
        }
    }

    fn remove(&mut self, event: &Event) {
        let Some(uid) = event.involved_object.uid.as_deref() else {
            return;
        };
        let key = key(event);
        if let Some(warnings) = self.0.get_mut(uid) {
            warnings.retain(|w| w.key != key);
            if warnings.is_empty() {
                self.0.remove(uid);
            }
        }
    }
}

impl PodWarnings {
    /// Applies one watcher event, as a reflector would.
    pub fn apply(&self, event: &WatchEvent<Event>) {
        // A panic under the lock cannot leave the map worse than stale; keep serving it.
        self.inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .apply(event);
    }

    /// The latest Warning event about the pod with `uid`, as what holds it pending.
    pub fn latest(&self, uid: &str) -> Option<PendingReason> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner
            .live()
            .0
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
        inner.live().0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Warning `reason` about `pod_uid`, last seen `second`s past the minute.
    fn event(name: &str, pod_uid: &str, reason: &str, second: u32) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "pi-driver", "uid": pod_uid},
            "type": "Warning",
            "reason": reason,
            "message": format!("{reason} happened"),
            "lastTimestamp": format!("2026-01-01T00:00:{second:02}Z"),
        }))
        .unwrap()
    }

    fn applied(w: &PodWarnings, name: &str, pod: &str, reason: &str, second: u32) {
        w.apply(&WatchEvent::Apply(event(name, pod, reason, second)));
    }

    #[test]
    fn the_latest_warning_of_a_pod_is_what_holds_it() {
        let w = PodWarnings::default();
        applied(&w, "e1", "pod-1", "FailedScheduling", 1);
        applied(&w, "e2", "pod-1", "FailedMount", 5);
        applied(&w, "e3", "pod-2", "BackOff", 9);
        let latest = w.latest("pod-1").unwrap();
        assert_eq!(
            (latest.reason.as_str(), latest.message.as_str()),
            ("FailedMount", "FailedMount happened")
        );
        assert_eq!(w.latest("pod-3"), None);
        // A series update of an older event makes it the latest again.
        applied(&w, "e1", "pod-1", "FailedScheduling", 7);
        assert_eq!(w.latest("pod-1").unwrap().reason, "FailedScheduling");
        // Expired events go.
        w.apply(&WatchEvent::Delete(event("e1", "pod-1", "", 7)));
        assert_eq!(w.latest("pod-1").unwrap().reason, "FailedMount");
        w.apply(&WatchEvent::Delete(event("e2", "pod-1", "", 5)));
        assert_eq!(w.latest("pod-1"), None);
        assert_eq!(w.pods(), 1);
    }

    #[test]
    fn normal_events_and_other_kinds_are_not_kept() {
        let w = PodWarnings::default();
        let mut normal = event("n", "pod-1", "Scheduled", 1);
        normal.type_ = Some("Normal".into());
        w.apply(&WatchEvent::Apply(normal));
        let mut node = event("x", "node-1", "NodeNotReady", 1);
        node.involved_object.kind = Some("Node".into());
        w.apply(&WatchEvent::Apply(node));
        assert_eq!(w.pods(), 0);
    }

    #[test]
    fn a_pod_keeps_only_its_newest_warnings() {
        let w = PodWarnings::default();
        for i in 0..20 {
            applied(&w, &format!("e{i}"), "pod-1", &format!("R{i}"), i);
        }
        let inner = w.inner.read().unwrap();
        assert_eq!(inner.live().0["pod-1"].len(), PER_POD);
        drop(inner);
        assert_eq!(w.latest("pod-1").unwrap().reason, "R19");
    }

    #[test]
    fn a_relist_swaps_in_whole() {
        let w = PodWarnings::default();
        applied(&w, "old", "pod-1", "FailedMount", 1);
        w.apply(&WatchEvent::Init);
        w.apply(&WatchEvent::InitApply(event(
            "new",
            "pod-2",
            "FailedScheduling",
            2,
        )));
        assert!(w.latest("pod-1").is_some(), "no half listing");
        w.apply(&WatchEvent::InitDone);
        assert_eq!(w.latest("pod-1"), None);
        assert_eq!(w.latest("pod-2").unwrap().reason, "FailedScheduling");
    }
}
