//! Status look-ups for clients that keep ids: `GET /api/v1/spark-submit/{submission_id}` and
//! `GET /api/v1/drivers/{namespace}/{pod}`, and the retention recorder behind them
//! ([`recorder`]). The log and the kill of a driver find it the same way ([`locate`]).
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
//! When the pod is gone, a retention record ([`crate::record`]) answers: Succeeded for a driver
//! whose success was retained, so a late reconnect does not resubmit finished work; Failed with
//! reason `Killed` for a driver killed through the submitter. A kill's record answers even while
//! the killed pod is still terminating. The recorder writes the success records from the pod
//! watch, a kill writes its own; the sweeper deletes both after the window.
//!
//! Plain functions over the shared state; the HTTP handlers are in [`crate::service`] and the
//! error mapping in [`crate::envelope`]. Errors: 503 while the caches have not synced or when a
//! live read fails (a retry soon will do), 401/403 per the policy (reading needs the namespace
//! only), 404 `NOT_FOUND` for a driver or submission that neither the cache, nor the API server,
//! nor a record knows.

pub mod recorder;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use thiserror::Error;

use crate::caches::WatchCaches;
use crate::kube_api::CallError;
use crate::policy::PolicyError;
use crate::record::{self, Outcome, Record};
use crate::state::AppState;
use crate::tls::PeerIdentity;
pub use recorder::{RecordConfig, RecordError, Recorder, run_recorder};
use submission::api::{DriverIdentity, DriverStatus, Target};
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

/// Where a driver was found.
#[derive(Debug, Clone)]
pub enum Located {
    /// Its pod (from the cache, or read live), and the record of its kill if it was killed.
    Pod {
        pod: Arc<Pod>,
        killed: Option<Record>,
    },
    /// Its record only: the pod is gone.
    Retained(Record),
}

impl Located {
    /// The status answer.
    pub fn status(&self) -> DriverStatus {
        match self {
            Located::Pod { pod, killed: None } => pod_status(pod),
            Located::Pod {
                pod,
                killed: Some(record),
            } => killed_pod_status(pod, record),
            Located::Retained(record) => record::status(record),
        }
    }

    /// The namespace of the driver.
    pub fn namespace(&self) -> &str {
        match self {
            Located::Pod { pod, .. } => pod.metadata.namespace.as_deref().unwrap_or_default(),
            Located::Retained(record) => &record.namespace,
        }
    }

    /// The pod's name.
    pub fn pod_name(&self) -> &str {
        match self {
            Located::Pod { pod, .. } => pod.metadata.name.as_deref().unwrap_or_default(),
            Located::Retained(record) => &record.pod,
        }
    }
}

/// Finds the driver `target` names, for `peer`: the caches, and on a miss the API server and
/// the retention records read live. Whoever may not read the driver's namespace learns nothing.
pub async fn locate(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    target: &Target,
) -> Result<Located, LookupError> {
    match target {
        Target::Driver { namespace, pod } => locate_driver(state, peer, namespace, pod).await,
        Target::Submission(id) => locate_submission(state, peer, id).await,
    }
}

/// The driver's status by namespace and pod name, for `peer`.
pub async fn driver_status(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    namespace: &str,
    pod: &str,
) -> Result<DriverStatus, LookupError> {
    locate_driver(state, peer, namespace, pod)
        .await
        .map(|found| found.status())
}

/// The driver's status by submission id, for `peer`. The same id may have been used in several
/// namespaces; only allowed ones are answered.
pub async fn submission_status(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    submission_id: &str,
) -> Result<DriverStatus, LookupError> {
    locate_submission(state, peer, submission_id)
        .await
        .map(|found| found.status())
}

