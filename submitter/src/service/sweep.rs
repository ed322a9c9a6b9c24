//! The sweeper: removes ConfigMaps whose driver pod never came.
//!
//! A submission creates the ConfigMaps its pod mounts before the pod, without owner, and makes
//! the pod their owner afterwards. A crash, or an ambiguous pod POST whose rollback must leave
//! them (a late pod would mount them), can leave ConfigMaps that nothing will ever collect. The
//! sweeper deletes a ConfigMap when all of these hold:
//! - it carries our submission label and annotation (only ours are watched at all);
//! - it has no `ownerReferences` (an owned one is the garbage collector's business);
//! - it is older than the grace period (default 5 minutes; far longer than any creation, so a
//!   submission running on another replica is never raced);
//! - no pod of the same submission exists in its namespace;
//! - no creation for that submission is running in this replica.
//!
//! Everything is read from two watch caches (kube-runtime reflectors on ConfigMaps and Pods
//! with our label), never from a periodic LIST; nothing is decided before both have synced. The
//! delete carries the cached uid and resourceVersion as preconditions, so a ConfigMap that
//! gained its owner after the cache saw it (the cache lags) is not deleted.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use thiserror::Error;
use tracing::{info, warn};

use tokio::sync::broadcast;

use super::inflight::InFlight;
use super::metrics::Metrics;
use crate::status::index::{Index, KeyFn};
use crate::status::record;
use submission::meta::{annotations, labels};

/// Default grace period before an ownerless ConfigMap without pod is removed.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

/// Default pause between two passes over the cache.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// Sweeper settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepConfig {
    pub grace: Duration,
    pub interval: Duration,
    /// Only for retention records that cannot be read: their creation time plus this is their
    /// end (a readable record carries its own `retain_until`).
    pub retention: Duration,
}

impl Default for SweepConfig {
    fn default() -> SweepConfig {
        SweepConfig {
            grace: DEFAULT_GRACE,
            interval: DEFAULT_INTERVAL,
            retention: record::DEFAULT_RETENTION,
        }
    }
}

/// Watch caches of our pods and ConfigMaps (all namespaces, selected by our label). The status
/// look-ups read them too, through the indexes kept from the same events.
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

/// Keeps of a cached pod only what the status look-ups, the recorder and the sweeper read:
/// identity metadata, the containers' names (and the env var that marks Spark's container),
/// and the phase, Ready condition and container states. A whole driver pod is ~28 KiB in memory; this keeps the
/// cache's cost per driver small, so memory follows the load, not the cluster's history.
fn trim_pod(pod: &mut Pod) {
    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};
    pod.metadata.managed_fields = None;
    if let Some(spec) = pod.spec.as_mut() {
        let containers = std::mem::take(&mut spec.containers)
            .into_iter()
            .map(|c| Container {
                env: c
                    .env
                    .map(|env| {
                        env.into_iter()
                            .filter(|var| {
                                var.name == submission::meta::containers::DRIVER_BIND_ADDRESS_ENV
                            })
                            .collect::<Vec<_>>()
                    })
                    .filter(|env| !env.is_empty()),
                name: c.name,
                ..Container::default()
            })
            .collect();
        *spec = PodSpec {
            containers,
            ..PodSpec::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        *status = PodStatus {
            phase: status.phase.take(),
            // Readiness is part of what the driver-state rule reports.
            conditions: status.conditions.take().map(|conditions| {
                conditions
                    .into_iter()
                    .filter(|c| c.type_ == "Ready")
                    .collect()
            }),
            reason: status.reason.take(),
            message: status.message.take(),
            container_statuses: status.container_statuses.take().map(|statuses| {
                statuses
                    .into_iter()
                    .map(|c| ContainerStatus {
                        name: c.name,
                        state: c.state,
                        ..ContainerStatus::default()
                    })
                    .collect()
            }),
            ..PodStatus::default()
        };
    }
}

