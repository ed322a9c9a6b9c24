//! What a pod's own network costs at start: the same real-process pods started with
//! `network: host` and `network: pod` side by side, in one run.
//!
//! ```sh
//! cargo run --release -p kubesim --example pod_start -- [PODS]    # default 50; needs root
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kubesim::kubelet::ImageCommand;
use kubesim::net::NetworkMode;
use kubesim::{Cluster, ClusterConfig};
use serde_json::json;

async fn run(mode: NetworkMode, pods: usize) -> anyhow::Result<(Duration, Duration)> {
    let images = BTreeMap::from([(
        "sleeper".to_string(),
        ImageCommand {
            command: vec!["sleep".into(), "30".into()],
            env: BTreeMap::new(),
        },
    )]);
    let cluster = Cluster::start(ClusterConfig {
        images,
        network: mode,
        ..ClusterConfig::default()
    })
    .await?;
    let api: Api<Pod> = Api::namespaced(cluster.client()?, "default");
    let running = |api: Api<Pod>, want: usize| async move {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let list = api.list(&ListParams::default()).await?;
            let n = list
                .items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            if n >= want {
                return anyhow::Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "pods did not start");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let pod = |name: String| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "sleeper"}]}}))
        .expect("pod")
    };
    // One pod at a time: the latency a single pod start sees.
    let started = Instant::now();
    for i in 0..5 {
        api.create(&PostParams::default(), &pod(format!("one-{i}")))
            .await?;
        running(api.clone(), i + 1).await?;
    }
    let single = started.elapsed() / 5;
    // Many at once: the kubelet's work per pod.
    let started = Instant::now();
    for i in 0..pods {
        api.create(&PostParams::default(), &pod(format!("many-{i}")))
            .await?;
    }
    running(api.clone(), pods + 5).await?;
    let burst = started.elapsed() / u32::try_from(pods)?;
    Ok((single, burst))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let pods: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(50);
    println!("| network | one pod, create → Running | {pods} pods at once, per pod |");
    println!("|---|---|---|");
    for (name, mode) in [("host", NetworkMode::Host), ("pod", NetworkMode::Pod)] {
        let (single, burst) = run(mode, pods).await?;
        println!(
            "| {name} | {:.1} ms | {:.1} ms |",
            single.as_secs_f64() * 1e3,
            burst.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
