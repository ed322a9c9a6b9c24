use serde_json::{Value, json};

use super::*;

pub(crate) fn args(extra: &[&str], primary: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "--master",
        "k8s://http://127.0.0.1:6443",
        "--deploy-mode",
        "cluster",
        "--conf",
        "spark.kubernetes.container.image=apache/spark:4.3.0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v.extend(primary.iter().map(|s| s.to_string()));
    v
}

fn java_app(extra: &[&str]) -> Vec<String> {
    let mut e = vec!["--class", "org.apache.spark.examples.SparkPi"];
    e.extend(extra);
    args(
        &e,
        &["local:///opt/spark/examples/jars/spark-examples.jar", "10"],
    )
}

fn build_ok(argv: &[String]) -> DriverObjects {
    match build_from_argv(argv, None, None, "sub-1", 1_764_423_780_000, "root") {
        Ok(o) => o,
        Err(e) => panic!("{argv:?}: {} ({})", e.message(), e.kind()),
    }
}

fn build_err(argv: &[String]) -> BuildError {
    build_from_argv(argv, None, None, "sub-1", 0, "root").unwrap_err()
}

fn container(objects: &DriverObjects) -> &Value {
    let containers = objects.pod()["spec"]["containers"].as_array().unwrap();
    containers.last().unwrap()
}

fn env_value<'a>(objects: &'a DriverObjects, name: &str) -> Option<&'a Value> {
    container(objects)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
}

fn property(objects: &DriverObjects, key: &str) -> Option<String> {
    let cm = objects.objects.last().unwrap();
    let text = cm["data"]["spark.properties"].as_str().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
}

#[test]
fn minimal_java_app_builds_sparks_objects_in_order() {
    let o = build_ok(&java_app(&["--name", "spark-pi"]));
    let kinds: Vec<&str> = o
        .objects
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Pod", "Service", "NetworkPolicy", "ConfigMap"]);
    assert!(o.identity.driver_pod_name.starts_with("spark-pi-"));
    assert!(o.identity.driver_pod_name.ends_with("-driver"));
    assert_eq!(
        o.identity.driver_pod_name.len(),
        "spark-pi--driver".len() + 16
    );
    assert_eq!(o.identity.namespace, "default");
    let c = container(&o);
    assert_eq!(c["name"], "spark-kubernetes-driver");
    assert_eq!(
        c["resources"]["requests"],
        json!({"cpu": "1", "memory": "1408Mi"})
    );
    assert_eq!(
        c["args"],
        json!([
            "driver",
            "--properties-file",
            "/opt/spark/conf/spark.properties",
            "--class",
            "org.apache.spark.examples.SparkPi",
            "local:///opt/spark/examples/jars/spark-examples.jar",
            "10"
        ])
    );
    assert_eq!(o.pod()["spec"]["restartPolicy"], "Never");
    assert_eq!(property(&o, "spark.app.id").unwrap(), o.identity.app_id);
    assert_eq!(
        property(&o, "spark.kubernetes.resource.type").unwrap(),
        "java"
    );
    assert_eq!(
        property(&o, "spark.kubernetes.memoryOverheadFactor").unwrap(),
        "0.1"
    );
    assert!(
        o.objects
            .iter()
            .all(|x| x["metadata"]["annotations"]["spark-submitter.io/submission-id"] == "sub-1")
    );
}

#[test]
fn repeated_builds_are_identical_and_ids_differ() {
    let a = build_ok(&java_app(&[]));
    let b = build_ok(&java_app(&[]));
    assert_eq!(a, b);
    let c = build_from_argv(
        &java_app(&[]),
        None,
        None,
        "sub-2",
        1_764_423_780_000,
        "root",
    )
    .unwrap();
    assert_ne!(a.identity.driver_pod_name, c.identity.driver_pod_name);
    assert_ne!(a.identity.app_id, c.identity.app_id);
}

