//! A kube-runtime Controller reconciling a custom resource with a status subresource.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::support::{eventually, start};

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "kubesim.test",
    version = "v1",
    kind = "Doubler",
    namespaced,
    status = "DoublerStatus"
)]
pub struct DoublerSpec {
    value: i64,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoublerStatus {
    doubled: i64,
    observed_generation: i64,
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed")]
struct ReconcileError(#[source] kube::Error);

async fn reconcile(d: Arc<Doubler>, api: Arc<Api<Doubler>>) -> Result<Action, ReconcileError> {
    let status = json!({"status": {"doubled": d.spec.value * 2, "observedGeneration": d.metadata.generation}});
    api.patch_status(
        &d.name_any(),
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await
    .map_err(ReconcileError)?;
    Ok(Action::await_change())
}

fn on_error(_: Arc<Doubler>, _: &ReconcileError, _: Arc<Api<Doubler>>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn controller_reconciles_custom_resource_status() {
    let sim = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client.clone());
    crds.create(&PostParams::default(), &Doubler::crd())
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        await_condition(
            crds,
            "doublers.kubesim.test",
            conditions::is_crd_established(),
        ),
    )
    .await
    .unwrap()
    .unwrap();

    let api: Api<Doubler> = Api::namespaced(sim.client.clone(), "default");
    let ctx = Arc::new(api.clone());
    let controller = tokio::spawn(
        Controller::new(api.clone(), Default::default())
            .run(reconcile, on_error, ctx)
            .for_each(|_| async {}),
    );
    api.create(
        &PostParams::default(),
        &Doubler::new("d", DoublerSpec { value: 21 }),
    )
    .await
    .unwrap();
    let first = eventually(10, || async {
        let d = api.get("d").await.ok()?;
        d.status
            .clone()
            .filter(|s| s.doubled == 42)
            .map(|s| (s, d.metadata.generation))
    })
    .await;
    assert_eq!(first.1, Some(1), "a status write does not bump generation");
    assert_eq!(first.0.observed_generation, 1);

    api.patch(
        "d",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"value": 5}})),
    )
    .await
    .unwrap();
    let second = eventually(10, || async {
        let d = api.get("d").await.ok()?;
        d.status.clone().filter(|s| s.doubled == 10)
    })
    .await;
    assert_eq!(
        second.observed_generation, 2,
        "a spec write bumps generation"
    );

    // Writing status through the main resource is ignored when a status subresource exists.
    let ignored = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"doubled": -1}})),
        )
        .await
        .unwrap();
    assert_eq!(ignored.status.map(|s| s.doubled), Some(10));
    controller.abort();
}
