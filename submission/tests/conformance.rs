//! Conformance with real Spark: every case of tests/corpus/cases.yaml was run by the real
//! `spark-submit` of each supported Spark release against kubesim (scripts/corpus.py), and what
//! Spark sent is stored in tests/corpus/golden/<release>/. Here the builder gets the same argv
//! (whose image, `apache/spark:<release>`, tells it which Spark to build for) and templates, and
//! its objects must equal Spark's request bodies field by field, after the normalisations
//! documented in docs/submitter.md ("Differences from spark-submit") and nothing else.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};
use submission::builder::{self, BuildError, BuildInput};
use submission::conf::Submission;
use submission::meta::{annotations, attach_owner, labels};
use submission::naming::SubmissionId;
use submission::template::{self, TemplateRole};

#[derive(Debug, Clone, Deserialize)]
struct Case {
    name: String,
    #[serde(default)]
    driver_template: Option<String>,
    #[serde(default)]
    executor_template: Option<String>,
    #[serde(default)]
    expect_error: Option<String>,
    #[serde(default)]
    stricter: bool,
    /// The Spark lines (`3.5`, `4.0`, ...) the case is for; all when absent.
    #[serde(default)]
    versions: Option<Vec<String>>,
    /// The Spark lines that accept what later ones refuse: `expect_error` does not apply there.
    #[serde(default)]
    accepted_by: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Golden {
    spark_version: String,
    argv: Vec<String>,
    spark_user: String,
    exit_code: i32,
    requests: Vec<Request>,
    #[serde(default)]
    exception: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    method: String,
    path: String,
    content_type: String,
    body: Value,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus")
}

fn load_template(
    case_path: &Option<String>,
    role: TemplateRole,
) -> Result<Option<Value>, BuildError> {
    let Some(path) = case_path else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(corpus_dir().join(path)).expect("template file exists");
    template::from_yaml(&text, role)
        .map(Some)
        .map_err(|source| match role {
            TemplateRole::Driver => BuildError::DriverTemplate { source },
            TemplateRole::Executor => BuildError::ExecutorTemplate { source },
        })
}

/// The argv Spark got, without the template-file confs: our builder gets templates inline.
fn builder_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut i = 0;
    while i < argv.len() {
        if argv[i] == "--conf"
            && argv.get(i + 1).is_some_and(|c| {
                c.starts_with("spark.kubernetes.driver.podTemplateFile=")
                    || c.starts_with("spark.kubernetes.executor.podTemplateFile=")
            })
        {
            i += 2;
            continue;
        }
        out.push(argv[i].clone());
        i += 1;
    }
    out
}

fn properties_of(body: &Value) -> Option<&str> {
    body.get("data")?.get("spark.properties")?.as_str()
}

