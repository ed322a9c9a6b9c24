//! Status look-ups for clients that keep ids: `GET /api/v1/spark-submit/{submission_id}` and
//! `GET /api/v1/drivers/{namespace}/{pod}`, and the retention recorder behind them.
//!
//! Both answer identity plus the driver state of [`submission::driver::observe_driver`] (the
//! driver container's status, not the pod phase) and the client action of the seed's table.
//! They read the service's watch caches ([`WatchCaches`]: one watch per resource, synced before
//! anything is served, retried forever): a fleet of orchestrators polling known drivers costs the
//! API server nothing. A submission id is found through an index on our submission-id annotation
//! ([`crate::caches::index`]), never by guessing names.
//!
//! A cache miss is never an answer by itself: caches lag (a driver created a moment ago, a watch
//! that is down), and a 404 tells a client to resubmit. So a miss reads live before it may be a
//! 404: the pod by name (or the pods carrying the submission id's label) and the retention
//! record (a labelled LIST in the submitter's namespace). A live read that fails is a 503, never
//! a 404.
//!
//! When the pod is gone, a retention record ([`crate::record`]) written when the driver succeeded
//! answers Succeeded, so a late reconnect does not resubmit finished work. The recorder here
//! writes those records from the pod watch; the sweeper deletes them after the window.
//!
//! Plain functions over the shared state; the HTTP handlers are in [`crate::service`] and the
//! error mapping in [`crate::envelope`]. Errors: 503 while the caches have not synced or when a
//! live read fails (a retry soon will do), 401/403 per the policy (reading needs the namespace
//! only), 404 `NOT_FOUND` for a driver or submission that neither the cache, nor the API server,
//! nor a record knows.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use thiserror::Error;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tracing::{info, warn};

use crate::caches::WatchCaches;
use crate::kube_api::CallError;
use crate::policy::PolicyError;
use crate::record::{self, Record};
use crate::state::AppState;
use crate::tls::PeerIdentity;
use submission::api::{DriverIdentity, DriverStatus};
use submission::driver::observe_driver;
use submission::meta::{annotations, labels};
use submission::naming::SubmissionId;

