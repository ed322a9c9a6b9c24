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
fn driver_pod_built_by_the_submitter_carries_annotations_labels_and_owner() {
    let (_, app) = accepted_apps().swap_remove(3);
    let plan = build_args(&app, MASTER).unwrap();
    let objects = submission::builder::build_from_argv(
        &plan.args,
        Some(&plan.driver_pod_template),
        Some(&plan.executor_pod_template),
        &plan.submission_id,
        1_750_000_000_000,
        "root",
    )
    .unwrap();
    let pod = objects.pod();
    assert_eq!(pod["metadata"]["name"], "pi-driver");
    assert_eq!(
        pod["metadata"]["annotations"]["example.com/owner"],
        "data-team"
    );
    assert_eq!(pod["metadata"]["labels"]["team"], "data");
    assert_eq!(
        pod["metadata"]["labels"][labels::SUBMISSION_ID],
        plan.submission_id
    );
    assert_eq!(pod["metadata"]["labels"][labels::APP_NAME], "pi");
    let owner = &pod["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "SparkApplication");
    assert_eq!(owner["uid"], UID);
    assert_eq!(owner["controller"], true);
    let containers = pod["spec"]["containers"].as_array().unwrap();
    assert!(
        containers.iter().any(|c| c["name"] == "logs"),
        "sidecar kept"
    );
    assert_eq!(pod["spec"]["initContainers"][0]["name"], "init");
    assert_eq!(pod["spec"]["tolerations"][0]["key"], "dedicated");
    assert_eq!(pod["spec"]["priorityClassName"], "high");
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

/// The field → conf table of `buildSparkSubmitArgs` and its option functions.
#[test]
fn spec_fields_map_to_the_confs_of_build_spark_submit_args() {
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({}), "spark.kubernetes.namespace", "spark"),
        (json!({}), "spark.kubernetes.container.image", "spark:4.0.0"),
        (json!({}), "spark.kubernetes.driver.pod.name", "pi-driver"),
        (
            json!({}),
            "spark.kubernetes.submission.waitAppCompletion",
            "false",
        ),
        (
            json!({}),
            "spark.kubernetes.driver.label.sparkoperator.k8s.io/app-name",
            "pi",
        ),
        (
            json!({}),
            "spark.kubernetes.executor.label.sparkoperator.k8s.io/launched-by-spark-operator",
            "true",
        ),
        (
            json!({}),
            "spark.kubernetes.driver.label.sparkoperator.k8s.io/submission-id",
            "6f1c2d9e-0000-4000-8000-000000000001-1",
        ),
        (
            json!({}),
            "spark.kubernetes.executor.label.sparkoperator.k8s.io/submission-id",
            "6f1c2d9e-0000-4000-8000-000000000001-1",
        ),
        (
            json!({}),
            "spark.kubernetes.driver.container.image",
            "spark:4.0.0",
        ),
        (
            json!({"executor": {"image": "exec:1"}}),
            "spark.kubernetes.executor.container.image",
            "exec:1",
        ),
        // The webhook's defaults.
        (json!({}), "spark.driver.cores", "1"),
        (json!({}), "spark.driver.memory", "1g"),
        (json!({}), "spark.executor.cores", "1"),
        (json!({}), "spark.executor.memory", "1g"),
        (json!({}), "spark.executor.instances", "1"),
        (
            json!({"imagePullPolicy": "Always"}),
            "spark.kubernetes.container.image.pullPolicy",
            "Always",
        ),
        (
            json!({"imagePullSecrets": ["a", "b"]}),
            "spark.kubernetes.container.image.pullSecrets",
            "a,b",
        ),
        (
            json!({"pythonVersion": "3"}),
            "spark.kubernetes.pyspark.pythonVersion",
            "3",
        ),
        (
            json!({"memoryOverheadFactor": "0.4"}),
            "spark.kubernetes.memoryOverheadFactor",
            "0.4",
        ),
        (
            json!({"sparkConf": {"spark.ui.port": "4045"}}),
            "spark.ui.port",
            "4045",
        ),
        (
            json!({"hadoopConf": {"fs.defaultFS": "hdfs://nn:8020"}}),
            "spark.hadoop.fs.defaultFS",
            "hdfs://nn:8020",
        ),
        (
            json!({"hadoopConfigMap": "hc"}),
            "spark.kubernetes.hadoop.configMapName",
            "hc",
        ),
        (
            json!({"nodeSelector": {"disk": "ssd"}}),
            "spark.kubernetes.node.selector.disk",
            "ssd",
        ),
        (json!({"driver": {"cores": 3}}), "spark.driver.cores", "3"),
        (
            json!({"driver": {"coreRequest": "500m"}}),
            "spark.kubernetes.driver.request.cores",
            "500m",
        ),
        (
            json!({"driver": {"coreLimit": "1200m"}}),
            "spark.kubernetes.driver.limit.cores",
            "1200m",
        ),
        (
            json!({"driver": {"memory": "3g"}}),
            "spark.driver.memory",
            "3g",
        ),
        (
            json!({"driver": {"memoryOverhead": "1g"}}),
            "spark.driver.memoryOverhead",
            "1g",
        ),
        (
            json!({"driver": {"serviceAccount": "sa"}}),
            "spark.kubernetes.authenticate.driver.serviceAccountName",
            "sa",
        ),
        (
            json!({"driver": {"javaOptions": "-Da=b"}}),
            "spark.driver.extraJavaOptions",
            "-Da=b",
        ),
        (
            json!({"driver": {"kubernetesMaster": "https://k"}}),
            "spark.kubernetes.driver.master",
            "https://k",
        ),
        (
            json!({"driver": {"labels": {"l": "v"}}}),
            "spark.kubernetes.driver.label.l",
            "v",
        ),
        (
            json!({"driver": {"annotations": {"a": "v"}}}),
            "spark.kubernetes.driver.annotation.a",
            "v",
        ),
        (
            json!({"driver": {"serviceLabels": {"l": "v"}}}),
            "spark.kubernetes.driver.service.label.l",
            "v",
        ),
        (
            json!({"driver": {"serviceAnnotations": {"a": "v"}}}),
            "spark.kubernetes.driver.service.annotation.a",
            "v",
        ),
        (
            json!({"driver": {"envSecretKeyRefs": {"P": {"name": "s", "key": "k"}}}}),
            "spark.kubernetes.driver.secretKeyRef.P",
            "s:k",
        ),
        (
            json!({"driver": {"envVars": {"E": "1"}}}),
            "spark.kubernetes.driverEnv.E",
            "1",
        ),
        (
            json!({"driver": {"secrets": [{"name": "s", "path": "/p", "secretType": "Generic"}]}}),
            "spark.kubernetes.driver.secrets.s",
            "/p",
        ),
        (
            json!({"driver": {"secrets": [{"name": "g", "path": "/g", "secretType": "GCPServiceAccount"}]}}),
            "spark.kubernetes.driverEnv.GOOGLE_APPLICATION_CREDENTIALS",
            "/g/key.json",
        ),
        (
            json!({"executor": {"secrets": [{"name": "h", "path": "/h", "secretType": "HadoopDelegationToken"}]}}),
            "spark.executorEnv.HADOOP_TOKEN_FILE_LOCATION",
            "/h/hadoop.token",
        ),
        (
            json!({"executor": {"instances": 5}}),
            "spark.executor.instances",
            "5",
        ),
        (
            json!({"executor": {"cores": 2}}),
            "spark.executor.cores",
            "2",
        ),
        (
            json!({"executor": {"coreRequest": "1"}}),
            "spark.kubernetes.executor.request.cores",
            "1",
        ),
        (
            json!({"executor": {"coreLimit": "2"}}),
            "spark.kubernetes.executor.limit.cores",
            "2",
        ),
        (
            json!({"executor": {"memory": "8g"}}),
            "spark.executor.memory",
            "8g",
        ),
        (
            json!({"executor": {"memoryOverhead": "2g"}}),
            "spark.executor.memoryOverhead",
            "2g",
        ),
        (
            json!({"executor": {"serviceAccount": "sa"}}),
            "spark.kubernetes.authenticate.executor.serviceAccountName",
            "sa",
        ),
        (
            json!({"executor": {"deleteOnTermination": false}}),
            "spark.kubernetes.executor.deleteOnTermination",
            "false",
        ),
        (
            json!({"executor": {"javaOptions": "-Dx"}}),
            "spark.executor.extraJavaOptions",
            "-Dx",
        ),
        (
            json!({"executor": {"labels": {"l": "v"}}}),
            "spark.kubernetes.executor.label.l",
            "v",
        ),
        (
            json!({"executor": {"annotations": {"a": "v"}}}),
            "spark.kubernetes.executor.annotation.a",
            "v",
        ),
        (
            json!({"executor": {"envVars": {"E": "1"}}}),
            "spark.executorEnv.E",
            "1",
        ),
        (
            json!({"executor": {"envSecretKeyRefs": {"P": {"name": "s", "key": "k"}}}}),
            "spark.kubernetes.executor.secretKeyRef.P",
            "s:k",
        ),
        (
            json!({"dynamicAllocation": {"enabled": true}}),
            "spark.dynamicAllocation.enabled",
            "true",
        ),
        (
            json!({"dynamicAllocation": {"enabled": true}}),
            "spark.dynamicAllocation.shuffleTracking.enabled",
            "true",
        ),
        (
            json!({"dynamicAllocation": {"enabled": true, "shuffleTrackingEnabled": false}}),
            "spark.dynamicAllocation.shuffleTracking.enabled",
            "false",
        ),
        (
            json!({"dynamicAllocation": {"enabled": true, "initialExecutors": 2}}),
            "spark.dynamicAllocation.initialExecutors",
            "2",
        ),
        (
            json!({"dynamicAllocation": {"enabled": true, "minExecutors": 1}}),
            "spark.dynamicAllocation.minExecutors",
            "1",
        ),
        (
            json!({"dynamicAllocation": {"enabled": true, "maxExecutors": 9}}),
            "spark.dynamicAllocation.maxExecutors",
            "9",
        ),
        (
            json!({"dynamicAllocation": {"enabled": true, "shuffleTrackingTimeout": 500}}),
            "spark.dynamicAllocation.shuffleTracking.timeout",
            "500",
        ),
        (
            json!({"driver": {"podName": "custom-driver"}}),
            "spark.kubernetes.driver.pod.name",
            "custom-driver",
        ),
        (
            json!({"sparkConf": {"spark.kubernetes.driver.pod.name": "from-conf"}}),
            "spark.kubernetes.driver.pod.name",
            "from-conf",
        ),
        (
            json!({
                "volumes": [{"name": "spark-local-dir-x", "hostPath": {"path": "/mnt/x", "type": "Directory"}}],
                "executor": {"volumeMounts": [{"name": "spark-local-dir-x", "mountPath": "/x", "subPath": "s"}]}
            }),
            "spark.kubernetes.executor.volumes.hostPath.spark-local-dir-x.options.path",
            "/mnt/x",
        ),
        (
            json!({
                "volumes": [{"name": "spark-local-dir-x", "hostPath": {"path": "/mnt/x", "type": "Directory"}}],
                "executor": {"volumeMounts": [{"name": "spark-local-dir-x", "mountPath": "/x", "subPath": "s"}]}
            }),
            "spark.kubernetes.executor.volumes.hostPath.spark-local-dir-x.mount.subPath",
            "s",
        ),
        (
            json!({
                "volumes": [{"name": "spark-local-dir-n", "nfs": {"server": "nfs.local", "path": "/exports", "readOnly": true}}],
                "driver": {"volumeMounts": [{"name": "spark-local-dir-n", "mountPath": "/n"}]}
            }),
            "spark.kubernetes.driver.volumes.nfs.spark-local-dir-n.options.server",
            "nfs.local",
        ),
        (
            json!({
                "volumes": [{"name": "spark-local-dir-p", "persistentVolumeClaim": {"claimName": "c"}}],
                "driver": {"volumeMounts": [{"name": "spark-local-dir-p", "mountPath": "/p"}]}
            }),
            "spark.kubernetes.driver.volumes.persistentVolumeClaim.spark-local-dir-p.options.claimName",
            "c",
        ),
        (
            json!({
                "volumes": [{"name": "spark-local-dir-e", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
                "driver": {"volumeMounts": [{"name": "spark-local-dir-e", "mountPath": "/e"}]}
            }),
            "spark.kubernetes.driver.volumes.emptyDir.spark-local-dir-e.options.medium",
            "Memory",
        ),
    ];
    for (extra, key, value) in cases {
        let plan = build_args(&app_with(extra.clone()), MASTER).unwrap();
        let confs = confs(&plan);
        assert_eq!(conf(&confs, key), Some(value), "{extra} → {key}");
    }
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
fn spark_application_labels_reach_pods_except_kueue_ones() {
    let mut app = app_with(json!({}));
    app.metadata.labels = Some(
        [
            ("team".to_owned(), "data".to_owned()),
            ("kueue.x-k8s.io/queue-name".to_owned(), "q".to_owned()),
        ]
        .into(),
    );
    let confs = confs(&build_args(&app, MASTER).unwrap());
    assert_eq!(
        conf(&confs, "spark.kubernetes.driver.label.team"),
        Some("data")
    );
    assert_eq!(
        conf(&confs, "spark.kubernetes.executor.label.team"),
        Some("data")
    );
    assert!(!confs.iter().any(|(k, _)| k.contains("kueue")), "{confs:?}");
}

#[test]
fn no_pod_template_file_and_no_mutated_by_label_are_sent() {
    let plan = build_args(&app_with(json!({})), MASTER).unwrap();
    assert!(!plan.args.iter().any(|a| a.contains("podTemplateFile")));
    assert!(
        !plan
            .args
            .iter()
            .any(|a| a.contains("mutated-by-spark-operator"))
    );
    assert!(!plan.args.iter().any(|a| a == "--load-spark-defaults"));
}

#[test]
fn same_app_gives_the_same_argv() {
    let extra = json!({"sparkConf": {"b": "2", "a": "1", "c": "3"}, "driver": {"labels": {"z": "1", "y": "2"}}});
    let first = build_args(&app_with(extra.clone()), MASTER).unwrap();
    let second = build_args(&app_with(extra), MASTER).unwrap();
    assert_eq!(first, second);
}

#[test]
fn templates_carry_owner_references_and_pod_settings() {
    let (_, app) = accepted_apps().swap_remove(3);
    let plan = build_args(&app, MASTER).unwrap();
    let driver = &plan.driver_pod_template;
    assert_eq!(
        driver["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "name": "pi", "uid": UID, "controller": true, "blockOwnerDeletion": true
        }])
    );
    assert_eq!(
        driver["metadata"]["annotations"]["example.com/owner"],
        "data-team"
    );
    assert_eq!(driver["metadata"]["labels"]["team"], "data");
    let container = &driver["spec"]["containers"][0];
    assert_eq!(container["name"], labels::DRIVER_CONTAINER);
    assert_eq!(
        container["env"],
        json!([{"name": "MODE", "value": "batch"}])
    );
    assert_eq!(container["envFrom"][0]["configMapRef"]["name"], "env-cm");
    assert_eq!(container["securityContext"], json!({"runAsNonRoot": true}));
    assert_eq!(container["ports"][0]["containerPort"], 9999);
    let mounts = container["volumeMounts"].as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m["name"] == "extra-vol" && m["mountPath"] == "/etc/extra")
    );
    assert!(
        mounts
            .iter()
            .any(|m| m["name"] == "data" && m["mountPath"] == "/data")
    );
    assert!(
        !mounts.iter().any(|m| m["name"] == "spark-local-dir-1"),
        "local dirs go through confs"
    );
    let volumes = driver["spec"]["volumes"].as_array().unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["persistentVolumeClaim"]["claimName"] == "data-pvc")
    );
    assert!(volumes.iter().any(|v| v["configMap"]["name"] == "extra"));
    assert_eq!(driver["spec"]["containers"][1]["name"], "logs");
    assert_eq!(driver["spec"]["securityContext"], json!({"fsGroup": 185}));
    assert_eq!(driver["spec"]["nodeSelector"], json!({"pool": "drivers"}));
    assert_eq!(driver["spec"]["terminationGracePeriodSeconds"], 30);
    assert!(driver["spec"]["affinity"]["nodeAffinity"].is_object());

    let executor = &plan.executor_pod_template;
    let owner = &executor["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], UID);
    assert!(
        owner.get("controller").is_none(),
        "executors are the driver's to control"
    );
    let container = &executor["spec"]["containers"][0];
    assert_eq!(container["name"], labels::EXECUTOR_CONTAINER);
    assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], "1");
    assert_eq!(container["volumeMounts"][0]["readOnly"], true);
}

