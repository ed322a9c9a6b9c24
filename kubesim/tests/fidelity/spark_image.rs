//! The Spark image as kubesim runs it, with stand-ins for Spark and Java (the real ones run in
//! `tests/tests/real_spark.rs`): the entrypoint's `driver`, `executor` and pass-through modes,
//! Spark's volumes at their mount paths, a working directory of the image's, nothing written to
//! the host; and watches over WebSocket, the way fabric8 (Spark's client) watches.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, LogParams, PostParams};
use kubesim::kubelet::spark_image::SparkImageConfig;
use kubesim::{Cluster, ClusterConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::eventually;

fn script(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A Spark home whose `spark-submit` reports what it sees, and a Java whose `java` prints its
/// arguments.
fn stand_ins(dir: &Path) -> (PathBuf, PathBuf) {
    let home = dir.join("spark");
    std::fs::create_dir_all(home.join("jars")).unwrap();
    script(
        &home.join("bin/spark-submit"),
        r#"#!/bin/sh
echo "spark-submit: $*"
echo "pwd: $(pwd)"
echo "conf: $(cat /opt/spark/conf/spark.properties)"
echo "homes: $SPARK_HOME $JAVA_HOME"
echo written > /opt/spark/work-dir/out && echo "work-dir: $(cat /opt/spark/work-dir/out)"
touch /var/data/spark-1/f && echo "local dir: writable"
touch /opt/spark/conf/x 2>/dev/null || echo "conf dir: read-only"
"#,
    );
    let java = dir.join("jdk");
    script(&java.join("bin/java"), "#!/bin/sh\necho \"java: $*\"\n");
    (home, java)
}

fn pod(name: &str, args: Value, env: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "spark-kubernetes-driver", "image": "apache/spark:4.3.0",
                "args": args, "env": env,
                "volumeMounts": [
                    {"name": "spark-local-dir-1", "mountPath": "/var/data/spark-1"},
                    {"name": "spark-conf-volume-driver", "mountPath": "/opt/spark/conf"},
                ],
            }],
            "volumes": [
                {"name": "spark-local-dir-1", "emptyDir": {}},
                {"name": "spark-conf-volume-driver", "configMap": {"name": "conf",
                 "items": [{"key": "spark.properties", "path": "spark.properties"}]}},
            ],
        },
    }))
    .unwrap()
}

async fn finished_log(pods: &Api<Pod>, name: &str) -> String {
    eventually(60, || async {
        let p = pods.get(name).await.ok()?;
        let phase = p.status.as_ref()?.phase.clone()?;
        (phase == "Succeeded" || phase == "Failed").then_some(())
    })
    .await;
    pods.logs(name, &LogParams::default()).await.unwrap()
}

