use std::time::Instant;

use super::*;
use crate::service_table::{Backend, ServicePort};

fn pod(name: &str, ip: &str, ready: bool, labels: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"), "labels": labels},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox", "ports": [{"name": "http", "containerPort": 8080}]}]},
           "status": {"phase": "Running", "podIP": ip,
                      "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
}

fn svc(selector: Value, cluster_ip: &str) -> Value {
    json!({"metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid"},
           "spec": {"clusterIP": cluster_ip, "selector": selector,
                    "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                              {"name": "raw", "port": 81, "targetPort": 9000, "protocol": "TCP"}]}})
}

#[test]
fn endpoints_follow_selector_readiness_and_named_ports() {
    let a = pod("a", "198.18.0.2", true, json!({"app": "web"}));
    let b = pod("b", "198.18.0.3", false, json!({"app": "web"}));
    let other = pod("c", "198.18.0.4", true, json!({"app": "db"}));
    let mut gone = pod("d", "198.18.0.5", true, json!({"app": "web"}));
    gone["status"]["phase"] = json!("Succeeded");
    let s = svc(json!({"app": "web"}), "198.19.1.2");
    let entry = service_entry(&s, &[&a, &b, &other, &gone], None);
    assert_eq!(entry.backends.len(), 2);
    let http = &entry.ports[0];
    assert_eq!(
        entry.ready_targets(http),
        vec![(Ipv4Addr::new(198, 18, 0, 2), 8080)]
    );
    assert_eq!(
        entry.ready_targets(&entry.ports[1]),
        vec![(Ipv4Addr::new(198, 18, 0, 2), 9000)]
    );
    let ep = endpoints_object(&s, &entry);
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "198.18.0.2");
    assert_eq!(ep["subsets"][0]["notReadyAddresses"][0]["ip"], "198.18.0.3");
    assert_eq!(ep["subsets"][0]["addresses"][0]["targetRef"]["name"], "a");
    let slice = endpoint_slice(&s, &entry);
    assert_eq!(slice["metadata"]["labels"][SERVICE_NAME_LABEL], "web");
    assert_eq!(slice["endpoints"][1]["conditions"]["ready"], false);
    assert_eq!(
        slice["ports"][0],
        json!({"name": "http", "port": 8080, "protocol": "TCP"})
    );
    assert_eq!(slice["metadata"]["ownerReferences"][0]["uid"], "svc-uid");
    assert!(
        slice["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("web-") && n.len() == 9)
    );
    let rec = entry.record();
    assert_eq!(rec.ips, vec![Ipv4Addr::new(198, 19, 1, 2)]);
}

#[test]
fn headless_services_resolve_to_ready_pods() {
    let a = pod("a", "198.18.0.2", true, json!({"app": "web"}));
    let b = pod("b", "198.18.0.3", false, json!({"app": "web"}));
    let entry = service_entry(&svc(json!({"app": "web"}), "None"), &[&a, &b], None);
    assert_eq!(entry.cluster_ip, None);
    assert_eq!(entry.record().ips, vec![Ipv4Addr::new(198, 18, 0, 2)]);
}

#[test]
fn selectorless_services_take_their_endpoints_object() {
    let s = json!({"metadata": {"name": "kubernetes", "namespace": "default"},
                   "spec": {"clusterIP": "198.19.0.1", "ports": [{"name": "https", "port": 443}]}});
    let ep = json!({"subsets": [{"addresses": [{"ip": "198.18.0.1"}], "ports": [{"name": "https", "port": 6443}]}]});
    let entry = service_entry(&s, &[], Some(&ep));
    assert_eq!(
        entry.ready_targets(&entry.ports[0]),
        vec![(Ipv4Addr::new(198, 18, 0, 1), 6443)]
    );
}

// The json!-built objects kubesim wrote before they were built field by field: the oracle of
// `built_objects_are_the_json_built_ones`.
fn json_target_ref(ns: &str, b: &Backend) -> Value {
    json!({"kind": "Pod", "namespace": ns, "name": b.pod.0, "uid": b.pod.1})
}

fn json_endpoints_object(svc: &Value, entry: &ServiceEntry) -> Value {
    // Resolved ports → (ready addresses, unready addresses).
    type Subsets = BTreeMap<Vec<(String, u16)>, (Vec<Value>, Vec<Value>)>;
    let mut groups = Subsets::new();
    let mut backends: Vec<&Backend> = entry.backends.iter().filter(|b| !b.terminating).collect();
    backends.sort_by_key(|b| b.ip);
    for b in backends {
        let key: Vec<(String, u16)> = b.ports.iter().map(|(k, v)| (k.clone(), *v)).collect();
        if key.is_empty() {
            continue;
        }
        let mut addr = json!({"ip": b.ip.to_string(), "nodeName": b.node,
                              "targetRef": json_target_ref(&entry.namespace, b)});
        if let Some(h) = &b.hostname {
            addr["hostname"] = json!(h);
        }
        let slot = groups.entry(key).or_default();
        if b.ready {
            slot.0.push(addr)
        } else {
            slot.1.push(addr)
        }
    }
    let subsets: Vec<Value> = groups
        .into_iter()
        .map(|(ports, (ready, unready))| {
            let ports: Vec<Value> = ports
                .iter()
                .map(|(name, port)| {
                    let proto = entry
                        .ports
                        .iter()
                        .find(|p| &p.name == name)
                        .map(|p| p.protocol.as_str())
                        .unwrap_or("TCP");
                    let mut v = json!({"port": port, "protocol": proto});
                    if !name.is_empty() {
                        v["name"] = json!(name);
                    }
                    v
                })
                .collect();
            let mut s = json!({"ports": ports});
            if !ready.is_empty() {
                s["addresses"] = json!(ready);
            }
            if !unready.is_empty() {
                s["notReadyAddresses"] = json!(unready);
            }
            s
        })
        .collect();
    let labels = svc
        .at("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut ep = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": entry.name, "namespace": entry.namespace, "labels": labels},
    });
    if !subsets.is_empty() {
        ep["subsets"] = json!(subsets);
    }
    ep
}

