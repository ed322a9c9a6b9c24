use super::*;
use proptest::prelude::*;
use serde_json::json;

const T0: &str = "2024-01-01T00:00:00Z";
const T1: &str = "2024-01-01T00:01:00Z";

fn managed(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(entries: &'a [Value], manager: &str, op: &str) -> Option<&'a Value> {
    entries
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == op)
}

#[test]
fn merge_patch_rfc7386() {
    let cases = [
        (
            json!({"a": 1, "b": {"c": 2, "d": 3}}),
            json!({"b": {"c": null, "e": 4}}),
            json!({"a": 1, "b": {"d": 3, "e": 4}}),
        ),
        (json!({"a": [1, 2]}), json!({"a": [3]}), json!({"a": [3]})),
        (json!({"a": 1}), json!("x"), json!("x")),
        (json!("x"), json!({"a": null, "b": 1}), json!({"b": 1})),
    ];
    for (target, patch, want) in cases {
        assert_eq!(merge_patch(&target, &patch), want, "{patch}");
    }
}

#[test]
fn json_patch_rfc6902() {
    let target = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": [1, 2]}});
    let patch = json!([
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "remove", "path": "/spec/x/0"},
        {"op": "replace", "path": "/spec/x/0", "value": 9},
    ]);
    assert_eq!(
        json_patch(&target, &patch).unwrap(),
        json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": [9]}})
    );
    let cases = [
        (json!({"op": "add"}), "malformed"),
        (json!([{"op": "bogus", "path": "/a"}]), "malformed"),
        (
            json!([{"op": "test", "path": "/metadata/labels/a", "value": "2"}]),
            "test_failed",
        ),
        (json!([{"op": "remove", "path": "/nope"}]), "failed"),
    ];
    for (patch, kind) in cases {
        assert_eq!(
            json_patch(&target, &patch).unwrap_err().kind(),
            kind,
            "{patch}"
        );
    }
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "web", "tier": "fe"}, "finalizers": ["a"]},
        "spec": {
            "containers": [
                {"name": "app", "image": "nginx:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "ports": [{"containerPort": 80, "name": "http"}], "args": ["x", "y"]},
                {"name": "sidecar", "image": "envoy"}
            ],
            "tolerations": [{"key": "k1", "operator": "Exists"}],
            "volumes": [{"name": "v1", "emptyDir": {}}]
        }
    })
}

type Check = Box<dyn Fn(&Value)>;

