use proptest::prelude::*;

use super::*;
use crate::conf::Submission;

const PRIMARY: &str = "local:///opt/app.jar";

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// A valid cluster-mode command line with `extra` before the primary resource.
fn submit(extra: &[&str]) -> Vec<String> {
    let mut args = strings(&[
        "--master",
        "k8s://https://kube:6443",
        "--deploy-mode",
        "cluster",
        "--class",
        "org.example.Main",
    ]);
    args.extend(strings(extra));
    args.push(PRIMARY.to_owned());
    args
}

fn parse_ok(args: &[String]) -> SubmitArgs {
    match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => panic!("{args:?} was rejected: {e} ({})", e.kind()),
    }
}

fn kind_of(args: &[String]) -> &'static str {
    match parse(args) {
        Ok(parsed) => panic!("{args:?} was accepted: {parsed:?}"),
        Err(e) => e.kind(),
    }
}

type Check = fn(&SubmitArgs) -> Option<&str>;

/// Every option that takes a value and that the submitter accepts, with where it lands.
const VALUE_OPTIONS: &[(&str, &str, Check)] = &[
    ("--master", "k8s://https://other:443", |a| {
        a.master.as_deref()
    }),
    ("--deploy-mode", "cluster", |a| a.deploy_mode.as_deref()),
    ("--class", "org.example.Other", |a| a.main_class.as_deref()),
    ("--name", "my app", |a| a.name.as_deref()),
    ("--jars", "https://h/a.jar,local:///b.jar", |a| {
        a.jars.as_deref()
    }),
    ("--exclude-packages", "g:a", |a| {
        a.exclude_packages.as_deref()
    }),
    ("--repositories", "https://repo", |a| {
        a.repositories.as_deref()
    }),
    ("--py-files", "https://h/a.zip", |a| a.py_files.as_deref()),
    ("--files", "https://h/f.txt", |a| a.files.as_deref()),
    ("--archives", "https://h/e.tgz#env", |a| {
        a.archives.as_deref()
    }),
    ("--executor-memory", "4g", |a| a.executor_memory.as_deref()),
    ("--driver-cores", "2", |a| a.driver_cores.as_deref()),
    ("--executor-cores", "3", |a| a.executor_cores.as_deref()),
    ("--num-executors", "5", |a| a.num_executors.as_deref()),
    ("--total-executor-cores", "8", |a| {
        a.total_executor_cores.as_deref()
    }),
    ("--proxy-user", "alice", |a| a.proxy_user.as_deref()),
    ("--principal", "me@REALM", |a| a.principal.as_deref()),
    ("--keytab", "local:///etc/me.keytab", |a| {
        a.keytab.as_deref()
    }),
    ("--queue", "q", |a| a.queue.as_deref()),
    ("--driver-memory", "2g", |a| {
        a.conf_value("spark.driver.memory")
    }),
    ("--driver-java-options", "-Dx=y -Dz", |a| {
        a.conf_value("spark.driver.extraJavaOptions")
    }),
    ("--driver-library-path", "/lib", |a| {
        a.conf_value("spark.driver.extraLibraryPath")
    }),
    ("--driver-class-path", "/cp/*", |a| {
        a.conf_value("spark.driver.extraClassPath")
    }),
    ("--driver-default-class-path", "/dcp", |a| {
        a.conf_value("spark.driver.defaultExtraClassPath")
    }),
    ("--conf", "spark.k=v", |a| a.conf_value("spark.k")),
    ("-c", "spark.k=v", |a| a.conf_value("spark.k")),
];

/// Spark wants a Kerberos principal and keytab together.
fn kerberos_partner(option: &str) -> &'static [&'static str] {
    match option {
        "--principal" => &["--keytab", "local:///k"],
        "--keytab" => &["--principal", "p"],
        _ => &[],
    }
}