fn json_endpoint_slice(svc: &Value, entry: &ServiceEntry) -> Value {
    let mut labels = svc
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(SERVICE_NAME_LABEL.into(), json!(entry.name));
    labels.insert(MANAGED_BY_LABEL.into(), json!(MANAGED_BY));
    let mut backends: Vec<&Backend> = entry.backends.iter().collect();
    backends.sort_by_key(|b| b.ip);
    let endpoints: Vec<Value> = backends
        .iter()
        .map(|b| {
            let mut e = json!({
                "addresses": [b.ip.to_string()],
                "conditions": {"ready": b.ready && !b.terminating, "serving": b.ready,
                               "terminating": b.terminating},
                "nodeName": b.node,
                "targetRef": json_target_ref(&entry.namespace, b),
            });
            if let Some(h) = &b.hostname {
                e["hostname"] = json!(h);
            }
            e
        })
        .collect();
    // A named targetPort may resolve differently per pod; the slice carries the first.
    let ports: Vec<Value> = entry
        .ports
        .iter()
        .filter_map(|p| {
            let port = entry.backends.iter().find_map(|b| b.ports.get(&p.name))?;
            Some(json!({"name": p.name, "port": port, "protocol": p.protocol}))
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": slice_name(svc),
            "namespace": entry.namespace,
            "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": entry.name,
                                  "uid": meta::uid(svc), "controller": true,
                                  "blockOwnerDeletion": true}],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    })
}

fn backend(last: u8, ready: bool, terminating: bool, ports: &[(&str, u16)]) -> Backend {
    Backend {
        ip: Ipv4Addr::new(198, 18, 0, last),
        ready,
        terminating,
        node: format!("n{last}"),
        pod: (format!("p{last}"), format!("u{last}")),
        hostname: (last == 3).then(|| "h".to_string()),
        ports: ports.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
    }
}

fn port(name: &str, protocol: &str) -> ServicePort {
    ServicePort {
        name: name.into(),
        port: 80,
        protocol: protocol.into(),
    }
}

#[test]
fn built_objects_are_the_json_built_ones() {
    let entry = |ports, backends| ServiceEntry {
        namespace: "ns".into(),
        name: "web".into(),
        cluster_ip: None,
        ports,
        backends,
    };
    let both = [("http", 8080), ("raw", 9000)];
    let entries = [
        entry(
            vec![port("http", "TCP"), port("raw", "UDP")],
            vec![
                backend(3, true, false, &both),
                backend(2, false, false, &both),
                backend(4, true, true, &[("http", 8080)]),
                backend(5, true, false, &[]),
                backend(6, true, false, &[("http", 8081), ("raw", 9000)]),
                backend(7, false, true, &both),
            ],
        ),
        entry(
            vec![port("", "UDP")],
            vec![backend(9, true, false, &[("", 53)])],
        ),
        entry(
            vec![port("http", "TCP")],
            vec![backend(2, false, false, &[])],
        ),
        entry(vec![port("http", "TCP")], vec![]),
    ];
    let labelled = svc(json!({"app": "web"}), "None");
    let mut unlabelled = labelled.clone();
    unlabelled["metadata"]["labels"] = json!({"team": "a", SERVICE_NAME_LABEL: "other"});
    let mut bare = labelled.clone();
    if let Some(md) = bare["metadata"].as_object_mut() {
        md.remove("labels");
    }
    for s in [&labelled, &unlabelled, &bare] {
        for e in &entries {
            assert_eq!(endpoints_object(s, e), json_endpoints_object(s, e));
            assert_eq!(endpoint_slice(s, e), json_endpoint_slice(s, e));
        }
    }
}

fn store() -> Arc<Store> {
    let store = Store::new(1000);
    let opts = WriteOpts::default();
    for (plural, ns, name) in [
        ("namespaces", "", "ns"),
        ("serviceaccounts", "ns", "default"),
    ] {
        let rt = store.registry().find("", "v1", plural).expect("core type");
        store
            .create(&rt, ns, json!({"metadata": {"name": name}}), &opts)
            .expect("create");
    }
    store
}

