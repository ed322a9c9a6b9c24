//! The properties the fuzz targets check, one function per target, each taking the fuzzer's
//! bytes and panicking when its property fails. The targets (`src/bin/*.rs`) run them under
//! `cargo afl` (scripts/fuzz.sh); `tests/corpus.rs` replays the committed corpora and the
//! regression inputs through them as ordinary tests.
//!
//! The properties:
//! - [`argv`], [`template_merge`], [`submit_body`], [`operator_spec`]: whatever the builder
//!   accepts, it turns into objects that kubesim's admission (the API server's validation)
//!   accepts, or refuses only for a value the client wrote: the builder never invents an
//!   invalid value. (A label value the client chose that Kubernetes refuses is refused by the API
//!   server, as with real `spark-submit`; a name the builder derives must always be valid.)
//!   Every object carries the submission id. The operator's argv always parses.
//! - [`properties`]: the `spark.properties` the builder writes reads back, through
//!   `java.util.Properties`' rules, to exactly the conf it was given.
//! - [`policy`]: an accepted policy lets each entry's identity do what the entry says, and never
//!   lets an identity it does not name do anything.
//! - [`agent_body`]: a commit body the agent admits lands as exactly that marker; one it refuses
//!   is over the size limit.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;
use submission::api::SubmitRequest;

/// A target's property: panics when the input breaks it.
pub type Property = fn(&[u8]);

/// Every target, by the name of its binary and corpus folder, with its property.
pub const TARGETS: [(&str, Property); 7] = [
    ("argv", argv),
    ("template_merge", template_merge),
    ("properties", properties),
    ("policy", policy),
    ("agent_body", agent_body),
    ("operator_spec", operator_spec),
    ("submit_body", submit_body),
];

/// The files under `dir`, sorted (none when it does not exist): a target's committed corpus
/// (`fuzz/corpus/<target>`) or its regressions (`fuzz/regressions/<target>`).
pub fn inputs(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|path| path.is_file());
    files.sort();
    files
}

/// The arguments of a small, valid cluster-mode application (before its primary resource).
const BASE_ARGS: [&str; 10] = [
    "--master",
    "k8s://https://kubernetes.default.svc:443",
    "--deploy-mode",
    "cluster",
    "--name",
    "fuzz-app",
    "--class",
    "org.example.Main",
    "--conf",
    "spark.kubernetes.container.image=spark:4.0.0",
];
const PRIMARY: &str = "local:///opt/app.jar";

fn args_with(extra: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut args: Vec<String> = BASE_ARGS.iter().map(|s| (*s).to_owned()).collect();
    args.extend(extra);
    args.push(PRIMARY.to_owned());
    args
}

/// The input as lines (lossy UTF-8).
fn lines(data: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(data)
        .split('\n')
        .map(str::to_owned)
        .collect()
}

fn registry() -> &'static kubesim::resources::Registry {
    static REGISTRY: OnceLock<kubesim::resources::Registry> = OnceLock::new();
    REGISTRY.get_or_init(kubesim::resources::Registry::default)
}

/// Every string in `value`, keys included.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(map) => {
            for (key, item) in map {
                out.push(key.clone());
                strings(item, out);
            }
        }
        other => out.push(other.to_string()),
    }
}

/// The value the API server quotes in a cause's message (`Invalid value: "…"`), read as a JSON
/// string when it is one (label values are quoted that way), else up to the next quote.
fn quoted(message: &str) -> Option<String> {
    let start = message.find('"')?;
    let rest = &message[start..];
    if let Some(Ok(Value::String(value))) = serde_json::Deserializer::from_str(rest)
        .into_iter::<Value>()
        .next()
    {
        return Some(value);
    }
    let end = rest[1..].find('"')?;
    Some(rest[1..=end].to_owned())
}

/// The value at a cause's field path (`spec.containers[0].image`).
fn value_at<'v>(object: &'v Value, field: &str) -> Option<&'v Value> {
    field
        .split('.')
        .flat_map(|part| part.split(['[', ']']))
        .filter(|step| !step.is_empty())
        .try_fold(object, |value, step| match value {
            Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => value.get(step),
        })
}

