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
//!   "waiting to start" is passed on (400). A driver pod still without a node is refused the
//!   same way (400, [`LogError::NotScheduled`]): the API server answers such a pod's log with
//!   an empty 200 (it has no kubelet to ask), which a client could not tell from a log that
//!   ended. A pod the watch cache has not shown yet (read live, the watch lagging) is judged
//!   as read until the cache shows it, and asked of the API server once more at the end of the
//!   wait, so a lagging cache never opens an unbound pod's empty log;
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
use submission::api::{ContainerState, DriverPhase, DriverStatus, LogQuery, QueryError, Target};
use submission::driver::{driver_container_name, observe_container, observe_driver};

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
    #[error(
        "the driver pod {namespace}/{pod} is not scheduled to a node yet, so it has no log: its \
         container is waiting to start; ask again once the driver is Running"
    )]
    NotScheduled { namespace: String, pod: String },
    #[error("the driver pod {namespace}/{pod} could not be read while its log was being opened")]
    ReadPod {
        namespace: String,
        pod: String,
        #[source]
        source: CallError,
    },
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
            LogError::NotScheduled { .. } => "not_scheduled",
            LogError::ReadPod { .. } => "read_pod",
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
    let driver = query.container.is_none();
    let bound = wait_for_start(state, &pod, driver, state.log_start_wait)
        .await
        .map_err(|source| LogError::ReadPod {
            namespace: namespace.clone(),
            pod: name.clone(),
            source,
        })?;
    if !bound {
        return Err(LogError::NotScheduled {
            namespace,
            pod: name,
        });
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
    let end_check = query.follows().then(|| {
        let state = state.clone();
        let container = container.clone();
        Box::new(move || -> futures::future::BoxFuture<'static, bool> {
            Box::pin(async move { ended(&state, &namespace, &name, container.as_deref()).await })
        }) as log_streams::EndCheck
    });
    Ok(OpenLog {
        status,
        container,
        body: Body::from_stream(log_streams::relay(upstream, slot, end_check)),
    })
}

/// Waits (up to `bound`, on the caches' events) until `pod` is bound to a node and, for the
/// `driver` container's log, until that container has started or ended; at once when it is so,
/// or when there are no synced caches to watch. Answers whether the pod, as last seen, is bound
/// (or gone: the API server then answers 404).
async fn wait_for_start(
    state: &AppState,
    pod: &Pod,
    driver: bool,
    bound: Duration,
) -> Result<bool, CallError> {
    let not_yet = |pod: &Pod| !is_scheduled(pod) || (driver && waiting(pod));
    if !not_yet(pod) {
        return Ok(true);
    }
    let Some(caches) = state.synced_caches() else {
        return Ok(is_scheduled(pod));
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + bound;
    // A pod read live may not be in the cache yet (a lagging watch): until the cache shows
    // it, the pod as located stands; once it has, its absence means the pod went away.
    let mut shown = false;
    caches
        .wait_until(deadline, |caches| match caches.pod(namespace, name) {
            Some(cached) => {
                shown = true;
                !not_yet(&cached)
            }
            None => shown,
        })
        .await;
    match caches.pod(namespace, name) {
        Some(cached) => Ok(is_scheduled(&cached)),
        None if shown => Ok(true),
        None => live_pod_holds(state, namespace, name, is_scheduled).await,
    }
}

/// Whether `holds` of the pod as the API server has it now, for a pod the watch cache does not
/// hold (gone, or not shown yet by a lagging watch): a pod that is gone holds anything.
async fn live_pod_holds(
    state: &AppState,
    namespace: &str,
    name: &str,
    holds: impl Fn(&Pod) -> bool,
) -> Result<bool, CallError> {
    let live = state.kube.get_pod(namespace, name).await?;
    Ok(live.as_ref().is_none_or(holds))
}

/// How long a followed log's clean end waits for the caches to show its container's exit: the
/// API server ends the stream when the container exits, and the watch event of that exit
/// follows.
const EXIT_SEEN_WAIT: Duration = Duration::from_secs(5);

/// Whether `container` of the pod has exited (by the driver-state rule, read for that
/// container: it terminated, or the pod finished), or the pod is gone or going, waiting up to
/// [`EXIT_SEEN_WAIT`] for the caches to show it; `true` without synced caches (nothing to ask).
/// A pod the cache does not hold is asked of the API server: the cache may not have shown it
/// yet, and an unconfirmed end is told to the reader as a cut, which it may resume from.
async fn ended(state: &AppState, namespace: &str, name: &str, container: Option<&str>) -> bool {
    let Some(caches) = state.synced_caches() else {
        return true;
    };
    let finished = |pod: &Pod| {
        let observed = match container {
            Some(container) => observe_container(pod, container),
            None => observe_driver(pod),
        };
        matches!(observed.phase, DriverPhase::Succeeded | DriverPhase::Failed)
            || pod.metadata.deletion_timestamp.is_some()
    };
    let seen = caches
        .wait_until(tokio::time::Instant::now() + EXIT_SEEN_WAIT, |caches| {
            caches.pod(namespace, name).is_none_or(|pod| finished(&pod))
        })
        .await;
    if caches.pod(namespace, name).is_some() {
        return seen;
    }
    live_pod_holds(state, namespace, name, finished)
        .await
        .unwrap_or(false)
}

/// Whether `pod` is bound to a node: only then has it a kubelet, and a log. The watch cache
/// keeps no `nodeName` (`submission::driver::trim_for_cache`), so a cached pod also counts as
/// bound by its `PodScheduled` condition or by any container status, which only a kubelet
/// writes.
fn is_scheduled(pod: &Pod) -> bool {
    let named = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .is_some_and(|node| !node.is_empty());
    let status = pod.status.as_ref();
    let condition = status
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "True")
        });
    let kubelet = status
        .and_then(|status| status.container_statuses.as_ref())
        .is_some_and(|statuses| !statuses.is_empty());
    named || condition || kubelet
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
