//! The pod status fast path against the general path, on pods the store itself stored (created,
//! updated, bound, being deleted, under a LimitRange) and on odd bodies.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{status_only, takes, updated};
use crate::meta;
use crate::resources::ResourceType;
use crate::store::{DeleteOpts, Part, Store, WriteOpts, same_but_resource_version};

const NS: &str = "default";

fn store_with(limit_range: bool) -> (Arc<Store>, Arc<ResourceType>) {
    let store = Store::new(1000);
    let reg = store.registry();
    let create = |plural: &str, ns: &str, obj: Value| {
        let rt = reg.find("", "v1", plural).unwrap();
        store.create(&rt, ns, obj, &WriteOpts::default()).unwrap();
    };
    create("namespaces", "", json!({"metadata": {"name": NS}}));
    create(
        "serviceaccounts",
        NS,
        json!({"metadata": {"name": "default"}}),
    );
    if limit_range {
        create(
            "limitranges",
            NS,
            json!({"metadata": {"name": "lr"}, "spec": {"limits": [{"type": "Container",
                "default": {"cpu": "1", "memory": "1Gi"}, "defaultRequest": {"cpu": "500m"}}]}}),
        );
    }
    let pods = reg.find("", "v1", "pods").unwrap();
    (store, pods)
}

/// The general path's answer in the fast path's terms: `None` when nothing changes.
fn oracle(
    rt: &ResourceType,
    current: &Value,
    body: Value,
) -> Result<Option<Value>, crate::api_error::ApiError> {
    updated(rt, NS, "p", current, body, Part::Status)
        .map(|p| (!same_but_resource_version(current, &p)).then_some(p))
}

/// A container: mostly valid (a pod must be stored to be written to), now and then with an
/// invalid name, image or quantity, or a field its type does not have.
fn container() -> impl Strategy<Value = Value> {
    let quantity = prop::sample::select(vec![
        json!("1"),
        json!("250m"),
        json!("1Gi"),
        json!("2"),
        json!(2),
        json!("lots"),
    ]);
    (
        prop::sample::select(vec!["c", "c", "c", "c", "c", "c", "Bad_Name"]),
        prop::sample::select(vec![
            "busybox",
            "spark:3.5",
            "busybox",
            "spark:3.5",
            "busybox",
            "",
        ]),
        prop::option::of(quantity.clone()),
        prop::option::of(quantity),
        any::<bool>(),
    )
        .prop_map(|(name, image, cpu, memory, unknown)| {
            let mut c = json!({"name": name, "image": image});
            if let Some(q) = cpu {
                c["resources"] = json!({"requests": {"cpu": q}});
            }
            if let Some(q) = memory {
                c["resources"]["limits"] = json!({"memory": q});
            }
            if unknown {
                c["bogusField"] = json!(1);
            }
            c
        })
}

fn pod() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(container(), 1..3),
        prop::option::of(prop::sample::select(vec![
            "Never",
            "OnFailure",
            "Never",
            "Sometimes",
        ])),
        prop::sample::select(vec![
            json!({"app": "x"}),
            json!({}),
            json!({"app": "y"}),
            json!({"bad key!": "v"}),
        ]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mut containers, restart, labels, finalizer, unknown)| {
            for (i, c) in containers.iter_mut().enumerate() {
                if c["name"] == "c" {
                    c["name"] = json!(format!("c{i}"));
                }
            }
            let mut p = json!({"metadata": {"name": "p", "labels": labels},
                "spec": {"containers": containers}});
            if let Some(r) = restart {
                p["spec"]["restartPolicy"] = json!(r);
            }
            if finalizer {
                p["metadata"]["finalizers"] = json!(["example.com/keep"]);
            }
            if unknown {
                p["bogusTop"] = json!({"x": 1});
            }
            p
        })
}

fn status() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["Pending", "Running", "Succeeded"]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(phase, conditions, containers, unknown)| {
            let mut s = json!({"phase": phase, "podIP": "10.0.0.7"});
            if conditions {
                s["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "bogus": 1}]);
            }
            if containers {
                s["containerStatuses"] = json!([{"name": "main", "ready": true, "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z", "extra": true}}, "unknownField": "x"}]);
            }
            if unknown {
                s["bogus"] = json!({"nested": [1, 2]});
            }
            s
        })
}