impl WatchCaches {
    /// Starts both watches as background tasks; they retry every error with backoff.
    pub fn start(client: &kube::Client) -> WatchCaches {
        let selector = watcher::Config::default().labels(labels::SUBMISSION_ID_HASH);
        let (pods, writer) = reflector::store();
        let pod_index = Index::new(pod_submission_id as KeyFn<Pod>);
        let (succeeded, _) = broadcast::channel(SUCCEEDED_BUFFER);
        let stream = watcher(Api::<Pod>::all(client.clone()), selector.clone())
            .default_backoff()
            .modify(trim_pod)
            .reflect(writer);
        let (index, sender) = (pod_index.clone(), succeeded.clone());
        tokio::spawn(drive(stream, "pods", move |event| {
            index.apply_event(event);
            if let watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) = event
                && sender.receiver_count() > 0
                && driver_succeeded(pod)
            {
                // No subscriber, or all lagging: the recorder re-scans the cache.
                let _ = sender.send(Arc::new(pod.clone()));
            }
        }));
        let (config_maps, writer) = reflector::store();
        let record_index = Index::new(record::index_keys as KeyFn<ConfigMap>);
        let stream = watcher(Api::<ConfigMap>::all(client.clone()), selector)
            .default_backoff()
            // The sweeper needs metadata only; spark.properties and templates stay out of memory.
            // Retention records keep their few short fields: the status look-ups read them.
            .modify(|cm: &mut ConfigMap| {
                if !record::is_record(cm) {
                    cm.data = None;
                }
                cm.binary_data = None;
                cm.metadata.managed_fields = None;
            })
            .reflect(writer);
        let index = record_index.clone();
        tokio::spawn(drive(stream, "configmaps", move |event| {
            index.apply_event(event)
        }));
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let (pod_store, cm_store) = (pods.clone(), config_maps.clone());
        tokio::spawn(async move {
            // The only waiter on the stores themselves (see `ready`).
            if pod_store.wait_until_ready().await.is_ok()
                && cm_store.wait_until_ready().await.is_ok()
            {
                let _ = ready_tx.send(true);
            }
        });
        WatchCaches {
            ready,
            pods,
            config_maps,
            pod_index,
            record_index,
            succeeded,
        }
    }

    /// Waits until both caches hold a complete first listing.
    ///
    /// Every caller waits on one shared signal: kube-runtime's `Store::wait_until_ready` wakes
    /// only the last task that polled it, so two tasks waiting on a store directly (the sweeper
    /// and the recorder) could leave one asleep forever.
    pub async fn ready(&self) -> Result<(), CachesStopped> {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|synced| *synced)
            .await
            .map(|_| ())
            .map_err(|_| CachesStopped)
    }
}

async fn drive<S, K>(
    stream: S,
    resource: &'static str,
    mut on_event: impl FnMut(&watcher::Event<K>),
) where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => on_event(&event),
            Err(error) => warn!(resource, error = %error, "watch failed; retrying with backoff"),
        }
    }
}

/// What the sweeper needs to know about one ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub namespace: &'a str,
    pub submission_id: Option<&'a str>,
    pub has_owner: bool,
    pub terminating: bool,
    /// `creationTimestamp`, milliseconds since the epoch.
    pub created_ms: Option<i64>,
}

impl<'a> Candidate<'a> {
    pub fn of(cm: &'a ConfigMap) -> Candidate<'a> {
        let meta = &cm.metadata;
        Candidate {
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            submission_id: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(annotations::SUBMISSION_ID))
                .map(String::as_str),
            has_owner: meta
                .owner_references
                .as_ref()
                .is_some_and(|o| !o.is_empty()),
            terminating: meta.deletion_timestamp.is_some(),
            created_ms: meta
                .creation_timestamp
                .as_ref()
                .map(|time| time.0.as_millisecond()),
        }
    }
}

/// Whether to delete: see the module documentation. Pure; `pods` holds (namespace, submission
/// id) of every pod of ours, `running` answers for in-flight creations.
pub fn sweepable(
    candidate: &Candidate<'_>,
    pods: &HashSet<(&str, &str)>,
    running: impl Fn(&str, &str) -> bool,
    now_ms: i64,
    grace: Duration,
) -> bool {
    let Some(submission_id) = candidate.submission_id else {
        // Not annotated by us (someone copied our label): not ours to judge.
        return false;
    };
    let Some(created_ms) = candidate.created_ms else {
        return false;
    };
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    !candidate.has_owner
        && !candidate.terminating
        && now_ms.saturating_sub(created_ms) >= grace_ms
        && !pods.contains(&(candidate.namespace, submission_id))
        && !running(candidate.namespace, submission_id)
}

