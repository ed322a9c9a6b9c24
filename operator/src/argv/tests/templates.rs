//! The inline pod templates: owner references, pod settings, the user's template as the base,
//! ConfigMaps mounted where kubeflow mounts them.

use super::*;

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
