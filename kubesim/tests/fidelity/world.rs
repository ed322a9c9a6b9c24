//! The world a pod sees, with real processes: its own network and address, a Service in front of
//! two replicas that listen on the same port, names resolved through the kubelet-managed hosts
//! file, the service-account volume at its real path with a token for the pod's service account
//! (RBAC applies to what the pod does), probes from the node, and a Secret update reaching a
//! running process.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::{Endpoints, Event, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{Sim, eventually, grant, image, start_with};

const REPLICA: &str = include_str!("programs/replica.py");

fn create<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// A replica pod: the program above, its Secret mounted, probed on its pod IP (readiness) and
/// inside its own namespaces (an exec startup probe reading a file only the pod has).
fn replica(name: &str, app: &str, startup: Value) -> Pod {
    create(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"serviceAccountName": "web", "containers": [{
            "name": "main", "image": "replica:1",
            "ports": [{"name": "http", "containerPort": 8080}],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "startupProbe": startup,
            "readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1},
            "volumeMounts": [{"name": "tls", "mountPath": "/etc/tls"}],
        }],
        "volumes": [{"name": "tls", "secret": {"secretName": "tls"}}]},
    }))
}

async fn log_line(api: &Api<Pod>, pod: &str, prefix: &str) -> String {
    eventually(60, || async {
        let logs = api.logs(pod, &LogParams::default()).await.ok()?;
        logs.lines()
            .rev()
            .find(|l| l.starts_with(prefix))
            .map(str::to_string)
    })
    .await
}

