//! The I/O shell of `operator run`: installs the CRD, opens one watch per resource type
//! (SparkApplications; driver pods by label) with a reflector cache each, runs kube-runtime's
//! `Controller` over them with [`crate::reconciler::reconcile`], and serves `/healthz` and
//! `/readyz`.
//!
//! Watches resume from their last resourceVersion and re-list only on 410 (kube-runtime's
//! watcher); every watch error is logged and retried with backoff, and marks the watch down for
//! readiness until the next event arrives.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use submission::error_chain::error_chain;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use http::StatusCode;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod, ResourceQuota};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use kube_runtime::WatchStreamExt;
use kube_runtime::controller::Config as ControllerConfig;
use kube_runtime::controller::Controller;
use kube_runtime::events::Reporter;
use kube_runtime::reflector::{self, ObjectRef};
use kube_runtime::watcher::{self};
use submitter_client::{ClientConfig, NewClientError, SubmitterClient};
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use crate::connect_controller;
use crate::crd::{ApplicationStateType, SparkApplication};
use crate::defaults::with_defaults;
use crate::events;
use crate::executor_quota;
use crate::executors::ExecutorIndex;
use crate::metrics::Metrics;
use crate::pod_index;
use crate::pod_warnings;
use crate::progress_store::ProgressStore;
use crate::progress_store::kube::KubeStore;
use crate::progress_store::redis::{ConnectError, RedisStore};
use crate::reconciler::kube::KubeEffects;
use crate::reconciler::{Health, Reconciler, error_policy, observe, reconcile};
use crate::recovery::{RecoverySettings, StoreKind};
use crate::scheduled_controller::{self, ScheduleClock};
use crate::state_machine::Settings;
use crate::watches::{scoped_api, track, watcher};

/// The field manager of everything the operator applies, and its event reporter name.
pub const MANAGER: &str = "spark-operator";

/// Reconciles running at once. A burst of new applications would otherwise send every
/// submission to the submitter together, past its own concurrency limit (64 by default), and
/// turn into `SUBMITTER_OVERLOADED` answers and retries (measured by the scale benchmark).
pub const MAX_CONCURRENT_RECONCILES: u16 = 32;

/// What `operator run` needs besides a Kubernetes client.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub submitter: ClientConfig,
    /// `--master` in every argv (the API server the driver talks to).
    pub master: String,
    /// Apply the CRD at start (needs RBAC on customresourcedefinitions).
    pub install_crd: bool,
    /// The namespaces watched; empty: all of them (one cluster-wide watch per resource).
    pub namespaces: Vec<String>,
    pub settings: Settings,
    /// Event reporter instance (the pod name in a cluster).
    pub instance: Option<String>,
    /// Shared with `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The time ScheduledSparkApplications run on (the wall clock outside tests).
    pub schedule_clock: ScheduleClock,
}

/// `operator run` failed to start or stopped.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("cannot make the submitter client")]
    NewSubmitterClient(#[source] NewClientError),
    #[error("cannot apply the SparkApplication CRD")]
    InstallCrd(#[source] kube::Error),
    #[error(
        "the SparkApplication CRD is managed by another field manager and differs from this operator's; it was not changed (install this operator's CRD explicitly, or run without --install-crd): {}",
        conflicts.join("; ")
    )]
    CrdManagedElsewhere { conflicts: Vec<String> },
    #[error("cannot listen for probes on {addr}")]
    ListenProbes {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to the fenced-restart state store")]
    ConnectStore(#[source] ConnectError),
    #[error("lost the leader lease {lease}")]
    LostLeadership { lease: String },
}

impl RunError {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::NewSubmitterClient(_) => "new_submitter_client",
            RunError::InstallCrd(_) => "install_crd",
            RunError::CrdManagedElsewhere { .. } => "crd_managed_elsewhere",
            RunError::ListenProbes { .. } => "listen_probes",
            RunError::ConnectStore(_) => "connect_store",
            RunError::LostLeadership { .. } => "lost_leadership",
        }
    }
}

/// Server-side applies each CRD (they are too large for client-side apply's annotation), never by
/// force: where another field manager (a Helm release, another operator) owns a field this CRD
/// would change, the API server answers 409 and nothing is written; that is reported, not
/// overwritten.
pub async fn install_crd(client: &Client) -> Result<(), RunError> {
    for crd in crate::crd::crds() {
        install_one_crd(client, crd).await?;
    }
    Ok(())
}

