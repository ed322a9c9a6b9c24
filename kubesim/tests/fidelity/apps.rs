//! Deployments and ReplicaSets as kube-rs sees them: pods made from the template, rolling and
//! recreating updates within their bounds, scale, status, and garbage collection.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubesim::store::WatchFrom;
use serde_json::{Value, json};

use super::support::{Sim, eventually, start};

fn deployment(name: &str, replicas: i32, image: &str, strategy: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"kubesim.io/run-seconds": "-1"}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }))
    .unwrap()
}

/// Waits until the Deployment reports a finished rollout of `replicas` (as `kubectl rollout
/// status` decides it) and returns it.
async fn rolled_out(api: &Api<Deployment>, name: &str, replicas: i32) -> Deployment {
    eventually(20, || async {
        let d = api.get(name).await.ok()?;
        let s = d.status.clone()?;
        let generation = d.metadata.generation?;
        (s.observed_generation? >= generation
            && s.updated_replicas == Some(replicas)
            && s.replicas == Some(replicas)
            && s.available_replicas == Some(replicas))
        .then_some(d)
    })
    .await
}

async fn replica_sets(sim: &Sim, selector: &str) -> Vec<ReplicaSet> {
    let api: Api<ReplicaSet> = Api::namespaced(sim.client.clone(), "default");
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
}

async fn running_pods(sim: &Sim, selector: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .collect()
}

#[tokio::test]
async fn a_deployment_runs_its_replicas_through_a_hashed_replica_set() {
    let sim = start().await;
    let api: Api<Deployment> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &deployment("web", 2, "nginx:1", json!({})),
    )
    .await
    .unwrap();
    let d = rolled_out(&api, "web", 2).await;
    let spec = d.spec.as_ref().unwrap();
    let strategy = spec.strategy.as_ref().unwrap();
    assert_eq!(
        strategy.type_.as_deref(),
        Some("RollingUpdate"),
        "defaulted"
    );
    assert_eq!(spec.revision_history_limit, Some(10));
    let status = d.status.unwrap();
    assert_eq!(status.ready_replicas, Some(2));
    let conditions: BTreeMap<String, (String, String)> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, (c.status, c.reason.unwrap_or_default())))
        .collect();
    assert_eq!(
        conditions["Available"],
        ("True".into(), "MinimumReplicasAvailable".into())
    );
    assert_eq!(
        conditions["Progressing"],
        ("True".into(), "NewReplicaSetAvailable".into())
    );
    assert_eq!(
        d.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );

    let rss = replica_sets(&sim, "app=web").await;
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Deployment", Some(true))
    );
    let pods = running_pods(&sim, &format!("pod-template-hash={hash}")).await;
    assert_eq!(pods.len(), 2);
    for p in &pods {
        assert!(
            p.metadata
                .name
                .as_ref()
                .unwrap()
                .starts_with(&format!("web-{hash}-"))
        );
        assert_eq!(
            p.metadata.owner_references.as_ref().unwrap()[0].kind,
            "ReplicaSet"
        );
    }
}

