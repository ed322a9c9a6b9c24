use super::*;
use serde_json::json;

fn setup() -> (Arc<Store>, Registry) {
    setup_with_history(100)
}

/// A store keeping `history` events of each type, with the default namespace and its service
/// account.
fn setup_with_history(history: usize) -> (Arc<Store>, Registry) {
    let store = Store::new(history);
    let reg = store.registry();
    let ns = reg.find("", "v1", "namespaces").unwrap();
    store
        .create(
            &ns,
            "",
            json!({"metadata": {"name": "default"}}),
            &WriteOpts::default(),
        )
        .unwrap();
    let sa = reg.find("", "v1", "serviceaccounts").unwrap();
    store
        .create(
            &sa,
            "default",
            json!({"metadata": {"name": "default"}}),
            &WriteOpts::default(),
        )
        .unwrap();
    (store, reg)
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

#[test]
fn create_fills_server_metadata_and_rejects_duplicates() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let o = store
        .create(&rt, "default", cm("a"), &WriteOpts::default())
        .unwrap();
    assert!(!meta::uid(&o).is_empty());
    assert_eq!(o["metadata"]["namespace"], "default");
    let e = store
        .create(&rt, "default", cm("a"), &WriteOpts::default())
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
}

#[test]
fn create_in_missing_namespace_is_not_found() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let e = store
        .create(&rt, "nope", cm("a"), &WriteOpts::default())
        .unwrap_err();
    assert_eq!(e.code, 404);
}

#[test]
fn generate_name_appends_a_suffix() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let o = store
        .create(
            &rt,
            "default",
            json!({"metadata": {"generateName": "x-"}}),
            &WriteOpts::default(),
        )
        .unwrap();
    assert!(meta::name(&o).starts_with("x-") && meta::name(&o).len() == 7);
}

#[test]
fn stale_update_conflicts_and_changes_nothing() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let o = store
        .create(&rt, "default", cm("a"), &WriteOpts::default())
        .unwrap();
    let mut first = o.clone();
    first["data"]["k"] = json!("v2");
    store
        .update(
            &rt,
            "default",
            "a",
            first,
            Part::Main,
            &WriteOpts::default(),
        )
        .unwrap();
    let mut stale = o.clone();
    stale["data"]["k"] = json!("v3");
    let e = store
        .update(
            &rt,
            "default",
            "a",
            stale,
            Part::Main,
            &WriteOpts::default(),
        )
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
    assert_eq!(store.get(&rt, "default", "a").unwrap()["data"]["k"], "v2");
}

#[test]
fn dry_run_stores_nothing() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let rv = store.resource_version();
    store
        .create(&rt, "default", cm("a"), &WriteOpts { dry_run: true })
        .unwrap();
    assert_eq!(store.resource_version(), rv);
    assert!(store.get(&rt, "default", "a").is_err());
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let mut o = cm("a");
    o["metadata"]["finalizers"] = json!(["example.com/hold"]);
    store
        .create(&rt, "default", o, &WriteOpts::default())
        .unwrap();
    let d = store
        .delete(&rt, "default", "a", &DeleteOpts::default())
        .unwrap();
    assert!(meta::is_deleting(&d));
    let mut cur = store.get(&rt, "default", "a").unwrap();
    cur["metadata"]["finalizers"] = json!([]);
    store
        .update(&rt, "default", "a", cur, Part::Main, &WriteOpts::default())
        .unwrap();
    assert_eq!(store.get(&rt, "default", "a").unwrap_err().code, 404);
}

#[test]
fn delete_precondition_on_uid_conflicts() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    store
        .create(&rt, "default", cm("a"), &WriteOpts::default())
        .unwrap();
    let e = store
        .delete(
            &rt,
            "default",
            "a",
            &DeleteOpts {
                uid: Some("other".into()),
                ..DeleteOpts::default()
            },
        )
        .unwrap_err();
    assert_eq!(e.code, 409);
    assert!(store.get(&rt, "default", "a").is_ok());
}

#[test]
fn status_subresource_separates_spec_and_status_writes() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "services").unwrap();
    let svc =
        json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
    let o = store
        .create(&rt, "default", svc, &WriteOpts::default())
        .unwrap();
    assert!(
        o["metadata"].get("generation").is_none(),
        "services keep no generation"
    );
    let mut with_status = o.clone();
    with_status["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
    let main = store
        .update(
            &rt,
            "default",
            "s",
            with_status.clone(),
            Part::Main,
            &WriteOpts::default(),
        )
        .unwrap();
    assert_eq!(main["status"], json!({"loadBalancer": {}}));
    with_status["metadata"]["resourceVersion"] = main["metadata"]["resourceVersion"].clone();
    let st = store
        .update(
            &rt,
            "default",
            "s",
            with_status,
            Part::Status,
            &WriteOpts::default(),
        )
        .unwrap();
    assert_eq!(st["status"]["loadBalancer"]["ingress"][0]["ip"], "1.2.3.4");
    let mut spec_change = st.clone();
    spec_change["spec"]["ports"][0]["port"] = json!(81);
    let sc = store
        .update(
            &rt,
            "default",
            "s",
            spec_change,
            Part::Main,
            &WriteOpts::default(),
        )
        .unwrap();
    assert_eq!(sc["spec"]["ports"][0]["port"], 81);
}

