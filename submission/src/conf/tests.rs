use proptest::prelude::*;

use super::*;
use crate::argv::{self, SubmitArgs};
use crate::keys;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn submission(args: &[&str]) -> Submission {
    match argv::parse(&strings(args)) {
        Ok(parsed) => Submission::from_args(&parsed),
        Err(e) => panic!("{args:?} was rejected: {e} ({})", e.kind()),
    }
}

fn conf_of(args: &[&str]) -> SparkConf {
    submission(args).conf
}

const HEAD: &[&str] = &[
    "--master",
    "k8s://http://127.0.0.1:1",
    "--deploy-mode",
    "cluster",
];

fn java(extra: &[&str]) -> SparkConf {
    let mut args = HEAD.to_vec();
    args.extend(["--class", "Foo"]);
    args.extend(extra);
    args.push("local:///opt/app.jar");
    conf_of(&args)
}

fn pairs(conf: &SparkConf) -> Vec<(&str, &str)> {
    let mut pairs: Vec<_> = conf.iter().collect();
    pairs.sort();
    pairs
}

/// `spark-submit --verbose` of Spark 4.3.0 printed this "Spark config" for the same argv
/// (spark.app.submitTime aside, which needs a clock).
#[test]
fn conf_matches_spark_4_3_for_a_full_java_submission() {
    let conf = java(&[
        "--name",
        "n1",
        "--driver-memory",
        "2g",
        "--conf",
        "spark.driver.memory=3g",
        "--conf",
        "spark.executor.instances=7",
        "--num-executors",
        "3",
        "--jars",
        "https://x/a.jar,https://x/b.jar",
        "--conf",
        "spark.jars=https://x/c.jar",
        "--driver-java-options",
        "-Dx=y",
        "--conf",
        "spark.driver.extraJavaOptions=-Dz=1",
        "--conf",
        "spark.kubernetes.container.image=img",
        "--files",
        "https://x/f.txt",
        "--archives",
        "https://x/e.tar.gz#env",
        "--proxy-user",
        "alice",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=false",
    ]);
    assert_eq!(
        pairs(&conf),
        vec![
            ("spark.app.name", "n1"),
            ("spark.archives", "https://x/e.tar.gz#env"),
            ("spark.driver.extraJavaOptions", "-Dz=1"),
            ("spark.driver.memory", "3g"),
            ("spark.executor.instances", "3"),
            ("spark.files", "https://x/f.txt"),
            (
                "spark.jars",
                "https://x/a.jar,https://x/b.jar,local:///opt/app.jar"
            ),
            ("spark.kubernetes.container.image", "img"),
            ("spark.kubernetes.submission.waitAppCompletion", "false"),
            ("spark.master", "k8s://http://127.0.0.1:1"),
            ("spark.submit.deployMode", "cluster"),
            ("spark.submit.pyFiles", ""),
        ]
    );
}

#[test]
fn conf_matches_spark_4_3_when_flags_come_last() {
    let conf = java(&[
        "--conf",
        "spark.driver.memory=3g",
        "--driver-memory",
        "2g",
        "--conf",
        "spark.executor.memory=5g",
        "--executor-memory",
        "4g",
        "--executor-memory=6g",
        "--conf",
        "spark.driver.cores=3",
        "--driver-cores",
        "2",
        "--queue",
        "q",
        "--total-executor-cores",
        "4",
        "--conf",
        "foo=bar",
        "--conf",
        "spark.x=1",
        "--conf",
        "spark.x=2",
        "-c",
        "spark.y=1",
        "--name=n2",
        "--conf=spark.z=a=b",
    ]);
    assert_eq!(
        pairs(&conf),
        vec![
            ("spark.app.name", "n2"),
            ("spark.driver.cores", "2"),
            ("spark.driver.memory", "2g"),
            ("spark.executor.memory", "6g"),
            ("spark.jars", "local:///opt/app.jar"),
            ("spark.master", "k8s://http://127.0.0.1:1"),
            ("spark.submit.deployMode", "cluster"),
            ("spark.submit.pyFiles", ""),
            ("spark.x", "2"),
            ("spark.y", "1"),
            ("spark.z", "a=b"),
        ]
    );
}

#[test]
fn conf_matches_spark_4_3_for_python() {
    let mut args = HEAD.to_vec();
    args.extend([
        "--py-files",
        "https://x/a.zip",
        "--class",
        "Foo",
        "--jars",
        "https://x/j.jar",
        "local:///a.py",
        "1",
    ]);
    let submission = submission(&args);
    assert_eq!(
        pairs(&submission.conf),
        vec![
            ("spark.app.name", "Foo"),
            ("spark.jars", "https://x/j.jar"),
            ("spark.master", "k8s://http://127.0.0.1:1"),
            ("spark.submit.deployMode", "cluster"),
            ("spark.submit.pyFiles", "https://x/a.zip"),
        ]
    );
    assert_eq!(
        submission.main_class,
        "org.apache.spark.deploy.PythonRunner"
    );
    assert_eq!(submission.resource_type, ResourceType::Python);
    assert_eq!(submission.app_args, strings(&["1"]));
}