#[tokio::test]
async fn a_template_change_rolls_out_within_surge_and_availability() {
    let sim = start().await;
    let api: Api<Deployment> = Api::namespaced(sim.client.clone(), "default");
    // maxUnavailable 0: availability may never drop below 2; maxSurge 1: at most 3 replicas.
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    api.create(
        &PostParams::default(),
        &deployment("web", 2, "nginx:1", strategy),
    )
    .await
    .unwrap();
    rolled_out(&api, "web", 2).await;

    let mut sub = sim
        .cluster
        .store
        .subscribe(&|g, p, _| g == "apps" && p == "replicasets", WatchFrom::Now)
        .unwrap();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}})),
    )
    .await
    .unwrap();
    let d = rolled_out(&api, "web", 2).await;
    assert_eq!(
        d.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "2"
    );

    // Every ReplicaSet state the rollout went through, in order.
    let mut spec: BTreeMap<String, i64> = BTreeMap::new();
    let mut available: BTreeMap<String, i64> = BTreeMap::new();
    let mut max_spec = 0;
    let mut min_available = i64::MAX;
    // The replay is the state before the patch; the live events are the rollout.
    let events: Vec<_> = std::mem::take(&mut sub.replay)
        .into_iter()
        .chain(std::iter::from_fn(|| sub.live.try_recv().ok()))
        .collect();
    for ev in events {
        if ev.group != "apps" || ev.plural != "replicasets" {
            continue;
        }
        let name = kubesim::meta::name(&ev.object).to_string();
        spec.insert(
            name.clone(),
            ev.object["spec"]["replicas"].as_i64().unwrap_or(0),
        );
        available.insert(
            name,
            ev.object["status"]["availableReplicas"]
                .as_i64()
                .unwrap_or(0),
        );
        max_spec = max_spec.max(spec.values().sum());
        min_available = min_available.min(available.values().sum());
    }
    assert_eq!(spec.len(), 2, "one new ReplicaSet: {spec:?}");
    assert!(max_spec <= 3, "replicas + maxSurge exceeded: {max_spec}");
    assert!(
        min_available >= 2,
        "availability dropped to {min_available}"
    );

    let rss = replica_sets(&sim, "app=web").await;
    let by_image: BTreeMap<String, i32> = rss
        .iter()
        .map(|rs| {
            let t = rs.spec.as_ref().unwrap().template.as_ref().unwrap();
            (
                t.spec.as_ref().unwrap().containers[0]
                    .image
                    .clone()
                    .unwrap(),
                rs.spec.as_ref().unwrap().replicas.unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_image,
        BTreeMap::from([("nginx:1".into(), 0), ("nginx:2".into(), 2)])
    );
    let pods = running_pods(&sim, "app=web").await;
    assert!(
        pods.iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:2"))
    );
}

#[tokio::test]
async fn recreate_stops_the_old_pods_before_starting_new_ones() {
    let sim = start().await;
    let api: Api<Deployment> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &deployment("batch", 2, "job:1", json!({"type": "Recreate"})),
    )
    .await
    .unwrap();
    rolled_out(&api, "batch", 2).await;
    let mut sub = sim
        .cluster
        .store
        .subscribe(&|g, p, _| g.is_empty() && p == "pods", WatchFrom::Now)
        .unwrap();
    api.patch(
        "batch",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "job:2"}]}}}})),
    )
    .await
    .unwrap();
    rolled_out(&api, "batch", 2).await;
    let mut live: BTreeMap<String, String> = BTreeMap::new();
    let events: Vec<_> = std::mem::take(&mut sub.replay)
        .into_iter()
        .chain(std::iter::from_fn(|| sub.live.try_recv().ok()))
        .collect();
    for ev in events {
        if !ev.group.is_empty() || ev.plural != "pods" {
            continue;
        }
        let name = kubesim::meta::name(&ev.object).to_string();
        let image = ev.object["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if ev.kind == kubesim::store::EventType::Deleted {
            live.remove(&name);
        } else {
            live.insert(name, image);
        }
        let images: std::collections::BTreeSet<&String> = live.values().collect();
        assert!(images.len() <= 1, "old and new pods at once: {live:?}");
    }
}

#[tokio::test]
async fn scale_subresource_and_a_deleted_pod_are_reconciled_and_deletion_collects_everything() {
    let sim = start().await;
    let api: Api<Deployment> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &deployment("web", 1, "nginx:1", json!({})),
    )
    .await
    .unwrap();
    rolled_out(&api, "web", 1).await;
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    rolled_out(&api, "web", 3).await;
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));

    // A pod deleted behind the ReplicaSet's back is replaced.
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let victim = running_pods(&sim, "app=web").await[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(
        &victim,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    eventually(20, || async {
        let running = running_pods(&sim, "app=web").await;
        (running.len() == 3
            && running
                .iter()
                .all(|p| p.metadata.name.as_deref() != Some(victim.as_str())))
        .then_some(())
    })
    .await;

    api.delete("web", &DeleteParams::background())
        .await
        .unwrap();
    eventually(20, || async {
        let rs_left = replica_sets(&sim, "app=web").await.len();
        let pods_left = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?
            .items
            .len();
        (rs_left == 0 && pods_left == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn invalid_workloads_are_refused_with_the_api_servers_causes() {
    let sim = start().await;
    let api: Api<Deployment> = Api::namespaced(sim.client.clone(), "default");
    let mut d = deployment("bad", 1, "nginx:1", json!({}));
    d.spec.as_mut().unwrap().selector.match_labels =
        Some(BTreeMap::from([("app".to_string(), "other".to_string())]));
    let err = api.create(&PostParams::default(), &d).await.unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err:?}")
    };
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message
            .contains("`selector` does not match template `labels`"),
        "{}",
        s.message
    );
    let both_zero =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}});
    let err = api
        .create(
            &PostParams::default(),
            &deployment("stuck", 1, "nginx:1", both_zero),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err:?}"
    );
}