#[test]
fn every_value_option_is_stored() {
    for (option, value, check) in VALUE_OPTIONS {
        let parsed = parse_ok(&submit(
            &[&[*option, *value], kerberos_partner(option)].concat(),
        ));
        let expected = if *option == "-c" || *option == "--conf" {
            "v"
        } else {
            value
        };
        assert_eq!(check(&parsed), Some(expected), "{option}");
        assert_eq!(parsed.primary_resource, PRIMARY, "{option}");
    }
}

#[test]
fn every_long_option_accepts_the_equals_form() {
    for (option, value, check) in VALUE_OPTIONS.iter().filter(|(o, ..)| o.starts_with("--")) {
        let inline = format!("{option}={value}");
        let parsed = parse_ok(&submit(
            &[&[inline.as_str()], kerberos_partner(option)].concat(),
        ));
        let expected = if *option == "--conf" { "v" } else { value };
        assert_eq!(check(&parsed), Some(expected), "{option}");
    }
}

#[test]
fn equals_form_splits_at_the_first_equals_only() {
    let parsed = parse_ok(&submit(&["--conf=spark.z=a=b", "--name==x"]));
    assert_eq!(parsed.conf_value("spark.z"), Some("a=b"));
    assert_eq!(parsed.name.as_deref(), Some("=x"));
}

#[test]
fn switches_are_recognised() {
    let parsed = parse_ok(&submit(&["-v", "--load-spark-defaults"]));
    assert!(parsed.verbose && parsed.load_spark_defaults);
    assert!(parse_ok(&submit(&["--verbose"])).verbose);
    // Spark drops an inline value given to a switch.
    assert!(parse_ok(&submit(&["--verbose=no"])).verbose);
}

#[test]
fn application_arguments_are_kept_verbatim() {
    let app_args = [
        "10",
        "two words",
        "\"double\"",
        "'single'",
        "$HOME",
        "--conf",
        "spark.x=y",
        "--class",
        "-v",
        "--unknown",
        "",
        "日本語 ✓",
        "a\nb",
        PRIMARY,
    ];
    let mut args = submit(&[]);
    args.extend(strings(&app_args));
    let parsed = parse_ok(&args);
    assert_eq!(parsed.app_args, strings(&app_args));
    assert_eq!(parsed.conf_value("spark.x"), None);
    assert_eq!(parsed.main_class.as_deref(), Some("org.example.Main"));
    assert!(!parsed.verbose);
}

#[test]
fn repeated_options_keep_the_last_and_confs_accumulate() {
    let parsed = parse_ok(&submit(&[
        "--name",
        "first",
        "--name",
        "second",
        "--conf",
        "spark.a=1",
        "-c",
        "spark.b=2",
        "--conf",
        "spark.a=3",
    ]));
    assert_eq!(parsed.name.as_deref(), Some("second"));
    assert_eq!(
        parsed.confs,
        vec![
            ("spark.a".to_owned(), "1".to_owned()),
            ("spark.b".to_owned(), "2".to_owned()),
            ("spark.a".to_owned(), "3".to_owned()),
        ]
    );
    assert_eq!(parsed.conf_value("spark.a"), Some("3"));
}

#[test]
fn conf_values_split_like_java() {
    let parsed = parse_ok(&submit(&[
        "--conf",
        "spark.empty=",
        "--conf",
        "=orphan",
        "--conf",
        "x=y",
    ]));
    assert_eq!(parsed.conf_value("spark.empty"), Some(""));
    assert!(parsed.confs.contains(&(String::new(), "orphan".to_owned())));
    // Kept as written, ignored like Spark ignores non-spark keys.
    assert!(parsed.confs.contains(&("x".to_owned(), "y".to_owned())));
    assert_eq!(parsed.conf_value("x"), None);
}

#[test]
fn primary_resource_may_be_python_or_r_or_remote() {
    for primary in [
        "local:///opt/pi.py",
        "https://h/app.R",
        "local:///opt/x.r",
        "s3a://b/app.jar",
    ] {
        let mut args = submit(&[]);
        args.pop();
        args.push(primary.to_owned());
        assert_eq!(parse_ok(&args).primary_resource, primary);
    }
    // Python and R need no --class.
    let parsed = parse_ok(&strings(&[
        "--master",
        "k8s://h:1",
        "--deploy-mode",
        "cluster",
        "local:///pi.py",
    ]));
    assert_eq!(parsed.main_class, None);
}