async fn install_one_crd(client: &Client, crd: CustomResourceDefinition) -> Result<(), RunError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds
        .patch(
            &crd.name_any(),
            &PatchParams::apply(MANAGER),
            &Patch::Apply(&crd),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let conflicts = status
                .details
                .as_ref()
                .map(|d| {
                    d.causes
                        .iter()
                        .map(|c| format!("{} ({})", c.field, c.message))
                        .collect()
                })
                .unwrap_or_default();
            return Err(RunError::CrdManagedElsewhere { conflicts });
        }
        Err(error) => return Err(RunError::InstallCrd(error)),
    }
    info!(crd = %crd.name_any(), "applied the CRD");
    // Watching before the API server serves the new type only yields retried errors; waiting
    // for Established keeps start-up logs clean. Not fatal: the watches retry regardless.
    let name = crd.name_any();
    let established = kube::runtime::wait::await_condition(
        crds,
        &name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    match tokio::time::timeout(CRD_ESTABLISHED_WAIT, established).await {
        Ok(Ok(_)) => info!(crd = %crd.name_any(), "the CRD is established"),
        Ok(Err(error)) => warn!(error = %error, "could not wait for the CRD to be established"),
        Err(_) => warn!(
            wait_secs = CRD_ESTABLISHED_WAIT.as_secs(),
            "the CRD is not established yet; the watches will retry"
        ),
    }
    Ok(())
}

/// How long start-up waits for the applied CRD to be served.
const CRD_ESTABLISHED_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// One namespace's (or all namespaces') two watch streams and their caches.
struct Streams {
    apps: BoxStream<'static, Result<SparkApplication, watcher::Error>>,
    app_reader: reflector::Store<SparkApplication>,
    /// Driver and executor pods: drivers are looked up in the cache, executors in the executor
    /// index this stream feeds; both wake their application.
    pods: BoxStream<'static, Result<Pod, watcher::Error>>,
    drivers: pod_index::DriverCache,
    /// The namespaces' ResourceQuotas: each change wakes the applications short of executors.
    quotas: BoxStream<'static, Result<ResourceQuota, watcher::Error>>,
    quota_reader: reflector::Store<ResourceQuota>,
}