fn pod_ip(p: &Pod) -> Ipv4Addr {
    p.status
        .as_ref()
        .unwrap()
        .pod_ip
        .as_ref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn replicas_behind_a_service_live_in_their_own_network() {
    let images = BTreeMap::from([(
        "replica".to_string(),
        image(&["python3", "-u", "-c", REPLICA]),
    )]);
    let Sim { cluster, client } = start_with(images).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    secrets
        .create(
            &pp,
            &create(json!({"metadata": {"name": "tls"}, "stringData": {"tls.crt": "one"}})),
        )
        .await
        .unwrap();
    // Created before the pods, so they get its variables.
    let svc = services
        .create(
            &pp,
            &create(json!({"metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})),
        )
        .await
        .unwrap();
    let cluster_ip: Ipv4Addr = svc.spec.unwrap().cluster_ip.unwrap().parse().unwrap();
    assert_eq!(cluster_ip.octets()[..2], [198, 19]);
    // The replicas' service account may read pods, and nothing else, as a chart would grant it.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    accounts
        .create(&pp, &create(json!({"metadata": {"name": "web"}})))
        .await
        .unwrap();
    let read_pods =
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]);
    grant(&client, "default", "web", "pod-reader", read_pods).await;

    let exec = json!({"exec": {"command": ["cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"]},
                      "periodSeconds": 1, "failureThreshold": 30});
    for name in ["web-a", "web-b"] {
        pods.create(&pp, &replica(name, "web", exec.clone()))
            .await
            .unwrap();
    }
    // The same program probed on the node's loopback: a kubelet's probe never reaches the pod.
    let loopback = json!({"httpGet": {"host": "127.0.0.1", "port": 8080, "path": "/healthz"},
                          "periodSeconds": 1, "failureThreshold": 60});
    pods.create(&pp, &replica("loopback", "other", loopback))
        .await
        .unwrap();

    // The exec probe (inside the container) and the pod-IP readiness probe pass: both Ready.
    let ready = |name: &'static str| {
        let pods = pods.clone();
        async move {
            eventually(60, || async {
                let p = pods.get(name).await.ok()?;
                let ready = p
                    .status
                    .as_ref()?
                    .conditions
                    .as_ref()?
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                ready.then_some(p)
            })
            .await
        }
    };
    let (a, b) = (ready("web-a").await, ready("web-b").await);
    let (ip_a, ip_b) = (pod_ip(&a), pod_ip(&b));
    assert_ne!(ip_a, ip_b);
    for ip in [ip_a, ip_b] {
        assert_eq!(ip.octets()[..2], [198, 18], "{ip}");
    }

    // Each resolves the Service name and reaches the other replica through it.
    for (me, other) in [("web-a", "web-b"), ("web-b", "web-a")] {
        let line = log_line(&pods, me, "resolved web").await;
        assert_eq!(
            line,
            format!(
                "resolved web -> {cluster_ip} (fqdn {cluster_ip}); peer through the Service: {other}"
            )
        );
        assert_eq!(
            log_line(&pods, me, "second listener:").await,
            "second listener: Address already in use"
        );
        let node = pods.get(me).await.unwrap().spec.unwrap().node_name.unwrap();
        assert_eq!(
            log_line(&pods, me, "token:").await,
            format!("token: system:serviceaccount:default:web bound to pod {me} on {node}")
        );
        // In-cluster config with that token: what the Role grants is served, the rest refused
        // with the API server's own words.
        assert_eq!(log_line(&pods, me, "pods:").await, "pods: web-a web-b");
        assert_eq!(
            log_line(&pods, me, "secrets:").await,
            "secrets: 403 secrets is forbidden: User \"system:serviceaccount:default:web\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(
            log_line(&pods, me, "namespace:").await,
            "namespace: default"
        );
        assert_eq!(
            log_line(&pods, me, "service variable:").await,
            format!("service variable: {cluster_ip} 198.19.0.1")
        );
    }

    // The controller's Endpoints and EndpointSlice list both replicas.
    let ep: Endpoints = Api::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap();
    let mut ips: Vec<String> = ep.subsets.unwrap()[0]
        .addresses
        .clone()
        .unwrap()
        .into_iter()
        .map(|a| a.ip)
        .collect();
    ips.sort();
    let mut want = vec![ip_a.to_string(), ip_b.to_string()];
    want.sort();
    assert_eq!(ips, want);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let listed = slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].ports.as_ref().unwrap()[0].port, Some(8080));

    // The test reaches a pod's port from inside the cluster network, and through a port-forward.
    let mut s = cluster
        .connect(SocketAddr::from((ip_a, 8080)))
        .await
        .unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    assert!(answer.ends_with("web-a"), "{answer}");
    let (local, _forward) = cluster
        .port_forward(SocketAddr::from((cluster_ip, 80)))
        .await
        .unwrap();
    let mut s = tokio::net::TcpStream::connect(local).await.unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.ends_with("web-a") || answer.ends_with("web-b"),
        "{answer}"
    );

    // A rotated Secret reaches the running processes' mounted file.
    assert_eq!(log_line(&pods, "web-a", "secret:").await, "secret: one");
    secrets
        .patch(
            "tls",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"tls.crt": "two"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        eventually(30, || async {
            let line = log_line(&pods, "web-a", "secret:").await;
            (line != "secret: one").then_some(line)
        })
        .await,
        "secret: two"
    );

    // The loopback probe went to the node, where nothing listens: a kubelet's event, no start.
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let message = eventually(30, || async {
        let list = events
            .list(&ListParams::default().fields("involvedObject.name=loopback"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Unhealthy"))
            .map(|e| (e.type_, e.message))
    })
    .await;
    assert_eq!(
        message,
        (
            Some("Warning".to_string()),
            Some("Startup probe failed: Get \"http://127.0.0.1:8080/healthz\": dial tcp 127.0.0.1:8080: connect: connection refused".to_string())
        )
    );
    let lp = pods.get("loopback").await.unwrap();
    let status = &lp.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!((status.started, status.ready), (Some(false), false));
}

const TLS_SERVER: &str = include_str!("programs/tls_server.py");

/// A pod serving HTTPS on 8443 (the program above) with `readinessProbe` on `path`.
fn tls_pod(name: &str, path: &str) -> Pod {
    create(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{
            "name": "main", "image": "tls-server:1",
            "ports": [{"name": "https", "containerPort": 8443}],
            "readinessProbe": {"httpGet": {"port": "https", "path": path, "scheme": "HTTPS"},
                               "periodSeconds": 1},
            "volumeMounts": [{"name": "tls", "mountPath": "/etc/tls"}],
        }],
        "volumes": [{"name": "tls", "secret": {"secretName": "server-tls"}}]},
    }))
}