/// Each row: argv fragment, key, expected value. The rule and where Spark implements it:
/// launcher-mapped driver options follow argv order (SparkSubmitCommandBuilder.OptionParser);
/// other flags beat --conf (SparkSubmitArguments.loadEnvironmentArguments + OptionAssigner).
#[test]
fn precedence_follows_spark() {
    let cases: &[(&[&str], &str, Option<&str>)] = &[
        (
            &["--driver-memory", "2g", "--conf", "spark.driver.memory=3g"],
            keys::DRIVER_MEMORY,
            Some("3g"),
        ),
        (
            &["--conf", "spark.driver.memory=3g", "--driver-memory", "2g"],
            keys::DRIVER_MEMORY,
            Some("2g"),
        ),
        (
            &[
                "--driver-java-options",
                "-Da",
                "-c",
                "spark.driver.extraJavaOptions=-Db",
            ],
            keys::DRIVER_JAVA_OPTIONS,
            Some("-Db"),
        ),
        (
            &[
                "-c",
                "spark.driver.extraClassPath=/b",
                "--driver-class-path",
                "/a",
            ],
            keys::DRIVER_CLASS_PATH,
            Some("/a"),
        ),
        (
            &[
                "--driver-library-path",
                "/a",
                "-c",
                "spark.driver.extraLibraryPath=/b",
            ],
            keys::DRIVER_LIBRARY_PATH,
            Some("/b"),
        ),
        (
            &[
                "--num-executors",
                "3",
                "--conf",
                "spark.executor.instances=7",
            ],
            keys::EXECUTOR_INSTANCES,
            Some("3"),
        ),
        (
            &[
                "--conf",
                "spark.executor.instances=7",
                "--num-executors",
                "3",
            ],
            keys::EXECUTOR_INSTANCES,
            Some("3"),
        ),
        (
            &["--conf", "spark.executor.instances=7"],
            keys::EXECUTOR_INSTANCES,
            Some("7"),
        ),
        (
            &[
                "--executor-memory",
                "4g",
                "--conf",
                "spark.executor.memory=5g",
            ],
            keys::EXECUTOR_MEMORY,
            Some("4g"),
        ),
        (
            &["--executor-cores", "2", "--conf", "spark.executor.cores=5"],
            keys::EXECUTOR_CORES,
            Some("2"),
        ),
        (
            &["--driver-cores", "2", "--conf", "spark.driver.cores=3"],
            keys::DRIVER_CORES,
            Some("2"),
        ),
        (
            &["--name", "a", "--conf", "spark.app.name=b"],
            keys::APP_NAME,
            Some("a"),
        ),
        (&["--conf", "spark.app.name=b"], keys::APP_NAME, Some("b")),
        (&[], keys::APP_NAME, Some("Foo")),
        (
            &[
                "--files",
                "https://h/a",
                "--conf",
                "spark.files=https://h/b",
            ],
            keys::FILES,
            Some("https://h/a"),
        ),
        (
            &["--conf", "spark.files=https://h/b, https://h/c"],
            keys::FILES,
            Some("https://h/b,https://h/c"),
        ),
        (
            &[
                "--archives",
                "https://h/a#x",
                "-c",
                "spark.archives=https://h/b",
            ],
            keys::ARCHIVES,
            Some("https://h/a#x"),
        ),
        (
            &[
                "--jars",
                "https://h/a.jar",
                "-c",
                "spark.jars=https://h/b.jar",
            ],
            keys::JARS,
            Some("https://h/a.jar,local:///opt/app.jar"),
        ),
        (
            &["-c", "spark.jars=https://h/b.jar,,"],
            keys::JARS,
            Some("https://h/b.jar,local:///opt/app.jar"),
        ),
        (
            &[
                "--py-files",
                "https://h/a.zip",
                "-c",
                "spark.submit.pyFiles=https://h/b.zip",
            ],
            keys::PY_FILES,
            Some("https://h/a.zip"),
        ),
        (
            &[
                "--principal",
                "a",
                "--keytab",
                "local:///k",
                "-c",
                "spark.kerberos.principal=b",
            ],
            keys::PRINCIPAL,
            Some("a"),
        ),
        (
            &[
                "-c",
                "spark.yarn.principal=y",
                "-c",
                "spark.kerberos.keytab=local:///k",
            ],
            keys::PRINCIPAL,
            Some("y"),
        ),
        (
            &[
                "--principal",
                "p",
                "--keytab",
                "local:///a",
                "-c",
                "spark.kerberos.keytab=local:///b",
            ],
            keys::KEYTAB,
            Some("local:///a"),
        ),
        (
            &[
                "--repositories",
                "https://r1",
                "-c",
                "spark.jars.repositories=https://r2",
            ],
            keys::JAR_REPOSITORIES,
            Some("https://r1"),
        ),
        (
            &["--exclude-packages", "g:a", "-c", "spark.jars.excludes=g:b"],
            keys::JAR_PACKAGES_EXCLUSIONS,
            Some("g:a"),
        ),
        (
            &["--master", "k8s://kube:6443"],
            keys::MASTER,
            Some("k8s://https://kube:6443"),
        ),
        (
            &[
                "--deploy-mode",
                "cluster",
                "-c",
                "spark.submit.deployMode=client",
            ],
            keys::DEPLOY_MODE,
            Some("cluster"),
        ),
        // Standalone and YARN only options leave no trace on Kubernetes.
        (&["--total-executor-cores", "4"], keys::CORES_MAX, None),
        (&["-c", "spark.cores.max=4"], keys::CORES_MAX, Some("4")),
        (&["--queue", "q"], "spark.yarn.queue", None),
        (
            &["-c", "spark.driver.host=client-box"],
            keys::DRIVER_HOST,
            None,
        ),
        (&["-c", "notspark.key=v"], "notspark.key", None),
        (&["-c", "=v"], "", None),
        (&[], keys::KUBERNETES_NAMESPACE, None),
    ];
    for (extra, key, expected) in cases {
        assert_eq!(java(extra).get(key), *expected, "{extra:?}");
    }
}

