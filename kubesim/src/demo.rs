//! `kubesim demo`: a short tour that starts a cluster and shows it behaving like Kubernetes to an
//! unmodified kube-rs client: a driver pod with a native sidecar runs to completion under a watch,
//! its dependents are garbage-collected with it, and the request counters show one LIST.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::meta::At;
use crate::{Cluster, ClusterConfig};

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The cluster did not start.
    #[error("starting the cluster")]
    Start(#[from] crate::StartError),
    /// An API call failed.
    #[error("{step}")]
    Api {
        /// What was being done.
        step: &'static str,
        /// The cause.
        source: kube::Error,
    },
    /// A demo object did not deserialize (a bug in the demo itself).
    #[error("building a demo object")]
    Object(#[source] serde_json::Error),
    /// The pod did not finish in time.
    #[error("the pod did not finish within {0:?}")]
    Timeout(Duration),
}

impl DemoError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Start(_) => "start",
            Self::Api { .. } => "api",
            Self::Object(_) => "object",
            Self::Timeout(_) => "timeout",
        }
    }
}

fn api_err(step: &'static str) -> impl FnOnce(kube::Error) -> DemoError {
    move |source| DemoError::Api { step, source }
}

/// Runs the tour, printing as it goes; returns the final phase of the pod.
pub async fn run() -> Result<String, DemoError> {
    let cluster = Cluster::start(ClusterConfig::default()).await?;
    let client = cluster.client()?;
    println!(
        "kubesim serving at {} (nodes: {})",
        cluster.url,
        cluster.kubelet.nodes().join(", ")
    );

    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &core("Pod", "pods"));
    let cms: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &core("ConfigMap", "configmaps"));
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "demo-driver", "labels": {"spark-role": "driver"},
                     "annotations": {"kubesim.io/run-seconds": "1.5"}},
        "spec": {"restartPolicy": "Never",
                 "initContainers": [{"name": "agent", "image": "agent:1", "restartPolicy": "Always"}],
                 "containers": [{"name": "spark-kubernetes-driver", "image": "apache/spark:4.0.1"}]}
    });
    let created = pods
        .create(&PostParams::default(), &object(pod)?)
        .await
        .map_err(api_err("creating the driver pod"))?;
    let uid = created.metadata.uid.unwrap_or_default();
    println!("created pod demo-driver (uid {uid}) with a native sidecar");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "demo-conf", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "demo-driver", "uid": uid, "controller": true}]},
        "data": {"spark.properties": "spark.app.name=demo\n"}});
    cms.create(&PostParams::default(), &object(cm)?)
        .await
        .map_err(api_err("creating the owned ConfigMap"))?;
    println!("created configmap demo-conf owned by the pod");

    let config = watcher::Config::default().fields("metadata.name=demo-driver");
    let mut events = watcher(pods.clone(), config).applied_objects().boxed();
    let mut last = String::new();
    let limit = Duration::from_secs(30);
    let finished = tokio::time::timeout(limit, async {
        while let Some(Ok(p)) = events.next().await {
            let p = serde_json::to_value(&p).unwrap_or_default();
            let phase = p
                .at("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let node = p
                .at("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("-");
            let containers: Vec<String> = ["initContainerStatuses", "containerStatuses"]
                .iter()
                .filter_map(|f| p.at(&format!("/status/{f}")).and_then(Value::as_array))
                .flatten()
                .map(|c| {
                    let state = c
                        .get("state")
                        .and_then(Value::as_object)
                        .and_then(|s| s.keys().next().cloned());
                    format!(
                        "{}={}",
                        c["name"].as_str().unwrap_or("?"),
                        state.unwrap_or_default()
                    )
                })
                .collect();
            let line = format!(
                "watch: phase={phase} node={node} [{}]",
                containers.join(" ")
            );
            if line != last {
                println!("{line}");
                last = line;
            }
            if phase == "Succeeded" || phase == "Failed" {
                return phase;
            }
        }
        String::new()
    })
    .await
    .map_err(|_| DemoError::Timeout(limit))?;
    println!("driver finished: {finished} (the native sidecar did not hold the pod)");

    pods.delete("demo-driver", &DeleteParams::background())
        .await
        .map_err(api_err("deleting the pod"))?;
    for _ in 0..100 {
        if cms
            .get_opt("demo-conf")
            .await
            .map_err(api_err("reading the ConfigMap"))?
            .is_none()
        {
            println!("pod deleted; garbage collector removed configmap demo-conf");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for row in cluster.control.counts() {
        println!(
            "requests: {:<7} {:<12} watch={:<5} x{}",
            row.verb, row.resource, row.watch, row.count
        );
    }
    Ok(finished)
}

fn core(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), plural)
}

fn object(v: Value) -> Result<DynamicObject, DemoError> {
    serde_json::from_value(v).map_err(DemoError::Object)
}