#[test]
fn watch_resume_past_history_is_gone() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let o = store
        .create(&rt, "default", cm("a"), &WriteOpts::default())
        .unwrap();
    let rv: u64 = meta::meta_str(&o, "resourceVersion").parse().unwrap();
    let all = |_: &str, _: &str, _: &str| true;
    assert!(
        store
            .subscribe(&all, WatchFrom::After(rv - 1))
            .unwrap()
            .replay
            .len()
            == 1
    );
    store.compact();
    let e = store.subscribe(&all, WatchFrom::After(rv)).err().unwrap();
    assert_eq!(e.code, 410);
}

#[test]
fn a_busy_type_does_not_push_another_types_history_out() {
    // Two events of history per type, as the API server keeps a watch cache per resource.
    let (store, reg) = setup_with_history(2);
    let cms = reg.find("", "v1", "configmaps").unwrap();
    let secrets = reg.find("", "v1", "secrets").unwrap();
    let o = store
        .create(&cms, "default", cm("a"), &WriteOpts::default())
        .unwrap();
    let rv: u64 = meta::meta_str(&o, "resourceVersion").parse().unwrap();
    for i in 0..5 {
        let secret = json!({"metadata": {"name": format!("s{i}")}, "data": {}});
        store
            .create(&secrets, "default", secret, &WriteOpts::default())
            .unwrap();
    }
    let all = |_: &str, _: &str, _: &str| true;
    // The ConfigMaps' history still holds the create; the secrets' lost three of five.
    let replay = store
        .subscribe_type("", "configmaps", &all, WatchFrom::After(rv - 1))
        .unwrap()
        .replay;
    assert_eq!(replay.len(), 1);
    assert_eq!(meta::name(&replay[0].object), "a");
    let gone = store
        .subscribe_type("", "secrets", &all, WatchFrom::After(rv))
        .err()
        .unwrap();
    assert_eq!(gone.code, 410);
    // A subscription to every type needs every type's history: gone as well.
    assert_eq!(
        store
            .subscribe(&all, WatchFrom::After(rv))
            .err()
            .unwrap()
            .code,
        410
    );
    // Across types, a resume within every history replays in resourceVersion order.
    let last_secret_rv = rv + 4;
    let replay = store
        .subscribe(&all, WatchFrom::After(last_secret_rv - 1))
        .unwrap()
        .replay;
    let rvs: Vec<u64> = replay.iter().map(|e| e.rv).collect();
    assert_eq!(rvs, [last_secret_rv, last_secret_rv + 1]);
}

#[test]
fn a_resume_replays_exactly_the_events_after_its_resource_version() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let rvs: Vec<u64> = (0..5)
        .map(|i| {
            let o = store
                .create(&rt, "default", cm(&format!("r{i}")), &WriteOpts::default())
                .unwrap();
            meta::meta_str(&o, "resourceVersion").parse().unwrap()
        })
        .collect();
    let all = |_: &str, _: &str, _: &str| true;
    // From before the first event, from each event, and from past the last.
    for from in std::iter::once(rvs[0] - 1).chain(rvs.iter().copied()) {
        let replay = store
            .subscribe_type("", "configmaps", &all, WatchFrom::After(from))
            .unwrap()
            .replay;
        let replayed: Vec<u64> = replay.iter().map(|e| e.rv).collect();
        let expected: Vec<u64> = rvs.iter().copied().filter(|rv| *rv > from).collect();
        assert_eq!(replayed, expected, "resumed after {from}");
    }
}

#[test]
fn list_pages_with_continue_tokens() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    for i in 0..5 {
        store
            .create(&rt, "default", cm(&format!("c{i}")), &WriteOpts::default())
            .unwrap();
    }
    let keep = |_: &Value| true;
    let p1 = store
        .list(
            &rt,
            Some("default"),
            &keep,
            &ListOpts {
                limit: 2,
                continue_token: None,
                count_remaining: true,
            },
        )
        .unwrap();
    assert_eq!(p1.items.len(), 2);
    assert_eq!(p1.remaining, Some(3));
    let p2 = store
        .list(
            &rt,
            Some("default"),
            &keep,
            &ListOpts {
                limit: 10,
                continue_token: p1.continue_token,
                count_remaining: true,
            },
        )
        .unwrap();
    assert_eq!(p2.items.len(), 3);
    assert!(p2.continue_token.is_none());
}