#[test]
fn accepted_edge_cases() {
    let cases: &[&[&str]] = &[
        // Spark 4.3 no longer refuses --py-files next to a jar.
        &["--py-files", "https://h/a.py"],
        &[
            "--conf",
            "spark.dynamicAllocation.enabled=TRUE",
            "--num-executors",
            "0",
        ],
        &["--driver-memory", "1b"],
        &["--driver-cores", "+2"],
        &["--packages", "  "],
        // Maven packages: the driver resolves them (coordinates as Spark splits them).
        &["--packages", "org.apache.commons:commons-lang3:3.12.0"],
        &["--packages", "g:a:1,h:b:2,"],
        &["--packages", "g/a/1"],
        &["--packages", "g:a:1:"],
        &["--packages", ",,,"],
        &["--conf", "spark.jars.packages=g:a:1"],
        &[
            "--packages",
            "g:a:1",
            "--repositories",
            "file:///opt/repo,https://repo.example.com/maven2",
            "--exclude-packages",
            "h:b,i/c,",
        ],
        &["--packages", "g:a:1", "-c", "spark.jars.excludes=h:b"],
        &["--packages", "g:a:1", "--exclude-packages", " "],
        // Exclusions without packages are never looked at.
        &["--exclude-packages", "not a coordinate"],
        &[
            "--packages",
            "g:a:1",
            "-c",
            "spark.jars.ivySettings=/opt/ivysettings.xml",
        ],
        &[
            "--repositories",
            "https://repo",
            "--exclude-packages",
            "g:a",
        ],
        &["--jars", "https://h/a.jar,,local:///b.jar,"],
        &[
            "--files",
            "s3a://bucket/dir/f.txt",
            "--archives",
            "hdfs://nn:8020/e.zip#env",
        ],
        &["--principal", "p", "--keytab", "local:///k.keytab"],
        &["--queue", "ignored-on-k8s", "--total-executor-cores", "4"],
        &["--conf", "spark.kubernetes.file.upload.path=s3a://b/up"],
    ];
    for extra in cases {
        parse_ok(&submit(extra));
    }
    // Master and deploy mode may come from --conf, as SparkSubmitArguments falls back to them.
    parse_ok(&strings(&[
        "--conf",
        "spark.master=k8s://h:6443",
        "--conf",
        "spark.submit.deployMode=cluster",
        "--class",
        "M",
        PRIMARY,
    ]));
}

