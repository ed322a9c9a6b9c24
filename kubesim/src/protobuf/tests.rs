//! Protobuf conversion: objects survive the round trip, zero values follow Go's JSON rules, and
//! the envelope and hand-converted types have the API server's layout.

use serde_json::json;

use super::*;

fn round_trip(v: &Value) -> Value {
    decode(&encode(v).expect("encodes")).expect("decodes")
}

#[test]
fn a_pod_survives_the_round_trip() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
            "generation": 1, "creationTimestamp": "2024-02-29T23:59:59Z",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {"a": "b"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "u-0", "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["f"],
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "time": "2024-02-29T23:59:59Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]},
        "spec": {
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 0,
            "enableServiceLinks": false, "securityContext": {},
            "containers": [{"name": "main", "image": "busybox:1", "args": ["-c", "sleep 1"],
                "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
                "env": [{"name": "A", "value": "1"},
                        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}},
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                "livenessProbe": {"tcpSocket": {"port": 8080}},
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/conf", "readOnly": true}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "cm", "defaultMode": 420}},
                        {"name": "scratch", "emptyDir": {}}],
        },
        "status": {"phase": "Running", "podIP": "198.18.0.5",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-03-01T00:00:00Z"}],
            "containerStatuses": [{"name": "main", "ready": false, "restartCount": 0, "image": "busybox:1",
                "imageID": "", "started": true,
                "state": {"running": {"startedAt": "2024-03-01T00:00:00Z"}}}]},
    });
    assert_eq!(round_trip(&pod), pod);
}

#[test]
fn pointer_zeros_survive_and_go_omitempty_zeros_do_not() {
    // replicas: 0 is a pointer (scale to zero); revisionHistoryLimit: 0 too. An empty
    // generateName is a plain omitempty string: absent after decoding, as in Go's JSON.
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "generateName": ""},
        "spec": {"replicas": 0, "revisionHistoryLimit": 0, "selector": {"matchLabels": {"a": "b"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let back = round_trip(&d);
    assert_eq!(back["spec"]["replicas"], 0);
    assert_eq!(back["spec"]["revisionHistoryLimit"], 0);
    assert_eq!(back["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(
        back["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    assert!(back["metadata"].get("generateName").is_none(), "{back}");
}

#[test]
fn secrets_carry_bytes_and_lists_carry_items() {
    let list = json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "7"},
        "items": [{"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "aGVsbG8="}, "immutable": false}]});
    let back = round_trip(&list);
    assert_eq!(back["items"][0]["data"]["k"], "aGVsbG8=");
    assert_eq!(
        back["items"][0]["immutable"], false,
        "a pointer bool keeps false"
    );
    assert_eq!(back["metadata"]["resourceVersion"], "7");
}

#[test]
fn the_envelope_is_the_api_servers() {
    let bytes =
        encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))
            .unwrap();
    assert_eq!(&bytes[..4], b"k8s\0");
    let unknown = wire::fields(&bytes[4..]).unwrap();
    let Raw::Len(type_meta) = unknown[0].1 else {
        panic!("typeMeta")
    };
    assert_eq!(
        wire::fields(type_meta).unwrap(),
        vec![(1, Raw::Len(b"v1")), (2, Raw::Len(b"ConfigMap"))]
    );
    let Raw::Len(raw) = unknown[1].1 else {
        panic!("raw")
    };
    // ConfigMap.metadata = 1, ObjectMeta.name = 1.
    assert_eq!(raw, &[0x0a, 0x03, 0x0a, 0x01, b'c']);
    assert_eq!(decode(b"{}"), Err(ProtoError::NoMagic));
    let mut custom = bytes.clone();
    custom.truncate(4);
    let mut tm = Vec::new();
    put_bytes(&mut tm, 1, b"ex.io/v1");
    put_bytes(&mut tm, 2, b"Thing");
    put_bytes(&mut custom, 1, &tm);
    assert_eq!(decode(&custom).map_err(|e| e.kind()), Err("unknown_kind"));
}

#[test]
fn hand_converted_types_have_their_own_layout() {
    let mut out = Vec::new();
    encode_special("intstr.IntOrString", &json!("25%"), &mut out).unwrap();
    assert_eq!(
        decode_special("intstr.IntOrString", &out).unwrap(),
        Some(json!("25%"))
    );
    out.clear();
    encode_special("intstr.IntOrString", &json!(-3), &mut out).unwrap();
    assert_eq!(
        decode_special("intstr.IntOrString", &out).unwrap(),
        Some(json!(-3))
    );
    out.clear();
    encode_special(
        "meta.v1.MicroTime",
        &json!("2024-02-29T23:59:59.123456Z"),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        decode_special("meta.v1.MicroTime", &out).unwrap(),
        Some(json!("2024-02-29T23:59:59.123456Z"))
    );
    // A zero Time marshals to an empty message and reads back as absent.
    assert_eq!(
        decode_special("meta.v1.Time", &[]).unwrap(),
        Some(Value::Null)
    );
    for (text, ns) in [
        ("0s", 0),
        ("1.5s", 1_500_000_000),
        ("1h0m0s", 3_600_000_000_000),
        ("2m30s", 150_000_000_000),
        ("300ms", 300_000_000),
    ] {
        assert_eq!(parse_go_duration(text), Some(ns), "{text}");
        assert_eq!(format_go_duration(ns), text);
    }
}

#[test]
fn watch_frames_are_length_prefixed_watch_events() {
    let frame = watch_frame(
        "ADDED",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
    )
    .unwrap();
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4);
    let event = wire::fields(&frame[4..]).unwrap();
    assert_eq!(event[0], (1, Raw::Len(b"ADDED")));
    let Raw::Len(raw_ext) = event[1].1 else {
        panic!("object")
    };
    let Raw::Len(inner) = wire::fields(raw_ext).unwrap()[0].1 else {
        panic!("raw")
    };
    assert_eq!(decode(inner).unwrap()["metadata"]["name"], "n");
}

#[test]
fn crds_with_schemas_survive_the_round_trip() {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.ex.io"},
        "spec": {"group": "ex.io", "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing", "shortNames": ["th"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"n": {"type": "integer", "default": 3}},
                        "additionalProperties": false}},
                    "required": ["spec"]}}}]}});
    assert_eq!(round_trip(&crd), crd);
}

