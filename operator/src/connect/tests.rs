use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use serde_json::json;

use super::*;

/// The widely used operator's example application, from its facts (tests/data/spark_connect/).
const EXAMPLE: &str = include_str!("../../../tests/data/spark_connect/spark-connect.json");

const MASTER: &str = "k8s://https://kubernetes.default.svc:443";

fn example() -> SparkConnect {
    let mut conn: SparkConnect = yaml_serde::from_str(EXAMPLE).unwrap();
    conn.metadata.uid = Some("c-uid".into());
    conn.metadata.generation = Some(1);
    conn
}

fn built() -> Objects {
    build(&example(), MASTER).unwrap()
}

fn server_container(pod: &Pod) -> &Container {
    &pod.spec.as_ref().unwrap().containers[0]
}

fn args(conn: &SparkConnect) -> String {
    server_args(conn, MASTER).unwrap().join(" ")
}

#[test]
fn the_example_reads_field_for_field() {
    let conn = example();
    assert_eq!(conn.spec.spark_version, "4.0.4");
    assert_eq!(conn.spec.executor.instances, Some(2));
    assert_eq!(conn.spec.executor.pod.cores, Some(1));
    assert_eq!(conn.spec.executor.pod.memory.as_deref(), Some("512m"));
    assert!(conn.spec.server.pod.template.is_some());
    assert!(conn.status.is_none());
}

#[test]
fn every_object_is_owned_by_the_spark_connect_as_its_controller() {
    let objects = built();
    for meta in [
        &objects.config_map.metadata,
        &objects.server.metadata,
        &objects.service.metadata,
    ] {
        let owner = &meta.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.api_version.as_str(),
                owner.uid.as_str()
            ),
            ("SparkConnect", "sparkoperator.k8s.io/v1alpha1", "c-uid")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(meta.namespace.as_deref(), Some("default"));
    }
    assert_eq!(
        objects.config_map.metadata.name.as_deref(),
        Some("spark-connect-conf")
    );
    assert_eq!(
        objects.server.metadata.name.as_deref(),
        Some("spark-connect-server")
    );
    assert_eq!(
        objects.service.metadata.name.as_deref(),
        Some("spark-connect-server")
    );
}

#[test]
fn the_server_pod_keeps_the_template_and_runs_the_connect_server_through_bash() {
    let pod = built().server;
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["key1"], "value1");
    assert_eq!(labels[SPARK_ROLE], "connect-server");
    assert_eq!(labels[SPARK_VERSION], "4.0.4");
    assert_eq!(labels[CONNECT_NAME], "spark-connect");
    assert_eq!(labels[LAUNCHED_BY_SPARK_OPERATOR], "true");
    assert_eq!(pod.metadata.annotations.as_ref().unwrap()["key3"], "value3");
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.service_account.as_deref(),
        Some("spark-operator-spark")
    );
    assert_eq!(
        spec.security_context.as_ref().unwrap().run_as_user,
        Some(185)
    );
    let container = server_container(&pod);
    assert_eq!(container.name, "spark-kubernetes-driver");
    assert_eq!(
        container.image.as_deref(),
        Some("docker.io/apache/spark:4.0.4")
    );
    assert_eq!(
        container.command.as_deref(),
        Some(&["bash".to_owned(), "-c".to_owned()][..])
    );
    let line = &container.args.as_ref().unwrap()[0];
    assert!(
        line.starts_with("${SPARK_HOME}/sbin/start-connect-server.sh --master "),
        "{line}"
    );
    let env: Vec<_> = container.env.as_ref().unwrap().iter().collect();
    assert!(env.iter().any(|e| {
        e.name == "POD_IP"
            && e.value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path
                == "status.podIP"
    }));
    assert!(
        env.iter()
            .any(|e| e.name == "SPARK_NO_DAEMONIZE" && e.value.as_deref() == Some("true"))
    );
    let mount = &container.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (
            mount.name.as_str(),
            mount.mount_path.as_str(),
            mount.sub_path.as_deref()
        ),
        (
            CONF_VOLUME,
            "/tmp/spark/executor-pod-template.yaml",
            Some("executor-pod-template.yaml")
        )
    );
    let volume = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(
        volume.config_map.as_ref().unwrap().name,
        "spark-connect-conf"
    );
    for probe in [&container.startup_probe, &container.readiness_probe] {
        let probe = probe.as_ref().unwrap();
        assert_eq!(
            probe.tcp_socket.as_ref().unwrap().port,
            IntOrString::Int(15002)
        );
    }
    assert_eq!(
        container.startup_probe.as_ref().unwrap().failure_threshold,
        Some(30)
    );
}