/// The watches of `namespace` (`None`: all), each feeding its reflector cache and `health`.
fn streams(
    client: &Client,
    namespace: Option<&str>,
    health: &Health,
    metrics: &Arc<Metrics>,
    executor_index: &Arc<ExecutorIndex>,
) -> Streams {
    let (apps_api, pods_api): (Api<SparkApplication>, Api<Pod>) =
        (scoped_api(client, namespace), scoped_api(client, namespace));
    let owned = namespace.map(str::to_owned);
    let (app_reader, app_writer) = reflector::store::<SparkApplication>();
    let apps = watcher(apps_api, watcher::Config::default())
        .default_backoff()
        // Status writes replace the status from the cached object, never its managed fields.
        .modify(|app| app.metadata.managed_fields = None)
        .reflect(app_writer)
        .inspect(track(
            &health.apps,
            metrics.clone(),
            "sparkapplications",
            owned.clone(),
        ))
        .applied_objects()
        .boxed();
    let (pod_reader, pod_writer) = reflector::store::<Pod>();
    let executors = executor_index.clone();
    let owners = pod_index::OwnerIndex::default();
    let indexed = owners.clone();
    let pods = watcher(
        pods_api,
        watcher::Config::default().labels(&observe::operator_pod_selector()),
    )
    .default_backoff()
    // Executors are indexed from the whole pod, before the cache's trim.
    .inspect(move |event| {
        if let Ok(event) = event {
            executors.apply(event);
        }
    })
    // What the driver-state rule reads, not the whole pod: memory follows the drivers.
    .modify(observe::trim_for_cache)
    .reflect(pod_writer)
    .inspect(move |event| {
        if let Ok(event) = event {
            indexed.apply(event);
        }
    })
    .inspect(track(&health.pods, metrics.clone(), "pods", owned.clone()))
    .touched_objects()
    .boxed();
    let (quota_reader, quota_writer) = reflector::store::<ResourceQuota>();
    let quotas = watcher(
        scoped_api::<ResourceQuota>(client, namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|q: &mut ResourceQuota| q.metadata.managed_fields = None)
    .reflect(quota_writer)
    .inspect(track(
        &health.quotas,
        metrics.clone(),
        "resourcequotas",
        owned,
    ))
    .touched_objects()
    .boxed();
    Streams {
        apps,
        app_reader,
        pods,
        drivers: pod_index::DriverCache {
            store: pod_reader,
            owners,
        },
        quotas,
        quota_reader,
    }
}

/// Runs the controller until `shutdown` completes. `health` is shared with the probes.
pub async fn run(
    client: Client,
    config: RunConfig,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let submitter =
        SubmitterClient::new(config.submitter.clone()).map_err(RunError::NewSubmitterClient)?;
    if config.install_crd {
        install_crd(&client).await?;
    }
    // One watch per resource type and namespace (a namespace-scoped operator needs no
    // cluster-wide list or watch permission), or one per resource type for all namespaces.
    let namespaces: Vec<Option<&str>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config
            .namespaces
            .iter()
            .map(|ns| Some(ns.as_str()))
            .collect()
    };
    let executor_index = ExecutorIndex::new();
    let all_streams: Vec<Streams> = namespaces
        .iter()
        .map(|ns| streams(&client, *ns, &health, &config.metrics, &executor_index))
        .collect();
    config
        .metrics
        .set_app_caches(all_streams.iter().map(|s| s.app_reader.clone()).collect());
    let reporter = Reporter {
        controller: MANAGER.to_owned(),
        instance: config.instance.clone(),
    };
    let shutdown = shutdown.shared();
    // ScheduledSparkApplications make SparkApplications; the controller below runs them.
    let mut schedules = AbortOnDrop(tokio::spawn(scheduled_controller::run(
        client.clone(),
        namespaces.iter().map(|ns| ns.map(str::to_owned)).collect(),
        health.clone(),
        events::EventRecorder::new(client.clone(), reporter.clone()),
        config.schedule_clock,
        config.metrics.clone(),
        shutdown.clone(),
    )));
    // SparkConnects: their server pods run Spark in client mode, which makes the executors.
    let mut connects = AbortOnDrop(tokio::spawn(connect_controller::run(
        client.clone(),
        namespaces.iter().map(|ns| ns.map(str::to_owned)).collect(),
        config.master.clone(),
        health.clone(),
        config.metrics.clone(),
        shutdown.clone(),
    )));
    let warnings = pod_warnings::PodWarnings::default();
    let _warning_watches: Vec<AbortOnDrop<()>> = namespaces
        .iter()
        .map(|ns| {
            let watch = watch_warnings(&client, *ns, &health, &config.metrics, warnings.clone());
            AbortOnDrop(tokio::spawn(watch))
        })
        .collect();
    let effects = KubeEffects {
        client: client.clone(),
        submitter,
        pods: all_streams.iter().map(|s| s.drivers.clone()).collect(),
        executors: executor_index,
        warnings,
        quotas: all_streams.iter().map(|s| s.quota_reader.clone()).collect(),
        health,
        recorder: Arc::new(events::EventRecorder::new(client.clone(), reporter)),
        master: config.master.clone(),
        recovery: config.settings.recovery.clone(),
        metrics: config.metrics.clone(),
        store: None::<KubeStore>,
    };
    // The state store's backend is chosen here, once; everything after is generic over it.
    match config.settings.recovery.as_ref() {
        None => control(all_streams, effects, &config, shutdown).await,
        Some(RecoverySettings {
            store: StoreKind::Kubernetes,
            ..
        }) => {
            let store = KubeStore::new(client.clone());
            control(all_streams, effects.with_store(store), &config, shutdown).await
        }
        Some(RecoverySettings {
            store: StoreKind::Redis { url },
            redis_ttl,
            ..
        }) => {
            let store = RedisStore::connect(url)
                .await
                .map_err(RunError::ConnectStore)?
                .with_ttl(*redis_ttl);
            control(all_streams, effects.with_store(store), &config, shutdown).await
        }
    }
    // The schedules and SparkConnects stop on the same shutdown (or with this future, when it is dropped).
    let _ = (&mut schedules.0).await;
    let _ = (&mut connects.0).await;
    info!("controller stopped");
    Ok(())
}

/// Feeds `warnings` from the pods' Warning events in `namespace` (`None`: all) until dropped.
/// Not a readiness condition (`Health::warnings`): a driver's pending reason is shown later, not
/// wrongly, while this watch is down.
fn watch_warnings(
    client: &Client,
    namespace: Option<&str>,
    health: &Health,
    metrics: &Arc<Metrics>,
    warnings: pod_warnings::PodWarnings,
) -> impl Future<Output = ()> + Send + 'static {
    watcher(
        scoped_api::<CoreEvent>(client, namespace),
        watcher::Config::default().fields(pod_warnings::SELECTOR),
    )
    .default_backoff()
    .inspect(track(
        &health.warnings,
        metrics.clone(),
        "events",
        namespace.map(str::to_owned),
    ))
    .for_each(move |event| {
        if let Ok(event) = event {
            warnings.apply(&event);
        }
        std::future::ready(())
    })
}

