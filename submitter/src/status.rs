//! Status look-ups for clients that keep ids: `GET /api/v1/spark-submit/{submission_id}` and
//! `GET /api/v1/drivers/{namespace}/{pod}`, and the retention recorder behind them.
//!
//! Both answer identity plus the driver state of [`submission::api::observe`] (the driver
//! container's status, not the pod phase) and the client action of the seed's table. They read
//! only the service's watch caches ([`WatchCaches`]: one watch per resource, synced before
//! anything is served, retried forever), never the API server: a fleet of orchestrators polling
//! must cost the API server nothing. A submission id is found through an index on our
//! submission-id annotation ([`index`]), never by guessing names.
//!
//! When the pod is gone, a retention record ([`record`]) written when the driver succeeded
//! answers Succeeded, so a late reconnect does not resubmit finished work. The recorder here
//! writes those records from the pod watch; the sweeper deletes them after the window.
//!
//! Errors: 503 while the caches have not synced (a retry soon will do), 401/403 per the policy
//! (reading needs the namespace only), 404 `NOT_FOUND` for a driver or submission neither the
//! cache nor a record knows.

pub mod index;
pub mod record;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Extension, Json, Router};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use thiserror::Error;
use tokio::sync::broadcast::error::RecvError;
use tracing::{info, instrument, warn};

use crate::envelope::{self, ApiError};
use crate::policy::PolicyError;
use crate::service::sweep::WatchCaches;
use crate::service::{Access, AppState, INSECURE_DEV_IDENTITY};
use crate::tls::PeerIdentity;
use submission::api::{DRIVERS_PATH, DriverIdentity, DriverStatus, ErrorCode, SUBMIT_PATH};
use submission::driver::observe_driver;
use submission::meta::{annotations, labels};

/// Why a look-up has no status to answer.
#[derive(Debug, Error)]
pub enum LookupError {
    #[error("the watch caches have not synced yet")]
    NotSynced,
    #[error("the client may not read drivers in this namespace")]
    Denied(#[source] PolicyError),
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
            LookupError::UnknownDriver { .. } => "unknown_driver",
            LookupError::UnknownSubmission { .. } => "unknown_submission",
        }
    }

    fn to_api(&self) -> ApiError {
        match self {
            LookupError::NotSynced => ApiError::overloaded(),
            LookupError::Denied(error) => envelope::policy_denied(error),
            LookupError::UnknownDriver { .. } | LookupError::UnknownSubmission { .. } => {
                ApiError::new(ErrorCode::NotFound, self.to_string())
            }
        }
    }
}

/// Adds the two look-up routes (called from `service::status_routes`).
pub fn routes(routes: Router<AppState>) -> Router<AppState> {
    routes
        .route(
            &format!("{SUBMIT_PATH}/{{submission_id}}"),
            get(submission_status),
        )
        .route(
            &format!("{DRIVERS_PATH}/{{namespace}}/{{pod}}"),
            get(driver_status),
        )
}

/// Whether `identity` may read drivers in `namespace` under `access`.
fn may_read(
    access: &Access,
    identity: Option<&PeerIdentity>,
    namespace: &str,
) -> Result<(), PolicyError> {
    match access {
        Access::InsecureDev(None) => Ok(()),
        Access::InsecureDev(Some(policy)) => {
            policy.authorize_namespace(&[INSECURE_DEV_IDENTITY.to_owned()], namespace)
        }
        Access::Policy(policy) => policy.authorize_namespace(
            identity.map(|i| i.names.as_slice()).unwrap_or_default(),
            namespace,
        ),
    }
}

fn path_error(rejection: PathRejection) -> ApiError {
    ApiError::new(ErrorCode::BadRequest, rejection.body_text())
}