#[test]
fn memory_overhead_rules_follow_spark() {
    let mem = |extra: &[&str]| {
        container(&build_ok(&java_app(extra)))["resources"]["limits"]["memory"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(mem(&["--driver-memory", "2g"]), "2432Mi");
    assert_eq!(
        mem(&[
            "--driver-memory",
            "1500m",
            "--conf",
            "spark.driver.memoryOverhead=512m"
        ]),
        "2012Mi"
    );
    assert_eq!(
        mem(&[
            "--driver-memory",
            "4g",
            "--conf",
            "spark.driver.memoryOverheadFactor=0.25"
        ]),
        "5120Mi"
    );
    assert_eq!(
        mem(&["--conf", "spark.driver.minMemoryOverhead=1g"]),
        "2048Mi"
    );
    let py = build_ok(&args(
        &["--driver-memory", "2g"],
        &["local:///opt/app/pi.py"],
    ));
    assert_eq!(container(&py)["resources"]["limits"]["memory"], "2867Mi");
    assert_eq!(
        property(&py, "spark.kubernetes.memoryOverheadFactor").unwrap(),
        "0.4"
    );
}

#[test]
fn driver_env_secrets_and_proxy_user_reach_the_container() {
    let o = build_ok(&java_app(&[
        "--proxy-user",
        "alice",
        "--conf",
        "spark.kubernetes.driverEnv.FOO=bar",
        "--conf",
        "spark.kubernetes.driver.secretKeyRef.PASS=db:password",
        "--conf",
        "spark.kubernetes.driver.secrets.tls=/etc/tls",
    ]));
    assert_eq!(env_value(&o, "SPARK_USER").unwrap()["value"], "alice");
    assert_eq!(env_value(&o, "FOO").unwrap()["value"], "bar");
    assert_eq!(
        env_value(&o, "PASS").unwrap()["valueFrom"]["secretKeyRef"],
        json!({"key": "password", "name": "db"})
    );
    assert_eq!(container(&o)["args"][1], "--proxy-user");
    let volumes = o.pod()["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().any(|v| v["name"] == "tls-volume"));
}

#[test]
fn bad_confs_are_invalid_args() {
    for extra in [
        &["--conf", "spark.kubernetes.driver.label.spark-role=x"][..],
        &["--conf", "spark.kubernetes.driver.secretKeyRef.PASS=nokey"],
        &["--conf", "spark.driver.port=abc"],
        &[
            "--conf",
            "spark.kubernetes.driver.volumes.hostPath.d.options.path=/x",
        ],
        &[
            "--conf",
            "spark.kubernetes.executor.volumes.hostPath.d.mount.path=/x",
        ],
        &["--conf", "spark.driver.memoryOverheadFactor=0"],
        &[
            "--conf",
            "spark.kubernetes.driver.podTemplateFile=/tmp/t.yaml",
        ],
    ] {
        let e = build_err(&java_app(extra));
        assert_eq!(
            e.error_code(),
            ErrorCode::InvalidSparkSubmitArgs,
            "{extra:?}: {e}"
        );
    }
    let no_image: Vec<String> = java_app(&[])
        .into_iter()
        .filter(|a| !a.contains("container.image"))
        .collect();
    let no_image: Vec<String> = no_image.into_iter().filter(|a| a != "--conf").collect();
    assert_eq!(build_err(&no_image).kind(), "missing_image");
}

#[test]
fn bad_ids_and_templates_have_their_codes() {
    let e = build_from_argv(&java_app(&[]), None, None, "", 0, "root").unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::BadRequest);
    let t = json!({"spec": {"containers": [{"name": "a"}]}});
    let argv = java_app(&[
        "--conf",
        "spark.kubernetes.driver.podTemplateContainerName=b",
    ]);
    let e = build_from_argv(&argv, Some(&t), None, "x", 0, "root").unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::InvalidPodTemplate);
    let e = build_from_argv(&java_app(&[]), None, Some(&json!("x")), "x", 0, "root").unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::InvalidPodTemplate);
}