async fn locate_driver(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    namespace: &str,
    pod: &str,
) -> Result<Located, LookupError> {
    // Authorise before touching the cache: a refused client learns nothing, synced or not.
    state
        .access
        .may_read(peer, namespace)
        .map_err(LookupError::Denied)?;
    let caches = state.synced_caches().ok_or(LookupError::NotSynced)?;
    if let Some(found) = cached_driver(caches, namespace, pod) {
        return Ok(found);
    }
    // A miss may be the cache's lag (a driver created a moment ago, a watch that is down):
    // only what the API server says may make a client resubmit.
    // (A pod read live is answered as it is: a kill record the cache has not shown yet is
    // milliseconds behind the pod's own deletion, which the kill waits for it to precede.)
    if let Some(live) = state
        .kube
        .get_pod(namespace, pod)
        .await
        .map_err(LookupError::ReadLive)?
        .filter(is_ours)
    {
        return Ok(Located::Pod {
            pod: Arc::new(live),
            killed: None,
        });
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
    .map(Located::Retained)
    .ok_or_else(|| LookupError::UnknownDriver {
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
    })
}

async fn locate_submission(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    submission_id: &str,
) -> Result<Located, LookupError> {
    // No identity at all is refused before anything is looked up.
    state.access.identified(peer).map_err(LookupError::Denied)?;
    let caches = state.synced_caches().ok_or(LookupError::NotSynced)?;
    let may_read = |namespace: &str| state.access.may_read(peer, namespace);
    let mut denied = None;
    match cached_submission(caches, submission_id, may_read) {
        Found::Located(found) => return Ok(*found),
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
        .into_iter()
        .filter(|pod| annotation(pod) == Some(submission_id))
    {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        match may_read(namespace) {
            Ok(()) => {
                return Ok(Located::Pod {
                    pod: Arc::new(pod),
                    killed: None,
                });
            }
            Err(error) => {
                denied.get_or_insert(error);
            }
        }
    }
    let records = live_records(state, &selector).await?;
    for record in records
        .into_iter()
        .filter(|r| r.submission_id == submission_id)
    {
        match may_read(&record.namespace) {
            Ok(()) => return Ok(Located::Retained(record)),
            Err(error) => {
                denied.get_or_insert(error);
            }
        }
    }
    Err(denied.map_or_else(unknown, LookupError::Denied))
}

/// What the caches say about one look-up.
enum Found {
    Located(Box<Located>),
    Denied(PolicyError),
    Nothing,
}

/// The driver by namespace and pod name, from the caches only.
fn cached_driver(caches: &WatchCaches, namespace: &str, pod: &str) -> Option<Located> {
    let records = caches.retained(&record::pod_key(namespace, pod));
    if let Some(pod) = caches.pod(namespace, pod) {
        return Some(with_kill(pod, records));
    }
    newest(records.into_iter()).map(Located::Retained)
}

/// The driver by submission id, from the caches only.
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
            let records = caches.retained(&record::pod_key(&namespace, &name));
            return Found::Located(Box::new(with_kill(pod, records)));
        }
    }
    for record in caches.retained(&record::submission_key(submission_id)) {
        match may_read(&record.namespace) {
            Ok(()) => return Found::Located(Box::new(Located::Retained(record))),
            Err(error) => {
                denied.get_or_insert(error);
            }
        }
    }
    denied.map_or(Found::Nothing, Found::Denied)
}

/// The pod, with the record of its kill among `records` (the records of its name): only a kill
/// of this very pod (by uid) counts, not one of an earlier pod of the same name.
fn with_kill(pod: Arc<Pod>, records: Vec<Record>) -> Located {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let killed = records
        .into_iter()
        .find(|r| r.outcome == Outcome::Killed && r.uid == uid);
    Located::Pod { pod, killed }
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

/// The record of the latest end, when a pod name was reused.
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
            submission_id: annotation(pod).map(str::to_owned),
            namespace: meta.namespace.clone().unwrap_or_default(),
            driver_pod_name: meta.name.clone().unwrap_or_default(),
            driver_pod_uid: meta.uid.clone().unwrap_or_default(),
            spark_app_id: record::spark_app_id(meta),
        },
        observe_driver(pod),
    )
}

/// A killed pod still going (its grace period): what the pod shows, but the outcome, reason,
/// message and action of the kill.
fn killed_pod_status(pod: &Pod, killed: &Record) -> DriverStatus {
    let kill = record::status(killed);
    DriverStatus {
        phase: kill.phase,
        reason: kill.reason,
        message: kill.message,
        finished_at: kill.finished_at,
        action: kill.action,
        ..pod_status(pod)
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
