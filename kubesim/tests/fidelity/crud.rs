//! Create, read, update, delete, list, patch flavours and selectors through kube-rs.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::support::start;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"}
    }))
    .unwrap()
}

#[tokio::test]
async fn typed_crud_round_trip() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let created = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let mut got = api.get("a").await.unwrap();
    got.data.as_mut().unwrap().insert("k".into(), "v2".into());
    let replaced = api
        .replace("a", &PostParams::default(), &got)
        .await
        .unwrap();
    assert_eq!(replaced.data.unwrap()["k"], "v2");
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let err = api.get("a").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.reason == "NotFound"),
        "{err:?}"
    );
}

#[tokio::test]
async fn duplicate_create_is_already_exists() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    api.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let err = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );
}

#[tokio::test]
async fn stale_replace_is_a_conflict_and_changes_nothing() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let first = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let mut fresh = first.clone();
    fresh
        .data
        .as_mut()
        .unwrap()
        .insert("k".into(), "fresh".into());
    api.replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    let mut stale = first.clone();
    stale
        .data
        .as_mut()
        .unwrap()
        .insert("k".into(), "stale".into());
    let err = api
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "fresh");
}

#[tokio::test]
async fn every_patch_flavour_applies() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    api.create(&PostParams::default(), &cm("a", json!({"x": "1"})))
        .await
        .unwrap();
    let pp = PatchParams::default();
    let merged = api
        .patch(
            "a",
            &pp,
            &Patch::Merge(json!({"data": {"m": "1", "k": null}})),
        )
        .await
        .unwrap();
    let data = merged.data.unwrap();
    assert_eq!(data.get("m").map(String::as_str), Some("1"));
    assert!(!data.contains_key("k"));
    let strategic = api
        .patch(
            "a",
            &pp,
            &Patch::Strategic(json!({"metadata": {"labels": {"y": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(strategic.metadata.labels.unwrap().len(), 2);
    let (code, jp) = sim
        .raw(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/a",
            Some("application/json-patch+json"),
            r#"[{"op": "add", "path": "/data/j", "value": "3"}]"#,
        )
        .await;
    assert_eq!((code, &jp["data"]["j"]), (200, &json!("3")));
    let applied = api
        .patch(
            "b",
            &PatchParams::apply("kubesim-test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"a": "1"}})),
        )
        .await
        .unwrap();
    let mf = applied.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("kubesim-test"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
}

#[tokio::test]
async fn apply_removes_fields_the_manager_no_longer_sets() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let pp = PatchParams::apply("mgr");
    let obj = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}),
        )
    };
    api.patch("c", &pp, &obj(json!({"a": "1", "b": "2"})))
        .await
        .unwrap();
    let second = api.patch("c", &pp, &obj(json!({"a": "1"}))).await.unwrap();
    let data = second.data.unwrap();
    assert!(data.contains_key("a") && !data.contains_key("b"));
    let other = PatchParams::apply("other");
    let err = api
        .patch("c", &other, &obj(json!({"a": "changed"})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    for (n, l) in [
        ("a", json!({"app": "x", "tier": "web"})),
        ("b", json!({"app": "y"})),
        ("c", json!({})),
    ] {
        api.create(&PostParams::default(), &cm(n, l)).await.unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        let mut v: Vec<String> = l
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        v.sort();
        v
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(api.list(&q("app=x")).await.unwrap()), ["a"]);
    assert_eq!(
        names(api.list(&q("app in (x,y)")).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(names(api.list(&q("!app")).await.unwrap()), ["c"]);
    assert_eq!(names(api.list(&q("app,app!=x")).await.unwrap()), ["b"]);
    let f = ListParams::default().fields("metadata.name=b");
    assert_eq!(names(api.list(&f).await.unwrap()), ["b"]);
    let bad = ListParams::default().fields("data.k=v");
    let err = api.list(&bad).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err:?}"
    );
}

/// Every page of `lp` in turn: (names, remainingItemCount) per page.
async fn pages(api: &Api<ConfigMap>, lp: ListParams) -> Vec<(Vec<String>, Option<i64>)> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut page_params = lp.clone();
        if let Some(t) = &token {
            page_params = page_params.continue_token(t);
        }
        let page = api.list(&page_params).await.unwrap();
        let names = page
            .items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        out.push((names, page.metadata.remaining_item_count));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() {
            return out;
        }
    }
}

#[tokio::test]
async fn paged_lists_follow_continue_tokens() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    for i in 0..7 {
        let labels = if i % 2 == 0 {
            json!({"even": "yes"})
        } else {
            json!({})
        };
        api.create(&PostParams::default(), &cm(&format!("c{i}"), labels))
            .await
            .unwrap();
    }
    let all = pages(&api, ListParams::default().limit(3)).await;
    let counts: Vec<_> = all.iter().map(|(n, r)| (n.len(), *r)).collect();
    assert_eq!(counts, [(3, Some(4)), (3, Some(1)), (1, None)]);
    // With a selector the API server leaves the count unset (ListMeta's remainingItemCount),
    // and the pages still hold every selected object once.
    let even = pages(&api, ListParams::default().labels("even=yes").limit(3)).await;
    assert_eq!(
        even,
        [
            (vec!["c0".into(), "c2".into(), "c4".into()], None),
            (vec!["c6".into()], None)
        ]
    );
    // A full page with objects after it gets a continue token even when none of them is
    // selected, as etcd paging gives it: the last page is then empty.
    let odd = pages(&api, ListParams::default().labels("!even").limit(3)).await;
    assert_eq!(
        odd,
        [
            (vec!["c1".into(), "c3".into(), "c5".into()], None),
            (vec![], None)
        ]
    );
}

#[tokio::test]
async fn dry_run_create_validates_but_stores_nothing() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let out = api.create(&pp, &cm("dry", json!({}))).await.unwrap();
    assert_eq!(out.metadata.name.as_deref(), Some("dry"));
    assert!(api.get_opt("dry").await.unwrap().is_none());
}