#[test]
fn immutable_configmap_rejects_data_changes() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let mut o = cm("a");
    o["immutable"] = json!(true);
    let o = store
        .create(&rt, "default", o, &WriteOpts::default())
        .unwrap();
    let mut changed = o.clone();
    changed["data"]["k"] = json!("other");
    let e = store
        .update(
            &rt,
            "default",
            "a",
            changed,
            Part::Main,
            &WriteOpts::default(),
        )
        .unwrap_err();
    assert_eq!(e.code, 422);
}

#[test]
fn deletion_event_carries_its_own_resource_version() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "configmaps").unwrap();
    let o = store
        .create(&rt, "default", cm("a"), &WriteOpts::default())
        .unwrap();
    let created_rv: u64 = meta::meta_str(&o, "resourceVersion").parse().unwrap();
    let all = |_: &str, _: &str, _: &str| true;
    let sub = store.subscribe(&all, WatchFrom::After(created_rv)).unwrap();
    let mut live = sub.live;
    store
        .delete(&rt, "default", "a", &DeleteOpts::default())
        .unwrap();
    let ev = live.try_recv().unwrap();
    assert_eq!(ev.kind, EventType::Deleted);
    assert_eq!(
        meta::meta_str(&ev.object, "resourceVersion"),
        ev.rv.to_string()
    );
    assert!(ev.rv > created_rv);
    assert!(
        !meta::is_deleting(&ev.object),
        "an immediate delete shows the last state"
    );
}

#[test]
fn create_drops_status_of_types_with_a_status_subresource() {
    let (store, reg) = setup();
    let rt = reg.find("", "v1", "services").unwrap();
    let svc = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "None"}, "status": {"bogus": true}});
    let o = store
        .create(&rt, "default", svc, &WriteOpts::default())
        .unwrap();
    assert_eq!(o["status"], json!({"loadBalancer": {}}));
}

#[test]
fn objects_equal_but_for_their_resource_version_are_the_same_write() {
    let a = json!({"metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "v"}});
    let cases = [
        (
            json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "v"}}),
            true,
        ),
        (json!({"metadata": {"name": "a"}, "data": {"k": "v"}}), true),
        (
            json!({"metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "w"}}),
            false,
        ),
        (
            json!({"metadata": {"name": "b", "resourceVersion": "1"}, "data": {"k": "v"}}),
            false,
        ),
        (
            json!({"metadata": {"name": "a", "resourceVersion": "1", "labels": {}}, "data": {"k": "v"}}),
            false,
        ),
        (
            json!({"metadata": {"name": "a", "resourceVersion": "1"}}),
            false,
        ),
    ];
    for (b, same) in cases {
        assert_eq!(same_but_resource_version(&a, &b), same, "{b}");
        assert_eq!(same_but_resource_version(&b, &a), same, "{b}");
    }
}

#[test]
fn a_cluster_ip_is_taken_while_its_service_exists_and_free_once_it_is_gone() {
    let (store, reg) = setup();
    let svc_rt = reg.find("", "v1", "services").unwrap();
    let hashed = crate::net::addr::service_ip("default", "b", &|_| false)
        .unwrap()
        .to_string();
    let svc = |name: &str, ip: &str| json!({"metadata": {"name": name}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}});
    let ip_of = |v: &Value| v["spec"]["clusterIP"].as_str().unwrap().to_string();
    store
        .create(&svc_rt, "default", svc("a", &hashed), &WriteOpts::default())
        .unwrap();
    let moved = store
        .create(&svc_rt, "default", svc("b", ""), &WriteOpts::default())
        .unwrap();
    assert_ne!(ip_of(&moved), hashed);
    for name in ["a", "b"] {
        store
            .delete(&svc_rt, "default", name, &DeleteOpts::default())
            .unwrap();
    }
    let again = store
        .create(&svc_rt, "default", svc("b", ""), &WriteOpts::default())
        .unwrap();
    assert_eq!(ip_of(&again), hashed);
}

proptest::proptest! {
    /// A key looked up with borrowed strings finds exactly what the owned key finds, in the
    /// hashed map of types and in the ordered map of objects (whose order lists and continue
    /// tokens follow): borrowed and owned keys hash and order alike.
    #[test]
    fn borrowed_keys_find_what_owned_keys_find(
        stored in proptest::collection::vec(("[a-c]{0,3}", "[a-c-]{0,4}"), 0..12),
        probe in ("[a-c]{0,3}", "[a-c-]{0,4}"),
    ) {
        let hashed: HashMap<(String, String), usize> =
            stored.iter().cloned().enumerate().map(|(i, k)| (k, i)).collect();
        let ordered: BTreeMap<(String, String), usize> =
            stored.iter().cloned().enumerate().map(|(i, k)| (k, i)).collect();
        let borrowed = (probe.0.as_str(), probe.1.as_str());
        proptest::prop_assert_eq!(hashed.get(key(&borrowed)), hashed.get(&probe));
        proptest::prop_assert_eq!(ordered.get(key(&borrowed)), ordered.get(&probe));
        proptest::prop_assert_eq!(
            ordered.contains_key(key(&borrowed)),
            stored.contains(&probe)
        );
    }
}