#[test]
fn user_template_is_the_base_and_its_spark_container_is_used() {
    let app = app_with(json!({
        "driver": {
            "env": [{"name": "A", "value": "1"}],
            "template": {"spec": {
                "containers": [
                    {"name": "proxy", "image": "envoy"},
                    {"name": "spark-kubernetes-driver", "env": [{"name": "T", "value": "t"}]}
                ],
                "volumes": [{"name": "from-template", "emptyDir": {}}]
            }},
            "volumeMounts": [{"name": "from-template", "mountPath": "/t"}]
        }
    }));
    let plan = build_args(&app, MASTER).unwrap();
    let containers = plan.driver_pod_template["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers[0], json!({"name": "proxy", "image": "envoy"}));
    assert_eq!(
        containers[1]["env"],
        json!([{"name": "T", "value": "t"}, {"name": "A", "value": "1"}])
    );
    assert_eq!(containers[1]["volumeMounts"][0]["name"], "from-template");
    assert_eq!(
        plan.driver_pod_template["spec"]["volumes"],
        json!([{"name": "from-template", "emptyDir": {}}])
    );
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
fn config_map_volume_names_fit_and_stay_unique() {
    assert_eq!(template::config_map_volume_name("extra"), "extra-vol");
    let dotted = template::config_map_volume_name("my.conf");
    assert!(
        dotted.starts_with("my-conf-") && dotted.ends_with("-vol"),
        "{dotted}"
    );
    let long = "a".repeat(80);
    let name = template::config_map_volume_name(&long);
    assert!(name.len() <= 63, "{name}");
    assert_ne!(name, template::config_map_volume_name(&"a".repeat(81)));
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

fn env_values(container: &Value, name: &str) -> Vec<String> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == name)
        .map(|e| e["value"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn mount_of<'a>(container: &'a Value, path: &str) -> Option<&'a Value> {
    container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["mountPath"] == path)
}

fn volume_config_map<'a>(pod: &'a Value, volume: &str) -> Option<&'a str> {
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == volume)
        .and_then(|v| v["configMap"]["name"].as_str())
}