/// Why a look-up has no status to answer.
#[derive(Debug, Error)]
pub enum LookupError {
    #[error("the watch caches have not synced yet")]
    NotSynced,
    #[error("the client may not read drivers in this namespace")]
    Denied(#[source] PolicyError),
    #[error("the cache missed and the live read failed")]
    ReadLive(#[source] CallError),
    #[error("no driver pod {namespace}/{pod} and no retained success for it")]
    UnknownDriver { namespace: String, pod: String },
    #[error("no driver for submission {submission_id:?} and no retained success for it")]
    UnknownSubmission { submission_id: String },
}

impl LookupError {
    pub fn kind(&self) -> &'static str {
        match self {
            LookupError::NotSynced => "not_synced",
            LookupError::Denied(_) => "denied",
            LookupError::ReadLive(_) => "read_live",
            LookupError::UnknownDriver { .. } => "unknown_driver",
            LookupError::UnknownSubmission { .. } => "unknown_submission",
        }
    }
}

/// The driver's status by namespace and pod name, for `peer`: the cache, and on a miss the pod
/// and its retention record read live.
pub async fn driver_status(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    namespace: &str,
    pod: &str,
) -> Result<DriverStatus, LookupError> {
    // Authorise before touching the cache: a refused client learns nothing, synced or not.
    state
        .access
        .may_read(peer, namespace)
        .map_err(LookupError::Denied)?;
    let caches = state.synced_caches().ok_or(LookupError::NotSynced)?;
    if let Some(status) = cached_driver(caches, namespace, pod) {
        return Ok(status);
    }
    // A miss may be the cache's lag (a driver created a moment ago, a watch that is down):
    // only what the API server says may make a client resubmit.
    if let Some(live) = state
        .kube
        .get_pod(namespace, pod)
        .await
        .map_err(LookupError::ReadLive)?
        .filter(is_ours)
    {
        return Ok(pod_status(&live));
    }
    let selector = format!(
        "{}={}",
        labels::RECORD_DRIVER_HASH,
        record::driver_label(namespace, pod)
    );
    let records = live_records(state, &selector).await?;
    newest(
        records
            .into_iter()
            .filter(|r| r.namespace == namespace && r.pod == pod),
    )
    .map(|record| record::status(&record))
    .ok_or_else(|| LookupError::UnknownDriver {
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
    })
}

/// The driver's status by submission id, for `peer`: the cache, and on a miss the pods and
/// retention records carrying the id read live. The same id may have been used in several
/// namespaces; only allowed ones are answered.
pub async fn submission_status(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    submission_id: &str,
) -> Result<DriverStatus, LookupError> {
    // No identity at all is refused before anything is looked up.
    state.access.identified(peer).map_err(LookupError::Denied)?;
    let caches = state.synced_caches().ok_or(LookupError::NotSynced)?;
    let may_read = |namespace: &str| state.access.may_read(peer, namespace);
    let mut denied = None;
    match cached_submission(caches, submission_id, may_read) {
        Found::Status(status) => return Ok(*status),
        Found::Denied(error) => denied = Some(error),
        Found::Nothing => {}
    }
    let unknown = || LookupError::UnknownSubmission {
        submission_id: submission_id.to_owned(),
    };
    // No object can carry an id that is not one.
    let Ok(id) = submission_id.parse::<SubmissionId>() else {
        return Err(unknown());
    };
    let selector = format!("{}={}", labels::SUBMISSION_ID_HASH, id.label_value());
    let pods = state
        .kube
        .list_pods(&selector)
        .await
        .map_err(LookupError::ReadLive)?;
    for pod in pods
        .iter()
        .filter(|pod| annotation(pod) == Some(submission_id))
    {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        match may_read(namespace) {
            Ok(()) => return Ok(pod_status(pod)),
            Err(error) => {
                denied.get_or_insert(error);
            }
        }
    }
    let records = live_records(state, &selector).await?;
    for record in records.iter().filter(|r| r.submission_id == submission_id) {
        match may_read(&record.namespace) {
            Ok(()) => return Ok(record::status(record)),
            Err(error) => {
                denied.get_or_insert(error);
            }
        }
    }
    Err(denied.map_or_else(unknown, LookupError::Denied))
}

/// What the caches say about one look-up.
enum Found {
    Status(Box<DriverStatus>),
    Denied(PolicyError),
    Nothing,
}

/// The driver's status by namespace and pod name, from the caches only.
fn cached_driver(caches: &WatchCaches, namespace: &str, pod: &str) -> Option<DriverStatus> {
    if let Some(pod) = caches.pod(namespace, pod) {
        return Some(pod_status(&pod));
    }
    newest(
        caches
            .retained(&record::pod_key(namespace, pod))
            .into_iter(),
    )
    .map(|record| record::status(&record))
}

/// The driver's status by submission id, from the caches only.
fn cached_submission(
    caches: &WatchCaches,
    submission_id: &str,
    may_read: impl Fn(&str) -> Result<(), PolicyError>,
) -> Found {
    let mut denied = None;
    for (namespace, name) in caches.pod_index.get(submission_id) {
        if let Err(error) = may_read(&namespace) {
            denied.get_or_insert(error);
            continue;
        }
        if let Some(pod) = caches.pod(&namespace, &name) {
            return Found::Status(Box::new(pod_status(&pod)));
        }
    }
    for record in caches.retained(&record::submission_key(submission_id)) {
        match may_read(&record.namespace) {
            Ok(()) => return Found::Status(Box::new(record::status(&record))),
            Err(error) => {
                denied.get_or_insert(error);
            }
        }
    }
    denied.map_or(Found::Nothing, Found::Denied)
}

/// The retention records in the submitter's namespace matching `selector`, read live.
async fn live_records(state: &AppState, selector: &str) -> Result<Vec<Record>, LookupError> {
    let records = state
        .kube
        .list_config_maps(&state.record_namespace, selector)
        .await
        .map_err(LookupError::ReadLive)?;
    Ok(records.iter().filter_map(record::read).collect())
}

/// The record of the latest success, when a pod name was reused.
fn newest(records: impl Iterator<Item = Record>) -> Option<Record> {
    records.max_by_key(|record| record.finished_at)
}

fn annotation(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(annotations::SUBMISSION_ID)
        .map(String::as_str)
}

/// A pod the submitter created (what the cache selects): a pod of the same name that is not
/// ours is no driver of ours.
fn is_ours(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(labels::SUBMISSION_ID_HASH))
        && annotation(pod).is_some()
}