fn submit_time(golden: &Golden) -> i64 {
    golden
        .requests
        .iter()
        .filter_map(|r| properties_of(&r.body))
        .flat_map(str::lines)
        .find_map(|l| l.strip_prefix("spark.app.submitTime="))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

fn build(case: &Case, golden: &Golden) -> Result<builder::DriverObjects, BuildError> {
    let driver = load_template(&case.driver_template, TemplateRole::Driver)?;
    let executor = load_template(&case.executor_template, TemplateRole::Executor)?;
    let argv = builder_argv(&golden.argv);
    let id: SubmissionId = format!("corpus-{}", case.name).parse().expect("valid id");
    let parsed =
        submission::argv::parse(&argv).map_err(|source| BuildError::ParseArgs { source })?;
    let submission = Submission::from_args(&parsed);
    builder::build(&BuildInput {
        submission: &submission,
        driver_template: driver.as_ref(),
        executor_template: executor.as_ref(),
        submission_id: &id,
        submit_time_ms: submit_time(golden),
        spark_user: &golden.spark_user,
    })
}

/// Method, path and content type Spark uses for an object (pod POST, then server-side apply).
fn request_line(object: &Value, namespace: &str) -> (String, String, String) {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let (base, plural) = match kind {
        "Pod" => ("/api/v1", "pods"),
        "Service" => ("/api/v1", "services"),
        "ConfigMap" => ("/api/v1", "configmaps"),
        "PersistentVolumeClaim" => ("/api/v1", "persistentvolumeclaims"),
        "NetworkPolicy" => ("/apis/networking.k8s.io/v1", "networkpolicies"),
        _ => ("?", "?"),
    };
    if kind == "Pod" {
        (
            "POST".into(),
            format!("{base}/namespaces/{namespace}/{plural}"),
            "application/json".into(),
        )
    } else {
        (
            "PATCH".into(),
            format!(
                "{base}/namespaces/{namespace}/{plural}/{name}?fieldManager=fabric8&force=true"
            ),
            "application/apply-patch+yaml".into(),
        )
    }
}

/// The 16-hex-digit `uniqueID()` segments of a name (a leading digit may have become `x`).
fn unique_ids(name: &str) -> Vec<&str> {
    name.split('-')
        .filter(|s| {
            s.len() == 16
                && s.char_indices().all(|(i, c)| {
                    c.is_ascii_digit() || ('a'..='f').contains(&c) || (i == 0 && c == 'x')
                })
        })
        .collect()
}

/// Pairs (Spark's random token, ours) found at the same places in both object lists.
fn token_pairs(golden: &[Value], ours: &[Value]) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (g, o) in golden.iter().zip(ours) {
        let (Some(gn), Some(on)) = (
            g["metadata"]["name"].as_str(),
            o["metadata"]["name"].as_str(),
        ) else {
            continue;
        };
        for (a, b) in unique_ids(gn).into_iter().zip(unique_ids(on)) {
            pairs.push((a.to_owned(), b.to_owned()));
        }
    }
    if let (Some(g), Some(o)) = (golden.first(), ours.first()) {
        if let (Some(a), Some(b)) = (
            g["metadata"]["labels"][labels::SPARK_APP_ID].as_str(),
            o["metadata"]["labels"][labels::SPARK_APP_ID].as_str(),
        ) {
            pairs.push((a.to_owned(), b.to_owned()));
        }
        let local_dir = |pod: &Value| -> Option<String> {
            pod["spec"]["containers"]
                .as_array()?
                .iter()
                .flat_map(|c| c["env"].as_array().into_iter().flatten())
                .find(|e| e["name"] == "SPARK_LOCAL_DIRS")?["value"]
                .as_str()?
                .strip_prefix("/var/data/spark-")
                .map(str::to_owned)
        };
        if let (Some(a), Some(b)) = (local_dir(g), local_dir(o)) {
            pairs.push((a, b));
        }
        // The spark-conf ConfigMap's name, in case its own request was never sent.
        let conf_map = |pod: &Value| -> Option<String> {
            pod["spec"]["volumes"]
                .as_array()?
                .iter()
                .find(|v| v["name"] == "spark-conf-volume-driver")?["configMap"]["name"]
                .as_str()
                .map(str::to_owned)
        };
        if let (Some(a), Some(b)) = (conf_map(g), conf_map(o)) {
            for (x, y) in unique_ids(&a).into_iter().zip(unique_ids(&b)) {
                pairs.push((x.to_owned(), y.to_owned()));
            }
        }
    }
    pairs.retain(|(a, b)| a != b && !a.is_empty());
    pairs
}

fn replace_tokens(value: &Value, pairs: &[(String, String)]) -> Value {
    let mut text = value.to_string();
    for (from, to) in pairs {
        text = text.replace(from.as_str(), to);
    }
    serde_json::from_str(&text).expect("replacing hex tokens keeps JSON valid")
}

/// Names that come out of a hash map in Spark (driverEnv, secretKeyRef env, secret names): their
/// relative order is not reproduced, so runs of them are compared sorted. `driver.volumes.*` is
/// not among them: the builder reproduces Spark's volume order, which is compared as it is.
fn hash_ordered_names(argv: &[String]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for conf in argv.windows(2).filter(|w| w[0] == "--conf").map(|w| &w[1]) {
        let Some((key, _)) = conf.split_once('=') else {
            continue;
        };
        for prefix in [
            "spark.kubernetes.driverEnv.",
            "spark.kubernetes.driver.secretKeyRef.",
        ] {
            if let Some(name) = key.strip_prefix(prefix) {
                names.insert(name.to_owned());
            }
        }
        if let Some(name) = key.strip_prefix("spark.kubernetes.driver.secrets.") {
            names.insert(format!("{name}-volume"));
        }
    }
    names
}

