//! The I/O shell of SparkConnects: one watch of the SparkConnects and one of their pods (server
//! and executors, which carry [`CONNECT_NAME`]) per namespace watched, each with a reflector
//! cache, and kube-runtime's `Controller` over them calling the pure [`crate::connect`]
//! builders.
//!
//! A reconcile creates what is missing, in order (ConfigMap, server pod, Service; POST: an
//! AlreadyExists answer means it exists), then writes the status computed from the pod cache
//! (carrying the resourceVersion read). A server pod in the cache means its ConfigMap was made
//! before it; the Service is created until the status names it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use kube_runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube_runtime::reflector::{ObjectRef, Store};
use submission::error_chain::error_chain;
use thiserror::Error;
use tracing::{info, instrument, warn};

use crate::connect::{self, Observed};
use crate::crd::SparkConnect;
use crate::labels::CONNECT_NAME;
use crate::metrics::Metrics;
use crate::reconciler::Health;
use crate::watches::{ParentWatches, WatchOf, parent_watches};

/// How soon to look again after a status write lost a race (409).
const CONFLICT_REQUEUE: Duration = Duration::from_millis(200);

/// Error backoff of a SparkConnect's reconcile.
const ERROR_REQUEUE: Duration = Duration::from_secs(2);

/// A SparkConnect's reconcile failed; it is retried.
#[derive(Debug, Error)]
pub enum ConnectError {
    #[error("the SparkConnect has no namespace")]
    ReadSparkConnect,
    #[error("cannot create {kind} {name}")]
    Create {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the status of the SparkConnect")]
    WriteStatus(#[source] kube::Error),
}

impl ConnectError {
    /// A stable name for logs, metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ConnectError::ReadSparkConnect => "read_spark_connect",
            ConnectError::Create { .. } => "create",
            ConnectError::WriteStatus(_) => "write_status",
        }
    }
}

/// What every SparkConnect's reconcile shares.
pub struct ConnectContext {
    client: Client,
    /// The pod caches (servers and executors), one per namespace watched (or one for all).
    pods: Vec<Store<Pod>>,
    /// `--master` of the servers' Spark.
    master: String,
    metrics: Arc<Metrics>,
}

/// The SparkConnect a pod belongs to, by its label.
fn connect_of(pod: Pod) -> Option<ObjectRef<SparkConnect>> {
    let name = pod.labels().get(CONNECT_NAME)?.clone();
    Some(ObjectRef::new(&name).within(&pod.namespace()?))
}

/// Runs the SparkConnect controller over `namespaces` (`None`: all) until `shutdown`.
pub async fn run(
    client: Client,
    namespaces: Vec<Option<String>>,
    master: String,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let all: Vec<ParentWatches<SparkConnect, Pod>> = namespaces
        .iter()
        .map(|ns| {
            parent_watches::<SparkConnect, Pod>(
                &client,
                ns.as_deref(),
                (
                    WatchOf {
                        health: &health.connects,
                        resource: "sparkconnects",
                    },
                    WatchOf {
                        health: &health.connect_pods,
                        resource: "pods",
                    },
                ),
                CONNECT_NAME,
                &metrics,
            )
        })
        .collect();
    let ctx = Arc::new(ConnectContext {
        client,
        pods: all.iter().map(|s| s.child_reader.clone()).collect(),
        master,
        metrics,
    });
    let shutdown = futures::FutureExt::shared(shutdown);
    let controllers = all.into_iter().map(|streams| {
        Controller::for_stream(streams.parents, streams.parent_reader)
            .with_config(ControllerConfig::default().concurrency(4))
            .watches_stream(streams.children, connect_of)
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|result| async move {
                if let Err(error) = result {
                    warn!(error = %error_chain(&error), "spark connect controller error");
                }
            })
    });
    futures::future::join_all(controllers).await;
}

fn error_policy(conn: Arc<SparkConnect>, error: &ConnectError, ctx: Arc<ConnectContext>) -> Action {
    ctx.metrics.reconcile_error(error.kind());
    warn!(
        connect = %conn.name_any(),
        ns = %conn.namespace().unwrap_or_default(),
        kind = error.kind(),
        error = %error_chain(error),
        "spark connect reconcile failed"
    );
    Action::requeue(ERROR_REQUEUE)
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// POSTs `object`; AlreadyExists means it was made before, by this or another replica.
async fn create<K>(api: &Api<K>, object: &K, kind: &'static str) -> Result<(), ConnectError>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), object).await {
        Ok(_) => {
            info!(kind, name = %name, "created");
            Ok(())
        }
        Err(error) if is_status(&error, 409) => Ok(()),
        Err(source) => Err(ConnectError::Create { kind, name, source }),
    }
}

#[instrument(skip_all, fields(connect = %conn.name_any(), ns = %conn.namespace().unwrap_or_default()))]
async fn reconcile(
    conn: Arc<SparkConnect>,
    ctx: Arc<ConnectContext>,
) -> Result<Action, ConnectError> {
    if conn.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = conn.namespace().ok_or(ConnectError::ReadSparkConnect)?;
    let name = conn.name_any();
    let server_name = connect::server_pod_name(&conn);
    let cached_server = |ctx: &ConnectContext| {
        ctx.pods
            .iter()
            .find_map(|store| store.get(&ObjectRef::new(&server_name).within(&namespace)))
    };
    let mut observed_service = conn
        .status
        .as_ref()
        .is_some_and(|s| !s.server.service_name.is_empty());
    let mut build_error = None;
    match connect::build(&conn, &ctx.master) {
        Ok(objects) => {
            if cached_server(&ctx).is_none() {
                let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
                create(&config_maps, &objects.config_map, "ConfigMap").await?;
                let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
                create(&pods, &objects.server, "Pod").await?;
            }
            if !observed_service {
                let services: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
                create(&services, &objects.service, "Service").await?;
                observed_service = true;
            }
        }
        Err(error) => {
            warn!(kind = error.kind(), error = %error_chain(&error), "cannot build the server");
            build_error = Some(error_chain(&error));
        }
    }
    let server = cached_server(&ctx);
    let executors: Vec<Arc<Pod>> = ctx
        .pods
        .iter()
        .flat_map(|store| {
            store.state_filter(|pod| {
                pod.namespace().as_deref() == Some(namespace.as_str())
                    && connect::is_executor_of(&name, pod)
            })
        })
        .collect();
    let observed = Observed {
        server: server.as_deref(),
        executors: executors.iter().map(|p| p.as_ref()).collect(),
        service: observed_service,
        build_error,
    };
    let Some(status) = connect::status(&conn, &observed, Timestamp::now()) else {
        return Ok(Action::await_change());
    };
    let api: Api<SparkConnect> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut body = (*conn).clone();
    body.status = Some(status);
    match api
        .replace_status(&name, &PostParams::default(), &body)
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(error) if is_status(&error, 409) => Ok(Action::requeue(CONFLICT_REQUEUE)),
        Err(source) => Err(ConnectError::WriteStatus(source)),
    }
}
