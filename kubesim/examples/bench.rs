//! kubesim throughput: pod creates per second through the HTTP API, and watch fan-out (events per
//! second delivered to many watchers). Bounded in count and time; loopback only.
//!
//! `cargo run --release -p kubesim --example bench -- [pods] [concurrency] [watchers] [events]`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kubesim::{Cluster, ClusterConfig};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(120);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let pods = *args.first().unwrap_or(&20_000);
    let concurrency = *args.get(1).unwrap_or(&64);
    let watchers = *args.get(2).unwrap_or(&100);
    let events = *args.get(3).unwrap_or(&2_000);

    let cluster = Cluster::start(ClusterConfig::default()).await?;
    let client = cluster.client()?;

    // 1. Watch fan-out (first, so the kubelet's work on the pods below does not mix in): `watchers` watches on one namespace, `events` ConfigMap creates.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = api
        .list(&Default::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let delivered = Arc::new(AtomicU64::new(0));
    let mut streams = Vec::new();
    for _ in 0..watchers {
        let api = api.clone();
        let rv = rv.clone();
        let delivered = delivered.clone();
        streams.push(tokio::spawn(async move {
            let mut s = api
                .watch(&WatchParams::default().timeout(290), &rv)
                .await?
                .boxed();
            let mut seen = 0;
            while seen < events {
                match tokio::time::timeout(LIMIT, s.try_next()).await {
                    Ok(Ok(Some(WatchEvent::Added(_)))) => {
                        seen += 1;
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(Some(_))) => {}
                    _ => break,
                }
            }
            Ok::<_, kube::Error>(())
        }));
    }
    // Let every watch connect before producing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    for i in 0..events {
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("cm{i}")}, "data": {"k": "v"}}),
        )?;
        api.create(&PostParams::default(), &cm).await?;
    }
    let produced = started.elapsed().as_secs_f64();
    for s in streams {
        s.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    let total = delivered.load(Ordering::Relaxed);
    println!(
        "watch fan-out: {watchers} watchers x {events} events = {total} deliveries in {secs:.2} s = {:.0} events/s delivered (producer finished in {produced:.2} s)",
        total as f64 / secs
    );
    // 2. Pod creates: scripted pods that never start, so the kubelet's work does not mix into the
    //    API figure; a second run lets the kubelet schedule and run them.
    for (label, annotations) in [
        (
            "pods (never-start)",
            json!({"kubesim.io/never-start": "true"}),
        ),
        (
            "pods (scheduled and run by the kubelet)",
            json!({"kubesim.io/run-seconds": "0.5"}),
        ),
    ] {
        let ns = if label.contains("never") {
            "bench-a"
        } else {
            "bench-b"
        };
        let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        nss.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
        // The namespace controller adds the default service account asynchronously.
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), ns);
        while sas.get_opt("default").await?.is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let next = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let api = api.clone();
            let next = next.clone();
            let annotations = annotations.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i as usize >= pods || started.elapsed() > LIMIT {
                        return Ok::<_, kube::Error>(());
                    }
                    let pod: Pod = serde_json::from_value(json!({
                        "metadata": {"name": format!("p{i}"), "annotations": annotations},
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}
                    }))
                    .expect("static pod");
                    api.create(&PostParams::default(), &pod).await?;
                }
            }));
        }
        for t in tasks {
            t.await??;
        }
        let secs = started.elapsed().as_secs_f64();
        let done = pods.min(next.load(Ordering::Relaxed) as usize);
        println!(
            "{label}: {done} creates in {secs:.2} s = {:.0} creates/s (concurrency {concurrency})",
            done as f64 / secs
        );
    }

    Ok(())
}