#[test]
fn spark_config_map_is_mounted_at_etc_spark_conf_with_spark_conf_dir_on_driver_and_executors() {
    let plan = build_args(&app_with(json!({"sparkConfigMap": "spark-conf"})), MASTER).unwrap();
    let driver = submitted_driver(&plan);
    let container = spark_container(&driver, labels::DRIVER_CONTAINER);
    // One SPARK_CONF_DIR, the webhook's: nothing depends on which duplicate a kubelet keeps.
    assert_eq!(env_values(container, "SPARK_CONF_DIR"), ["/etc/spark/conf"]);
    let mount = mount_of(container, "/etc/spark/conf").expect("the ConfigMap is mounted");
    assert_eq!(mount["readOnly"], true);
    let volume = mount["name"].as_str().unwrap();
    assert_eq!(volume_config_map(&driver, volume), Some("spark-conf"));
    // Spark's own properties stay where the driver's --properties-file reads them.
    assert!(mount_of(container, "/opt/spark/conf").is_some());

    let executor = &plan.executor_pod_template;
    let container = &executor["spec"]["containers"][0];
    assert_eq!(env_values(container, "SPARK_CONF_DIR"), ["/etc/spark/conf"]);
    let mount = mount_of(container, "/etc/spark/conf").expect("mounted on executors");
    let volume = mount["name"].as_str().unwrap();
    assert_eq!(volume_config_map(executor, volume), Some("spark-conf"));

    // Without it, nothing moves.
    let plain = build_args(&app_with(json!({})), MASTER).unwrap();
    let driver = submitted_driver(&plain);
    let container = spark_container(&driver, labels::DRIVER_CONTAINER);
    assert_eq!(env_values(container, "SPARK_CONF_DIR"), ["/opt/spark/conf"]);
    assert!(mount_of(container, "/etc/spark/conf").is_none());
    assert!(
        env_values(
            &plain.executor_pod_template["spec"]["containers"][0],
            "SPARK_CONF_DIR"
        )
        .is_empty()
    );
}