#[test]
fn derived_values_follow_spark() {
    let cases: &[(&str, Option<&str>, ResourceType, &str, &str)] = &[
        (
            "local:///opt/app.jar",
            Some("org.example.Main"),
            ResourceType::Java,
            "org.example.Main",
            "org.example.Main",
        ),
        (
            "local:///opt/pi.py",
            None,
            ResourceType::Python,
            "org.apache.spark.deploy.PythonRunner",
            "pi.py",
        ),
        (
            "https://h/x/app.R",
            None,
            ResourceType::R,
            "org.apache.spark.deploy.RRunner",
            "app.R",
        ),
        (
            "local:///opt/app.r",
            Some("Named"),
            ResourceType::R,
            "org.apache.spark.deploy.RRunner",
            "Named",
        ),
    ];
    for (primary, class, resource_type, main_class, name) in cases {
        let mut args = HEAD.to_vec();
        if let Some(class) = class {
            args.extend(["--class", class]);
        }
        args.push(primary);
        let submission = submission(&args);
        assert_eq!(submission.resource_type, *resource_type, "{primary}");
        assert_eq!(submission.main_class, *main_class, "{primary}");
        assert_eq!(submission.app_name(), *name, "{primary}");
        assert_eq!(submission.namespace(), "default");
        assert_eq!(submission.primary_resource, *primary);
        let has_jars = submission.conf.contains(keys::JARS);
        assert_eq!(has_jars, *resource_type == ResourceType::Java, "{primary}");
        assert_eq!(submission.conf.get(keys::PY_FILES), Some(""));
    }
    assert_eq!(ResourceType::Python.as_str(), "python");
    assert_eq!(ResourceType::R.as_str(), "r");
    assert_eq!(ResourceType::Java.as_str(), "java");
}

#[test]
fn submission_helpers() {
    let mut args = HEAD.to_vec();
    args.extend([
        "--class",
        "M",
        "--proxy-user",
        "alice",
        "--jars",
        "https://h/a.jar",
        "-c",
        "spark.kubernetes.namespace=team",
        "--py-files",
        "https://h/p.zip,https://h/q.py",
        "local:///app.jar",
        "x",
    ]);
    let submission = submission(&args);
    assert_eq!(submission.namespace(), "team");
    assert_eq!(submission.proxy_user.as_deref(), Some("alice"));
    assert_eq!(
        submission.jars().collect::<Vec<_>>(),
        ["https://h/a.jar", "local:///app.jar"]
    );
    assert_eq!(
        submission.py_files().collect::<Vec<_>>(),
        ["https://h/p.zip", "https://h/q.py"]
    );
    // `spark-internal` is Spark's "no resource": never appended to spark.jars.
    let internal = SubmitArgs {
        primary_resource: "spark-internal".into(),
        main_class: Some("M".into()),
        ..SubmitArgs::default()
    };
    assert_eq!(
        SparkConf::from_submit_args(&internal).get(keys::JARS),
        Some("")
    );
}