/// Asserts that kubesim admits every object, or refuses it only for a value the client wrote
/// (`inputs`), or for structure that came from a client's template (`templated`).
fn never_invents(objects: &[Value], inputs: &[String], templated: bool, id: &str) {
    for object in objects {
        let annotations = object.pointer("/metadata/annotations");
        let carried = annotations
            .and_then(|a| a.get(submission::meta::annotations::SUBMISSION_ID))
            .and_then(Value::as_str);
        assert_eq!(
            carried,
            Some(id),
            "an object without the submission id: {object}"
        );
        let (group, _) = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .map(|v| v.rsplit_once('/').unwrap_or(("", v)))
            .unwrap_or(("", ""));
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let rt = registry()
            .find_kind(group, kind)
            .unwrap_or_else(|| panic!("the builder made an unknown kind {group}/{kind}"));
        let mut admitted = object.clone();
        let Err(error) = kubesim::admission::admit_create(&rt, &mut admitted, &|_, _, _, _| true)
        else {
            continue;
        };
        assert!(
            !error.causes.is_empty() || templated,
            "kubesim refused a built {kind} without causes: {} ({object})",
            error.message
        );
        for cause in &error.causes {
            // A field the client left empty is theirs: an empty value
            // (`--conf spark.kubernetes.container.image=`) or an empty key suffix
            // (`--conf spark.kubernetes.driver.secretKeyRef.=s:k` names an env var "").
            let client_empty = value_at(object, &cause.field)
                == Some(&Value::String(String::new()))
                && inputs
                    .iter()
                    .any(|input| input.is_empty() || input.ends_with('=') || input.contains(".="));
            let explained = client_empty
                || match quoted(&cause.message) {
                    Some(value) => inputs.iter().any(|input| input.contains(&value)),
                    None => templated,
                };
            assert!(
                explained,
                "the builder invented a value kubesim refuses: {} {}: {} ({object})",
                cause.field, cause.reason, cause.message
            );
        }
    }
}

/// Builds `args` with the templates and checks [`never_invents`].
fn build_and_check(args: &[String], driver: Option<&Value>, executor: Option<&Value>, id: &str) {
    let Ok(built) = submission::builder::build_from_argv(args, driver, executor, id, 0, "root")
    else {
        return;
    };
    let mut inputs: Vec<String> = args.to_vec();
    for template in [driver, executor].into_iter().flatten() {
        strings(template, &mut inputs);
    }
    never_invents(
        &built.objects,
        &inputs,
        driver.is_some() || executor.is_some(),
        id,
    );
}

/// Target `argv`: the input's lines are the argument vector. Parsing never panics, an argument
/// with a NUL is always refused, and [`never_invents`] holds for what builds.
pub fn argv(data: &[u8]) {
    let args = lines(data);
    let parsed = submission::argv::parse(&args);
    if args.iter().any(|arg| arg.contains('\0')) {
        assert!(parsed.is_err(), "an argument with a NUL was accepted");
        return;
    }
    build_and_check(&args, None, None, "fuzz-argv");
}

/// Target `template_merge`: the input is a driver pod template (YAML or JSON), and the executor
/// template too when its first byte is odd; the arguments are fixed and valid.
pub fn template_merge(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let source: submission::render::TemplateSource = Ok(text.to_owned());
    let executor = data.first().is_some_and(|b| b % 2 == 1);
    let args = args_with([]);
    let rendered = submission::render::render(
        &args,
        Some(&source),
        executor.then_some(&source),
        "fuzz-template",
        0,
        "root",
    );
    let Ok(list) = rendered else {
        return;
    };
    let items = list
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let template: Value = serde_json::from_str(text)
        .or_else(|_| submission_yaml(text))
        .unwrap_or(Value::Null);
    let mut inputs = args.clone();
    strings(&template, &mut inputs);
    inputs.push(text.to_owned());
    never_invents(&items, &inputs, true, "fuzz-template");
}

/// Reads the template the way the builder does, through the pure crate's own entry point.
fn submission_yaml(text: &str) -> Result<Value, ()> {
    submission::template::from_yaml(text, submission::template::TemplateRole::Driver)
        .map_err(|_| ())
}

/// Target `properties`: the input's lines are key, value, key, value…; each pair goes in as
/// `--conf spark.fuzz.KEY=VALUE`. What the builder accepts, its `spark.properties` reads back
/// (java.util.Properties rules) to the very conf the arguments parsed to.
pub fn properties(data: &[u8]) {
    let fields = lines(data);
    let confs: Vec<String> = fields
        .chunks(2)
        .map(|pair| {
            format!(
                "spark.fuzz.{}={}",
                pair[0],
                pair.get(1).map_or("", String::as_str)
            )
        })
        .collect();
    let args = args_with(
        confs
            .iter()
            .flat_map(|conf| ["--conf".to_owned(), conf.clone()]),
    );
    let Ok(parsed) = submission::argv::parse(&args) else {
        return;
    };
    let conf = submission::conf::Submission::from_args(&parsed).conf;
    let Ok(built) =
        submission::builder::build_from_argv(&args, None, None, "fuzz-props", 0, "root")
    else {
        return;
    };
    let text = built
        .objects
        .iter()
        .find_map(|object| object.pointer("/data/spark.properties"))
        .and_then(Value::as_str)
        .expect("the driver's ConfigMap holds spark.properties");
    let read = java_properties(text);
    for (key, value) in conf
        .iter()
        .filter(|(key, _)| key.starts_with("spark.fuzz."))
    {
        assert_eq!(
            read.get(key).map(String::as_str),
            Some(value),
            "{key:?} does not read back from:\n{text}"
        );
    }
}