#[test]
fn hadoop_config_map_is_spark_s_own_and_also_mounted_at_etc_hadoop_conf() {
    let plan = build_args(&app_with(json!({"hadoopConfigMap": "hadoop-conf"})), MASTER).unwrap();
    assert_eq!(
        conf(&confs(&plan), "spark.kubernetes.hadoop.configMapName"),
        Some("hadoop-conf")
    );
    let driver = submitted_driver(&plan);
    let container = spark_container(&driver, labels::DRIVER_CONTAINER);
    // Spark's HadoopConfDriverFeatureStep: /opt/hadoop/conf and HADOOP_CONF_DIR there.
    assert_eq!(
        env_values(container, "HADOOP_CONF_DIR"),
        ["/opt/hadoop/conf"]
    );
    for path in ["/opt/hadoop/conf", "/etc/hadoop/conf"] {
        let mount = mount_of(container, path).unwrap_or_else(|| panic!("{path} mounted"));
        let volume = mount["name"].as_str().unwrap();
        assert_eq!(
            volume_config_map(&driver, volume),
            Some("hadoop-conf"),
            "{path}"
        );
    }
    let executor = &plan.executor_pod_template;
    let mount = mount_of(&executor["spec"]["containers"][0], "/etc/hadoop/conf").unwrap();
    let volume = mount["name"].as_str().unwrap();
    assert_eq!(volume_config_map(executor, volume), Some("hadoop-conf"));
}