#[test]
fn unknown_fields_are_named_as_strict_decoding_names_them_and_pruned() {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"a": "b"}, "bogus": 1},
        "spec": {"replica": 3, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always",
                    "resources": {"limits": {"cpu": "1"}}}],
                    "volumes": [{"name": "v", "emptyDir": {}, "configMap": {"name": "x", "oops": true}}]}}}});
    let found = unknown_fields(&mut d.clone(), false).expect("built-in");
    assert_eq!(
        found,
        vec![
            "metadata.bogus",
            "spec.replica",
            "spec.template.spec.containers[0].imagePullPolicyy",
            "spec.template.spec.volumes[0].configMap.oops",
        ]
    );
    unknown_fields(&mut d, true);
    assert_eq!(unknown_fields(&mut d.clone(), false), Some(vec![]));
    assert_eq!(
        d["spec"]["template"]["spec"]["volumes"][0]["emptyDir"],
        json!({})
    );
    let mut cr = json!({"apiVersion": "ex.io/v1", "kind": "Thing", "spec": {"anything": 1}});
    assert_eq!(unknown_fields(&mut cr, true), None);
}

#[test]
fn a_replacement_loses_the_unknown_fields_of_every_part_that_differs_from_the_stored_object() {
    let mut stored = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}});
    unknown_fields(&mut stored, true);
    let mut next = stored.clone();
    next["metadata"]["bogus"] = json!(1);
    next["spec"]["containers"][0]["imagePullPolicyy"] = json!("Always");
    next["status"]["phase"] = json!("Running");
    next["status"]["conditions"][0]["oops"] = json!(true);
    next["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(json!({"type": "PodScheduled", "status": "True", "extra": 1}));
    next["status"]["containerStatuses"] = json!([{"name": "c", "ready": true, "nope": 2}]);
    prune_changed(&mut next, &stored);
    assert_eq!(unknown_fields(&mut next.clone(), false), Some(vec![]));
    assert_eq!(next["status"]["phase"], "Running");
    assert_eq!(
        next["status"]["conditions"],
        json!([{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}])
    );
    assert_eq!(next["spec"], stored["spec"]);
}
