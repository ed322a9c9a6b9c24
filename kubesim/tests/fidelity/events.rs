//! Events are one store served through two APIs, as the API server serves them: what kube-runtime's
//! `Recorder` writes through `events.k8s.io/v1` is what `kubectl describe` reads through core/v1,
//! and the kubelet's core/v1 events read through `events.k8s.io/v1`, field by field, with one
//! name, uid and resourceVersion; watches on either see writes through both.

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::events::{Event as Published, EventType, Recorder, Reporter};
use serde_json::json;

use super::support::start;

/// The next ADDED or MODIFIED object of a watch (bounded in time).
async fn next_change<K>(
    stream: &mut (impl Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
) -> (&'static str, K) {
    let next = async {
        loop {
            match stream.next().await.expect("the watch is open").unwrap() {
                WatchEvent::Added(o) => return ("ADDED", o),
                WatchEvent::Modified(o) => return ("MODIFIED", o),
                WatchEvent::Bookmark(_) => continue,
                other => panic!("unexpected watch event {other:?}"),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), next)
        .await
        .expect("a watch event within 10 s")
}

#[tokio::test]
async fn events_are_one_store_served_through_core_v1_and_events_k8s_io() {
    let sim = start().await;
    let core: Api<CoreEvent> = Api::namespaced(sim.client.clone(), "default");
    let events: Api<Event> = Api::namespaced(sim.client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let cm = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "subject"}})).unwrap(),
        )
        .await
        .unwrap();
    let mut core_watch = core
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut events_watch = events
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    // Written through events.k8s.io by kube-runtime's Recorder (as our operator writes).
    let recorder = Recorder::new(
        sim.client.clone(),
        Reporter {
            controller: "kubesim.io/test".into(),
            instance: Some("test-0".into()),
        },
    );
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: cm.metadata.name.clone(),
        namespace: Some("default".into()),
        uid: cm.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    let published = Published {
        type_: EventType::Warning,
        reason: "Tested".into(),
        note: Some("written through events.k8s.io".into()),
        action: "Testing".into(),
        secondary: None,
    };
    recorder.publish(&published, &reference).await.unwrap();

    // Read through core/v1, as `kubectl describe` does: note is message, regarding is
    // involvedObject, reportingController is reportingComponent; nothing deprecated was set.
    let (kind, seen) = next_change(&mut core_watch).await;
    assert_eq!(kind, "ADDED");
    assert_eq!(
        seen.message.as_deref(),
        Some("written through events.k8s.io")
    );
    assert_eq!(seen.involved_object.name.as_deref(), Some("subject"));
    assert_eq!(seen.involved_object.uid, cm.metadata.uid);
    assert_eq!(seen.reporting_component.as_deref(), Some("kubesim.io/test"));
    assert_eq!(seen.reporting_instance.as_deref(), Some("test-0"));
    assert_eq!(
        (
            seen.type_.as_deref(),
            seen.reason.as_deref(),
            seen.action.as_deref()
        ),
        (Some("Warning"), Some("Tested"), Some("Testing"))
    );
    assert!(seen.event_time.is_some());
    assert_eq!((seen.count, &seen.first_timestamp), (None, &None));
    let name = seen.metadata.name.clone().unwrap();
    let (_, own) = next_change(&mut events_watch).await;
    assert_eq!(own.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(own.metadata.uid, seen.metadata.uid);
    assert_eq!(
        own.metadata.resource_version,
        seen.metadata.resource_version
    );

    // Published again: the Recorder patches the series, and core/v1 readers see it.
    recorder.publish(&published, &reference).await.unwrap();
    let (kind, seen) = next_change(&mut core_watch).await;
    assert_eq!(kind, "MODIFIED");
    assert_eq!(seen.series.as_ref().and_then(|s| s.count), Some(2));
    let (kind, own) = next_change(&mut events_watch).await;
    assert_eq!(kind, "MODIFIED");
    assert_eq!(own.series.map(|s| s.count), Some(2));

    // Field selectors name the stored (core) fields on both APIs, as the API server's do.
    let by_subject = ListParams::default().fields("involvedObject.name=subject");
    assert_eq!(core.list(&by_subject).await.unwrap().items.len(), 1);
    assert_eq!(events.list(&by_subject).await.unwrap().items.len(), 1);
    let err = events
        .list(&ListParams::default().fields("regarding.name=subject"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400),
        "{err:?}"
    );

    // Written through core/v1 as the kubelet writes, read through events.k8s.io.
    let kubelet_style: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "subject.kubelet"},
        "involvedObject": {"kind": "ConfigMap", "name": "subject", "namespace": "default"},
        "reason": "Pulled", "message": "pulled the image", "type": "Normal",
        "source": {"component": "kubelet", "host": "kubesim-node-1"},
        "firstTimestamp": "2026-12-01T10:00:00Z", "lastTimestamp": "2026-12-01T10:01:00Z",
        "count": 3, "reportingComponent": "kubelet", "reportingInstance": "kubesim-node-1",
    }))
    .unwrap();
    core.create(&PostParams::default(), &kubelet_style)
        .await
        .unwrap();
    let (kind, e) = next_change(&mut events_watch).await;
    assert_eq!(kind, "ADDED");
    assert_eq!(e.metadata.name.as_deref(), Some("subject.kubelet"));
    assert_eq!(e.note.as_deref(), Some("pulled the image"));
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("subject")
    );
    assert_eq!(e.reporting_controller.as_deref(), Some("kubelet"));
    assert_eq!(e.deprecated_count, Some(3));
    let source = e.deprecated_source.clone().unwrap();
    assert_eq!(
        (source.component.as_deref(), source.host.as_deref()),
        (Some("kubelet"), Some("kubesim-node-1"))
    );
    assert_eq!(
        e.deprecated_first_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        Some("2026-12-01T10:00:00Z".to_string())
    );

    // events.k8s.io takes only what a new-style event may say: deprecated fields are refused.
    let mut old_style = serde_json::to_value(&e).unwrap();
    old_style["metadata"] = json!({"name": "old-style"});
    old_style["eventTime"] = json!("2026-12-01T10:00:00.000000Z");
    old_style["action"] = json!("Pulling");
    let err = events
        .create(
            &PostParams::default(),
            &serde_json::from_value(old_style).unwrap(),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    for field in ["firstTimestamp", "lastTimestamp", "count", "source"] {
        assert!(
            status.message.contains(&format!("{field}: Invalid value")),
            "{field}: {}",
            status.message
        );
    }

    // One object: deleted through one API, it is gone from the other.
    core.delete("subject.kubelet", &DeleteParams::default())
        .await
        .unwrap();
    let err = events.get("subject.kubelet").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404 && s.message == "events.events.k8s.io \"subject.kubelet\" not found"),
        "{err:?}"
    );
}