#[test]
fn strategic_merge_table() {
    let cases: Vec<(&str, Value, Check)> = vec![
        (
            "containers by name",
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:2"}, {"name": "new", "image": "busybox"}]}}),
            Box::new(|r| {
                let c = r["spec"]["containers"].as_array().unwrap();
                assert_eq!(c.len(), 3);
                assert_eq!(c[0]["image"], "nginx:2");
                assert_eq!(
                    c[0]["env"].as_array().unwrap().len(),
                    2,
                    "untouched fields survive"
                );
                assert_eq!(c[1]["name"], "sidecar");
                assert_eq!(c[2]["name"], "new");
            }),
        ),
        (
            "env by name",
            json!({"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}}),
            Box::new(|r| {
                assert_eq!(
                    r["spec"]["containers"][0]["env"],
                    json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}])
                )
            }),
        ),
        (
            "$patch delete element",
            json!({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}),
            Box::new(|r| assert_eq!(r["spec"]["containers"].as_array().unwrap().len(), 1)),
        ),
        (
            "null removes key",
            json!({"metadata": {"labels": {"tier": null}}}),
            Box::new(|r| assert_eq!(r["metadata"]["labels"], json!({"app": "web"}))),
        ),
        (
            "tolerations replaced",
            json!({"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}}),
            Box::new(|r| {
                assert_eq!(
                    r["spec"]["tolerations"],
                    json!([{"key": "k2", "operator": "Exists"}])
                )
            }),
        ),
        (
            "args replaced",
            json!({"spec": {"containers": [{"name": "app", "args": ["z"]}]}}),
            Box::new(|r| assert_eq!(r["spec"]["containers"][0]["args"], json!(["z"]))),
        ),
        (
            "container ports by containerPort",
            json!({"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}]}]}}),
            Box::new(|r| {
                assert_eq!(
                    r["spec"]["containers"][0]["ports"],
                    json!([{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 443}])
                )
            }),
        ),
        (
            "finalizers set-merge",
            json!({"metadata": {"finalizers": ["b", "a"], "$setElementOrder/finalizers": ["a", "b"]}}),
            Box::new(|r| {
                assert_eq!(r["metadata"]["finalizers"], json!(["a", "b"]));
                assert!(r["metadata"].get("$setElementOrder/finalizers").is_none());
            }),
        ),
        (
            "deleteFromPrimitiveList",
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
            Box::new(|r| assert_eq!(r["metadata"]["finalizers"], json!([]))),
        ),
        (
            "$patch replace map",
            json!({"metadata": {"labels": {"$patch": "replace", "only": "me"}}}),
            Box::new(|r| assert_eq!(r["metadata"]["labels"], json!({"only": "me"}))),
        ),
        (
            "$patch delete map",
            json!({"metadata": {"labels": {"$patch": "delete"}}}),
            Box::new(|r| assert!(r["metadata"].get("labels").is_none())),
        ),
        (
            "$patch replace list",
            json!({"spec": {"volumes": [{"$patch": "replace"}, {"name": "v2", "configMap": {"name": "c"}}]}}),
            Box::new(|r| {
                assert_eq!(
                    r["spec"]["volumes"],
                    json!([{"name": "v2", "configMap": {"name": "c"}}])
                )
            }),
        ),
        (
            "$retainKeys",
            json!({"spec": {"$retainKeys": ["containers"], "containers": [{"name": "app", "image": "i"}]}}),
            Box::new(|r| {
                assert!(r["spec"].get("tolerations").is_none());
                assert_eq!(r["spec"]["containers"].as_array().unwrap().len(), 2);
            }),
        ),
        (
            "new list element strips directives",
            json!({"spec": {"containers": [{"name": "n", "env": [{"name": "X", "$patch": "delete"}]}]}}),
            Box::new(|r| assert_eq!(r["spec"]["containers"][2], json!({"name": "n", "env": []}))),
        ),
    ];
    for (name, patch, check) in cases {
        let r = strategic_merge_patch(&pod(), &patch).unwrap_or_else(|e| panic!("{name}: {e}"));
        check(&r);
    }
}

#[test]
fn strategic_merge_service_ports_by_port() {
    let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
    let r = strategic_merge_patch(
        &svc,
        &json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}),
    )
    .unwrap();
    assert_eq!(
        r["spec"]["ports"],
        json!([{"port": 80, "targetPort": 9090}, {"port": 443}])
    );
}

#[test]
fn strategic_merge_errors() {
    let cases = [
        (json!([1]), "malformed"),
        (json!("x"), "malformed"),
        (
            json!({"spec": {"containers": [{"image": "x"}]}}),
            "missing_merge_key",
        ),
        (json!({"spec": {"containers": ["x"]}}), "missing_merge_key"),
        (
            json!({"metadata": {"$patch": "explode"}}),
            "invalid_directive",
        ),
        (json!({"spec": {"$retainKeys": "x"}}), "invalid_directive"),
    ];
    for (patch, kind) in cases {
        assert_eq!(
            strategic_merge_patch(&pod(), &patch).unwrap_err().kind(),
            kind,
            "{patch}"
        );
    }
    assert_eq!(
        strategic_merge_patch(&json!([]), &json!({}))
            .unwrap_err()
            .kind(),
        "invalid_target"
    );
}

fn cm(labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns", "labels": labels}, "data": data})
}

#[test]
fn apply_create_records_managed_fields() {
    let obj = apply(
        None,
        &cm(json!({"app": "x"}), json!({"k": "v"})),
        "mgr",
        false,
        T0,
    )
    .unwrap();
    assert_eq!(obj["data"], json!({"k": "v"}));
    assert_eq!(obj["metadata"]["name"], "c");
    assert_eq!(
        managed(&obj),
        vec![json!({
            "manager": "mgr", "operation": "Apply", "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
        })]
    );
}

#[test]
fn apply_reapply_removes_omitted_fields() {
    let first = apply(
        None,
        &cm(json!({"app": "x", "old": "y"}), json!({"k": "v"})),
        "mgr",
        false,
        T0,
    )
    .unwrap();
    let second = apply(
        Some(&first),
        &cm(json!({"app": "x"}), json!({"k": "v"})),
        "mgr",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(second["metadata"]["labels"], json!({"app": "x"}));
    let entries = managed(&second);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["time"], T1);
    assert_eq!(
        entries[0]["fieldsV1"]["f:metadata"],
        json!({"f:labels": {"f:app": {}}})
    );
    // Idempotent apart from the timestamp.
    let third = apply(
        Some(&second),
        &cm(json!({"app": "x"}), json!({"k": "v"})),
        "mgr",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(third, second);
}

#[test]
fn apply_prunes_emptied_maps() {
    let first = apply(
        None,
        &cm(json!({"a": "1"}), json!({"k": "v"})),
        "m",
        false,
        T0,
    )
    .unwrap();
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let second = apply(Some(&first), &applied, "m", false, T0).unwrap();
    assert!(second["metadata"].get("labels").is_none(), "{second}");
    assert_eq!(second["metadata"]["name"], "c");
}

#[test]
fn apply_keeps_fields_of_other_managers() {
    let first = apply(None, &cm(json!({"a": "1"}), json!({})), "one", false, T0).unwrap();
    let second = apply(
        Some(&first),
        &cm(json!({"b": "2"}), json!({})),
        "two",
        false,
        T0,
    )
    .unwrap();
    assert_eq!(second["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    // "one" drops its label; "two"'s label must stay.
    let third = apply(
        Some(&second),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        "one",
        false,
        T0,
    )
    .unwrap();
    assert_eq!(third["metadata"]["labels"], json!({"b": "2"}));
    assert!(
        entry(&managed(&third), "one", "Apply").is_none(),
        "empty managers are dropped"
    );
}

#[test]
fn apply_conflict_without_force_and_with_force() {
    let first = apply(
        None,
        &cm(json!({}), json!({"k": "v", "other": "o"})),
        "one",
        false,
        T0,
    )
    .unwrap();
    // Same value: shared ownership, no conflict.
    let shared = apply(
        Some(&first),
        &cm(json!({}), json!({"k": "v"})),
        "two",
        false,
        T0,
    )
    .unwrap();
    assert!(
        entry(&managed(&shared), "one", "Apply").unwrap()["fieldsV1"]["f:data"]
            .get("f:k")
            .is_some()
    );

    let err = apply(
        Some(&shared),
        &cm(json!({}), json!({"k": "changed"})),
        "two",
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "conflict");
    assert_eq!(
        err,
        ApplyError::Conflict {
            conflicts: vec![("one".into(), ".data.k".into())]
        }
    );
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"one\": .data.k"
    );

    let forced = apply(
        Some(&shared),
        &cm(json!({}), json!({"k": "changed"})),
        "two",
        true,
        T1,
    )
    .unwrap();
    assert_eq!(forced["data"], json!({"k": "changed", "other": "o"}));
    let entries = managed(&forced);
    assert_eq!(
        entry(&entries, "one", "Apply").unwrap()["fieldsV1"]["f:data"],
        json!({"f:other": {}})
    );
    assert_eq!(
        entry(&entries, "two", "Apply").unwrap()["fieldsV1"]["f:data"],
        json!({"f:k": {}})
    );
}

#[test]
fn apply_conflicts_with_update_managers() {
    let created = record_update(
        None,
        &cm(json!({"app": "x"}), json!({"k": "v"})),
        "kubectl-create",
        T0,
    );
    let e = entry(&managed(&created), "kubectl-create", "Update")
        .unwrap()
        .clone();
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );
    let err = apply(
        Some(&created),
        &cm(json!({"app": "y"}), json!({"k": "v"})),
        "ssa",
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(
        err,
        ApplyError::Conflict {
            conflicts: vec![("kubectl-create".into(), ".metadata.labels.app".into())]
        }
    );
}

fn deployment_like(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn apply_keyed_list() {
    let first = apply(
        None,
        &deployment_like(json!([{"name": "a", "image": "i1", "ports": [{"containerPort": 80}]}, {"name": "b", "image": "i2"}])),
        "mgr",
        false,
        T0,
    )
    .unwrap();
    let fields = &managed(&first)[0]["fieldsV1"];
    assert_eq!(
        fields["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"],
        json!({".": {}, "f:name": {}, "f:image": {}, "f:ports": {"k:{\"containerPort\":80}": {".": {}, "f:containerPort": {}}}})
    );
    // Another manager adds a field inside container "a" and a container of its own.
    let patched = strategic_merge_patch(
        &first,
        &json!({"spec": {"containers": [{"name": "a", "imagePullPolicy": "Always"}, {"name": "c", "image": "i3"}]}}),
    )
    .unwrap();
    let updated = record_update(Some(&first), &patched, "kubectl-edit", T0);
    // Re-apply without "b" and with a new image for "a".
    let second = apply(
        Some(&updated),
        &deployment_like(json!([{"name": "a", "image": "i9"}])),
        "mgr",
        false,
        T1,
    )
    .unwrap();
    let containers = second["spec"]["containers"].as_array().unwrap();
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(
        containers[0],
        json!({"name": "a", "image": "i9", "imagePullPolicy": "Always"})
    );
}

#[test]
fn apply_conflict_in_keyed_list_path() {
    let first = apply(
        None,
        &deployment_like(json!([{"name": "a", "image": "i1"}])),
        "one",
        false,
        T0,
    )
    .unwrap();
    let err = apply(
        Some(&first),
        &deployment_like(json!([{"name": "a", "image": "i2"}])),
        "two",
        false,
        T0,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"one\": .spec.containers[name=\"a\"].image"
    );
}

#[test]
fn apply_invalid_inputs() {
    assert_eq!(
        apply(None, &json!([1]), "m", false, T0).unwrap_err().kind(),
        "invalid"
    );
    assert_eq!(
        apply(None, &json!({}), "", false, T0).unwrap_err().kind(),
        "invalid"
    );
    assert_eq!(
        apply(Some(&json!(3)), &json!({}), "m", false, T0)
            .unwrap_err()
            .kind(),
        "invalid"
    );
}

#[test]
fn apply_ignores_server_metadata_and_nulls() {
    let existing =
        json!({"metadata": {"name": "c", "resourceVersion": "5", "uid": "u"}, "data": {"a": "1"}});
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "resourceVersion": "1", "managedFields": [{"manager": "evil"}]}, "data": {"b": "2", "c": null}});
    let r = apply(Some(&existing), &applied, "m", false, T0).unwrap();
    assert_eq!(r["metadata"]["resourceVersion"], "5");
    assert_eq!(r["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(managed(&r).len(), 1);
    assert_eq!(managed(&r)[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
}

#[test]
fn conflict_message_multiple() {
    let e = ApplyError::Conflict {
        conflicts: vec![
            ("a".into(), ".x".into()),
            ("a".into(), ".y".into()),
            ("b".into(), ".z".into()),
        ],
    };
    assert_eq!(
        e.to_string(),
        "Apply failed with 3 conflicts: conflicts with \"a\":\n- .x\n- .y\nconflicts with \"b\":\n- .z"
    );
}

#[test]
fn record_update_moves_ownership() {
    let applied = apply(
        None,
        &cm(json!({"app": "x"}), json!({"k": "v", "j": "w"})),
        "ssa",
        false,
        T0,
    )
    .unwrap();
    let mut edited = applied.clone();
    edited["data"]["k"] = json!("edited");
    edited["data"]["new"] = json!("n");
    if let Some(d) = edited["data"].as_object_mut() {
        d.remove("j");
    }
    let r = record_update(Some(&applied), &edited, "kubectl-edit", T1);
    let entries = managed(&r);
    assert_eq!(
        entry(&entries, "ssa", "Apply").unwrap()["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}}}})
    );
    let mine = entry(&entries, "kubectl-edit", "Update").unwrap();
    assert_eq!(
        mine["fieldsV1"],
        json!({"f:data": {"f:k": {}, "f:new": {}}})
    );
    assert_eq!(mine["time"], T1);
    // Unchanged writes do not create an entry.
    let noop = record_update(Some(&r), &r, "someone", T1);
    assert!(entry(&managed(&noop), "someone", "Update").is_none());
    assert_eq!(noop, r);
    // Non-objects pass through untouched.
    assert_eq!(record_update(None, &json!(1), "m", T0), json!(1));
}

#[test]
fn record_update_respects_sent_managed_fields() {
    let created = record_update(None, &cm(json!({}), json!({"k": "v"})), "a", T0);
    let mut reset = created.clone();
    reset["metadata"]["managedFields"] = json!([]);
    reset["data"]["k"] = json!("w");
    let r = record_update(Some(&created), &reset, "b", T1);
    let entries = managed(&r);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["manager"], "b");
}

fn arb_key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "metadata",
        "labels",
        "name",
        "containers",
        "env",
        "ports",
        "containerPort",
        "port",
        "finalizers",
        "spec",
        "data",
        "managedFields",
        "fieldsV1",
        "manager",
        "operation",
        "conditions",
        "type",
        "$patch",
        "$retainKeys",
        "$deleteFromPrimitiveList/finalizers",
        "$setElementOrder/containers",
        "f:spec",
        "f:data",
        "k:{\"name\":\"a\"}",
        "v:\"a\"",
        ".",
        "i:0",
        "apiVersion",
        "op",
        "path",
        "value",
    ])
    .prop_map(str::to_string)
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0i64..3).prop_map(|n| json!(n)),
        prop::sample::select(vec![
            "a", "b", "delete", "replace", "merge", "Apply", "Update", "m", "/a", "add", "test"
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(arb_key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The changed set as `record_update` first computed it: every member of `after`'s set looked
/// up from the root in both objects. The one-walk version must agree with it exactly.
fn changed_by_lookups(after: &Value, before: Option<&Value>) -> fieldset::FieldSet {
    let mut changed = fieldset::FieldSet::default();
    for path in fieldset::FieldSet::from_object(after).members() {
        let now = fieldset::get(after, &path);
        let was = before.and_then(|b| fieldset::get(b, &path));
        let field = path.last().is_some_and(|e| e.starts_with("f:"));
        if (field && now != was) || (!field && was.is_none()) {
            changed.insert(&path);
        }
    }
    changed
}

/// Stale members removed one path at a time, as `record_update` first did.
fn drop_stale_by_lookups(
    set: &mut fieldset::FieldSet,
    after: &Value,
    taken: Option<&fieldset::FieldSet>,
) -> bool {
    let mut stale: Vec<Vec<String>> = set
        .members()
        .into_iter()
        .filter(|p| fieldset::get(after, p).is_none())
        .collect();
    if let Some(t) = taken {
        stale.extend(t.members().into_iter().filter(|p| set.contains(p)));
    }
    for p in &stale {
        set.remove(p);
    }
    !stale.is_empty()
}

/// An object and a changed copy of it (a merge patch), so the two share most of their fields.
fn arb_before_after() -> impl Strategy<Value = (Value, Value)> {
    (arb_json(), arb_json(), any::<bool>()).prop_map(|(base, change, patched)| {
        let after = if patched {
            merge_patch(&base, &change)
        } else {
            change
        };
        (base, after)
    })
}

fn pod_like(image: &str, env: Value, finalizers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "labels": {"app": "a"}, "finalizers": finalizers},
           "spec": {"containers": [{"name": "c", "image": image, "env": env,
                                    "ports": [{"containerPort": 80}, {"containerPort": 81}]},
                                   {"name": "c", "image": "dup"}],
                    "volumes": [{"name": "v", "configMap": {"name": "cm"}}]}})
}

#[test]
fn changed_fields_match_lookups_from_the_root() {
    let a = pod_like("i1", json!([{"name": "X", "value": "1"}]), json!(["f1"]));
    let b = pod_like(
        "i2",
        json!([{"name": "X", "value": "2"}, {"name": "Y"}]),
        json!(["f1", "f2"]),
    );
    for (before, after) in [(None, &a), (Some(&a), &b), (Some(&b), &a), (Some(&a), &a)] {
        assert_eq!(
            fieldset::FieldSet::from_object(after).changed(after, before),
            changed_by_lookups(after, before)
        );
    }
}

#[test]
fn record_update_gives_changed_fields_to_the_writer_and_keeps_the_rest() {
    let first = record_update(None, &pod_like("i1", json!([]), json!(["f1"])), "a", T0);
    let mut edited = pod_like("i2", json!([]), json!(["f1"]));
    edited["metadata"]["managedFields"] = first["metadata"]["managedFields"].clone();
    let r = record_update(Some(&first), &edited, "b", T1);
    let entries = managed(&r);
    let b = entry(&entries, "b", "Update").unwrap();
    assert_eq!(
        b["fieldsV1"],
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:image": {}}}}})
    );
    let a = entry(&entries, "a", "Update").unwrap();
    assert!(a["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:image"].is_null());
    assert!(!a["fieldsV1"]["f:metadata"]["f:labels"]["f:app"].is_null());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn changed_fields_match_lookups_on_any_objects((before, after) in arb_before_after()) {
        let set = fieldset::FieldSet::from_object(&after);
        prop_assert_eq!(set.changed(&after, Some(&before)), changed_by_lookups(&after, Some(&before)));
        prop_assert_eq!(set.changed(&after, None), changed_by_lookups(&after, None));
    }

    #[test]
    fn a_creates_entries_are_what_record_update_records(obj in arb_json(), pod in any::<bool>()) {
        let mut obj = if pod { pod_like("i", json!([{"name": "X"}]), json!(["f"])) } else { obj };
        let Some(top) = obj.as_object_mut() else {
            return Ok(());
        };
        // As the store keeps every object: with a metadata map.
        if !top.get("metadata").is_some_and(Value::is_object) {
            top.insert("metadata".into(), json!({"name": "x"}));
        }
        let recorded = record_update(None, &obj, "m", T0);
        match created_entries(&obj, "m", T0) {
            Some(entries) => {
                let mut expected = obj.clone();
                if !entries.is_empty() {
                    expected["metadata"]["managedFields"] = Value::Array(entries);
                }
                prop_assert_eq!(expected, recorded);
            }
            // Only an object carrying managedFields of its own needs the full path.
            None => prop_assert!(!obj["metadata"]["managedFields"].is_null()),
        }
    }

    #[test]
    fn stale_members_match_removal_by_path(
        (before, after) in arb_before_after(),
        owned in arb_json(),
        encoded in arb_json(),
        mine in any::<bool>(),
    ) {
        let changed = fieldset::FieldSet::from_object(&after).changed(&after, Some(&before));
        let taken = (!mine).then_some(&changed);
        for start in [
            fieldset::FieldSet::from_object(&before),
            fieldset::FieldSet::from_object(&owned),
            fieldset::FieldSet::from_fields_v1(&encoded),
        ] {
            let (mut walked, mut by_path) = (start.clone(), start);
            let removed = walked.drop_stale(&after, taken);
            prop_assert_eq!(removed, drop_stale_by_lookups(&mut by_path, &after, taken));
            prop_assert_eq!(walked, by_path);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn patches_never_panic(target in arb_json(), patch in arb_json()) {
        let _ = merge_patch(&target, &patch);
        let _ = json_patch(&target, &patch);
        let _ = strategic_merge_patch(&target, &patch);
    }

    #[test]
    fn apply_and_record_never_panic(existing in arb_json(), applied in arb_json(), force in any::<bool>()) {
        let _ = apply(Some(&existing), &applied, "m", force, T0);
        let _ = apply(None, &applied, "m", force, T0);
        let _ = record_update(Some(&existing), &applied, "m", T0);
        let _ = record_update(None, &existing, "m", T0);
    }

    #[test]
    fn apply_is_idempotent(applied in arb_json()) {
        if let Ok(first) = apply(None, &applied, "m", false, T0) {
            let second = apply(Some(&first), &applied, "m", false, T0);
            prop_assert_eq!(second, Ok(first));
        }
    }

    #[test]
    fn merge_patch_with_self_is_identity_without_nulls(v in arb_json()) {
        let cleaned = merge_patch(&json!({}), &v);
        if cleaned.is_object() {
            prop_assert_eq!(merge_patch(&cleaned, &cleaned), cleaned);
        }
    }
}

/// What a create's answer carries: [`created_fields`] as written, [`created_entries`] as built.
fn created_both(obj: &Value) -> Option<(String, String)> {
    let written = crate::patch::created_fields(obj, "m", T0)?;
    let built = created_entries(obj, "m", T0).expect("no managedFields of its own");
    Some((
        serde_json::to_string(&written).expect("serialisable"),
        serde_json::to_string(&built).expect("serialisable"),
    ))
}

#[test]
fn created_fields_are_written_as_created_entries_builds_them() {
    let mut unique = pod_like(
        "i",
        json!([{"name": "X"}, {"name": "Y", "value": null}]),
        json!(["b", "a", "b"]),
    );
    unique["spec"]["containers"][1]["name"] = json!("d");
    unique["metadata"]["ownerReferences"] = json!([{"uid": "u2", "name": "o"}, {"uid": "u1"}]);
    for obj in [
        unique,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "namespace": "x"}}),
        json!({"kind": "ConfigMap", "metadata": {"name": "n", "labels": {"a\"b": "c"}}, "data": {"k\n": "v", "e": {}}}),
        json!({"metadata": 3, "spec": [1, 2], "status": null}),
    ] {
        let (written, built) = created_both(&obj).expect("no merged elements");
        assert_eq!(written, built, "{obj}");
    }
    // Two elements under one key are merged by the field set: left to it.
    assert!(created_both(&pod_like("i", json!([]), json!([]))).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn created_fields_match_created_entries_on_any_objects(obj in arb_json()) {
        // `None` falls back to record_update, which a_creates_entries_are_what_record_update_records covers.
        if let Some((written, built)) = created_both(&obj) {
            prop_assert_eq!(written, built);
        }
    }
}
