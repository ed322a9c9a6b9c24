//! Watch plumbing shared by the operator's controllers: a namespaced kind's watch into a
//! reflector cache, its health for readiness, and the parent/children pair of watches the
//! schedule and Spark Connect controllers run on. Watches resume from their last
//! resourceVersion and re-list only on 410 (kube-runtime's watcher); every error is logged,
//! counted and retried with backoff.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::{Client, Resource};
use kube_runtime::WatchStreamExt;
use kube_runtime::reflector;
use kube_runtime::watcher::{self, Event as WatchEvent};
use serde::de::DeserializeOwned;
use submission::error_chain::error_chain;
use tracing::warn;

use crate::metrics::Metrics;
use crate::reconciler::WatchHealth;

/// Updates a new stream of `watches` from a watch's events; logs its errors (the watcher retries
/// them).
pub(crate) fn track<K>(
    watches: &WatchHealth,
    metrics: Arc<Metrics>,
    resource: &'static str,
    namespace: Option<String>,
) -> impl Fn(&Result<WatchEvent<K>, watcher::Error>) + use<K> {
    let stream = watches.stream();
    move |event| match event {
        Ok(event) => stream.on_event(matches!(event, WatchEvent::InitDone)),
        Err(error) => {
            if stream.on_error() {
                metrics.watch_restart(resource);
            }
            warn!(resource, namespace = ?namespace, error = %error_chain(error), "watch failed; retrying with backoff");
        }
    }
}

/// Which watch: its health stream and its resource's name in logs and metrics.
pub(crate) struct WatchOf<'a> {
    pub health: &'a WatchHealth,
    pub resource: &'static str,
}

/// A kind's watch and the watch of its children (the objects carrying `child_label`), each
/// feeding a reflector cache without managed fields: the shape of the schedule and Spark
/// Connect controllers, in one namespace or (`None`) all.
pub(crate) struct ParentWatches<P, C>
where
    P: Resource<DynamicType = ()> + 'static,
    C: Resource<DynamicType = ()> + 'static,
{
    pub parents: BoxStream<'static, Result<P, watcher::Error>>,
    pub parent_reader: reflector::Store<P>,
    pub children: BoxStream<'static, Result<C, watcher::Error>>,
    pub child_reader: reflector::Store<C>,
}

/// A namespaced kind the operator watches into a reflector cache.
pub(crate) trait Watched:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

pub(crate) fn parent_watches<P: Watched, C: Watched>(
    client: &Client,
    namespace: Option<&str>,
    (parent, child): (WatchOf<'_>, WatchOf<'_>),
    child_label: &str,
    metrics: &Arc<Metrics>,
) -> ParentWatches<P, C> {
    let owned = namespace.map(str::to_owned);
    let (parent_reader, parent_writer) = reflector::store();
    let parents = watcher::watcher(
        scoped_api::<P>(client, namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|o| o.meta_mut().managed_fields = None)
    .reflect(parent_writer)
    .inspect(track(
        parent.health,
        metrics.clone(),
        parent.resource,
        owned.clone(),
    ))
    .applied_objects()
    .boxed();
    let (child_reader, child_writer) = reflector::store();
    let children = watcher::watcher(
        scoped_api::<C>(client, namespace),
        watcher::Config::default().labels(child_label),
    )
    .default_backoff()
    .modify(|o| o.meta_mut().managed_fields = None)
    .reflect(child_writer)
    .inspect(track(child.health, metrics.clone(), child.resource, owned))
    .touched_objects()
    .boxed();
    ParentWatches {
        parents,
        parent_reader,
        children,
        child_reader,
    }
}

/// The API of `K` in `namespace`, or in all namespaces.
pub(crate) fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A watch of `api` with `config`: every watch of the operator starts here.
pub(crate) fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<WatchEvent<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config)
}
