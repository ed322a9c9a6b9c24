//! The operator's event recorder (`events.k8s.io/v1`), with client-go's recorder's bounds: a
//! repeat of an event (same object, type, reason, action, reporter) within six minutes updates
//! the first one's `series` instead of creating another, and what is remembered to recognise
//! repeats is a least-recently-used cache of 4,096 entries holding names and counts only.
//!
//! kube-runtime's `Recorder` has the same series semantics but remembers every event it
//! published (whole objects) for six minutes and scans them all on every publish: at 10,000
//! applications, tens of thousands of events in memory and a publish that costs more with each.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_runtime::events::{Event, EventType, Reporter};

/// How long a repeat updates the first event's series (kube-runtime's and client-go's window).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// Events remembered for series (client-go's `maxLruCacheEntries`).
pub const CACHE_ENTRIES: usize = 4096;

/// What is remembered of a published event.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    namespace: String,
    count: i32,
    last: Timestamp,
    /// Position in the recency order.
    tick: u64,
}

/// A least-recently-used map of event keys to what was published under them.
#[derive(Debug, Default)]
struct Cache {
    seen: HashMap<String, Seen>,
    /// Recency order: tick → key.
    order: BTreeMap<u64, String>,
    tick: u64,
}

impl Cache {
    /// The entry under `key` if it is recent enough to continue a series at `now`.
    fn recent(&self, key: &str, now: Timestamp) -> Option<Seen> {
        self.seen
            .get(key)
            .filter(|seen| seen.last + SERIES_WINDOW > now)
            .cloned()
    }

    fn remember(&mut self, key: String, mut seen: Seen) {
        self.tick += 1;
        seen.tick = self.tick;
        if let Some(old) = self.seen.insert(key.clone(), seen) {
            self.order.remove(&old.tick);
        }
        self.order.insert(self.tick, key);
        while self.seen.len() > CACHE_ENTRIES {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.seen.remove(&oldest);
        }
    }
}

/// Publishes events; cheap to share (clone the `Arc` it lives in).
pub struct EventRecorder {
    client: Client,
    reporter: Reporter,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

/// The identity of an event for series: everything but its note.
fn key(reporter: &Reporter, ev: &Event, regarding: &ObjectReference) -> String {
    let object = |r: &ObjectReference| {
        format!(
            "{}/{}/{}/{}/{}",
            r.api_version.as_deref().unwrap_or(""),
            r.kind.as_deref().unwrap_or(""),
            r.namespace.as_deref().unwrap_or(""),
            r.name.as_deref().unwrap_or(""),
            r.uid.as_deref().unwrap_or("")
        )
    };
    format!(
        "{}\0{}\0{}\0{}\0{}\0{}\0{}",
        match ev.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        },
        ev.action,
        ev.reason,
        reporter.controller,
        reporter.instance.as_deref().unwrap_or(""),
        object(regarding),
        ev.secondary.as_ref().map(object).unwrap_or_default()
    )
}

impl EventRecorder {
    pub fn new(client: Client, reporter: Reporter) -> EventRecorder {
        EventRecorder {
            client,
            reporter,
            cache: Mutex::default(),
        }
    }

    fn event(&self, ev: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: ev.note.clone(),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{}.{:x}",
                    regarding
                        .name
                        .as_deref()
                        .unwrap_or(&self.reporter.controller),
                    now.as_nanosecond()
                )),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            related: ev.secondary.clone(),
            ..K8sEvent::default()
        }
    }

    /// Publishes `ev` about `regarding`: a new Event, or the next count of a recent one's series.
    pub async fn publish(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = key(&self.reporter, ev, regarding);
        let recent = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recent(&key, now);
        let seen = match recent {
            Some(seen) => {
                let count = seen.count + 1;
                let series = EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                };
                let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), &seen.namespace);
                events
                    .patch(
                        &seen.name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({"series": series})),
                    )
                    .await?;
                Seen {
                    count,
                    last: now,
                    ..seen
                }
            }
            None => {
                let event = self.event(ev, regarding, now);
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
                let created = events.create(&PostParams::default(), &event).await?;
                Seen {
                    name: created.metadata.name.unwrap_or_default(),
                    namespace,
                    count: 1,
                    last: now,
                    tick: 0,
                }
            }
        };
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remember(key, seen);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(name: &str, last: Timestamp) -> Seen {
        Seen {
            name: name.into(),
            namespace: "ns".into(),
            count: 1,
            last,
            tick: 0,
        }
    }

    #[test]
    fn a_repeat_continues_the_series_only_within_six_minutes() {
        let t0 = Timestamp::UNIX_EPOCH + SignedDuration::from_hours(500_000);
        let mut cache = Cache::default();
        cache.remember("k".into(), seen("e1", t0));
        assert_eq!(
            cache
                .recent("k", t0 + SignedDuration::from_mins(5))
                .map(|s| s.name),
            Some("e1".into())
        );
        let later = t0 + SERIES_WINDOW + SignedDuration::from_mins(1);
        assert!(cache.recent("k", later).is_none());
        assert!(cache.recent("other", t0).is_none());
    }

    #[test]
    fn the_cache_keeps_the_most_recently_used_entries_only() {
        let now = Timestamp::UNIX_EPOCH + SignedDuration::from_hours(500_000);
        let mut cache = Cache::default();
        for i in 0..CACHE_ENTRIES + 10 {
            cache.remember(format!("k{i}"), seen(&format!("e{i}"), now));
            // k0 is used again and again: it stays.
            if i % 100 == 0 {
                let again = cache.recent("k0", now).unwrap();
                cache.remember("k0".into(), again);
            }
        }
        assert_eq!(cache.seen.len(), CACHE_ENTRIES);
        assert_eq!(cache.order.len(), CACHE_ENTRIES);
        assert!(cache.recent("k0", now).is_some());
        assert!(cache.recent("k1", now).is_none(), "the oldest went first");
        assert!(
            cache
                .recent(&format!("k{}", CACHE_ENTRIES + 9), now)
                .is_some()
        );
    }
}