#[tokio::test]
async fn https_probes_complete_the_handshake_and_read_the_status() {
    let images = BTreeMap::from([(
        "tls-server".to_string(),
        image(&["python3", "-u", "-c", TLS_SERVER]),
    )]);
    let Sim {
        cluster: _cluster,
        client,
    } = start_with(images).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    // A certificate for a name, not the pod IP: the kubelet does not verify it.
    let issued = rcgen::generate_simple_self_signed(vec!["server.example".to_owned()]).unwrap();
    secrets
        .create(
            &pp,
            &create(json!({"metadata": {"name": "server-tls"}, "stringData": {
                "tls.crt": issued.cert.pem(), "tls.key": issued.signing_key.serialize_pem()}})),
        )
        .await
        .unwrap();
    pods.create(&pp, &tls_pod("healthy", "/healthz"))
        .await
        .unwrap();
    pods.create(&pp, &tls_pod("unready", "/ready"))
        .await
        .unwrap();

    // The probe went through TLS to the server's handler, without a client certificate, and
    // its 200 made the pod Ready.
    eventually(60, || async {
        let p = pods.get("healthy").await.ok()?;
        let conditions = p.status?.conditions?;
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(())
    })
    .await;
    assert_eq!(
        log_line(&pods, "healthy", "GET").await,
        "GET /healthz kube-probe/1.34 client-cert=no"
    );

    // A 503 over TLS is a failed probe with the kubelet's words, and the pod stays unready
    // (the probes before the server listened were refused: events of their own).
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let message = eventually(60, || async {
        let list = events
            .list(&ListParams::default().fields("involvedObject.name=unready"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("Unhealthy"))
            .filter_map(|e| e.message)
            .find(|m| !m.contains("connection refused"))
    })
    .await;
    assert_eq!(
        message,
        "Readiness probe failed: HTTP probe failed with statuscode: 503"
    );
    assert_eq!(
        log_line(&pods, "unready", "GET").await,
        "GET /ready kube-probe/1.34 client-cert=no"
    );
    let unready = pods.get("unready").await.unwrap();
    let status = &unready.status.unwrap().container_statuses.unwrap()[0];
    assert!(!status.ready);
}

/// Says whether `/` is mounted read-only and whether its emptyDir takes a write.
const ROOT_PROBE: &str = r#"
import os
print("root:", "ro" if os.statvfs("/").f_flag & os.ST_RDONLY else "rw", flush=True)
try:
    with open("/mnt/scratch/written", "w") as f:
        f.write("x")
    print("scratch: written", flush=True)
except OSError as e:
    print("scratch:", e.strerror, flush=True)
"#;

#[tokio::test]
async fn a_read_only_root_file_system_leaves_volumes_writable() {
    let images = BTreeMap::from([(
        "root-probe".to_string(),
        image(&["python3", "-c", ROOT_PROBE]),
    )]);
    let Sim {
        cluster: _cluster,
        client,
    } = start_with(images).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, read_only) in [("read-only", true), ("writable", false)] {
        let pod = create(json!({
            "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "root-probe:1",
                "securityContext": {"readOnlyRootFilesystem": read_only},
                "volumeMounts": [{"name": "scratch", "mountPath": "/mnt/scratch"}],
            }],
            "volumes": [{"name": "scratch", "emptyDir": {}}]},
        }));
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    assert_eq!(log_line(&pods, "read-only", "root:").await, "root: ro");
    assert_eq!(
        log_line(&pods, "read-only", "scratch:").await,
        "scratch: written"
    );
    assert_eq!(log_line(&pods, "writable", "root:").await, "root: rw");
    assert_eq!(
        log_line(&pods, "writable", "scratch:").await,
        "scratch: written"
    );
}