#[tokio::test]
async fn generate_name_gets_a_random_suffix() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": "gen-", "annotations": {"kubesim.io/never-start": "true"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}
    }))
    .unwrap();
    let a = api.create(&PostParams::default(), &pod).await.unwrap();
    let b = api.create(&PostParams::default(), &pod).await.unwrap();
    let (a, b) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(a.starts_with("gen-") && a.len() == 9 && a != b);
}

#[tokio::test]
async fn ingresses_are_served_with_a_status_subresource_and_collected_with_their_owner() {
    use k8s_openapi::api::networking::v1::Ingress;
    let sim = start().await;
    let owner = Api::<ConfigMap>::namespaced(sim.client.clone(), "default")
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    let api: Api<Ingress> = Api::namespaced(sim.client.clone(), "default");
    let ingress: Ingress = serde_json::from_value(json!({
        "metadata": {"name": "ui", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
            "name": "owner", "uid": owner.metadata.uid}]},
        "spec": {"ingressClassName": "nginx", "rules": [{"host": "pi.example.com", "http": {"paths": [
            {"path": "/", "pathType": "ImplementationSpecific",
             "backend": {"service": {"name": "pi-ui-svc", "port": {"number": 4040}}}}]}}]},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &ingress).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    // The status is written through its subresource only, as a controller writes it.
    let mut with_status = created.clone();
    with_status.status =
        serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "198.18.0.9"}]}}))
            .unwrap();
    let written = api
        .replace_status("ui", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(written.status.is_some());
    let ignored = api
        .replace(
            "ui",
            &PostParams::default(),
            &Ingress {
                status: None,
                ..written.clone()
            },
        )
        .await
        .unwrap();
    assert!(
        ignored.status.is_some(),
        "a main-resource write keeps the status"
    );
    // Owned: deleting the owner collects it.
    Api::<ConfigMap>::namespaced(sim.client.clone(), "default")
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        kube::runtime::wait::await_condition(
            api,
            "ui",
            kube::runtime::wait::conditions::is_deleted(&uid),
        ),
    )
    .await
    .expect("the ingress was not collected")
    .unwrap();
}