/// Target `policy`: the input is a policy file.
pub fn policy(data: &[u8]) {
    use submitter::policy::{Policy, PolicyError, Scope};
    let text = String::from_utf8_lossy(data);
    let Ok(policy) = Policy::parse(&text) else {
        return;
    };
    // A YAML identity cannot hold a NUL here: this one is in no entry.
    let stranger = vec!["\0stranger".to_owned()];
    assert_eq!(
        policy.authorize(&stranger, "default", None),
        Err(PolicyError::UnknownIdentity)
    );
    assert_eq!(
        policy.pod_security(&stranger, "default", &[None]),
        submitter::pod_security::Exceptions::baseline()
    );
    let pick = |scope: &Scope, any: &str| match scope {
        Scope::Any => any.to_owned(),
        Scope::Only(names) => names.iter().next().cloned().unwrap_or_default(),
    };
    for rule in policy.rules() {
        let namespace = pick(&rule.namespaces, "some-namespace");
        let account = pick(&rule.service_accounts, "some-account");
        let identities = vec![rule.identity.clone()];
        assert_eq!(
            policy.authorize(&identities, &namespace, Some(&account)),
            Ok(()),
            "{rule:?}"
        );
        assert_eq!(policy.authorize_namespace(&identities, &namespace), Ok(()));
        let granted = policy.pod_security(&identities, &namespace, &[Some(&account)]);
        assert!(
            rule.pod_security.controls.is_subset(&granted.controls),
            "an entry's relaxations are not granted: {rule:?}"
        );
    }
}

/// Target `agent_body`: the input is a `POST /v1/marker` body.
pub fn agent_body(data: &[u8]) {
    use operator::agent::state::{AgentState, CommitRequest, MAX_PAYLOAD_BYTES};
    let Ok(request) = serde_json::from_slice::<CommitRequest>(data) else {
        return;
    };
    let mut state = AgentState::new(3);
    state.restored(None);
    match state.admit_commit(&request) {
        Ok(()) => {
            assert!(request.payload.len() <= MAX_PAYLOAD_BYTES);
            state.commit_landed(request.clone(), 1);
            let marker = state
                .marker_view()
                .expect("a ready agent answers")
                .marker
                .expect("the commit is the latest marker");
            assert_eq!(
                (marker.epoch, marker.seq, marker.payload.as_str()),
                (3, request.seq, request.payload.as_str())
            );
        }
        Err(_) => assert!(request.payload.len() > MAX_PAYLOAD_BYTES),
    }
}

/// Target `operator_spec`: the input is a SparkApplication `spec` (JSON). What the operator
/// turns into arguments, the submitter's parser reads, and [`never_invents`] holds.
pub fn operator_spec(data: &[u8]) {
    use operator::crd::{SparkApplication, SparkApplicationStatus};
    let Ok(spec) = serde_json::from_slice(data) else {
        return;
    };
    let mut app = SparkApplication::new("fuzz", spec);
    app.metadata.namespace = Some("spark".into());
    app.metadata.uid = Some("00000000-0000-4000-8000-000000000001".into());
    app.status = Some(SparkApplicationStatus {
        submission_id: "fuzz-operator-1".into(),
        ..SparkApplicationStatus::default()
    });
    let Ok(plan) = operator::argv::build_args(&app, "k8s://https://10.0.0.1:443") else {
        return;
    };
    let has_nul = plan.args.iter().any(|arg| arg.contains('\0'));
    let text = String::from_utf8_lossy(data).into_owned();
    // The spec parses with invalid UTF-8 inside a field it ignores (serde skips those strings
    // unchecked); a `Value` would not, so the strings are read from the lossy text.
    let mut inputs = vec![text.clone()];
    strings(
        &serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        &mut inputs,
    );
    if let Err(error) = submission::argv::parse(&plan.args) {
        // The submitter may refuse a value the spec holds (a malformed memory size, a primary
        // resource that is not local), as spark-submit would; never one the operator made.
        let text = format!("{error:?}");
        let value = quoted(&text);
        assert!(
            has_nul
                || inputs
                    .iter()
                    .any(|input| text.contains(&format!("{input:?}")))
                || value.is_some_and(|value| inputs.iter().any(|input| input.contains(&value))),
            "the operator made an argv the submitter refuses for no value of the spec: {text} {:?}",
            plan.args
        );
        return;
    }
    inputs.extend(plan.args.iter().cloned());
    let Ok(built) = submission::builder::build_from_argv(
        &plan.args,
        Some(&plan.driver_pod_template),
        Some(&plan.executor_pod_template),
        &plan.submission_id,
        0,
        "root",
    ) else {
        return;
    };
    never_invents(&built.objects, &inputs, true, &plan.submission_id);
}