#[instrument(skip_all, fields(namespace, pod))]
async fn driver_status(
    State(state): State<AppState>,
    identity: Option<Extension<PeerIdentity>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<DriverStatus>, ApiError> {
    let Path((namespace, pod)) = path.map_err(path_error)?;
    let identity = identity.as_ref().map(|e| &e.0);
    let check = |ns: &str| may_read(&state.access, identity, ns);
    // Authorise before touching the cache: a refused client learns nothing, synced or not.
    check(&namespace).map_err(|error| LookupError::Denied(error).to_api())?;
    let caches = state.caches.as_ref().ok_or(LookupError::NotSynced);
    caches
        .and_then(|caches| lookup_driver(caches, &namespace, &pod))
        .map(Json)
        .map_err(|error| {
            info!(kind = error.kind(), "driver status not answered");
            error.to_api()
        })
}

#[instrument(skip_all, fields(submission_id))]
async fn submission_status(
    State(state): State<AppState>,
    identity: Option<Extension<PeerIdentity>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<DriverStatus>, ApiError> {
    let Path(submission_id) = path.map_err(path_error)?;
    let identity = identity.as_ref().map(|e| &e.0);
    let with_id = |error: ApiError| error.with_submission_id(submission_id.clone());
    // No identity at all is a 401 before anything is looked up.
    if let (Access::Policy(_), None) = (&state.access, identity) {
        return Err(with_id(envelope::policy_denied(&PolicyError::NoIdentity)));
    }
    let check = |ns: &str| may_read(&state.access, identity, ns);
    let caches = state.caches.as_ref().ok_or(LookupError::NotSynced);
    caches
        .and_then(|caches| lookup_submission(caches, &submission_id, check))
        .map(Json)
        .map_err(|error| {
            info!(kind = error.kind(), "submission status not answered");
            with_id(error.to_api())
        })
}

/// Whether both caches (and their indexes) hold a complete first listing.
pub fn synced(caches: &WatchCaches) -> bool {
    caches.pod_index.is_synced() && caches.record_index.is_synced()
}

/// The driver's status by namespace and pod name, from the caches only.
pub fn lookup_driver(
    caches: &WatchCaches,
    namespace: &str,
    pod: &str,
) -> Result<DriverStatus, LookupError> {
    if !synced(caches) {
        return Err(LookupError::NotSynced);
    }
    if let Some(pod) = caches.pods.get(&ObjectRef::new(pod).within(namespace)) {
        return Ok(pod_status(&pod));
    }
    retained(caches, &record::pod_key(namespace, pod))
        .into_iter()
        .next()
        .map(|record| record::status(&record))
        .ok_or_else(|| LookupError::UnknownDriver {
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
        })
}

/// The driver's status by submission id, from the caches only. `may_read` filters namespaces:
/// the same id may have been used in several namespaces, and only allowed ones are answered.
pub fn lookup_submission(
    caches: &WatchCaches,
    submission_id: &str,
    may_read: impl Fn(&str) -> Result<(), PolicyError>,
) -> Result<DriverStatus, LookupError> {
    if !synced(caches) {
        return Err(LookupError::NotSynced);
    }
    let mut denied = None;
    for (namespace, name) in caches.pod_index.get(submission_id) {
        if let Err(error) = may_read(&namespace) {
            denied.get_or_insert(error);
            continue;
        }
        if let Some(pod) = caches.pods.get(&ObjectRef::new(&name).within(&namespace)) {
            return Ok(pod_status(&pod));
        }
    }
    for record in retained(caches, &record::submission_key(submission_id)) {
        match may_read(&record.namespace) {
            Ok(()) => return Ok(record::status(&record)),
            Err(error) => {
                denied.get_or_insert(error);
            }
        }
    }
    Err(match denied {
        Some(error) => LookupError::Denied(error),
        None => LookupError::UnknownSubmission {
            submission_id: submission_id.to_owned(),
        },
    })
}

/// The records indexed under `key` that the cache still holds.
pub(crate) fn retained(caches: &WatchCaches, key: &str) -> Vec<record::Record> {
    caches
        .record_index
        .get(key)
        .into_iter()
        .filter_map(|(namespace, name)| {
            caches
                .config_maps
                .get(&ObjectRef::new(&name).within(&namespace))
        })
        .filter_map(|cm| record::read(&cm))
        .collect()
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

/// Writes the retention record of a succeeded driver pod, unless the cache shows it already.
/// Idempotent: the name is deterministic and `AlreadyExists` counts as written.
pub async fn record_success(
    client: &kube::Client,
    caches: &WatchCaches,
    pod: &Pod,
    retention: Duration,
) -> Result<bool, RecordError> {
    let Some(record) = record::for_pod(pod, Timestamp::now(), retention) else {
        return Ok(false);
    };
    let Some(cm) = record::build(&record) else {
        return Ok(false);
    };
    let name = cm.metadata.name.clone().unwrap_or_default();
    if caches
        .config_maps
        .get(&ObjectRef::new(&name).within(&record.namespace))
        .is_some()
    {
        return Ok(false);
    }
    let api = Api::<ConfigMap>::namespaced(client.clone(), &record.namespace);
    match api.create(&PostParams::default(), &cm).await {
        Ok(_) => {
            info!(namespace = %record.namespace, pod = %record.pod,
                submission_id = %record.submission_id, retain_until = %record.retain_until,
                "retained a driver's success");
            Ok(true)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(RecordError::CreateRecord {
            namespace: record.namespace.clone(),
            name,
            source,
        }),
    }
}

/// Pause before a failed record write is tried again.
const RECORD_RETRY: Duration = Duration::from_secs(2);

/// Runs the recorder until the task is dropped: every succeeded driver the pod watch reports
/// gets its retention record. It subscribes before the caches sync and then passes once over
/// the whole pod cache, so a success seen during start-up or while it lagged is not missed.
pub async fn run_recorder(client: kube::Client, caches: WatchCaches, retention: Duration) {
    let mut successes = caches.succeeded.subscribe();
    if caches.ready().await.is_err() {
        warn!("watch caches stopped before syncing; the recorder does not run");
        return;
    }
    let mut backlog: Vec<Arc<Pod>> = caches.pods.state();
    loop {
        // Failed writes stay in the backlog: the pod may be gone from the cache by the retry.
        let mut failed = Vec::new();
        for pod in backlog.drain(..) {
            if let Err(error) = record_success(&client, &caches, &pod, retention).await {
                warn!(kind = error.kind(), error = %error, "retention record not written; retrying");
                failed.push(pod);
            }
        }
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