/// A cached pod's status: identity from its metadata, state from its driver container.
pub fn pod_status(pod: &Pod) -> DriverStatus {
    let meta = &pod.metadata;
    DriverStatus::new(
        DriverIdentity {
            submission_id: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(annotations::SUBMISSION_ID))
                .cloned(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            driver_pod_name: meta.name.clone().unwrap_or_default(),
            driver_pod_uid: meta.uid.clone().unwrap_or_default(),
            spark_app_id: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::SPARK_APP_ID))
                .cloned()
                .unwrap_or_default(),
        },
        observe_driver(pod),
    )
}

/// Why a record could not be written.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("cannot create retention record {namespace}/{name}")]
    CreateRecord {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl RecordError {
    pub fn kind(&self) -> &'static str {
        match self {
            RecordError::CreateRecord { .. } => "create_record",
        }
    }
}

/// Where and for how long the recorder keeps records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordConfig {
    /// The submitter's own namespace.
    pub namespace: String,
    pub retention: Duration,
}

/// Records this replica has written (or is writing, or found written) and its ConfigMap cache
/// may not show yet. Every later event of a succeeded pod reaches the recorder again; without
/// this memory each one would create the record again, for a 409, until the cache caught up.
/// Bounded: the oldest names go first, long after the cache has shown them.
#[derive(Debug, Default)]
struct Written {
    names: HashSet<String>,
    order: VecDeque<String>,
}

impl Written {
    /// Names remembered; far more than the records written while a cache lags.
    const REMEMBERED: usize = 8192;

    /// Takes `name` for a write: false if it is already written or being written.
    fn claim(&mut self, name: &str) -> bool {
        if !self.names.insert(name.to_owned()) {
            return false;
        }
        self.order.push_back(name.to_owned());
        if self.order.len() > Self::REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.names.remove(&oldest);
        }
        true
    }

    /// Gives `name` back after a failed write, so the retry may write it.
    fn release(&mut self, name: &str) {
        self.names.remove(name);
        self.order.retain(|n| n != name);
    }
}

/// Writes the retention records of succeeded driver pods: each once, unless the cache shows it.
pub struct Recorder {
    client: kube::Client,
    caches: WatchCaches,
    config: RecordConfig,
    written: Mutex<Written>,
}

impl Recorder {
    pub fn new(client: kube::Client, caches: WatchCaches, config: RecordConfig) -> Recorder {
        Recorder {
            client,
            caches,
            config,
            written: Mutex::new(Written::default()),
        }
    }