/// Writes into a volume mounted at a top-level folder the host lacks, and says which of the
/// root's folders are read-only.
const TOP_LEVEL_PROBE: &str = r#"
import os
with open("/kubesim-fidelity-top/written", "w") as f:
    f.write("x")
print("top: written", flush=True)
print("usr:", "ro" if os.statvfs("/usr").f_flag & os.ST_RDONLY else "rw", flush=True)
with open("/dev/null", "w") as f:
    f.write("x")
print("dev: written", flush=True)
"#;

#[tokio::test]
async fn a_volume_at_a_top_level_folder_the_host_lacks_is_mounted_there_in_a_root_of_its_own() {
    let top = std::path::Path::new("/kubesim-fidelity-top");
    assert!(!top.exists(), "the host has no {top:?}");
    let images = BTreeMap::from([(
        "top-probe".to_string(),
        image(&["python3", "-c", TOP_LEVEL_PROBE]),
    )]);
    let Sim {
        cluster: _cluster,
        client,
    } = start_with(images).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, read_only) in [("top-read-only", true), ("top-writable", false)] {
        let pod = create(json!({
            "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "top-probe:1",
                "securityContext": {"readOnlyRootFilesystem": read_only},
                "volumeMounts": [{"name": "data", "mountPath": top}],
            }],
            "volumes": [{"name": "data", "emptyDir": {}}]},
        }));
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    for (name, usr) in [("top-read-only", "usr: ro"), ("top-writable", "usr: rw")] {
        assert_eq!(
            log_line(&pods, name, "top:").await,
            "top: written",
            "{name}"
        );
        assert_eq!(log_line(&pods, name, "usr:").await, usr, "{name}");
        // Device files stay usable under a read-only root, as a runtime's /dev is its own mount.
        assert_eq!(
            log_line(&pods, name, "dev:").await,
            "dev: written",
            "{name}"
        );
    }
    assert!(!top.exists(), "nothing was made on the host");
}

/// Prints the file `$FILE` names.
const CAT: &str = r#"
import os
with open(os.environ["FILE"]) as f:
    print("file:", f.read().strip(), flush=True)
"#;

/// A mount point the host lacks, under `/tmp` where the cluster keeps its own folders (and the
/// container's private scratch): `/tmp` is overlaid in the container and the mounts below it,
/// the scratch among them, are bound again on top (the widely used operator's Spark Connect
/// server mounts its executor template at `/tmp/spark/…`).
#[tokio::test]
async fn a_sub_path_mounted_under_tmp_where_the_host_has_no_folder_is_read() {
    let images = BTreeMap::from([("cat".to_string(), image(&["python3", "-c", CAT]))]);
    let Sim {
        cluster: _cluster,
        client,
    } = start_with(images).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    maps.create(
        &PostParams::default(),
        &create(json!({"metadata": {"name": "conf"}, "data": {"t.yaml": "kind: Pod"}})),
    )
    .await
    .unwrap();
    let missing = format!("/tmp/kubesim-no-such-folder-{}", std::process::id());
    assert!(!std::path::Path::new(&missing).exists());
    let file = format!("{missing}/t.yaml");
    // A first mount point the host lacks, elsewhere: the container's scratch is mounted for
    // its overlay before `/tmp` is overlaid (as an image's layers mount it).
    let elsewhere = format!("/opt/kubesim-no-such-folder-{}/t.yaml", std::process::id());
    let pod = create(json!({
        "metadata": {"name": "reader"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "cat:1",
            "env": [{"name": "FILE", "value": file}],
            "volumeMounts": [
                {"name": "conf", "mountPath": elsewhere, "subPath": "t.yaml", "readOnly": true},
                {"name": "conf", "mountPath": file, "subPath": "t.yaml", "readOnly": true},
            ],
        }],
        "volumes": [{"name": "conf", "configMap": {"name": "conf"}}]},
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(log_line(&pods, "reader", "file:").await, "file: kind: Pod");
    assert!(
        !std::path::Path::new(&missing).exists(),
        "the mount point was made in the container only"
    );
}