#[test]
fn driver_memory_limit_replaces_the_limit_spark_sets() {
    let limit_of = |extra: Value| {
        let plan = build_args(&app_with(extra), MASTER).unwrap();
        let driver = submitted_driver(&plan);
        let resources = &spark_container(&driver, labels::DRIVER_CONTAINER)["resources"];
        (
            resources["requests"]["memory"].as_str().unwrap().to_owned(),
            resources["limits"]["memory"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(
        limit_of(json!({"driver": {"memory": "512m"}})),
        ("896Mi".into(), "896Mi".into())
    );
    assert_eq!(
        limit_of(json!({"driver": {"memory": "512m", "memoryLimit": "2g"}})),
        ("896Mi".into(), "2Gi".into())
    );
    assert_eq!(
        limit_of(json!({"driver": {"memory": "512m", "memoryLimit": "1536Mi"}})),
        ("896Mi".into(), "1536Mi".into())
    );
    // The executors' limit is the driver's Spark's to set: reported, never sent.
    let plan = build_args(
        &app_with(json!({"executor": {"memoryLimit": "3g"}})),
        MASTER,
    )
    .unwrap();
    assert!(
        !plan.args.iter().any(|a| a.contains("limit.memory")),
        "{:?}",
        plan.args
    );
}

#[test]
fn java_memory_strings_become_kubernetes_quantities_as_kubeflow_converts_them() {
    for (java, quantity) in [
        ("2g", "2Gi"),
        ("2G", "2Gi"),
        ("2gb", "2Gi"),
        ("512m", "512Mi"),
        ("512MB", "512Mi"),
        ("100k", "100Ki"),
        ("1kb", "1Ki"),
        ("1t", "1Ti"),
        ("1p", "1Pi"),
        (" 3g ", "3Gi"),
        ("2Gi", "2Gi"),
        ("1500M", "1500Mi"),
        ("1048576", "1048576"),
    ] {
        assert_eq!(kubernetes_memory(java), quantity, "{java}");
    }
}