/// The quota watch's mapper: a quota's change concerns the running applications of its
/// namespace that are short of executors or show the quota condition, not every application
/// there (a quota's `used` moves with every pod of the namespace).
fn short_of_executors(
    apps: reflector::Store<SparkApplication>,
    executors: Arc<ExecutorIndex>,
) -> impl Fn(ResourceQuota) -> Vec<ObjectRef<SparkApplication>> + Send + Sync + 'static {
    move |quota| {
        let Some(namespace) = quota.metadata.namespace.as_deref() else {
            return Vec::new();
        };
        apps.state()
            .iter()
            .filter(|app| app.metadata.namespace.as_deref() == Some(namespace))
            .filter(|app| {
                let Some(status) = app.status.as_ref() else {
                    return false;
                };
                if status.app_state.state != ApplicationStateType::Running {
                    return false;
                }
                let shown = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == executor_quota::CONDITION_TYPE);
                let of_app = executors.executors(namespace, &app.name_any());
                let live = executor_quota::live_executors(
                    of_app.iter().map(|e| (e.submission_id.as_deref(), e.state)),
                    &status.submission_id,
                );
                shown || live < executor_quota::expected_executors(&with_defaults(&app.spec))
            })
            .map(|app| ObjectRef::from_obj(app.as_ref()))
            .collect()
    }
}

/// A task that ends with its owner: a dropped `run` (an aborted operator) stops its schedules.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one kube-runtime controller per namespace watched, all over one reconciler, until
/// `shutdown`; together they run at most [`MAX_CONCURRENT_RECONCILES`] reconciles at once.
async fn control<S>(
    all_streams: Vec<Streams>,
    effects: KubeEffects<S>,
    config: &RunConfig,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) where
    S: ProgressStore + 'static,
{
    let executors = effects.executors.clone();
    let ctx = Arc::new(Reconciler::new(
        effects,
        config.settings.clone(),
        config.metrics.clone(),
    ));
    let permits = Arc::new(Semaphore::new(usize::from(MAX_CONCURRENT_RECONCILES)));
    let shutdown = shutdown.shared();
    info!(namespaces = ?config.namespaces, "starting the controller");
    let controllers = all_streams.into_iter().map(|streams| {
        let permits = permits.clone();
        let wake = short_of_executors(streams.app_reader.clone(), executors.clone());
        Controller::for_stream(streams.apps, streams.app_reader)
            .with_config(ControllerConfig::default().concurrency(MAX_CONCURRENT_RECONCILES))
            .watches_stream(streams.pods, observe::application_of)
            .watches_stream(streams.quotas, wake)
            .graceful_shutdown_on(shutdown.clone())
            .run(
                move |app, ctx| {
                    let permits = permits.clone();
                    async move {
                        // The semaphore is never closed, so a permit always comes.
                        let _permit = permits.acquire_owned().await;
                        reconcile(app, ctx).await
                    }
                },
                error_policy,
                ctx.clone(),
            )
            .for_each(|result| async move {
                if let Err(error) = result {
                    // Reconcile errors are logged by the error policy; these are the controller's
                    // own (a watch error, a reconcile for an object that left the cache).
                    warn!(error = %error_chain(&error), "controller error");
                }
            })
    });
    futures::future::join_all(controllers).await;
}

/// `/healthz` (the process answers), `/readyz` (both watches synced and connected) and
/// `/metrics`.
pub fn probe_router(health: Arc<Health>, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state((health, metrics))
}

async fn metrics_text(
    State((_, metrics)): State<(Arc<Health>, Arc<Metrics>)>,
) -> ([(http::header::HeaderName, &'static str); 1], String) {
    (
        [(
            http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

async fn readyz(
    State((health, _)): State<(Arc<Health>, Arc<Metrics>)>,
) -> (StatusCode, &'static str) {
    if health.ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "watch down or not synced")
    }
}

/// Binds the probe address; returns the bound address and a future that serves until dropped.
pub async fn serve_probes(
    addr: SocketAddr,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
) -> Result<(SocketAddr, impl Future<Output = ()>), RunError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::ListenProbes { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| RunError::ListenProbes { addr, source })?;
    info!(addr = %bound, "serving probes");
    Ok((bound, async move {
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        if let Err(error) = axum::serve(listener, probe_router(health, metrics)).await {
            warn!(error = %error, "probe server stopped");
        }
    }))
}
