//! Tests of the argument vector: the fixtures the parts share, what every argv must be, flags,
//! refusals; the field → conf table in `tests/confs.rs`, the pod templates in `tests/templates.rs`.

use serde_json::{Value, json};

use super::*;
use crate::crd::SparkApplicationStatus;

const MASTER: &str = "k8s://https://10.0.0.1:443";
const UID: &str = "6f1c2d9e-0000-4000-8000-000000000001";

/// A SparkApplication from a spec, with `extra` merged over a minimal Scala app.
fn app_with(extra: Value) -> SparkApplication {
    let mut spec = json!({
        "type": "Scala",
        "sparkVersion": "4.0.0",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
        "image": "spark:4.0.0",
        "driver": {},
        "executor": {}
    });
    merge(&mut spec, extra);
    let mut app = SparkApplication::new("pi", serde_json::from_value(spec).unwrap());
    app.metadata.namespace = Some("spark".into());
    app.metadata.uid = Some(UID.into());
    app.status = Some(SparkApplicationStatus {
        submission_id: format!("{UID}-1"),
        ..SparkApplicationStatus::default()
    });
    app
}

/// Every driver and executor field we honour, in one app.
const FULL_JAVA_APP: &str = r#"
type: Java
imagePullPolicy: IfNotPresent
imagePullSecrets: [regcred, other]
sparkConf: {spark.eventLog.enabled: "false", spark.sql.shuffle.partitions: "8"}
hadoopConf: {fs.s3a.endpoint: "http://minio:9000"}
hadoopConfigMap: hadoop-conf
memoryOverheadFactor: "0.2"
nodeSelector: {disk: ssd}
timeToLiveSeconds: 3600
restartPolicy: {type: OnFailure, onFailureRetries: 3}
volumes:
  - {name: data, persistentVolumeClaim: {claimName: data-pvc}}
  - {name: spark-local-dir-1, emptyDir: {sizeLimit: 10Gi}}
driver:
  cores: 2
  coreRequest: 500m
  coreLimit: "2"
  memory: 2g
  memoryOverhead: 512m
  serviceAccount: spark
  javaOptions: "-XX:+UseG1GC"
  labels: {team: data}
  annotations: {example.com/owner: data-team}
  serviceLabels: {svc: "yes"}
  serviceAnnotations: {svc.example.com/a: b}
  env: [{name: MODE, value: batch}]
  envVars: {LEGACY: "1"}
  envFrom: [{configMapRef: {name: env-cm}}]
  envSecretKeyRefs: {PASSWORD: {name: db, key: password}}
  secrets: [{name: gcp, path: /mnt/gcp, secretType: GCPServiceAccount}]
  configMaps: [{name: extra, path: /etc/extra}]
  volumeMounts:
    - {name: data, mountPath: /data}
    - {name: spark-local-dir-1, mountPath: /tmp/spark-local, readOnly: true}
  tolerations: [{key: dedicated, operator: Equal, value: spark, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]
  securityContext: {runAsNonRoot: true}
  podSecurityContext: {fsGroup: 185}
  sidecars: [{name: logs, image: "busybox:1"}]
  initContainers: [{name: init, image: "busybox:1", command: ["true"]}]
  nodeSelector: {pool: drivers}
  ports: [{name: jmx, protocol: TCP, containerPort: 9999}]
  priorityClassName: high
  terminationGracePeriodSeconds: 30
executor:
  instances: 4
  cores: 3
  coreRequest: "1"
  coreLimit: "3"
  memory: 4g
  memoryOverhead: 1g
  deleteOnTermination: false
  serviceAccount: spark-exec
  javaOptions: "-Dx=y"
  labels: {role: worker}
  annotations: {a: b}
  env: [{name: MODE, value: batch}]
  envVars: {LEGACY: "1"}
  secrets: [{name: token, path: /mnt/token, secretType: HadoopDelegationToken}]
  volumeMounts: [{name: data, mountPath: /data, readOnly: true}]
  gpu: {name: nvidia.com/gpu, quantity: 1}
"#;

fn yaml(text: &str) -> Value {
    yaml_serde::from_str(text).unwrap()
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (k, v) in extra {
                merge(base.entry(k).or_insert(Value::Null), v);
            }
        }
        (base, extra) => *base = extra,
    }
}