#[test]
fn rejections_have_stable_kinds() {
    let without_mode = |extra: &[&str]| {
        let mut args = strings(&["--master", "k8s://https://kube:6443", "--class", "M"]);
        args.extend(strings(extra));
        args
    };
    let with = |prefix: &[&str], primary: &str| {
        let mut args = strings(&[
            "--master",
            "k8s://https://kube:6443",
            "--deploy-mode",
            "cluster",
        ]);
        args.extend(strings(prefix));
        args.push(primary.to_owned());
        args
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        // Grammar, as spark-submit's launcher and SparkSubmitArguments report it.
        (strings(&["--class"]), "missing_option_value"),
        (
            submit(&["--conf"]).into_iter().take(7).collect(),
            "missing_option_value",
        ),
        (submit(&["--foo"]), "unrecognized_option"),
        (submit(&["--foo=bar"]), "unrecognized_option"),
        (submit(&["--name="]), "unrecognized_option"),
        (submit(&["--name=a\nb"]), "unrecognized_option"),
        (submit(&["-c=spark.a=b"]), "unrecognized_option"),
        (submit(&["-"]), "unrecognized_option"),
        (submit(&["--conf", "spark.x"]), "conf_without_equals"),
        (submit(&["-c", "novalue"]), "conf_without_equals"),
        (submit(&["--deploy-mode", "Cluster"]), "invalid_deploy_mode"),
        (
            without_mode(&["--conf", "spark.submit.deployMode=yarn", PRIMARY]),
            "invalid_deploy_mode",
        ),
        (Vec::new(), "missing_primary_resource"),
        (
            submit(&[]).into_iter().take(6).collect(),
            "missing_primary_resource",
        ),
        // Values SparkSubmitArguments checks.
        (submit(&["--driver-memory", "abc"]), "invalid_size"),
        (submit(&["--driver-memory", "0"]), "invalid_size"),
        (submit(&["--driver-memory", "1.5g"]), "invalid_size"),
        (
            submit(&["--conf", "spark.driver.memory=-1g"]),
            "invalid_size",
        ),
        (submit(&["--executor-memory", "1x"]), "invalid_size"),
        (
            submit(&["--conf", "spark.executor.memory=0m"]),
            "invalid_size",
        ),
        (submit(&["--driver-cores", "x"]), "invalid_number"),
        (submit(&["--driver-cores", "0"]), "invalid_number"),
        (submit(&["--executor-cores", "1.5"]), "invalid_number"),
        (
            submit(&["--conf", "spark.executor.cores=-2"]),
            "invalid_number",
        ),
        (
            submit(&["--total-executor-cores", "99999999999"]),
            "invalid_number",
        ),
        (submit(&["--num-executors", "-1"]), "invalid_number"),
        (
            submit(&["--conf", "spark.executor.instances= 2"]),
            "invalid_number",
        ),
        (
            submit(&["--proxy-user", "a", "--principal", "p"]),
            "proxy_user_with_principal",
        ),
        (
            submit(&["--proxy-user", "a", "--conf", "spark.kerberos.principal=p"]),
            "proxy_user_with_principal",
        ),
        // Master and deploy mode.
        (
            strings(&["--deploy-mode", "cluster", "--class", "M", PRIMARY]),
            "missing_master",
        ),
        (submit(&["--master", "local[*]"]), "master_not_kubernetes"),
        (submit(&["--master", "yarn"]), "master_not_kubernetes"),
        (
            submit(&["--master", "spark://h:7077"]),
            "master_not_kubernetes",
        ),
        (submit(&["--master", "K8S://h"]), "master_not_kubernetes"),
        (submit(&["--master", "k8s"]), "invalid_kubernetes_master"),
        (
            submit(&["--master", "k8s://ftp://h"]),
            "invalid_kubernetes_master",
        ),
        (without_mode(&[PRIMARY]), "missing_deploy_mode"),
        (submit(&["--deploy-mode", "client"]), "client_deploy_mode"),
        (
            without_mode(&["--conf", "spark.submit.deployMode=client", PRIMARY]),
            "client_deploy_mode",
        ),
        // What spark-submit does instead of submitting.
        (submit(&["--kill", "ns:pod"]), "unsupported_action"),
        (submit(&["--status", "ns:pod"]), "unsupported_action"),
        (submit(&["--version"]), "unsupported_action"),
        (submit(&["--help"]), "unsupported_action"),
        (submit(&["-h"]), "unsupported_action"),
        (submit(&["--usage-error"]), "unsupported_action"),
        (
            submit(&["--properties-file", "/etc/spark.conf"]),
            "properties_file",
        ),
        (
            submit(&["--extra-properties-file", "/etc/x.conf"]),
            "properties_file",
        ),
        (submit(&["--supervise"]), "supervise"),
        (submit(&["--remote", "sc://h"]), "spark_connect"),
        (submit(&["--conf", "spark.remote=sc://h"]), "spark_connect"),
        (with(&[], "spark-shell"), "not_applicable_in_cluster_mode"),
        (with(&[], "pyspark-shell"), "not_applicable_in_cluster_mode"),
        (
            with(
                &[
                    "--class",
                    "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
                ],
                PRIMARY,
            ),
            "not_applicable_in_cluster_mode",
        ),
        // Maven coordinates, checked as spark-submit checks them before resolving.
        (submit(&["--packages", "g:a"]), "invalid_maven_coordinate"),
        (
            submit(&["--packages", "g:a:1:x"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--packages", "g:a:1,,h:b:2"]),
            "invalid_maven_coordinate",
        ),
        (submit(&["--packages", " :a:1"]), "invalid_maven_coordinate"),
        (submit(&["--packages", "g: :1"]), "invalid_maven_coordinate"),
        (submit(&["--packages", "g:a: "]), "invalid_maven_coordinate"),
        (
            submit(&["--packages", "g/a/1/x"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--conf", "spark.jars.packages=g:a"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--packages", "g:a:1", "--exclude-packages", "g"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--packages", "g:a:1", "--exclude-packages", "g:a:1"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--packages", "g:a:1", "--exclude-packages", "g:a,,h:b"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--packages", "g:a:1", "--exclude-packages", "g:"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--packages", "g:a:1", "-c", "spark.jars.excludes=g"]),
            "invalid_maven_coordinate",
        ),
        (
            submit(&["--principal", "p", "--keytab", "/home/me/me.keytab"]),
            "client_keytab",
        ),
        (
            submit(&[
                "-c",
                "spark.kerberos.keytab=file:///k",
                "-c",
                "spark.yarn.principal=p",
            ]),
            "client_keytab",
        ),
        (submit(&["--keytab", "local:///k"]), "incomplete_kerberos"),
        (submit(&["--keytab", "/home/me/k"]), "incomplete_kerberos"),
        (submit(&["--principal", "p"]), "incomplete_kerberos"),
        // Main class.
        (with(&[], PRIMARY), "missing_main_class"),
        (with(&[], "https://h/app.jar"), "missing_main_class"),
        // Files on the client's disk.
        (
            with(&["--class", "M"], "file:///tmp/app.jar"),
            "local_resource_without_upload_path",
        ),
        (with(&[], "app.py"), "local_resource_without_upload_path"),
        (
            with(&[], "/abs/app.R"),
            "local_resource_without_upload_path",
        ),
        (
            submit(&["--jars", "lib.jar"]),
            "local_resource_without_upload_path",
        ),
        (
            submit(&["--jars", "https://h/a.jar, https://h/b.jar"]),
            "local_resource_without_upload_path",
        ),
        (
            submit(&["--files", "file:/etc/hosts"]),
            "local_resource_without_upload_path",
        ),
        (
            submit(&["--py-files", "deps.zip"]),
            "local_resource_without_upload_path",
        ),
        (
            submit(&["--archives", "env.tar.gz#env"]),
            "local_resource_without_upload_path",
        ),
        (
            submit(&["--conf", "spark.files=a.txt"]),
            "local_resource_without_upload_path",
        ),
        (
            with(
                &[
                    "--class",
                    "M",
                    "--conf",
                    "spark.kubernetes.file.upload.path=s3a://b/up",
                ],
                "app.jar",
            ),
            "local_resource_upload",
        ),
        (
            submit(&[
                "--conf",
                "spark.kubernetes.file.upload.path=s3a://b/up",
                "--files",
                "f.txt",
            ]),
            "local_resource_upload",
        ),
        // Remote file systems spark-submit would query at submit time.
        (
            submit(&["--jars", "hdfs:///apps/lib.jar"]),
            "unresolvable_resource",
        ),
        (
            submit(&["--files", "s3a://bucket/conf/*.xml"]),
            "unresolvable_resource",
        ),
        (
            submit(&["--conf", "spark.archives=gs://b/"]),
            "unresolvable_resource",
        ),
    ];
    for (args, kind) in &cases {
        assert_eq!(kind_of(args), *kind, "{args:?}");
    }
}

#[test]
fn errors_name_the_argument_and_read_lowercase() {
    let cases: &[(&[&str], &str)] = &[
        (&["--driver-memory", "abc"], "--driver-memory"),
        (
            &["--conf", "spark.executor.cores=x"],
            "spark.executor.cores",
        ),
        (&["--num-executors", "-1"], "--num-executors"),
        (&["--jars", "lib.jar"], "--jars"),
        (&["--conf", "spark.files=a.txt"], "spark.files"),
        (&["--deploy-mode", "client"], "--deploy-mode"),
        (&["--supervise"], "--supervise"),
        (&["--bogus"], "--bogus"),
        (&["--packages", "g:a"], "--packages"),
        (&["--conf", "spark.jars.packages=g"], "spark.jars.packages"),
        (
            &["--packages", "g:a:1", "--exclude-packages", "g"],
            "--exclude-packages",
        ),
        (
            &["--packages", "g:a:1", "-c", "spark.jars.excludes=g"],
            "spark.jars.excludes",
        ),
    ];
    for (extra, argument) in cases {
        let Err(err) = parse(&submit(extra)) else {
            panic!("{extra:?} was accepted");
        };
        assert_eq!(err.argument(), *argument, "{extra:?}");
        let message = err.to_string();
        assert!(message.contains(argument), "{message}");
        assert!(
            !message.starts_with(|c: char| c.is_uppercase()),
            "{message}"
        );
    }
}

#[test]
fn checks_run_in_spark_order() {
    // validateSubmitArguments (sizes) comes before the master check in prepareSubmitEnvironment.
    let args = strings(&[
        "--master",
        "yarn",
        "--driver-memory",
        "abc",
        "--class",
        "M",
        PRIMARY,
    ]);
    assert_eq!(kind_of(&args), "invalid_size");
    // Grammar errors stop parsing before anything else is checked.
    let args = strings(&["--supervise", "--driver-memory", "abc", PRIMARY]);
    assert_eq!(kind_of(&args), "supervise");
}

const VOCABULARY: &[&str] = &[
    "--master",
    "k8s://https://h:1",
    "k8s://h",
    "--deploy-mode",
    "cluster",
    "client",
    "--class",
    "M",
    "--name",
    "--name=",
    "--conf",
    "-c",
    "spark.a=b",
    "spark.driver.memory=abc",
    "=",
    "--jars",
    "--files",
    "--py-files",
    "--archives",
    "lib.jar",
    "https://h/a.jar",
    "hdfs:///x",
    "local:///a.jar",
    "app.py",
    "spark-shell",
    "--driver-memory",
    "1g",
    "--num-executors",
    "-1",
    "--supervise",
    "-v",
    "--kill",
    "--packages",
    "--proxy-user",
    "--principal",
    "--keytab",
    "--",
    "-",
    "",
    "spark.kubernetes.file.upload.path=/u",
    "--conf=spark.master=k8s://h",
];

fn argv_strategy() -> impl Strategy<Value = Vec<String>> {
    let token = prop_oneof![
        3 => proptest::sample::select(VOCABULARY).prop_map(str::to_owned),
        1 => ".*",
        1 => "--[a-z-]{1,20}(=.{0,5})?",
    ];
    proptest::collection::vec(token, 0..16)
}

proptest! {
    #[test]
    fn parse_never_panics(args in argv_strategy()) {
        if let Ok(parsed) = parse(&args) {
            let submission = Submission::from_args(&parsed);
            prop_assert_eq!(submission.primary_resource, parsed.primary_resource);
        }
    }

    #[test]
    /// Any content a command line can carry (everything but NUL, see the test below).
    fn app_args_survive_any_content(app_args in proptest::collection::vec("[^\\x00]*", 0..8)) {
        let mut args = submit(&[]);
        args.extend(app_args.iter().cloned());
        prop_assert_eq!(parse(&args).map(|p| p.app_args), Ok(app_args));
    }
}

#[test]
fn an_argument_with_a_nul_byte_is_refused_wherever_it_is() {
    let mut app_arg = submit(&[]);
    app_arg.push("1\0".into());
    let mut master = submit(&[]);
    master[1] = "k8s://https://kube:6443\0".into();
    for args in [
        submit(&["--conf", "spark.app.name=a\0b"]),
        submit(&["--name", "\0"]),
        app_arg,
        master,
    ] {
        assert_eq!(kind_of(&args), "nul_byte", "{args:?}");
    }
}
