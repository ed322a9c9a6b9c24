//! Admission of pods against the LimitRanges and ResourceQuotas of their namespace, in the API
//! server's order, through the store.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::store::{Store, WriteOpts};

fn store_with(objects: &[(&str, Value)]) -> Arc<crate::store::Store> {
    let store = Store::new(100);
    let reg = store.registry();
    let opts = WriteOpts::default();
    let rt = |p: &str| reg.find("", "v1", p).expect("core type");
    store
        .create(
            &rt("namespaces"),
            "",
            json!({"metadata": {"name": "ns"}}),
            &opts,
        )
        .expect("namespace");
    store
        .create(
            &rt("serviceaccounts"),
            "ns",
            json!({"metadata": {"name": "default"}}),
            &opts,
        )
        .expect("service account");
    for (plural, obj) in objects {
        store
            .create(&rt(plural), "ns", obj.clone(), &opts)
            .expect("setup object");
    }
    store
}

fn pod(name: &str, resources: Value) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"containers": [{"name": "main", "image": "busybox:1", "resources": resources}]}})
}

#[test]
fn pods_are_admitted_by_limit_ranges_then_quotas() {
    let quota = |hard: Value| {
        (
            "resourcequotas",
            json!({"metadata": {"name": "q"}, "spec": {"hard": hard}}),
        )
    };
    let range = |items: Value| {
        (
            "limitranges",
            json!({"metadata": {"name": "lr"}, "spec": {"limits": items}}),
        )
    };
    let cpu = |c: &str| json!({"requests": {"cpu": c}, "limits": {"cpu": c}});
    // (what, objects made first, pods created in order, what the last create answers)
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, Value)>,
        Vec<Value>,
        Result<(), &'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            "no quota, no range",
            vec![],
            vec![pod("a", json!({}))],
            Ok(()),
        ),
        (
            "pods counted",
            vec![quota(json!({"pods": "1"}))],
            vec![pod("a", json!({})), pod("b", json!({}))],
            Err(
                "pods \"b\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1",
            ),
        ),
        (
            "cpu is an alias of requests.cpu, compared exactly",
            vec![quota(json!({"cpu": "1"}))],
            vec![
                pod("a", cpu("500m")),
                pod("b", cpu("0.5")),
                pod("c", cpu("1m")),
            ],
            Err(
                "pods \"c\" is forbidden: exceeded quota: q, requested: cpu=1m, used: cpu=1, limited: cpu=1",
            ),
        ),
        (
            "memory across suffixes",
            vec![quota(json!({"limits.memory": "1G"}))],
            vec![pod("a", json!({"limits": {"memory": "1Gi"}}))],
            Err(
                "pods \"a\" is forbidden: exceeded quota: q, requested: limits.memory=1Gi, used: limits.memory=0, limited: limits.memory=1G",
            ),
        ),
        (
            "a quota on memory needs the request",
            vec![quota(json!({"requests.memory": "1Gi"}))],
            vec![pod("a", cpu("1"))],
            Err("pods \"a\" is forbidden: failed quota: q: must specify requests.memory for: main"),
        ),
        (
            "range defaults come before the quota",
            vec![
                quota(json!({"requests.memory": "1Gi"})),
                range(json!([{"type": "Container", "defaultRequest": {"memory": "256Mi"}}])),
            ],
            vec![
                pod("a", json!({})),
                pod("b", json!({})),
                pod("c", json!({})),
                pod("d", json!({})),
                pod("e", json!({})),
            ],
            Err(
                "pods \"e\" is forbidden: exceeded quota: q, requested: requests.memory=256Mi, used: requests.memory=1Gi, limited: requests.memory=1Gi",
            ),
        ),
        (
            "range max refuses before the quota is asked",
            vec![
                quota(json!({"pods": "0"})),
                range(json!([{"type": "Container", "max": {"cpu": "1"}}])),
            ],
            vec![pod("a", cpu("2"))],
            Err("pods \"a\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"),
        ),
        (
            "scoped quotas are not enforced",
            vec![(
                "resourcequotas",
                json!({"metadata": {"name": "q"},
                "spec": {"hard": {"pods": "0"}, "scopes": ["BestEffort"]}}),
            )],
            vec![pod("a", json!({}))],
            Ok(()),
        ),
    ];
    for (what, setup, pods, want) in cases {
        let store = store_with(&setup);
        let rt = store.registry().find("", "v1", "pods").expect("pods");
        let got = pods.into_iter().try_for_each(|p| {
            store
                .create(&rt, "ns", p, &WriteOpts::default())
                .map(|_| ())
                .map_err(|e| (e.code, e.message))
        });
        assert_eq!(got, want.map_err(|m| (403, m.to_string())), "{what}");
    }
}

#[test]
fn quota_status_follows_creates_finishes_and_deletes() {
    let store = store_with(&[(
        "resourcequotas",
        json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "5", "count/pods": "5", "requests.cpu": "2"}}}),
    )]);
    let reg = store.registry();
    let pods = reg.find("", "v1", "pods").expect("pods");
    let quotas = reg.find("", "v1", "resourcequotas").expect("quotas");
    let used = || store.get(&quotas, "ns", "q").expect("quota")["status"]["used"].clone();
    let opts = WriteOpts::default();
    assert_eq!(
        used(),
        json!({"count/pods": "0", "pods": "0", "requests.cpu": "0"})
    );
    for name in ["a", "b"] {
        store
            .create(
                &pods,
                "ns",
                pod(name, json!({"requests": {"cpu": "750m"}})),
                &opts,
            )
            .expect("admitted");
    }
    assert_eq!(
        used(),
        json!({"count/pods": "2", "pods": "2", "requests.cpu": "1500m"})
    );
    store
        .modify(&pods, "ns", "a", crate::store::Part::Status, &opts, |cur| {
            let mut next = cur.clone();
            next["status"]["phase"] = json!("Succeeded");
            Ok(next)
        })
        .expect("finished");
    assert_eq!(
        used(),
        json!({"count/pods": "2", "pods": "1", "requests.cpu": "750m"})
    );
    let gone = crate::store::DeleteOpts {
        grace_period: Some(0),
        ..crate::store::DeleteOpts::default()
    };
    store.delete(&pods, "ns", "a", &gone).expect("deleted");
    assert_eq!(
        used(),
        json!({"count/pods": "1", "pods": "1", "requests.cpu": "750m"})
    );
}