fn sort_hash_runs(list: &mut [Value], names: &BTreeSet<String>) {
    let in_set = |v: &Value| v["name"].as_str().is_some_and(|n| names.contains(n));
    let mut i = 0;
    while i < list.len() {
        if !in_set(&list[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < list.len() && in_set(&list[i]) {
            i += 1;
        }
        list[start..i].sort_by_key(|v| v.to_string());
    }
}

/// Spark shuffles the local dirs (`Utils.randomize` in `LocalDirsFeatureStep`) before it lists
/// them in `SPARK_LOCAL_DIRS` and mounts them as `spark-local-dir-<i>`; we keep the configured
/// order. Both sides get the list sorted and the mount paths sorted over the same mounts.
fn sort_local_dirs(container: &mut Value) {
    if let Some(Value::Array(env)) = container.get_mut("env") {
        for e in env.iter_mut().filter(|e| e["name"] == "SPARK_LOCAL_DIRS") {
            if let Some(list) = e["value"].as_str() {
                let mut dirs: Vec<&str> = list.split(',').collect();
                dirs.sort_unstable();
                e["value"] = Value::String(dirs.join(","));
            }
        }
    }
    if let Some(Value::Array(mounts)) = container.get_mut("volumeMounts") {
        let local = |m: &Value| {
            m["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("spark-local-dir-"))
        };
        let mut paths: Vec<Value> = mounts
            .iter()
            .filter(|m| local(m))
            .map(|m| m["mountPath"].clone())
            .collect();
        paths.sort_by_key(Value::to_string);
        for (m, path) in mounts.iter_mut().filter(|m| local(m)).zip(paths) {
            m["mountPath"] = path;
        }
    }
}

/// The documented normalisations, applied to both sides.
fn normalise(object: &mut Value, names: &BTreeSet<String>, ours: bool) {
    if ours && let Some(meta) = object["metadata"].as_object_mut() {
        for (field, key) in [
            ("annotations", annotations::SUBMISSION_ID),
            ("labels", labels::SUBMISSION_ID_HASH),
        ] {
            if let Some(map) = meta.get_mut(field).and_then(Value::as_object_mut) {
                map.remove(key);
                if map.is_empty() {
                    meta.remove(field);
                }
            }
        }
    }
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        if let Some(Value::Array(volumes)) = spec.get_mut("volumes") {
            sort_hash_runs(volumes, names);
        }
        if let Some(Value::Array(containers)) = spec.get_mut("containers") {
            for c in containers {
                for field in ["env", "volumeMounts"] {
                    if let Some(Value::Array(list)) = c.get_mut(field) {
                        sort_hash_runs(list, names);
                    }
                }
                sort_local_dirs(c);
            }
        }
    }
    if let Some(data) = object.get_mut("data").and_then(Value::as_object_mut) {
        if let Some(Value::String(text)) = data.get("spark.properties") {
            let mut lines = text.lines();
            let comment = lines.next().unwrap_or_default().to_owned();
            let _date = lines.next();
            let mut entries: Vec<Value> = lines
                .filter(|l| !l.starts_with("spark.kubernetes.driver.podTemplateFile="))
                .map(|l| Value::String(l.to_owned()))
                .collect();
            entries.sort_by_key(|v| v.to_string());
            let mut normalised = Map::new();
            normalised.insert("comment".into(), Value::String(comment));
            normalised.insert("entries".into(), Value::Array(entries));
            data.insert("spark.properties".into(), Value::Object(normalised));
        }
        if let Some(Value::String(text)) = data.get("podspec-configmap-key") {
            let parsed: Value = yaml_serde::from_str(text).unwrap_or(Value::Null);
            data.insert("podspec-configmap-key".into(), parsed);
        }
    }
}

fn diff(path: &str, golden: &Value, ours: &Value, out: &mut Vec<String>) {
    match (golden, ours) {
        (Value::Object(g), Value::Object(o)) => {
            let keys: BTreeSet<&String> = g.keys().chain(o.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (g.get(k), o.get(k)) {
                    (Some(a), Some(b)) => diff(&p, a, b, out),
                    (Some(a), None) => out.push(format!("{p}: spark has {a}, we have nothing")),
                    (None, Some(b)) => out.push(format!("{p}: we have {b}, spark has nothing")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(g), Value::Array(o)) if g.len() == o.len() => {
            for (i, (a, b)) in g.iter().zip(o).enumerate() {
                diff(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ if golden != ours => out.push(format!("{path}: spark {golden}, ours {ours}")),
        _ => {}
    }
}

/// Compares one case; returns the differences found.
fn check(case: &Case, golden: &Golden) -> Vec<String> {
    let built = build(case, golden);
    let spark_failed = golden.exit_code != 0;
    match (&case.expect_error, spark_failed, built) {
        (Some(code), _, Err(e)) => {
            let mut problems = Vec::new();
            if e.error_code().as_str() != code {
                problems.push(format!(
                    "we answer {} ({}), expected {code}",
                    e.error_code().as_str(),
                    e.message()
                ));
            }
            if !spark_failed && !case.stricter {
                problems.push("spark succeeded, but the case expects an error".into());
            }
            if spark_failed && !golden.requests.is_empty() {
                problems
                    .push("spark failed after sending requests; not a submit-time error".into());
            }
            problems
        }
        (Some(code), _, Ok(_)) => vec![format!(
            "we build objects; expected {code} (spark: {})",
            golden.exception.as_deref().unwrap_or("succeeded")
        )],
        (None, true, _) => vec![format!(
            "spark failed ({}), but the case expects success",
            golden.exception.as_deref().unwrap_or("?")
        )],
        (None, false, Err(e)) => vec![format!("we fail with {}: {}", e.kind(), e.message())],
        (None, false, Ok(built)) => compare_objects(golden, built),
    }
}

fn compare_objects(golden: &Golden, built: builder::DriverObjects) -> Vec<String> {
    let mut problems = Vec::new();
    let mut ours = built.objects;
    let uid = golden
        .requests
        .get(1)
        .and_then(|r| r.body["metadata"]["ownerReferences"][0]["uid"].as_str())
        .unwrap_or_default();
    attach_owner(&mut ours, &built.identity.driver_pod_name, uid);
    let bodies: Vec<Value> = golden.requests.iter().map(|r| r.body.clone()).collect();
    let pairs = token_pairs(&bodies, &ours);
    let names = hash_ordered_names(&golden.argv);
    if golden.requests.len() != ours.len() {
        problems.push(format!(
            "spark sent {} requests ({:?}), we build {} objects",
            golden.requests.len(),
            golden
                .requests
                .iter()
                .map(|r| r.path.as_str())
                .collect::<Vec<_>>(),
            ours.len()
        ));
    }
    for (i, (request, object)) in golden.requests.iter().zip(ours.iter_mut()).enumerate() {
        let (method, path, content_type) = request_line(object, &built.identity.namespace);
        let golden_path = replace_tokens(&Value::String(request.path.clone()), &pairs);
        if request.method != method
            || golden_path != Value::String(path.clone())
            || request.content_type != content_type
        {
            problems.push(format!(
                "request {i}: spark {} {} ({}), ours {method} {path} ({content_type})",
                request.method, golden_path, request.content_type
            ));
        }
        let mut g = replace_tokens(&request.body, &pairs);
        normalise(&mut g, &names, false);
        normalise(object, &names, true);
        let mut d = Vec::new();
        diff(&format!("request {i} body"), &g, object, &mut d);
        problems.extend(d);
    }
    problems
}

fn cases() -> Vec<Case> {
    yaml_serde::from_str(
        &std::fs::read_to_string(corpus_dir().join("cases.yaml")).expect("tests/corpus/cases.yaml"),
    )
    .expect("cases.yaml parses")
}

/// Compares every case of one release's corpus; panics with every difference found. At least
/// `min_cases` cases (all that apply, at most) must have a golden.
fn conforms(release: &str, min_cases: usize) {
    let line = release.rsplit_once('.').map_or(release, |(l, _)| l);
    let dir = corpus_dir().join("golden").join(release);
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| {
            c.versions
                .as_ref()
                .is_none_or(|v| v.iter().any(|l| l == line))
        })
        .collect();
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in &cases {
        let path = dir.join(format!("{}.json", case.name));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let golden: Golden = serde_json::from_str(&text).expect("golden parses");
        assert_eq!(golden.spark_version, release, "{}", path.display());
        compared += 1;
        let accepted = case.accepted_by.iter().any(|l| l == line);
        let case = &Case {
            expect_error: case.expect_error.clone().filter(|_| !accepted),
            ..case.clone()
        };
        for problem in check(case, &golden) {
            failures.push(format!("{}: {problem}", case.name));
        }
    }
    let required = min_cases.min(cases.len());
    assert!(
        compared >= required,
        "Spark {release}: only {compared} cases have goldens (run scripts/corpus.py --spark-version {release}); {required} expected"
    );
    assert!(
        failures.is_empty(),
        "Spark {release}: {} of {} cases differ from real Spark:\n{}",
        failures
            .iter()
            .map(|f| f.split(':').next().unwrap_or_default())
            .collect::<BTreeSet<_>>()
            .len(),
        compared,
        failures.join("\n")
    );
}

fn golden_releases() -> Vec<String> {
    let mut releases: Vec<String> = std::fs::read_dir(corpus_dir().join("golden"))
        .expect("tests/corpus/golden")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    releases.sort();
    releases
}

fn newest_releases() -> Vec<String> {
    builder::SparkLine::ALL
        .iter()
        .map(|l| l.newest_release().to_owned())
        .collect()
}

/// Every supported line has a corpus of its newest release, and every golden folder is a
/// release of a supported line.
#[test]
fn each_supported_spark_line_has_a_corpus() {
    let releases = golden_releases();
    for newest in newest_releases() {
        assert!(releases.contains(&newest), "no corpus for Spark {newest}");
    }
    for release in &releases {
        let line = release
            .rsplit_once('.')
            .map_or(release.as_str(), |(l, _)| l);
        assert!(
            builder::SparkLine::ALL.iter().any(|l| l.as_str() == line),
            "golden/{release} is not a supported Spark line"
        );
    }
}

/// Goldens name their template files as Spark was given them by scripts/corpus.py: relative
/// to the repository root, in the argv and in the conf Spark sent, and naming the case's file.
/// A path of the machine a golden was made on would differ from one regeneration to the next.
#[test]
fn goldens_name_template_files_relative_to_the_repository() {
    const DRIVER: &str = "spark.kubernetes.driver.podTemplateFile=";
    const EXECUTOR: &str = "spark.kubernetes.executor.podTemplateFile=";
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut wrong = Vec::new();
    for release in golden_releases() {
        let dir = corpus_dir().join("golden").join(&release);
        for entry in std::fs::read_dir(&dir).expect("a release's goldens") {
            let path = entry.expect("a directory entry").path();
            let text = std::fs::read_to_string(&path).expect("a golden");
            let golden: Golden = serde_json::from_str(&text).expect("golden parses");
            // The conf Spark sends keeps the driver's file as given; the executor's it points
            // at the copy it mounts in the driver pod.
            let sent = golden
                .requests
                .iter()
                .filter_map(|r| properties_of(&r.body))
                .flat_map(str::lines)
                .filter_map(|l| l.strip_prefix(DRIVER));
            let given = golden
                .argv
                .iter()
                .filter_map(|a| a.strip_prefix(DRIVER).or_else(|| a.strip_prefix(EXECUTOR)));
            for file in given.chain(sent) {
                if !file.starts_with("tests/corpus/templates/") || !root.join(file).is_file() {
                    wrong.push(format!("{}: {file}", path.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Older patch releases of a line, captured for the cases where patch releases differ.
#[test]
fn builder_matches_real_spark_patch_releases() {
    let newest = newest_releases();
    for release in golden_releases().iter().filter(|r| !newest.contains(r)) {
        conforms(release, 10);
    }
}

#[test]
fn builder_matches_real_spark_4_3() {
    conforms("4.3.0", usize::MAX);
}

#[test]
fn builder_matches_real_spark_4_2() {
    conforms("4.2.1", usize::MAX);
}

#[test]
fn builder_matches_real_spark_4_1() {
    conforms("4.1.4", usize::MAX);
}

#[test]
fn builder_matches_real_spark_4_0() {
    conforms("4.0.5", usize::MAX);
}

#[test]
fn builder_matches_real_spark_3_5() {
    conforms("3.5.9", usize::MAX);
}