#[tokio::test]
async fn the_spark_image_runs_driver_and_executor_as_the_image_does_without_touching_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let (home, java) = stand_ins(dir.path());
    let host_opt_spark = Path::new("/opt/spark").exists();
    let cluster = Cluster::start(ClusterConfig {
        spark: Some(SparkImageConfig {
            home: Some(home.clone()),
            java_home: Some(java),
            ..SparkImageConfig::default()
        }),
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let client = cluster.client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    maps.create(
        &pp,
        &serde_json::from_value(
            json!({"metadata": {"name": "conf"}, "data": {"spark.properties": "spark.app.name=pi"}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let bind = json!([{"name": "SPARK_DRIVER_BIND_ADDRESS",
                       "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]);
    let driver_args = json!([
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        "local:///opt/spark/work-dir/pi.py",
        "4"
    ]);
    pods.create(&pp, &pod("driver", driver_args, bind))
        .await
        .unwrap();
    let executor_env = json!([
        {"name": "SPARK_DRIVER_URL", "value": "spark://CoarseGrainedScheduler@svc.default.svc:7078"},
        {"name": "SPARK_EXECUTOR_ID", "value": "1"},
        {"name": "SPARK_EXECUTOR_CORES", "value": "1"},
        {"name": "SPARK_EXECUTOR_MEMORY", "value": "512m"},
        {"name": "SPARK_APPLICATION_ID", "value": "spark-1"},
        {"name": "SPARK_RESOURCE_PROFILE_ID", "value": "0"},
        {"name": "SPARK_EXECUTOR_POD_NAME", "value": "exec-1"},
        {"name": "SPARK_CONF_DIR", "value": "/opt/spark/conf"},
        {"name": "SPARK_JAVA_OPT_0", "value": "-Dfirst=1"},
        {"name": "SPARK_JAVA_OPT_1", "value": "-Dsecond=two words"},
        {"name": "SPARK_EXECUTOR_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]);
    pods.create(&pp, &pod("exec-1", json!(["executor"]), executor_env))
        .await
        .unwrap();
    pods.create(
        &pp,
        &pod(
            "other",
            json!(["sh", "-c", "echo passed through"]),
            json!([]),
        ),
    )
    .await
    .unwrap();

    let log = finished_log(&pods, "driver").await;
    let ip = pods
        .get("driver")
        .await
        .unwrap()
        .status
        .unwrap()
        .pod_ip
        .unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "spark-submit: --conf spark.driver.bindAddress={ip} --conf \
                 spark.executorEnv.SPARK_DRIVER_POD_IP={ip} --deploy-mode client \
                 --properties-file /opt/spark/conf/spark.properties --class \
                 org.apache.spark.deploy.PythonRunner local:///opt/spark/work-dir/pi.py 4"
            )
            .as_str(),
            "pwd: /opt/spark/work-dir",
            "conf: spark.app.name=pi",
            "homes: /opt/spark /opt/java/openjdk",
            "work-dir: written",
            "local dir: writable",
            "conf dir: read-only",
        ],
        "{log}"
    );

    let log = finished_log(&pods, "exec-1").await;
    let ip = pods
        .get("exec-1")
        .await
        .unwrap()
        .status
        .unwrap()
        .pod_ip
        .unwrap();
    assert_eq!(
        log.trim(),
        format!(
            "java: -Dfirst=1 -Dsecond=two words -Xms512m -Xmx512m -cp \
             /opt/spark/conf:/opt/spark/jars/*:/opt/spark/work-dir: \
             org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend --driver-url \
             spark://CoarseGrainedScheduler@svc.default.svc:7078 --executor-id 1 --cores 1 \
             --app-id spark-1 --hostname {ip} --resourceProfileId 0 --podName exec-1"
        )
    );
    assert_eq!(finished_log(&pods, "other").await.trim(), "passed through");

    // What the containers wrote stayed in them.
    assert!(
        !home.join("work-dir").exists(),
        "the image's layer is the container's own"
    );
    if !host_opt_spark {
        assert!(
            !Path::new("/opt/spark").exists(),
            "no mount point made on the host"
        );
    }
}

#[tokio::test]
async fn the_spark_image_needs_the_pod_network() {
    let dir = tempfile::tempdir().unwrap();
    let (home, java) = stand_ins(dir.path());
    let cluster = Cluster::start(ClusterConfig {
        network: kubesim::net::NetworkMode::Host,
        spark: Some(SparkImageConfig {
            home: Some(home),
            java_home: Some(java),
            ..SparkImageConfig::default()
        }),
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client().unwrap(), "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "spark:4.3.0", "args": ["executor"]}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let waiting = eventually(30, || async {
        let p = pods.get("p").await.ok()?;
        let state = p.status?.container_statuses?.first()?.state.clone()?;
        state
            .waiting
            .filter(|w| w.reason.as_deref() != Some("ContainerCreating"))
    })
    .await;
    assert_eq!(
        waiting.reason.as_deref(),
        Some("CreateContainerConfigError")
    );
    assert!(
        waiting.message.unwrap_or_default().contains("network: pod"),
        "the message says what is needed"
    );
}

/// Reads one server frame: (opcode, payload).
async fn read_frame(s: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 2];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(head[1] & 0x80, 0, "server frames are not masked");
    let len = match head[1] & 0x7F {
        126 => u64::from(s.read_u16().await.unwrap()),
        127 => s.read_u64().await.unwrap(),
        n => u64::from(n),
    };
    let mut payload = vec![0u8; len as usize];
    s.read_exact(&mut payload).await.unwrap();
    (head[0] & 0x0F, payload)
}

#[tokio::test]
async fn watches_are_served_over_websocket_as_fabric8_asks() {
    let cluster = Cluster::start(ClusterConfig {
        network: kubesim::net::NetworkMode::Host,
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let mut s = tokio::net::TcpStream::connect(cluster.addr).await.unwrap();
    s.write_all(
        b"GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\n\
          Host: kubesim\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
        assert!(head.len() < 4096, "the handshake answer ends");
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );

    let maps: Api<ConfigMap> = Api::namespaced(cluster.client().unwrap(), "default");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "seen"}})).unwrap(),
    )
    .await
    .unwrap();
    let (opcode, payload) = read_frame(&mut s).await;
    assert_eq!(opcode, 0x1, "a text message");
    let event: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "seen");

    // A (masked) close is answered with a close.
    s.write_all(&[0x88, 0x80, 1, 2, 3, 4]).await.unwrap();
    let (opcode, _) = read_frame(&mut s).await;
    assert_eq!(opcode, 0x8);
}