#[test]
fn template_is_the_base_and_the_spark_container_goes_last() {
    let t = json!({"metadata": {"labels": {"team": "a"}}, "spec": {
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "containers": [{"name": "side", "image": "busybox"}, {"name": "main", "env": [{"name": "T", "value": "1"}]}]}});
    let argv = java_app(&[
        "--conf",
        "spark.kubernetes.driver.podTemplateContainerName=main",
    ]);
    let o = build_from_argv(&argv, Some(&t), None, "x", 0, "root").unwrap();
    let containers = o.pod()["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers[0]["name"], "side");
    assert_eq!(containers[1]["name"], "main");
    assert_eq!(containers[1]["env"][0]["name"], "T");
    assert_eq!(o.pod()["metadata"]["labels"]["team"], "a");
    assert_eq!(o.pod()["spec"]["tolerations"][0]["key"], "k");
}

#[test]
fn executor_template_gets_a_config_map_and_a_mount() {
    let t = json!({"spec": {"containers": [{"name": "exec"}]}});
    let o = build_from_argv(&java_app(&[]), None, Some(&t), "x", 0, "root").unwrap();
    let kinds: Vec<&str> = o
        .objects
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["Pod", "Service", "NetworkPolicy", "ConfigMap", "ConfigMap"]
    );
    assert!(
        o.objects[3]["metadata"]["name"]
            .as_str()
            .unwrap()
            .ends_with("-driver-podspec-conf-map")
    );
    assert_eq!(
        property(&o, "spark.kubernetes.executor.podTemplateFile").unwrap(),
        "/opt/spark/pod-template/pod-spec-template.yml"
    );
}

mod properties {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::super::*;

    /// Words an argv is made of: real options, real conf keys, and junk.
    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("--conf".to_owned()),
            Just("--name".to_owned()),
            Just("--class".to_owned()),
            Just("--driver-memory".to_owned()),
            Just("--proxy-user".to_owned()),
            Just("--py-files".to_owned()),
            Just("local:///opt/app.jar".to_owned()),
            Just("local:///opt/app.py".to_owned()),
            "(spark\\.kubernetes\\.(driver\\.(label|annotation|secrets|secretKeyRef|volumes\\.(hostPath|emptyDir|nfs|persistentVolumeClaim)\\.[a-z]{1,3}\\.(mount\\.path|options\\.[a-zA-Z]{1,9}|mount\\.readOnly))|driverEnv|node\\.selector)\\.?[a-zA-Z{}_]{0,6}|spark\\.driver\\.(memory|port|cores|memoryOverhead(Factor)?|resource\\.gpu\\.(amount|vendor))|spark\\.kubernetes\\.(memoryOverheadFactor|local\\.dirs\\.tmpfs|driver\\.pod\\.name))=[ -~]{0,8}",
            ".{0,12}",
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("metadata".to_owned()),
                        Just("spec".to_owned()),
                        Just("containers".to_owned()),
                        Just("name".to_owned()),
                        Just("env".to_owned()),
                        Just("volumeMounts".to_owned()),
                        Just("resources".to_owned()),
                        Just("labels".to_owned()),
                        "[a-z]{1,5}",
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn head() -> Vec<String> {
        super::args(&[], &[])
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_argv_builds_a_pod_or_fails_cleanly(words in prop::collection::vec(word(), 0..12)) {
            let mut argv = head();
            argv.extend(words);
            match build_from_argv(&argv, None, None, "prop", 0, "root") {
                Ok(built) => {
                    prop_assert_eq!(&built.objects[0]["kind"], "Pod");
                    prop_assert!(built.objects[0]["spec"]["containers"].as_array().is_some_and(|c| !c.is_empty()));
                    prop_assert_eq!(&built.objects.last().unwrap()["kind"], "ConfigMap");
                }
                Err(e) => {
                    prop_assert!(!e.kind().is_empty());
                    prop_assert!(!e.message().is_empty());
                }
            }
        }

        #[test]
        fn arbitrary_templates_build_a_pod_or_are_invalid_templates(
            driver in json_value(),
            spec in json_value(),
            executor in json_value(),
        ) {
            let argv = super::args(&["--class", "Main"], &["local:///opt/app.jar"]);
            let shaped = json!({"metadata": {}, "spec": spec});
            for template in [&driver, &shaped] {
                match build_from_argv(&argv, Some(template), Some(&executor), "prop", 0, "root") {
                    Ok(built) => {
                        let containers = built.objects[0]["spec"]["containers"].as_array().unwrap();
                        let spark = containers.last().unwrap();
                        prop_assert!(spark["name"].is_string());
                        prop_assert_eq!(&spark["image"], "apache/spark:4.3.0");
                    }
                    Err(e) => prop_assert_eq!(e.error_code(), ErrorCode::InvalidPodTemplate, "{}", e.message()),
                }
            }
        }
    }
}