#[test]
fn spark_conf_keeps_insertion_order_and_compares_as_a_map() {
    let mut conf = SparkConf::new();
    conf.set("b", "1");
    conf.set("a", "2");
    conf.set("b", "3");
    conf.set_if_missing("a", "ignored");
    conf.set_if_missing("c", "4");
    assert_eq!(
        conf.iter().collect::<Vec<_>>(),
        [("b", "3"), ("a", "2"), ("c", "4")]
    );
    assert_eq!(conf.remove("b"), Some("3".into()));
    assert_eq!(conf.remove("b"), None);
    conf.set("d", "5");
    assert_eq!(
        conf.iter().collect::<Vec<_>>(),
        [("a", "2"), ("c", "4"), ("d", "5")]
    );
    assert_eq!(conf.get("c"), Some("4"));
    let reordered: SparkConf = [("d", "5"), ("c", "4"), ("a", "2")].into_iter().collect();
    assert_eq!(conf, reordered);
    assert_ne!(conf, SparkConf::new());
    assert_eq!(conf.len(), 3);
    assert!(!conf.is_empty());
}

#[test]
fn typed_reads_follow_spark_config_builders() {
    let conf: SparkConf = [
        ("t", " TRUE "),
        ("f", "false"),
        ("bad", "yes"),
        ("i", " 42"),
        ("m", "1g"),
        ("neg", "-512m"),
        ("bare", "512"),
        ("junk", "1.5g"),
        ("spark.kubernetes.driver.label.a", "1"),
        ("spark.kubernetes.driver.label.b", "2"),
    ]
    .into_iter()
    .collect();
    assert_eq!(conf.get_bool("t"), Ok(Some(true)));
    assert_eq!(conf.get_bool("f"), Ok(Some(false)));
    assert_eq!(conf.get_bool("missing"), Ok(None));
    assert_eq!(conf.get_bool_or("missing", true), Ok(true));
    assert_eq!(
        conf.get_bool("bad").map_err(|e| e.kind()),
        Err("not_boolean")
    );
    assert_eq!(conf.get_int("i"), Ok(Some(42)));
    assert_eq!(conf.get_int("m").map_err(|e| e.kind()), Err("not_int"));
    assert_eq!(conf.get_size_mib("m"), Ok(Some(1024)));
    assert_eq!(conf.get_size_bytes("m"), Ok(Some(1 << 30)));
    assert_eq!(conf.get_size_mib("neg"), Ok(Some(-512)));
    assert_eq!(conf.get_size_mib("bare"), Ok(Some(512)));
    assert_eq!(
        conf.get_size_mib("junk").map_err(|e| e.kind()),
        Err("not_byte_size")
    );
    assert_eq!(conf.get_or("missing", "d"), "d");
    assert_eq!(
        conf.with_prefix("spark.kubernetes.driver.label.")
            .collect::<Vec<_>>(),
        [("a", "1"), ("b", "2")]
    );
}

fn opt_string() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        ".*",
        "(local|https|file|hdfs)://[a-z/.,#]{0,12}"
    ])
}

prop_compose! {
    fn any_submit_args()(
        strings in proptest::collection::vec(opt_string(), 19),
        confs in proptest::collection::vec((prop_oneof![".*", "spark\\.[a-z.]{1,20}"], ".*"), 0..8),
        primary_resource in prop_oneof![".*", "spark-internal", "pyspark-shell", "[a-z:/]{0,10}\\.(py|R|jar)"],
        app_args in proptest::collection::vec(".*", 0..4),
        verbose in any::<bool>(),
    ) -> SubmitArgs {
        let mut s = strings.into_iter();
        let mut next = || s.next().flatten();
        SubmitArgs {
            master: next(), deploy_mode: next(), main_class: next(), name: next(), jars: next(),
            packages: next(), exclude_packages: next(), repositories: next(), py_files: next(),
            files: next(), archives: next(), executor_memory: next(), driver_cores: next(),
            executor_cores: next(), num_executors: next(), total_executor_cores: next(),
            proxy_user: next(), principal: next(), keytab: next(), queue: None,
            verbose, load_spark_defaults: false, confs, primary_resource, app_args,
        }
    }
}

proptest! {
    #[test]
    fn conf_builder_never_panics(args in any_submit_args()) {
        let submission = Submission::from_args(&args);
        prop_assert!(submission.conf.contains(keys::PY_FILES));
        prop_assert!(submission.conf.contains(keys::DEPLOY_MODE));
        prop_assert!(!submission.conf.contains(keys::DRIVER_HOST));
        prop_assert!(submission.conf.iter().all(|(k, _)| k.starts_with("spark.")));
        let _ = (submission.app_name(), submission.namespace(), submission.jars().count());
        for (key, _) in submission.conf.iter() {
            let _ = submission.conf.get_size_mib(key);
            let _ = submission.conf.get_bool(key);
            let _ = submission.conf.get_int(key);
        }
    }
}
