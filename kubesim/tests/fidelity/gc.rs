//! Garbage collection through ownerReferences (background, foreground, orphan), finalizers and
//! namespace deletion, as seen by kube-rs.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

use super::support::{Sim, eventually, start};

async fn owner_and_dependents(sim: &Sim, api: &Api<ConfigMap>, n: usize) -> String {
    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let uid = owner.metadata.uid.unwrap();
    for i in 0..n {
        let dep: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("dep{i}"),
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "controller": true}]}}))
        .unwrap();
        api.create(&PostParams::default(), &dep).await.unwrap();
    }
    let _ = sim;
    uid
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    owner_and_dependents(&sim, &api, 2).await;
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(5, || async {
        (api.get_opt("dep0").await.unwrap().is_none()
            && api.get_opt("dep1").await.unwrap().is_none())
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_removes_dependents_before_owner() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    owner_and_dependents(&sim, &api, 1).await;
    // A finalizer on the dependent holds it, so the owner must wait in foreground deletion.
    api.patch(
        "dep0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["test/hold"]}})),
    )
    .await
    .unwrap();
    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let owner = eventually(5, || async {
        let o = api.get_opt("owner").await.unwrap()?;
        o.metadata.deletion_timestamp.is_some().then_some(o)
    })
    .await;
    assert!(
        owner
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    eventually(5, || async {
        api.get_opt("dep0")
            .await
            .unwrap()?
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    assert!(
        api.get_opt("owner").await.unwrap().is_some(),
        "owner waits for its dependent"
    );
    api.patch(
        "dep0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(5, || async {
        api.get_opt("owner").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_owner_references() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    owner_and_dependents(&sim, &api, 1).await;
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    api.delete("owner", &dp).await.unwrap();
    eventually(5, || async {
        api.get_opt("owner").await.unwrap().is_none().then_some(())
    })
    .await;
    let dep = api.get("dep0").await.unwrap();
    assert!(dep.metadata.owner_references.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn dependent_of_a_missing_owner_is_collected() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let dep: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "stray",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "never", "uid": "00000000-0000-0000-0000-000000000000"}]}}))
    .unwrap();
    api.create(&PostParams::default(), &dep).await.unwrap();
    eventually(5, || async {
        api.get_opt("stray").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn finalizer_holds_object_until_removed() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["test/hold"]}}))
            .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let err = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["test/hold", "test/new"]}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none());
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_contents() {
    let sim = start().await;
    let nss: Api<Namespace> = Api::all(sim.client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap(),
    )
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "doomed");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
    )
    .await
    .unwrap();
    nss.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    eventually(5, || async {
        nss.get_opt("doomed").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(
        sim.cluster
            .store
            .get_raw("", "configmaps", "doomed", "x")
            .is_none()
    );
}