    /// Writes the record of `pod` if it is a succeeded driver whose record neither the cache
    /// shows nor this recorder has written. Idempotent: the name is deterministic and
    /// `AlreadyExists` counts as written. True when this call created it.
    pub async fn record(&self, pod: &Pod) -> Result<bool, RecordError> {
        let Some(record) = record::for_pod(pod, Timestamp::now(), self.config.retention) else {
            return Ok(false);
        };
        let Some(cm) = record::build(&record, &self.config.namespace) else {
            return Ok(false);
        };
        let name = cm.metadata.name.clone().unwrap_or_default();
        let cached = self
            .caches
            .config_maps
            .get(&ObjectRef::new(&name).within(&self.config.namespace))
            .is_some();
        if cached || !self.written().claim(&name) {
            return Ok(false);
        }
        let api = Api::<ConfigMap>::namespaced(self.client.clone(), &self.config.namespace);
        match api.create(&PostParams::default(), &cm).await {
            Ok(_) => {
                info!(namespace = %record.namespace, pod = %record.pod,
                    submission_id = %record.submission_id, retain_until = %record.retain_until,
                    "retained a driver's success");
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(source) => {
                self.written().release(&name);
                Err(RecordError::CreateRecord {
                    namespace: self.config.namespace.clone(),
                    name,
                    source,
                })
            }
        }
    }

    fn written(&self) -> std::sync::MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Pause before a failed record write is tried again.
const RECORD_RETRY: Duration = Duration::from_secs(2);

/// Record writes in flight at once: successes come in bursts (a wave of drivers finishing), and
/// one write at a time leaves the records minutes behind at thousands of drivers.
const RECORD_WRITES_IN_FLIGHT: usize = 8;

/// Runs the recorder until the task is dropped: every succeeded driver the pod watch reports
/// gets its retention record. It subscribes before the caches sync and then passes once over
/// the whole pod cache, so a success seen during start-up or while it lagged is not missed.
pub async fn run_recorder(client: kube::Client, caches: WatchCaches, config: RecordConfig) {
    let mut successes = caches.succeeded.subscribe();
    if caches.ready().await.is_err() {
        warn!("watch caches stopped before syncing; the recorder does not run");
        return;
    }
    let recorder = Recorder::new(client, caches.clone(), config);
    let mut backlog: Vec<Arc<Pod>> = caches.pods.state();
    loop {
        // Failed writes stay in the backlog: the pod may be gone from the cache by the retry.
        let failed: Vec<Arc<Pod>> = futures::stream::iter(backlog.drain(..))
            .map(|pod| {
                let recorder = &recorder;
                async move {
                    match recorder.record(&pod).await {
                        Ok(_) => None,
                        Err(error) => {
                            warn!(kind = error.kind(), error = %error, "retention record not written; retrying");
                            Some(pod)
                        }
                    }
                }
            })
            .buffer_unordered(RECORD_WRITES_IN_FLIGHT)
            .filter_map(std::future::ready)
            .collect()
            .await;
        backlog = failed;
        let next = if backlog.is_empty() {
            successes.recv().await
        } else {
            match tokio::time::timeout(RECORD_RETRY, successes.recv()).await {
                Ok(next) => next,
                Err(_) => continue,
            }
        };
        match next {
            Ok(pod) => backlog.push(pod),
            Err(RecvError::Lagged(missed)) => {
                warn!(
                    missed,
                    "recorder fell behind the pod watch; passing over the cache"
                );
                backlog.extend(caches.pods.state());
            }
            Err(RecvError::Closed) => return,
        }
        // Take what else has arrived, so a burst is written concurrently.
        while backlog.len() < 4 * RECORD_WRITES_IN_FLIGHT {
            match successes.try_recv() {
                Ok(pod) => backlog.push(pod),
                Err(TryRecvError::Lagged(_)) => {
                    backlog.extend(caches.pods.state());
                    break;
                }
                Err(_) => break,
            }
        }
    }
}

/// Why a duration flag was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{text:?} is not a duration: a number with s, m, h or d (e.g. 24h, 90m, 3600s)")]
pub struct ParseDurationError {
    pub text: String,
}

impl ParseDurationError {
    pub fn kind(&self) -> &'static str {
        "parse_duration"
    }
}

/// `24h`, `90m`, `30s`, `7d`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, ParseDurationError> {
    let error = || ParseDurationError {
        text: text.to_owned(),
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: u64 = number.parse().map_err(|_| error())?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(error()),
    };
    number
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_seconds() {
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("1w").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("").is_err());
    }
}
