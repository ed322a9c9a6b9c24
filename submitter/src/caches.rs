//! The service's watch caches: one kube-runtime watcher on our pods and one on our ConfigMaps
//! (all namespaces, selected by our submission label), each filling a [`store`] of the objects,
//! the secondary indexes the status look-ups need ([`index`]), the succeeded-driver events the
//! retention recorder follows, and the health of both watches for readiness.
//!
//! Both watches are started once, retried forever with backoff, resume from their last
//! resourceVersion and re-list only on 410; nothing should act on them before [`WatchCaches::ready`].
//! The status look-ups, the retention recorder and the sweeper all read these caches; none of them
//! LISTs periodically.

pub mod index;
pub mod slim;
pub mod store;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::broadcast;
use tracing::warn;

use crate::record;
use index::{Index, KeyFn};
use slim::{SlimConfigMap, SlimPod};
use store::Store;
use submission::meta::{annotations, labels};

/// Watch caches of our pods and ConfigMaps (all namespaces, selected by our label), with the
/// indexes kept from the same events.
#[derive(Clone)]
pub struct WatchCaches {
    pub pods: Store<Pod>,
    pub config_maps: Store<ConfigMap>,
    /// Pods by their submission-id annotation.
    pub pod_index: Index<Pod>,
    /// Retention records by submission id and by driver pod ([`record::index_keys`]).
    pub record_index: Index<ConfigMap>,
    /// Every pod event showing a succeeded driver, for the retention recorder. A broadcast:
    /// without a subscriber nothing queues up, and a slow one learns that it lagged.
    pub succeeded: broadcast::Sender<Arc<Pod>>,
    /// Turns true once both caches hold a complete first listing.
    ready: tokio::sync::watch::Receiver<bool>,
    /// Whether each watch is failing now, for readiness.
    pub pods_health: Arc<WatchHealth>,
    pub config_maps_health: Arc<WatchHealth>,
    /// Bumped after every event either cache applied: a submission that learnt from the API
    /// server that an object exists waits on it for the cache to show it ([`WatchCaches::wait_until`]).
    changes: tokio::sync::watch::Sender<u64>,
}

/// How long after its last error a watch counts as failing when nothing has arrived since. The
/// watcher retries with backoff capped at 30 s, so a watch that keeps failing reports a new error
/// well within this; a re-watch that succeeds is silent until the next event, so a quiet cluster
/// is ready again at the latest this long after the last error.
pub const FAILING_WINDOW: Duration = Duration::from_secs(60);

/// Whether one watch is failing: an error more recent than the last event, and recent.
#[derive(Debug, Default)]
pub struct WatchHealth {
    /// The last error since the last event (cleared by every event).
    last_error: Mutex<Option<Instant>>,
}

impl WatchHealth {
    fn on_event(&self) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn on_error(&self, now: Instant) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(now);
    }

    /// Whether the watch is failing at `now`.
    pub fn failing(&self, now: Instant) -> bool {
        let last_error = *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        failing(last_error, now, FAILING_WINDOW)
    }
}

/// The rule: failing while the last error (not followed by an event) is within `window`.
fn failing(last_error: Option<Instant>, now: Instant, window: Duration) -> bool {
    last_error.is_some_and(|at| now.saturating_duration_since(at) < window)
}

/// The watch caches stopped before they synced (their tasks ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the watch caches stopped before they synced")]
pub struct CachesStopped;

impl std::fmt::Debug for WatchCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCaches")
            .field("pods", &self.pods.len())
            .field("config_maps", &self.config_maps.len())
            .finish_non_exhaustive()
    }
}

/// Succeeded-driver events kept for a lagging recorder before it must re-scan the cache.
const SUCCEEDED_BUFFER: usize = 1024;

fn pod_submission_id(pod: &Pod) -> Vec<String> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::SUBMISSION_ID))
        .cloned()
        .into_iter()
        .collect()
}