/// Why one deletion failed.
#[derive(Debug, Error)]
pub enum SweepError {
    #[error("cannot delete ConfigMap {namespace}/{name}")]
    DeleteConfigMap {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl SweepError {
    pub fn kind(&self) -> &'static str {
        match self {
            SweepError::DeleteConfigMap { .. } => "delete_config_map",
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One pass over the caches; returns how many ConfigMaps were deleted.
pub async fn sweep_once(
    client: &kube::Client,
    caches: &WatchCaches,
    in_flight: &InFlight,
    metrics: &Metrics,
    grace: Duration,
    retention: Duration,
) -> usize {
    let pods = caches.pods.state();
    let pod_keys: HashSet<(&str, &str)> = pods
        .iter()
        .filter_map(|pod| {
            let meta = &pod.metadata;
            let id = meta.annotations.as_ref()?.get(annotations::SUBMISSION_ID)?;
            Some((meta.namespace.as_deref()?, id.as_str()))
        })
        .collect();
    let now = now_ms();
    let mut deleted = 0;
    let now_ts = k8s_openapi::jiff::Timestamp::now();
    for cm in caches.config_maps.state() {
        if record::is_record(&cm) {
            // Records have no owner and outlive their pod on purpose: judged by their window.
            if record::expired(&cm, now_ts, retention) {
                match delete(client, &cm).await {
                    Ok(true) => info!(
                        namespace = cm.metadata.namespace.as_deref(),
                        record = cm.metadata.name.as_deref(),
                        "retention window over; record deleted"
                    ),
                    Ok(false) => {}
                    Err(error) => {
                        warn!(error = %error, kind = error.kind(), "deleting an expired record failed; next pass retries")
                    }
                }
            }
            continue;
        }
        let candidate = Candidate::of(&cm);
        if !sweepable(
            &candidate,
            &pod_keys,
            |ns, id| in_flight.contains(ns, id),
            now,
            grace,
        ) {
            continue;
        }
        match delete(client, &cm).await {
            Ok(true) => {
                deleted += 1;
                metrics.swept();
                info!(
                    namespace = candidate.namespace,
                    config_map = cm.metadata.name.as_deref(),
                    submission_id = candidate.submission_id,
                    "swept a ConfigMap whose driver pod never came"
                );
            }
            Ok(false) => {}
            Err(error) => {
                warn!(error = %error, kind = error.kind(), "sweeping failed; next pass retries")
            }
        }
    }
    deleted
}

/// Deletes `cm` if it is still the version the cache saw; false if it changed or went.
async fn delete(client: &kube::Client, cm: &ConfigMap) -> Result<bool, SweepError> {
    let namespace = cm.metadata.namespace.clone().unwrap_or_default();
    let name = cm.metadata.name.clone().unwrap_or_default();
    let api = Api::<ConfigMap>::namespaced(client.clone(), &namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: cm.metadata.uid.clone(),
            resource_version: cm.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(source) => Err(SweepError::DeleteConfigMap {
            namespace,
            name,
            source,
        }),
    }
}

/// Runs the sweeper until the task is dropped: waits for both caches, then a pass every
/// `config.interval`.
pub async fn run(
    client: kube::Client,
    caches: WatchCaches,
    in_flight: InFlight,
    metrics: Arc<Metrics>,
    config: SweepConfig,
) {
    if caches.ready().await.is_err() {
        warn!("watch caches stopped before syncing; the sweeper does not run");
        return;
    }
    info!(grace_secs = config.grace.as_secs(), "sweeper started");
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sweep_once(
            &client,
            &caches,
            &in_flight,
            &metrics,
            config.grace,
            config.retention,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
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
        trim_pod(&mut trimmed);
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
        let record_of = |p: &Pod| crate::status::record::for_pod(p, now, day);
        assert!(record_of(&whole).is_some());
        assert_eq!(record_of(&trimmed), record_of(&whole));
    }

    use super::*;

    fn candidate(id: Option<&'static str>, owner: bool, age_ms: i64) -> Candidate<'static> {
        Candidate {
            namespace: "spark",
            submission_id: id,
            has_owner: owner,
            terminating: false,
            created_ms: Some(1_000_000 - age_ms),
        }
    }

    const GRACE: Duration = Duration::from_secs(300);

    #[test]
    fn ownerless_old_config_map_without_pod_is_swept() {
        let pods = HashSet::new();
        assert!(sweepable(
            &candidate(Some("a"), false, 300_000),
            &pods,
            |_, _| false,
            1_000_000,
            GRACE
        ));
    }

    #[test]
    fn each_condition_alone_keeps_the_config_map() {
        let none = HashSet::new();
        let now = 1_000_000;
        // Owned: the garbage collector's business.
        assert!(!sweepable(
            &candidate(Some("a"), true, 400_000),
            &none,
            |_, _| false,
            now,
            GRACE
        ));
        // Young: its submission may still be creating the pod on another replica.
        assert!(!sweepable(
            &candidate(Some("a"), false, 299_999),
            &none,
            |_, _| false,
            now,
            GRACE
        ));
        // Its pod exists.
        let pods = HashSet::from([("spark", "a")]);
        assert!(!sweepable(
            &candidate(Some("a"), false, 400_000),
            &pods,
            |_, _| false,
            now,
            GRACE
        ));
        // A pod of the same id in another namespace does not count.
        let elsewhere = HashSet::from([("other", "a")]);
        assert!(sweepable(
            &candidate(Some("a"), false, 400_000),
            &elsewhere,
            |_, _| false,
            now,
            GRACE
        ));
        // Being created in this replica right now.
        assert!(!sweepable(
            &candidate(Some("a"), false, 400_000),
            &none,
            |ns, id| (ns, id) == ("spark", "a"),
            now,
            GRACE
        ));
        // Not annotated by us.
        assert!(!sweepable(
            &candidate(None, false, 400_000),
            &none,
            |_, _| false,
            now,
            GRACE
        ));
        // Already going.
        let mut terminating = candidate(Some("a"), false, 400_000);
        terminating.terminating = true;
        assert!(!sweepable(&terminating, &none, |_, _| false, now, GRACE));
    }

    #[test]
    fn zero_grace_sweeps_at_once() {
        let none = HashSet::new();
        assert!(sweepable(
            &candidate(Some("a"), false, 0),
            &none,
            |_, _| false,
            1_000_000,
            Duration::ZERO
        ));
    }
}