fn with_image(image: &str, extra: &[&str]) -> Vec<String> {
    java_app(extra)
        .into_iter()
        .map(|a| {
            if a.starts_with("spark.kubernetes.container.image=") {
                format!("spark.kubernetes.container.image={image}")
            } else {
                a
            }
        })
        .collect()
}

/// What each release's spark-submit builds differently, as the corpus goldens of each showed.
#[test]
fn each_spark_line_builds_what_its_spark_submit_builds() {
    // (image, label, NetworkPolicy, Connect port, its appProtocol, allowPrivilegeEscalation,
    //  publishNotReadyAddresses)
    let table = [
        (
            "apache/spark:3.5.1",
            "3.5.1",
            false,
            false,
            false,
            false,
            false,
        ),
        (
            "apache/spark:4.0.0",
            "4.0.0",
            false,
            false,
            false,
            false,
            false,
        ),
        (
            "apache/spark:4.1.0",
            "4.1.0",
            false,
            true,
            false,
            false,
            false,
        ),
        (
            "apache/spark:4.2.0",
            "4.2.0",
            true,
            true,
            true,
            false,
            false,
        ),
        ("apache/spark:4.3.0", "4.3.0", true, true, true, true, true),
    ];
    for (image, label, policy, connect, grpc, privilege, publish) in table {
        let o = build_ok(&with_image(image, &["--name", "v"]));
        assert_eq!(o.identity.spark_version.release(), label, "{image}");
        assert_eq!(o.pod()["metadata"]["labels"]["spark-version"], label);
        let kinds: Vec<&str> = o
            .objects
            .iter()
            .map(|x| x["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds.contains(&"NetworkPolicy"),
            policy,
            "{image}: {kinds:?}"
        );
        let port_names: Vec<&str> = container(&o)["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(port_names.contains(&"spark-connect"), connect, "{image}");
        let service = &o.objects[1];
        let service_connect = service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "spark-connect");
        assert_eq!(service_connect.is_some(), connect, "{image}");
        assert_eq!(
            service_connect.is_some_and(|p| p["appProtocol"] == "grpc"),
            grpc,
            "{image}"
        );
        assert_eq!(
            container(&o).get("securityContext").is_some(),
            privilege,
            "{image}"
        );
        assert_eq!(
            service["spec"].get("publishNotReadyAddresses").is_some(),
            publish,
            "{image}"
        );
    }
}

#[test]
fn spark_3_5_ignores_what_4_0_added() {
    let extra = [
        "--conf",
        "spark.kubernetes.driver.label.ref={{APP_ID}}",
        "--conf",
        "spark.driver.minMemoryOverhead=1g",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.mount.path=/d",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.mount.subPathExpr=$(POD)",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.options.claimName=OnDemand",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.options.storageClass=std",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.options.sizeLimit=1Gi",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.label.tier=hot",
    ];
    let old = build_ok(&with_image("apache/spark:3.5.3", &extra));
    let new = build_ok(&with_image("apache/spark:4.0.1", &extra));
    let label = |o: &DriverObjects| o.pod()["metadata"]["labels"]["ref"].clone();
    assert_eq!(label(&old), "{{APP_ID}}");
    assert_eq!(label(&new), json!(new.identity.app_id));
    let memory = |o: &DriverObjects| container(o)["resources"]["limits"]["memory"].clone();
    assert_eq!(memory(&old), "1408Mi");
    assert_eq!(memory(&new), "2048Mi");
    let mount = |o: &DriverObjects| container(o)["volumeMounts"][0].clone();
    assert!(mount(&old).get("subPathExpr").is_none());
    assert_eq!(mount(&new)["subPathExpr"], "$(POD)");
    let claim = |o: &DriverObjects| {
        o.objects
            .iter()
            .find(|x| x["kind"] == "PersistentVolumeClaim")
            .unwrap()
            .clone()
    };
    assert_eq!(claim(&old)["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert!(claim(&old)["metadata"]["labels"].get("tier").is_none());
    assert_eq!(
        claim(&new)["spec"]["accessModes"],
        json!(["ReadWriteOncePod"])
    );
    assert_eq!(claim(&new)["metadata"]["labels"]["tier"], "hot");
}

#[test]
fn the_version_conf_overrides_the_image_and_bad_versions_are_refused() {
    let o = build_ok(&with_image(
        "apache/spark:4.3.0",
        &["--conf", "spark.kubernetes.submitter.sparkVersion=3.5"],
    ));
    assert_eq!(o.identity.spark_version.release(), "3.5.9");
    assert_eq!(o.identity.spark_version.source(), VersionSource::Conf);
    for (image, extra, kind) in [
        (
            "apache/spark:4.3.0",
            ["--conf", "spark.kubernetes.submitter.sparkVersion=3.4.1"],
            "unsupported_spark_version",
        ),
        (
            "apache/spark:4.3.0",
            ["--conf", "spark.kubernetes.submitter.sparkVersion=latest"],
            "invalid_spark_version",
        ),
        (
            "gcr.io/spark-operator/spark:v3.1.1",
            ["--name", "old"],
            "unsupported_spark_version",
        ),
    ] {
        let e = build_err(&with_image(image, &extra));
        assert_eq!(e.kind(), kind, "{image} {extra:?}");
        assert_eq!(e.error_code(), ErrorCode::InvalidSparkSubmitArgs);
    }
}

/// The one difference inside a line: spark.kubernetes.legacy.useReadWriteOnceAccessMode came with
/// Spark 3.5.1, so 3.5.0 asks ReadWriteOnce even when told not to.
#[test]
fn spark_3_5_0_has_no_switch_for_the_claim_access_mode() {
    let extra = [
        "--conf",
        "spark.kubernetes.legacy.useReadWriteOnceAccessMode=false",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.mount.path=/d",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.options.claimName=OnDemand",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.options.storageClass=std",
        "--conf",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.d.options.sizeLimit=1Gi",
    ];
    let mode = |image: &str| {
        build_ok(&with_image(image, &extra))
            .objects
            .iter()
            .find(|x| x["kind"] == "PersistentVolumeClaim")
            .unwrap()["spec"]["accessModes"][0]
            .clone()
    };
    assert_eq!(mode("apache/spark:3.5.0"), "ReadWriteOnce");
    assert_eq!(mode("apache/spark:3.5.1"), "ReadWriteOncePod");
    assert_eq!(mode("apache/spark:3.5"), "ReadWriteOncePod");
}

/// Spark 3.5.0 alone kept --total-executor-cores as spark.cores.max on Kubernetes.
#[test]
fn only_spark_3_5_0_writes_total_executor_cores() {
    for (image, expected) in [
        ("apache/spark:3.5.0", Some("6".to_owned())),
        ("apache/spark:3.5.1", None),
        ("apache/spark:4.3.0", None),
    ] {
        let o = build_ok(&with_image(image, &["--total-executor-cores", "6"]));
        assert_eq!(property(&o, "spark.cores.max"), expected, "{image}");
    }
}

#[test]
fn driver_memory_limit_conf_replaces_the_limit_spark_sets() {
    let limit = |extra: &[&str]| {
        let objects = build_ok(&java_app(extra));
        let resources = container(&objects)["resources"].clone();
        (
            resources["requests"]["memory"].as_str().unwrap().to_owned(),
            resources["limits"]["memory"].as_str().unwrap().to_owned(),
        )
    };
    // 1g + 384Mi overhead = 1408Mi requested; Spark's limit equals it.
    assert_eq!(limit(&[]), ("1408Mi".into(), "1408Mi".into()));
    let cases = [
        ("2Gi", "2Gi"),
        ("1408Mi", "1408Mi"),
        ("1500M", "1500M"),
        ("3e9", "3e9"),
        ("1.5Gi", "1.5Gi"),
    ];
    for (asked, limit_set) in cases {
        let conf = format!("{DRIVER_MEMORY_LIMIT_CONF}={asked}");
        assert_eq!(
            limit(&["--conf", &conf]),
            ("1408Mi".into(), limit_set.into()),
            "{asked}"
        );
    }
}

#[test]
fn driver_memory_limit_conf_is_refused_when_not_a_quantity_or_below_the_request() {
    for bad in [
        "", "2g", "lots", "1.2.3Gi", "-2Gi", "1Gi", "1407Mi", "1e", ".", "2 Gi",
    ] {
        let conf = format!("{DRIVER_MEMORY_LIMIT_CONF}={bad}");
        let err = build_err(&java_app(&["--conf", &conf]));
        assert_eq!(err.kind(), "invalid_conf", "{bad:?}");
        assert!(err.message().contains(DRIVER_MEMORY_LIMIT_CONF), "{bad:?}");
    }
}

#[test]
fn driver_spark_conf_dir_conf_replaces_spark_conf_dir_and_keeps_the_properties_mount() {
    let plain = build_ok(&java_app(&[]));
    assert_eq!(
        env_value(&plain, "SPARK_CONF_DIR").unwrap()["value"],
        "/opt/spark/conf"
    );
    let conf = format!("{DRIVER_SPARK_CONF_DIR_CONF}=/etc/spark/conf");
    let moved = build_ok(&java_app(&["--conf", &conf]));
    let vars: Vec<&Value> = container(&moved)["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "SPARK_CONF_DIR")
        .collect();
    assert_eq!(
        vars,
        [&json!({"name": "SPARK_CONF_DIR", "value": "/etc/spark/conf"})]
    );
    // spark.properties is still mounted where the driver's --properties-file names it.
    assert_eq!(
        container(&moved)["volumeMounts"],
        container(&plain)["volumeMounts"]
    );
    assert_eq!(container(&moved)["args"], container(&plain)["args"]);

    let relative = format!("{DRIVER_SPARK_CONF_DIR_CONF}=etc/spark/conf");
    assert_eq!(
        build_err(&java_app(&["--conf", &relative])).kind(),
        "invalid_conf"
    );
}

#[test]
fn maven_packages_reach_spark_properties_for_the_driver_to_resolve() {
    let objects = build_ok(&java_app(&[
        "--packages",
        "org.example:greeting:1.0.0",
        "--repositories",
        "file:///opt/repo",
        "--exclude-packages",
        "org.example:unused",
        "--conf",
        "spark.jars.ivy=/tmp/ivy",
    ]));
    for (key, value) in [
        ("spark.jars.packages", "org.example:greeting:1.0.0"),
        ("spark.jars.repositories", "file:///opt/repo"),
        ("spark.jars.excludes", "org.example:unused"),
        ("spark.jars.ivy", "/tmp/ivy"),
    ] {
        // (Java properties escape `:`.)
        let found = property(&objects, key).map(|v| v.replace('\\', ""));
        assert_eq!(found.as_deref(), Some(value), "{key}");
    }
    // The client's resolution only feeds the client's class path: spark.jars is untouched.
    assert_eq!(
        property(&objects, "spark.jars")
            .map(|v| v.replace('\\', ""))
            .as_deref(),
        Some("local:///opt/spark/examples/jars/spark-examples.jar")
    );
}
