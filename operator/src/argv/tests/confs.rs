//! The field → conf table of `buildSparkSubmitArgs`, labels, memory limits and quantities.

use super::*;

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
