//! A driver's log, by submission id or `namespace:pod`: `GET …/log`.
//!
//! The driver is found as a status look-up finds it ([`crate::status::locate`], the same
//! access rule: an identity reads only what it may submit into), then the API server's pod log
//! is opened with the client's options and relayed as it comes ([`crate::log_streams`]): the
//! submitter keeps no log.
//!
//! Decided, where the issue and the API server leave room:
//! - the default container is the driver's, by the one rule ([`driver_container_name`]): a
//!   sidecar (Istio, the recovery agent) is never read unless named;
//! - a driver container that has not started yet is waited for, up to
//!   [`AppState::log_start_wait`] (20 s, `kubectl logs`' `--pod-running-timeout`), on the
//!   watch caches' events, so `submit` then `logs -f` just works; after that the API server's
//!   "waiting to start" is passed on (400);
//! - a driver whose pod is gone but whose submission a record remembers (a retained success, a
//!   kill) is 410 `DRIVER_GONE`: the log went with the pod; one that nothing remembers is 404;
//! - the API server's own refusals of the options (`previous` with no previous instance, a
//!   container the pod does not have) are 400 with its message.

use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use thiserror::Error;
use tracing::info;

use crate::fairness::charged_identity;
use crate::kube_api::CallError;
use crate::log_streams::{self, Refusal};
use crate::state::AppState;
use crate::status::{Located, LookupError, locate};
use crate::tls::PeerIdentity;
use submission::api::{ContainerState, DriverStatus, LogQuery, QueryError, Target};
use submission::driver::{driver_container_name, observe_driver};

/// Why a log could not be opened.
#[derive(Debug, Error)]
pub enum LogError {
    #[error("invalid log options")]
    Options(#[source] QueryError),
    #[error("the driver could not be found")]
    Locate(#[source] LookupError),
    #[error("the driver pod {namespace}/{pod} is gone, and its log with it")]
    Gone { namespace: String, pod: String },
    #[error("no log stream opened")]
    Refused(#[source] Refusal),
    #[error("the driver pod {namespace}/{pod} went away before its log was opened")]
    Vanished { namespace: String, pod: String },
    #[error("the API server did not open the log of {namespace}/{pod}")]
    OpenLog {
        namespace: String,
        pod: String,
        #[source]
        source: CallError,
    },
}

impl LogError {
    pub fn kind(&self) -> &'static str {
        match self {
            LogError::Options(_) => "options",
            LogError::Locate(error) => error.kind(),
            LogError::Gone { .. } => "gone",
            LogError::Refused(refusal) => refusal.kind(),
            LogError::Vanished { .. } => "vanished",
            LogError::OpenLog { .. } => "open_log",
        }
    }
}

/// An open log: the driver it belongs to, and its body (streaming).
pub struct OpenLog {
    pub status: DriverStatus,
    pub container: Option<String>,
    pub body: Body,
}

/// Opens the log of the driver `target` names, for `peer`, with `query`'s options.
pub async fn open(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    target: &Target,
    query: &LogQuery,
) -> Result<OpenLog, LogError> {
    query.check().map_err(LogError::Options)?;
    let located = locate(state, peer, target)
        .await
        .map_err(LogError::Locate)?;
    let status = located.status();
    let Located::Pod { pod, .. } = located else {
        return Err(LogError::Gone {
            namespace: status.namespace,
            pod: status.driver_pod_name,
        });
    };
    let container = query
        .container
        .clone()
        .or_else(|| driver_container_name(&pod).map(str::to_owned));
    let namespace = status.namespace.clone();
    let name = status.driver_pod_name.clone();
    // Taken before anything waits or opens: a client over its limit costs nothing more.
    let slot = state
        .log_streams
        .admit(charged_identity(peer), &state.metrics)
        .map_err(LogError::Refused)?;
    if query.container.is_none() {
        wait_for_start(state, &pod, state.log_start_wait).await;
    }
    let params = LogParams {
        container: container.clone(),
        follow: query.follows(),
        limit_bytes: query.limit_bytes,
        pretty: false,
        previous: query.previous == Some(true),
        since_seconds: query.since_seconds,
        since_time: None,
        tail_lines: query.tail_lines,
        timestamps: query.timestamps == Some(true),
    };
    let response = state
        .kube
        .pod_log(&namespace, &name, &params)
        .await
        .map_err(|source| {
            if source.is_not_found() {
                LogError::Vanished {
                    namespace: namespace.clone(),
                    pod: name.clone(),
                }
            } else {
                LogError::OpenLog {
                    namespace: namespace.clone(),
                    pod: name.clone(),
                    source,
                }
            }
        })?;
    info!(namespace = %namespace, pod = %name, container = container.as_deref(),
        follow = query.follows(), "driver log opened");
    let upstream = response.into_body().into_data_stream();
    Ok(OpenLog {
        status,
        container,
        body: Body::from_stream(log_streams::relay(upstream, slot)),
    })
}

/// Waits (up to `bound`, on the caches' events) until the driver container of `pod` has started
/// or ended; at once when it has, or when there are no synced caches to watch.
async fn wait_for_start(state: &AppState, pod: &Pod, bound: Duration) {
    if !waiting(pod) {
        return;
    }
    let Some(caches) = state.synced_caches() else {
        return;
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + bound;
    caches
        .wait_until(deadline, |caches| {
            caches.pod(namespace, name).is_none_or(|pod| !waiting(&pod))
        })
        .await;
}

/// Whether the driver container has not started yet (no log to read).
fn waiting(pod: &Pod) -> bool {
    let observed = observe_driver(pod);
    matches!(
        observed.container_state,
        ContainerState::Waiting | ContainerState::Absent
    ) && observed.pod_phase.is_none_or(|phase| {
        matches!(
            phase,
            submission::api::PodPhase::Pending | submission::api::PodPhase::Running
        )
    })
}