/// Target `submit_body`: the input is a `POST /api/v1/spark-submit` body.
pub fn submit_body(data: &[u8]) {
    let Ok(request) = serde_json::from_slice::<SubmitRequest>(data) else {
        return;
    };
    build_and_check(
        &request.spark_submit_args,
        request.driver_pod_template.as_ref(),
        request.executor_pod_template.as_ref(),
        &request.submission_id,
    );
}

/// `java.util.Properties.load` over `text`: logical lines (a backslash at the end continues),
/// comments (`#`, `!`), the key up to an unescaped `=`, `:` or whitespace, escapes (`\t`, `\n`,
/// `\r`, `\f`, `\uXXXX`, and `\x` for any other `x`).
pub fn java_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut physical = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line));
    while let Some(first) = physical.next() {
        let mut line = first.trim_start_matches([' ', '\t', '\x0c']).to_owned();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        // An odd number of trailing backslashes continues the line.
        while line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1 {
            line.pop();
            match physical.next() {
                Some(next) => line.push_str(next.trim_start_matches([' ', '\t', '\x0c'])),
                None => break,
            }
        }
        let chars: Vec<char> = line.chars().collect();
        let mut index = 0;
        let mut key = String::new();
        while index < chars.len() {
            let c = chars[index];
            if c == '\\' {
                index = unescape(&chars, index, &mut key);
                continue;
            }
            if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\x0c' {
                break;
            }
            key.push(c);
            index += 1;
        }
        // Skip whitespace, one separator, whitespace.
        while index < chars.len() && matches!(chars[index], ' ' | '\t' | '\x0c') {
            index += 1;
        }
        if index < chars.len() && matches!(chars[index], '=' | ':') {
            index += 1;
        }
        while index < chars.len() && matches!(chars[index], ' ' | '\t' | '\x0c') {
            index += 1;
        }
        let mut value = String::new();
        while index < chars.len() {
            if chars[index] == '\\' {
                index = unescape(&chars, index, &mut value);
            } else {
                value.push(chars[index]);
                index += 1;
            }
        }
        out.insert(key, value);
    }
    out
}

/// Reads the escape at `chars[at]` (a backslash) into `out`; returns the index after it.
fn unescape(chars: &[char], at: usize, out: &mut String) -> usize {
    let Some(&next) = chars.get(at + 1) else {
        return at + 1;
    };
    match next {
        't' => out.push('\t'),
        'n' => out.push('\n'),
        'r' => out.push('\r'),
        'f' => out.push('\x0c'),
        'u' => {
            let hex: String = chars.iter().skip(at + 2).take(4).collect();
            let unit = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
            // Surrogate pairs: Java strings are UTF-16.
            if (0xD800..0xDC00).contains(&unit)
                && chars.get(at + 6) == Some(&'\\')
                && chars.get(at + 7) == Some(&'u')
            {
                let low: String = chars.iter().skip(at + 8).take(4).collect();
                if let Ok(low) = u32::from_str_radix(&low, 16)
                    && (0xDC00..0xE000).contains(&low)
                {
                    let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    return at + 12;
                }
            }
            out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
            return at + 6;
        }
        other => out.push(other),
    }
    at + 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_properties_reads_what_java_writes() {
        let text = "# comment\n\
            a=1\n\
            b = two words\n\
            c\\ d=e\\=f\n\
            long=first \\\n    second\n\
            tab=\\tx\\u00e9\n\
            empty=\n";
        let read = java_properties(text);
        assert_eq!(read["a"], "1");
        assert_eq!(read["b"], "two words");
        assert_eq!(read["c d"], "e=f");
        assert_eq!(read["long"], "first second");
        assert_eq!(read["tab"], "\tx\u{e9}");
        assert_eq!(read["empty"], "");
    }
}
