//! kube-runtime's watcher and reflector over kubesim: resume after dropped watches, re-list only
//! after 410 Gone, bookmarks, and selective watches.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use super::support::{Sim, eventually, start};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "w"}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

/// A running kube-runtime reflector over ConfigMaps that has seen one created object.
async fn synced_reflector_with_one_object(
    sim: &Sim,
) -> (
    Api<ConfigMap>,
    reflector::Store<ConfigMap>,
    tokio::task::JoinHandle<()>,
) {
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .default_backoff()
        .touched_objects();
    let task = tokio::spawn(async move {
        stream.for_each(|_| async {}).await;
    });
    reader.wait_until_ready().await.unwrap();
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    eventually(5, || async { (reader.state().len() == 1).then_some(()) }).await;
    (api, reader, task)
}

#[tokio::test]
async fn reflector_survives_dropped_watches_without_relisting() {
    let sim = start().await;
    let (api, reader, task) = synced_reflector_with_one_object(&sim).await;
    let lists_before = sim.count("list", "configmaps").await;
    let watches_before = sim.count("watch", "configmaps").await;

    sim.control("POST", "/watches/drop", "").await;
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    eventually(10, || async { (reader.state().len() == 2).then_some(()) }).await;
    eventually(10, || async {
        (sim.count("watch", "configmaps").await > watches_before).then_some(())
    })
    .await;
    assert_eq!(
        sim.count("list", "configmaps").await,
        lists_before,
        "a dropped watch must resume, not re-list"
    );
    task.abort();
}

#[tokio::test]
async fn reflector_relists_after_410_and_converges() {
    let sim = start().await;
    let (api, reader, task) = synced_reflector_with_one_object(&sim).await;
    let lists_before = sim.count("list", "configmaps").await;

    sim.control("POST", "/compact", r#"{"dropWatches": true}"#)
        .await;
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    api.delete("a", &Default::default()).await.unwrap();
    eventually(10, || async {
        let names: Vec<String> = reader
            .state()
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        (names == ["b"]).then_some(())
    })
    .await;
    assert!(
        sim.count("list", "configmaps").await > lists_before,
        "410 must lead to a re-list"
    );
    task.abort();
}

#[tokio::test]
async fn watch_from_compacted_version_gets_410_error_event() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    sim.control("POST", "/compact", "").await;
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}

#[tokio::test]
async fn raw_watch_sees_changes_and_bookmarks_in_order() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let start_rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(10), &start_rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("a", &Default::default()).await.unwrap();
    let mut kinds = Vec::new();
    let mut bookmark = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    while (kinds.len() < 3 || !bookmark) && tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(3), stream.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(_)))) => kinds.push("ADDED"),
            Ok(Ok(Some(WatchEvent::Modified(_)))) => kinds.push("MODIFIED"),
            Ok(Ok(Some(WatchEvent::Deleted(_)))) => kinds.push("DELETED"),
            Ok(Ok(Some(WatchEvent::Bookmark(_)))) => bookmark = true,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    assert!(bookmark, "bookmarks were requested");
}

#[tokio::test]
async fn selective_watch_sees_objects_leave_the_selection_as_deleted() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("app=w").timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(c)) => assert_eq!(c.metadata.name.as_deref(), Some("a")),
        other => panic!("expected DELETED, got {other:?}"),
    }
}