/// A cheap typed pre-check before the JSON classification: only a pod with a terminated
/// container or a finished phase can show a succeeded driver.
fn maybe_succeeded(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    status.phase.as_deref() == Some("Succeeded")
        || status
            .container_statuses
            .iter()
            .flatten()
            .any(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
}

fn driver_succeeded(pod: &Pod) -> bool {
    maybe_succeeded(pod)
        && submission::driver::observe_driver(pod).phase == submission::api::DriverPhase::Succeeded
}

/// What the cache keeps of a (non-record) ConfigMap's data: the line of `spark.properties`
/// naming the driver pod, if any.
fn trim_data(
    data: Option<std::collections::BTreeMap<String, String>>,
) -> Option<std::collections::BTreeMap<String, String>> {
    let mut data = data?;
    let properties = data.remove(PROPERTIES_KEY)?;
    let line = submission::plan::driver_pod_line(&properties)?;
    Some([(PROPERTIES_KEY.to_owned(), line.to_owned())].into())
}

/// The spark-conf ConfigMap's data key holding the driver's properties.
pub const PROPERTIES_KEY: &str = "spark.properties";

impl WatchCaches {
    /// Starts both watches as background tasks; they retry every error with backoff.
    pub fn start(client: &kube::Client) -> WatchCaches {
        let selector = watcher::Config::default().labels(labels::SUBMISSION_ID_HASH);
        let pods = Store::default();
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let ready_tx = Arc::new(ready_tx);
        let pod_index = Index::new(pod_submission_id as KeyFn<Pod>);
        let (succeeded, _) = broadcast::channel(SUCCEEDED_BUFFER);
        // Decoded slim, converted to the trimmed pods the cache keeps (`slim`).
        let stream = watcher(Api::<SlimPod>::all(client.clone()), selector.clone())
            .default_backoff()
            .map_ok(full_event::<SlimPod, Pod>);
        let (index, sender) = (pod_index.clone(), succeeded.clone());
        let pods_health = Arc::new(WatchHealth::default());
        let (changes, _) = tokio::sync::watch::channel(0u64);
        let changed = changes.clone();
        let record_index = Index::new(record::index_keys as KeyFn<ConfigMap>);
        let synced = {
            let (pod_index, record_index, ready_tx) =
                (pod_index.clone(), record_index.clone(), ready_tx.clone());
            move || {
                if pod_index.is_synced() && record_index.is_synced() {
                    ready_tx.send_replace(true);
                }
            }
        };
        let (store, on_synced) = (pods.clone(), synced.clone());
        tokio::spawn(drive(stream, "pods", pods_health.clone(), move |event| {
            let (applied, listed) = apply(event, &index, &store, &changed);
            if listed {
                on_synced();
            }
            if let Some(pod) = applied
                && sender.receiver_count() > 0
                && driver_succeeded(&pod)
            {
                // No subscriber, or all lagging: the recorder re-scans the cache.
                let _ = sender.send(pod);
            }
        }));
        let config_maps = Store::default();
        let stream = watcher(Api::<SlimConfigMap>::all(client.clone()), selector)
            .default_backoff()
            .map_ok(full_event::<SlimConfigMap, ConfigMap>)
            // The sweeper needs metadata only; spark.properties and templates stay out of memory
            // but for the line naming the driver pod, which tells which driver a submission id
            // is bound to (`plan::classify_meta`). Claims and retention records keep their few
            // short fields: submissions, the status look-ups and the sweeper read them.
            .modify(|cm: &mut ConfigMap| {
                if !record::is_claim(cm) {
                    cm.data = trim_data(cm.data.take());
                }
            });
        let index = record_index.clone();
        let config_maps_health = Arc::new(WatchHealth::default());
        let changed = changes.clone();
        let store = config_maps.clone();
        tokio::spawn(drive(
            stream,
            "configmaps",
            config_maps_health.clone(),
            move |event| {
                if apply(event, &index, &store, &changed).1 {
                    synced();
                }
            },
        ));
        WatchCaches {
            ready,
            pods,
            config_maps,
            pod_index,
            record_index,
            succeeded,
            pods_health,
            config_maps_health,
            changes,
        }
    }

    /// Waits until `done` holds of the caches, re-checking after every event, until `deadline`;
    /// whether it came to hold.
    pub async fn wait_until(
        &self,
        deadline: tokio::time::Instant,
        mut done: impl FnMut(&WatchCaches) -> bool,
    ) -> bool {
        // Subscribed before the first check: an event between the check and the wait is seen.
        let mut changes = self.changes.subscribe();
        loop {
            if done(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // The deadline passed, or the watches stopped.
                Ok(Err(_)) | Err(_) => return done(self),
            }
        }
    }

    /// A cached ConfigMap of ours by namespace and name (data trimmed, see [`trim_data`]).
    pub fn config_map(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
        self.config_maps.get(namespace, name)
    }

    /// The watches failing at `now`, by resource (empty: both fine).
    pub fn failing_watches(&self, now: Instant) -> Vec<&'static str> {
        [
            ("pods", &self.pods_health),
            ("configmaps", &self.config_maps_health),
        ]
        .into_iter()
        .filter(|(_, health)| health.failing(now))
        .map(|(resource, _)| resource)
        .collect()
    }

    /// Waits until both caches hold a complete first listing: every caller waits on one shared
    /// signal, sent by whichever watch completes the pair.
    pub async fn ready(&self) -> Result<(), CachesStopped> {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|synced| *synced)
            .await
            .map(|_| ())
            .map_err(|_| CachesStopped)
    }

    /// Whether both caches (and their indexes) hold a complete first listing.
    pub fn synced(&self) -> bool {
        self.pod_index.is_synced() && self.record_index.is_synced()
    }

    /// A cached pod by namespace and name.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.get(namespace, name)
    }

    /// The retention records indexed under `key` that the cache still holds.
    pub fn retained(&self, key: &str) -> Vec<record::Record> {
        self.record_index
            .get(key)
            .into_iter()
            .filter_map(|(namespace, name)| self.config_maps.get(&namespace, &name))
            .filter_map(|cm| record::read(&cm))
            .collect()
    }
}