#[test]
fn the_servers_conf_names_the_master_namespace_images_executors_and_template() {
    let line = args(&example());
    for part in [
        &format!("--master '{MASTER}'"),
        "'spark.kubernetes.namespace=default'",
        "'spark.kubernetes.container.image=docker.io/apache/spark:4.0.4'",
        "'spark.kubernetes.executor.container.image=docker.io/apache/spark:4.0.4'",
        "'spark.kubernetes.driver.label.sparkoperator.k8s.io/launched-by-spark-operator=true'",
        "'spark.kubernetes.driver.label.sparkoperator.k8s.io/connect-name=spark-connect'",
        "'spark.driver.bindAddress=0.0.0.0'",
        "spark.driver.host=$(host=${POD_IP};",
        "'spark.kubernetes.executor.useDriverPodIP=false'",
        "'spark.driver.port=7078'",
        "'spark.driver.blockManager.port=7079'",
        "'spark.kubernetes.driver.pod.name=spark-connect-server'",
        "'spark.kubernetes.executor.label.sparkoperator.k8s.io/launched-by-spark-operator=true'",
        "'spark.kubernetes.executor.label.sparkoperator.k8s.io/connect-name=spark-connect'",
        "'spark.executor.instances=2'",
        "'spark.executor.cores=1'",
        "'spark.executor.memory=512m'",
        "'spark.kubernetes.executor.podNamePrefix=spark-connect'",
        "'spark.kubernetes.executor.podTemplateFile=/tmp/spark/executor-pod-template.yaml'",
        "'spark.kubernetes.executor.podTemplateContainerName=spark-kubernetes-executor'",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    assert!(!line.contains("dynamicAllocation"), "{line}");
}

#[test]
fn user_confs_come_first_are_quoted_for_bash_and_cannot_rename_the_server() {
    let mut conn = example();
    conn.spec.spark_conf = Some(BTreeMap::from([
        ("spark.sql.shuffle.partitions".into(), "4".into()),
        ("spark.kubernetes.driver.pod.name".into(), "other".into()),
        ("spark.app.name".into(), "it's mine".into()),
    ]));
    conn.spec.hadoop_conf = Some(BTreeMap::from([
        ("fs.s3a.endpoint".into(), "http://s3".into()),
        ("spark.hadoop.fs.defaultFS".into(), "s3a://b".into()),
    ]));
    let line = args(&conn);
    assert!(line.contains("'spark.sql.shuffle.partitions=4'"));
    assert!(line.contains(r#"'spark.app.name=it'"'"'s mine'"#), "{line}");
    assert!(line.contains("'spark.hadoop.fs.s3a.endpoint=http://s3'"));
    assert!(line.contains("'spark.hadoop.fs.defaultFS=s3a://b'"));
    assert!(!line.contains("pod.name=other"));
    // The user's confs precede the operator's, which win as the later --conf.
    assert!(
        line.find("spark.sql.shuffle.partitions").unwrap()
            < line.find("spark.driver.bindAddress").unwrap()
    );
}

#[test]
fn dynamic_allocation_turns_shuffle_tracking_on_unless_told_otherwise() {
    let mut conn = example();
    conn.spec.dynamic_allocation = Some(
        serde_json::from_value(json!({"enabled": true, "minExecutors": 1, "maxExecutors": 3}))
            .unwrap(),
    );
    let line = args(&conn);
    for part in [
        "'spark.dynamicAllocation.enabled=true'",
        "'spark.dynamicAllocation.minExecutors=1'",
        "'spark.dynamicAllocation.maxExecutors=3'",
        "'spark.dynamicAllocation.shuffleTracking.enabled=true'",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
}

#[test]
fn images_come_from_the_templates_else_spec_image_else_the_spec_is_refused() {
    let mut conn = example();
    conn.spec.image = Some("spark:4.0.0".into());
    conn.spec.executor.pod.template = None;
    conn.spec.server.pod.template = None;
    let objects = build(&conn, MASTER).unwrap();
    assert_eq!(
        server_container(&objects.server).image.as_deref(),
        Some("spark:4.0.0")
    );
    assert_eq!(
        server_container(&objects.server).name,
        "spark-kubernetes-driver"
    );
    let line = args(&conn);
    assert!(line.contains("'spark.kubernetes.executor.container.image=spark:4.0.0'"));
    // No executor template: no template conf, but the ConfigMap key the pod mounts is there.
    assert!(!line.contains("podTemplateFile"));
    assert!(
        objects
            .config_map
            .data
            .unwrap()
            .contains_key(EXECUTOR_TEMPLATE_FILE)
    );

    conn.spec.image = None;
    let error = build(&conn, MASTER).unwrap_err();
    assert_eq!(error.kind(), "no_image");
    conn.spec.image = Some("spark:4.0.0".into());
    conn.spec.executor.pod.template = Some(json!({"spec": {"containers": "not a list"}}));
    assert_eq!(build(&conn, MASTER).unwrap_err().kind(), "parse_template");
}

#[test]
fn the_config_map_holds_the_executor_template_as_spark_reads_it() {
    let data = built().config_map.data.unwrap();
    let template: serde_json::Value = yaml_serde::from_str(&data[EXECUTOR_TEMPLATE_FILE]).unwrap();
    assert_eq!(
        template["spec"]["containers"][0]["name"],
        "spark-kubernetes-executor"
    );
    assert_eq!(template["metadata"]["labels"]["key1"], "value1");
    assert_eq!(template["spec"]["securityContext"]["runAsUser"], 185);
}

#[test]
fn the_service_exposes_connect_the_ui_and_the_driver_ports_and_selects_the_server() {
    let service = built().service;
    let spec = service.spec.unwrap();
    let ports: Vec<(&str, i32, &str)> = spec
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p.name.as_deref().unwrap(),
                p.port,
                p.app_protocol.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("driver-rpc", 7078, "tcp"),
            ("blockmanager", 7079, "tcp"),
            ("web-ui", 4040, "http"),
            ("spark-connect-server", 15002, "grpc"),
        ]
    );
    assert_eq!(spec.selector.unwrap(), server_selector(&example()));
    let labels = service.metadata.labels.unwrap();
    assert_eq!(labels[CREATED_BY_LABEL], "true");
    assert_eq!(labels[CONNECT_NAME], "spark-connect");
}

#[test]
fn a_given_service_keeps_its_name_type_and_annotations() {
    let mut conn = example();
    conn.spec.server.service = Some(json!({
        "metadata": {"name": "connect", "namespace": "elsewhere",
                     "annotations": {"lb": "internal"}},
        "spec": {"type": "LoadBalancer"},
    }));
    let service = build(&conn, MASTER).unwrap().service;
    assert_eq!(service.metadata.name.as_deref(), Some("connect"));
    assert_eq!(service.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(service.metadata.annotations.unwrap()["lb"], "internal");
    assert_eq!(service.spec.unwrap().type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(service_name(&conn), "connect");
}

fn pod(name: &str, phase: &str, ready: bool, labels: serde_json::Value) -> Pod {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
    }))
    .unwrap();
    pod.status = Some(PodStatus {
        phase: Some(phase.into()),
        pod_ip: Some("198.18.0.7".into()),
        message: None,
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    pod
}

fn executor(name: &str, phase: &str) -> Pod {
    pod(
        name,
        phase,
        false,
        json!({CONNECT_NAME: "spark-connect", LAUNCHED_BY_SPARK_OPERATOR: "true",
               SPARK_ROLE: "executor"}),
    )
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

#[test]
fn status_follows_the_server_pod_from_provisioning_to_ready() {
    let mut conn = example();
    let provisioning = status(&conn, &Observed::default(), at(0)).unwrap();
    assert_eq!(provisioning.state, SparkConnectState::Provisioning);
    assert_eq!(provisioning.start_time, Some(Time(at(0))));
    assert_eq!(provisioning.conditions[0].status, "False");
    conn.status = Some(provisioning);

    let server = pod("spark-connect-server", "Running", false, json!({}));
    let observed = Observed {
        server: Some(&server),
        service: true,
        ..Observed::default()
    };
    let not_ready = status(&conn, &observed, at(5)).unwrap();
    assert_eq!(not_ready.state, SparkConnectState::NotReady);
    assert_eq!(not_ready.server.pod_name, "spark-connect-server");
    assert_eq!(not_ready.server.pod_ip, "198.18.0.7");
    assert_eq!(not_ready.server.service_name, "spark-connect-server");
    assert_eq!(not_ready.conditions[0].reason, REASON_NOT_READY);
    // Still False: the transition time stays.
    assert_eq!(not_ready.conditions[0].last_transition_time, Time(at(0)));
    conn.status = Some(not_ready);

    let server = pod("spark-connect-server", "Running", true, json!({}));
    let a = executor("spark-connect-exec-1", "Running");
    let b = executor("spark-connect-exec-2", "Pending");
    let observed = Observed {
        server: Some(&server),
        executors: vec![&a, &b],
        service: true,
        build_error: None,
    };
    let ready = status(&conn, &observed, at(9)).unwrap();
    assert_eq!(ready.state, SparkConnectState::Ready);
    assert_eq!(
        (
            ready.conditions[0].status.as_str(),
            ready.conditions[0].reason.as_str()
        ),
        ("True", REASON_READY)
    );
    assert_eq!(ready.conditions[0].last_transition_time, Time(at(9)));
    assert_eq!(
        ready.executors,
        BTreeMap::from([("pending".into(), 1), ("running".into(), 1)])
    );
    assert_eq!(ready.start_time, Some(Time(at(0))));
    assert_eq!(ready.last_update_time, Some(Time(at(9))));
    conn.status = Some(ready);
    // Nothing changed: nothing to write.
    assert_eq!(status(&conn, &observed, at(20)), None);
}

#[test]
fn an_ended_server_or_an_invalid_spec_fails_the_spark_connect() {
    let conn = example();
    let server = pod("spark-connect-server", "Failed", false, json!({}));
    let observed = Observed {
        server: Some(&server),
        ..Observed::default()
    };
    assert_eq!(
        status(&conn, &observed, at(0)).unwrap().state,
        SparkConnectState::Failed
    );
    let observed = Observed {
        build_error: Some("image is not specified".into()),
        ..Observed::default()
    };
    let failed = status(&conn, &observed, at(0)).unwrap();
    assert_eq!(failed.state, SparkConnectState::Failed);
    assert_eq!(failed.conditions[0].message, "image is not specified");
}

#[test]
fn executors_are_recognised_by_their_three_labels() {
    assert!(is_executor_of("spark-connect", &executor("e", "Running")));
    assert!(!is_executor_of("other", &executor("e", "Running")));
    let server = pod(
        "s",
        "Running",
        true,
        json!({CONNECT_NAME: "spark-connect", LAUNCHED_BY_SPARK_OPERATOR: "true",
               SPARK_ROLE: "connect-server"}),
    );
    assert!(!is_executor_of("spark-connect", &server));
}

#[test]
fn status_uses_the_json_names_of_v1alpha1() {
    let status: SparkConnectStatus = serde_json::from_value(json!({
        "state": "Ready",
        "server": {"podName": "p", "podIp": "10.0.0.1", "serviceName": "s"},
        "executors": {"running": 2},
        "startTime": "2026-01-02T03:04:05Z",
    }))
    .unwrap();
    assert_eq!(status.state, SparkConnectState::Ready);
    assert_eq!(status.server.pod_ip, "10.0.0.1");
    let back = serde_json::to_value(&status).unwrap();
    assert_eq!(back["server"]["podIp"], "10.0.0.1");
    assert_eq!(back["executors"]["running"], 2);
    let new: SparkConnectStatus = serde_json::from_value(json!({"state": ""})).unwrap();
    assert_eq!(new.state, SparkConnectState::New);
}