/// A status write's body: a plain one, or one of the odd ones a client may send.
fn body(current: &Value, variant: u8, s: Value) -> Value {
    let rv = meta::meta_str(current, "resourceVersion");
    match variant {
        0 => json!({"status": s}),
        1 => json!({}),
        2 => json!({"status": null}),
        3 => json!({"status": "Running"}),
        4 => json!({"metadata": {"name": "other"}, "status": s}),
        5 => json!({"metadata": {"namespace": "other"}, "status": s}),
        6 => json!({"metadata": {"resourceVersion": "1"}, "status": s}),
        7 => json!({"metadata": {"resourceVersion": rv}, "status": s}),
        8 => json!({"kind": "Service", "status": s}),
        9 => json!(["not", "an", "object"]),
        10 => json!({"spec": {"containers": []}, "bogusTop": 1, "metadata": {"labels": {"x": "y"},
            "finalizers": ["new/one"], "selfLink": "/x", "uid": "forged", "generation": 9}, "status": s}),
        11 => json!({"status": current.get("status").cloned().unwrap_or(Value::Null)}),
        12 => json!({"apiVersion": "v2", "status": s}),
        _ => {
            let mut whole = current.clone();
            whole["status"] = s;
            whole
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever a pod the store holds and whatever a status write's body, the fast path stores
    /// exactly what the general path stores, refuses exactly what it refuses, and finds the
    /// same writes no-ops; and it takes every stored pod's status write.
    #[test]
    fn pod_status_fast_path_answers_as_the_general_path(
        spec in pod(),
        limit_range in any::<bool>(),
        bind in any::<bool>(),
        new_image in any::<bool>(),
        delete in any::<bool>(),
        writes in prop::collection::vec((0u8..14, status()), 1..8),
    ) {
        let (store, rt) = store_with(limit_range);
        if store.create(&rt, NS, spec, &WriteOpts::default()).is_err() {
            return Ok(());
        }
        let main = |change: &dyn Fn(&mut Value)| {
            let mut p = store.get(&rt, NS, "p").unwrap();
            change(&mut p);
            let _ = store.update(&rt, NS, "p", p, Part::Main, &WriteOpts::default());
        };
        if bind {
            main(&|p| p["spec"]["nodeName"] = json!("node-1"));
        }
        if new_image {
            main(&|p| p["spec"]["containers"][0]["image"] = json!("busybox:2"));
        }
        if delete {
            let opts = DeleteOpts { grace_period: Some(30), ..DeleteOpts::default() };
            let _ = store.delete(&rt, NS, "p", &opts);
        }
        for (variant, s) in writes {
            let Ok(current) = store.get(&rt, NS, "p") else {
                // Deleted: the store answers 404 before either path runs.
                let e = store.update(&rt, NS, "p", json!({"status": s}), Part::Status, &WriteOpts::default());
                prop_assert_eq!(e.map_err(|e| e.code).err(), Some(404));
                return Ok(());
            };
            prop_assert!(takes(&rt, &current, Part::Status, &WriteOpts::default()), "{current}");
            let b = body(&current, variant, s);
            let fast = status_only(&rt, NS, "p", &current, b.clone());
            prop_assert_eq!(&fast, &oracle(&rt, &current, b.clone()), "body {}", b);
            // Stored through the store (which checks again in debug builds), so the next write
            // starts from this one's result.
            let stored = store.update(&rt, NS, "p", b, Part::Status, &WriteOpts::default());
            match fast {
                Err(e) => prop_assert_eq!(stored.err(), Some(e)),
                Ok(None) => prop_assert_eq!(stored.ok(), Some(current)),
                Ok(Some(mut p)) => {
                    let stored = stored.unwrap();
                    p["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
                    prop_assert_eq!(stored, p);
                }
            }
        }
    }
}

#[test]
fn a_status_write_that_changes_nothing_keeps_the_resource_version_and_sends_no_event() {
    let (store, rt) = store_with(false);
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = store.create(&rt, NS, pod, &WriteOpts::default()).unwrap();
    let before = store.resource_version();
    let again = json!({"status": created["status"].clone()});
    let after = store
        .update(&rt, NS, "p", again, Part::Status, &WriteOpts::default())
        .unwrap();
    assert_eq!(after, created);
    assert_eq!(store.resource_version(), before);
}

#[test]
fn a_status_write_prunes_unknown_status_fields_and_keeps_the_spec() {
    let (store, rt) = store_with(false);
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = store.create(&rt, NS, pod, &WriteOpts::default()).unwrap();
    let body = json!({"spec": {"containers": []}, "status": {"phase": "Running", "bogus": 1,
        "containerStatuses": [{"name": "c", "ready": true, "extra": 2}]}});
    let after = store
        .update(&rt, NS, "p", body, Part::Status, &WriteOpts::default())
        .unwrap();
    assert_eq!(after["spec"], created["spec"]);
    assert_eq!(
        after["status"],
        json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": true}]})
    );
    assert_ne!(
        after["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}