fn confs(plan: &SubmitPlan) -> Vec<(String, String)> {
    plan.args
        .windows(2)
        .filter(|w| w[0] == "--conf")
        .filter_map(|w| {
            w[1].split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

fn conf<'a>(confs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    confs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn flag<'a>(plan: &'a SubmitPlan, name: &str) -> Option<&'a str> {
    plan.args
        .windows(2)
        .find(|w| w[0] == name)
        .map(|w| w[1].as_str())
}

/// Apps the submitter must accept: the argv parses and the driver's objects build.
fn accepted_apps() -> Vec<(&'static str, SparkApplication)> {
    vec![
        ("minimal scala", app_with(json!({}))),
        (
            "python with deps and arguments",
            app_with(json!({
                "type": "Python",
                "mainClass": null,
                "mainApplicationFile": "local:///opt/app/main.py",
                "pythonVersion": "3",
                "arguments": ["--input", "s3a://bucket/in", "--n=3"],
                "deps": {
                    "pyFiles": ["local:///opt/app/lib.py"],
                    "files": ["https://example.com/conf.json"],
                    "jars": ["local:///opt/jars/a.jar", "https://example.com/b.jar"],
                    "archives": ["local:///opt/env.tar.gz#env"]
                }
            })),
        ),
        (
            "R",
            app_with(json!({
                "type": "R",
                "mainClass": null,
                "mainApplicationFile": "local:///opt/app/main.R"
            })),
        ),
        (
            "java with everything on the driver and executors",
            app_with(yaml(FULL_JAVA_APP)),
        ),
        (
            "dynamic allocation",
            app_with(json!({
                "dynamicAllocation": {
                    "enabled": true, "initialExecutors": 2, "minExecutors": 1,
                    "maxExecutors": 10, "shuffleTrackingTimeout": 60000
                }
            })),
        ),
        (
            "user template and proxy user",
            app_with(json!({
                "proxyUser": "alice",
                "driver": {"template": {
                    "metadata": {"labels": {"from-template": "yes"}},
                    "spec": {"containers": [{"name": "spark-kubernetes-driver", "workingDir": "/work"}]}
                }},
                "executor": {"template": {"spec": {"containers": [{"name": "spark-kubernetes-executor"}]}}}
            })),
        ),
        (
            "maven packages, a Spark conf ConfigMap and memory limits",
            app_with(json!({
                "deps": {
                    "packages": ["org.example:greeting:1.0.0"],
                    "repositories": ["file:///opt/maven-repo"],
                    "excludePackages": ["org.example:unused"]
                },
                "sparkConfigMap": "spark-conf",
                "hadoopConfigMap": "hadoop-conf",
                "driver": {"memory": "512m", "memoryLimit": "2g"},
                "executor": {"memoryLimit": "3g"}
            })),
        ),
        (
            "client-side-free remote main file and repositories without packages",
            app_with(json!({
                "mainApplicationFile": "https://example.com/app.jar",
                "deps": {"repositories": ["https://repo.example.com/maven"], "excludePackages": ["a:b"]}
            })),
        ),
    ]
}

/// The driver pod the submitter builds from a plan.
fn submitted_driver(plan: &SubmitPlan) -> Value {
    submission::builder::build_from_argv(
        &plan.args,
        Some(&plan.driver_pod_template),
        Some(&plan.executor_pod_template),
        &plan.submission_id,
        1_750_000_000_000,
        "root",
    )
    .unwrap()
    .pod()
    .clone()
}

fn spark_container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn every_built_argv_is_accepted_by_the_submitter() {
    for (case, app) in accepted_apps() {
        let plan = build_args(&app, MASTER).unwrap_or_else(|e| panic!("{case}: {e}"));
        submission::argv::parse(&plan.args)
            .unwrap_or_else(|e| panic!("{case}: submitter refused {:?}: {e}", plan.args));
        submission::builder::build_from_argv(
            &plan.args,
            Some(&plan.driver_pod_template),
            Some(&plan.executor_pod_template),
            &plan.submission_id,
            1_750_000_000_000,
            "root",
        )
        .unwrap_or_else(|e| panic!("{case}: submitter could not build the driver: {e}"));
    }
}

#[test]
fn argv_starts_with_master_and_mode_and_ends_with_main_file_and_arguments() {
    let app = app_with(json!({"arguments": ["1000", "--verbose"]}));
    let plan = build_args(&app, MASTER).unwrap();
    assert_eq!(
        plan.args[..8],
        [
            "--master",
            MASTER,
            "--deploy-mode",
            "cluster",
            "--class",
            "org.apache.spark.examples.SparkPi",
            "--name",
            "pi"
        ]
    );
    let n = plan.args.len();
    assert_eq!(
        plan.args[n - 3..],
        [
            "local:///opt/spark/examples/jars/spark-examples.jar",
            "1000",
            "--verbose"
        ]
    );
    assert_eq!(plan.driver_pod_name, "pi-driver");
    assert_eq!(plan.submission_id, format!("{UID}-1"));
}

#[test]
fn deps_and_proxy_user_map_to_flags() {
    let app = app_with(json!({
        "proxyUser": "bob",
        "deps": {
            "jars": ["local:///a.jar", "local:///b.jar"], "files": ["local:///f"],
            "pyFiles": ["local:///p.py"], "archives": ["local:///z.zip"],
            "repositories": ["https://r", "file:///opt/repo"], "excludePackages": ["g:a", "h:b"],
            "packages": ["org.example:greeting:1.0.0", "g:c:2"]
        }
    }));
    let plan = build_args(&app, MASTER).unwrap();
    for (name, value) in [
        ("--packages", "org.example:greeting:1.0.0,g:c:2"),
        ("--exclude-packages", "g:a,h:b"),
        ("--repositories", "https://r,file:///opt/repo"),
        ("--jars", "local:///a.jar,local:///b.jar"),
        ("--files", "local:///f"),
        ("--py-files", "local:///p.py"),
        ("--archives", "local:///z.zip"),
        ("--proxy-user", "bob"),
    ] {
        assert_eq!(flag(&plan, name), Some(value), "{name}");
    }
}

#[test]
fn same_app_gives_the_same_argv() {
    let extra = json!({"sparkConf": {"b": "2", "a": "1", "c": "3"}, "driver": {"labels": {"z": "1", "y": "2"}}});
    let first = build_args(&app_with(extra.clone()), MASTER).unwrap();
    let second = build_args(&app_with(extra), MASTER).unwrap();
    assert_eq!(first, second);
}

#[test]
fn refusals_name_what_is_missing() {
    let mut app = app_with(json!({}));
    app.status = None;
    assert_eq!(
        build_args(&app, MASTER).unwrap_err().kind(),
        "missing_submission_id"
    );

    let mut app = app_with(json!({}));
    app.metadata.uid = None;
    assert_eq!(
        build_args(&app, MASTER).unwrap_err().kind(),
        "missing_metadata"
    );

    let err = build_args(&app_with(json!({"mode": "client"})), MASTER).unwrap_err();
    assert_eq!(err.kind(), "unsupported");

    let err = build_args(
        &app_with(json!({"driver": {"volumeMounts": [{"name": "nowhere", "mountPath": "/x"}]}})),
        MASTER,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "volume_not_found");

    let err = build_args(
        &app_with(json!({"executor": {"volumeMounts": [{"name": "spark-local-dir-9", "mountPath": "/x"}]}})),
        MASTER,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "volume_not_found");

    let err = build_args(
        &app_with(json!({
            "volumes": [{"name": "spark-local-dir-c", "configMap": {"name": "c"}}],
            "driver": {"volumeMounts": [{"name": "spark-local-dir-c", "mountPath": "/x"}]}
        })),
        MASTER,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "unsupported_local_dir_volume");

    let err = build_args(
        &app_with(json!({"driver": {"template": {"spec": []}}})),
        MASTER,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "invalid_template");
}

#[test]
fn master_url_brackets_ipv6_hosts() {
    assert_eq!(master_url("10.0.0.1", "443"), "k8s://https://10.0.0.1:443");
    assert_eq!(
        master_url("fd00::1", "6443"),
        "k8s://https://[fd00::1]:6443"
    );
    assert_eq!(
        master_url("[fd00::1]", "6443"),
        "k8s://https://[fd00::1]:6443"
    );
}

#[test]
fn request_carries_the_plan() {
    let plan = build_args(&app_with(json!({})), MASTER).unwrap();
    let request = plan.clone().into_request();
    assert_eq!(request.submission_id, plan.submission_id);
    assert_eq!(request.spark_submit_args, plan.args);
    assert_eq!(request.driver_pod_template, Some(plan.driver_pod_template));
}

#[test]
fn spark_version_of_the_spec_tells_the_submitter_which_spark_to_build_for() {
    let plan = build_args(&app_with(json!({"sparkVersion": "3.5.1"})), MASTER).unwrap();
    assert_eq!(conf(&confs(&plan), SPARK_VERSION_CONF), Some("3.5.1"));
    // The user's own conf wins over the spec, once.
    let plan = build_args(
        &app_with(json!({"sparkVersion": "3.5.1", "sparkConf": {SPARK_VERSION_CONF: "4.0"}})),
        MASTER,
    )
    .unwrap();
    let confs = confs(&plan);
    let versions: Vec<_> = confs
        .iter()
        .filter(|(k, _)| k == SPARK_VERSION_CONF)
        .collect();
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_eq!(versions[0].1, "4.0");
    // No version in the spec: the submitter reads the image tag.
    let plan = build_args(&app_with(json!({"sparkVersion": ""})), MASTER).unwrap();
    assert_eq!(conf(&self::confs(&plan), SPARK_VERSION_CONF), None);
}

mod confs;
mod templates;