fn rt(store: &Store, group: &str, plural: &str) -> Arc<ResourceType> {
    store
        .registry()
        .find(group, "v1", plural)
        .expect("registered type")
}

/// Polls object `name` of `plural` in namespace `ns` until `done` holds (bounded).
async fn wait_for(
    store: &Store,
    group: &str,
    plural: &str,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> Arc<Value> {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let o = store.get_shared(group, plural, "ns", name);
        if let Some(o) = &o
            && done(o)
        {
            return o.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {plural}/{name}: {o:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn set_pod(store: &Store, part: Part, change: impl FnOnce(&mut Value)) {
    let pods = rt(store, "", "pods");
    store
        .modify_shared(&pods, "ns", "a", part, &WriteOpts::default(), |cur| {
            let mut p = cur.clone();
            change(&mut p);
            Ok(p)
        })
        .expect("pod write");
}

fn rv(obj: &Value) -> &str {
    meta::meta_str(obj, "resourceVersion")
}

#[tokio::test]
async fn endpoints_whose_content_would_not_change_are_not_written() {
    let store = store();
    let _table = start(store.clone());
    let opts = WriteOpts::default();
    let mut a = pod("a", "198.18.0.2", true, json!({"app": "web"}));
    let status = a["status"].take();
    store
        .create(&rt(&store, "", "pods"), "ns", a, &opts)
        .expect("pod");
    let mut web = svc(json!({"app": "web"}), "None");
    web["metadata"]["labels"] = json!({"tier": "front"});
    store
        .create(&rt(&store, "", "services"), "ns", web, &opts)
        .expect("service");
    set_pod(&store, Part::Status, |p| p["status"] = status);
    let slice = slice_name(&store.get_raw("", "services", "ns", "web").expect("service"));
    let ep = wait_for(&store, "", "endpoints", "web", |e| {
        e.pointer("/subsets/0/addresses/0/ip") == Some(&json!("198.18.0.2"))
    })
    .await;
    let es = wait_for(&store, "discovery.k8s.io", "endpointslices", &slice, |e| {
        e.pointer("/endpoints/0/conditions/ready") == Some(&json!(true))
    })
    .await;
    let scope = |g: &str, p: &str, _: &str| {
        (g.is_empty() && p == "endpoints") || (g == "discovery.k8s.io" && p == "endpointslices")
    };
    let mut sub = store.subscribe(&scope, WatchFrom::Now).expect("subscribe");

    // A pod status change the endpoints do not show, and a Service change that leaves its
    // selector, ports and labels (the Service controller builds both objects again).
    set_pod(&store, Part::Status, |p| {
        p["status"]["conditions"]
            .as_array_mut()
            .expect("conditions")
            .push(json!({"type": "PodScheduled", "status": "True"}));
        p["status"]["startTime"] = json!("2026-01-01T00:00:00Z");
    });
    let svcs = rt(&store, "", "services");
    store
        .modify_shared(&svcs, "ns", "web", Part::Main, &opts, |cur| {
            let mut s = cur.clone();
            s["metadata"]["annotations"] = json!({"note": "unrelated"});
            Ok(s)
        })
        .expect("service write");
    // The controller takes events in order: once a later Service's Endpoints exist, it has
    // been through the changes above.
    let mut marker = svc(json!({"app": "none"}), "None");
    marker["metadata"]["name"] = json!("zz-marker");
    marker["metadata"]["uid"] = json!("marker-uid");
    store.create(&svcs, "ns", marker, &opts).expect("service");
    wait_for(&store, "", "endpoints", "zz-marker", |_| true).await;

    let ep_now = store
        .get_shared("", "endpoints", "ns", "web")
        .expect("endpoints");
    let es_now = store
        .get_shared("discovery.k8s.io", "endpointslices", "ns", &slice)
        .expect("slice");
    assert_eq!((rv(&ep_now), rv(&es_now)), (rv(&ep), rv(&es)));
    // The live feed carries every type; the scope only chose the replay.
    while let Ok(ev) = sub.live.try_recv() {
        if scope(&ev.group, &ev.plural, &ev.namespace) {
            assert!(
                meta::name(&ev.object).starts_with("zz-marker"),
                "unexpected {:?} of {}",
                ev.kind,
                meta::name(&ev.object)
            );
        }
    }

    // A change they do show is still written, and labels follow the Service.
    set_pod(&store, Part::Status, |p| {
        p["status"]["conditions"][0]["status"] = json!("False");
    });
    let ep = wait_for(&store, "", "endpoints", "web", |e| {
        e.pointer("/subsets/0/notReadyAddresses/0/ip") == Some(&json!("198.18.0.2"))
    })
    .await;
    assert_eq!(ep["metadata"]["labels"], json!({"tier": "front"}));
    wait_for(&store, "discovery.k8s.io", "endpointslices", &slice, |e| {
        e.pointer("/endpoints/0/conditions/ready") == Some(&json!(false))
    })
    .await;
}