/// Applies one event to a cache's index and store, then wakes the waiters on the caches; the
/// object stored, and whether the event completed a listing.
fn apply<K: kube::Resource>(
    event: watcher::Event<K>,
    index: &Index<K>,
    store: &Store<K>,
    changes: &tokio::sync::watch::Sender<u64>,
) -> (Option<Arc<K>>, bool) {
    index.apply_event(&event);
    let listed = matches!(event, watcher::Event::InitDone);
    let applied = store.apply(event);
    changes.send_modify(|n| *n = n.wrapping_add(1));
    (applied, listed)
}

/// A watch event of a slim type as one of the full type the caches store.
fn full_event<S, K: From<S>>(event: watcher::Event<S>) -> watcher::Event<K> {
    match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(object.into()),
        watcher::Event::Delete(object) => watcher::Event::Delete(object.into()),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(object) => watcher::Event::InitApply(object.into()),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

async fn drive<S, K>(
    stream: S,
    resource: &'static str,
    health: Arc<WatchHealth>,
    mut on_event: impl FnMut(watcher::Event<K>),
) where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                health.on_event();
                on_event(event);
            }
            Err(error) => {
                health.on_error(Instant::now());
                warn!(resource, error = %error, "watch failed; retrying with backoff");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_fails_from_an_error_until_an_event_or_the_window_passes() {
        let start = Instant::now();
        let window = Duration::from_secs(60);
        assert!(!failing(None, start, window), "never failed");
        assert!(failing(Some(start), start, window));
        assert!(failing(
            Some(start),
            start + Duration::from_secs(59),
            window
        ));
        assert!(!failing(Some(start), start + window, window));
        let health = WatchHealth::default();
        health.on_error(start);
        assert!(health.failing(start));
        health.on_event();
        assert!(!health.failing(start), "an event clears it");
    }

    #[test]
    fn trimmed_pods_classify_like_whole_ones() {
        let whole: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d", "namespace": "ns", "uid": "u",
                         "annotations": {"spark-submitter.io/submission-id": "s"}},
            "spec": {"containers": [
                {"name": "istio-proxy", "image": "proxy"},
                {"name": "main", "image": "spark", "args": ["driver"],
                 "env": [{"name": "A", "value": "1"}, {"name": "SPARK_DRIVER_BIND_ADDRESS", "value": "x"}]}],
                     "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [
                {"name": "istio-proxy", "image": "proxy", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {}}},
                {"name": "main", "image": "spark", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
        }))
        .unwrap();
        let mut trimmed = whole.clone();
        submission::driver::trim_for_cache(&mut trimmed);
        let observe = |p: &Pod| submission::driver::observe_driver(p);
        assert_eq!(observe(&trimmed), observe(&whole));
        assert_eq!(
            observe(&trimmed).phase,
            submission::api::DriverPhase::Succeeded
        );
        assert!(trimmed.spec.as_ref().unwrap().volumes.is_none());
        assert_eq!(trimmed.metadata.annotations, whole.metadata.annotations);
        let now = k8s_openapi::jiff::Timestamp::now();
        let day = Duration::from_secs(86_400);
        let record_of = |p: &Pod| crate::record::for_pod(p, now, day);
        assert!(record_of(&whole).is_some());
        assert_eq!(record_of(&trimmed), record_of(&whole));
    }
}
