//! Container environment and command line of real processes, resolved by Kubernetes' rules:
//! `$(VAR)` expansion, `fieldRef`, `configMapKeyRef`, `secretKeyRef` and `envFrom`.

use serde_json::Value;

use crate::base64;
use crate::meta;
use crate::meta::At;

/// Expands `$(VAR)` references the way Kubernetes does (`third_party/forked/golang/expansion`):
/// `$$` is an escaped `$`, an unknown `$(VAR)` is left as written, and a `$` that starts no
/// reference is kept.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let Some(next) = after.chars().next() else {
            // A trailing `$` is literal.
            out.push('$');
            rest = after;
            break;
        };
        match next {
            '$' => {
                out.push('$');
                rest = &after[1..];
            }
            '(' => match after.find(')') {
                Some(close) => {
                    let name = &after[1..close];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            other => {
                out.push('$');
                out.push(other);
                rest = &after[other.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a `fieldRef` or downward API item needs besides the pod object.
#[derive(Debug, Clone, Copy)]
pub struct PodAddrs<'a> {
    /// `status.podIP`.
    pub pod_ip: &'a str,
    /// `status.hostIP`.
    pub host_ip: &'a str,
}

fn bracket_key<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let inner = path
        .strip_prefix(prefix)?
        .strip_prefix('[')?
        .strip_suffix(']')?;
    Some(inner.trim_matches(|c| c == '\'' || c == '"'))
}

fn map_lines(map: Option<&Value>) -> String {
    // The downward API's `key="value"` lines, sorted by key.
    let mut lines: Vec<String> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={:?}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    lines.sort();
    lines.join("\n")
}

/// Resolves a `fieldRef.fieldPath` against the pod.
pub fn field_ref(pod: &Value, path: &str, addrs: PodAddrs<'_>) -> Option<String> {
    let s = |p: &str| pod.at(p).and_then(Value::as_str).map(str::to_string);
    match path {
        "metadata.name" => Some(meta::name(pod).to_string()),
        "metadata.namespace" => Some(meta::meta_str(pod, "namespace").to_string()),
        "metadata.uid" => Some(meta::uid(pod).to_string()),
        "metadata.labels" => Some(map_lines(pod.at("/metadata/labels"))),
        "metadata.annotations" => Some(map_lines(pod.at("/metadata/annotations"))),
        "spec.nodeName" => s("/spec/nodeName"),
        "spec.serviceAccountName" => s("/spec/serviceAccountName"),
        "status.podIP" | "status.podIPs" => Some(addrs.pod_ip.to_string()),
        "status.hostIP" | "status.hostIPs" => Some(addrs.host_ip.to_string()),
        _ => {
            if let Some(k) = bracket_key(path, "metadata.labels") {
                return Some(
                    pod.at("/metadata/labels")
                        .and_then(|l| l.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                );
            }
            bracket_key(path, "metadata.annotations")
                .map(|k| meta::annotation(pod, k).unwrap_or("").to_string())
        }
    }
}

/// Looks up a ConfigMap or Secret of the pod's namespace: (plural, name) → object.
pub type Lookup<'a> = &'a dyn Fn(&str, &str) -> Option<Value>;

/// The string value of a key of a ConfigMap (`data`, then `binaryData`) or Secret (decoded).
pub fn object_key(plural: &str, obj: &Value, key: &str) -> Option<Vec<u8>> {
    if plural == "secrets" {
        return obj
            .get("data")
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .and_then(base64::decode);
    }
    obj.get("data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .map(|s| s.as_bytes().to_vec())
        .or_else(|| {
            obj.get("binaryData")
                .and_then(|d| d.get(key))
                .and_then(Value::as_str)
                .and_then(base64::decode)
        })
}

/// Every key of a ConfigMap or Secret with its bytes.
pub fn object_entries(plural: &str, obj: &Value) -> Vec<(String, Vec<u8>)> {
    let mut keys: Vec<String> = Vec::new();
    for field in ["data", "binaryData"] {
        if let Some(m) = obj.get(field).and_then(Value::as_object) {
            keys.extend(m.keys().cloned());
        }
    }
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| object_key(plural, obj, &k).map(|v| (k, v)))
        .collect()
}

fn kind_word(plural: &str) -> &'static str {
    if plural == "secrets" {
        "secret"
    } else {
        "configmap"
    }
}

fn key_ref(
    r: &Value,
    plural: &str,
    ns: &str,
    lookup: Lookup<'_>,
) -> Result<Option<String>, String> {
    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
    let key = r.get("key").and_then(Value::as_str).unwrap_or("");
    let optional = r.get("optional").and_then(Value::as_bool) == Some(true);
    let Some(obj) = lookup(plural, name) else {
        return if optional {
            Ok(None)
        } else {
            Err(format!("{} \"{name}\" not found", kind_word(plural)))
        };
    };
    match object_key(plural, &obj, key) {
        Some(v) => Ok(Some(String::from_utf8_lossy(&v).into_owned())),
        None if optional => Ok(None),
        None => Err(format!(
            "couldn't find key {key} in {} {ns}/{name}",
            if plural == "secrets" {
                "Secret"
            } else {
                "ConfigMap"
            }
        )),
    }
}

fn set(env: &mut Vec<(String, String)>, k: String, v: String) {
    match env.iter_mut().find(|(n, _)| *n == k) {
        Some(slot) => slot.1 = v,
        None => env.push((k, v)),
    }
}

/// The environment of a container: image env, then `envFrom`, then `env` in order (each `value`
/// expanded against what is defined before it). An error is the `CreateContainerConfigError`
/// message Kubernetes would give.
pub fn resolve_env(
    pod: &Value,
    container: &Value,
    image_env: &[(String, String)],
    lookup: Lookup<'_>,
    addrs: PodAddrs<'_>,
) -> Result<Vec<(String, String)>, String> {
    let ns = meta::meta_str(pod, "namespace");
    let mut env: Vec<(String, String)> = image_env.to_vec();
    for from in container
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = from.get("prefix").and_then(Value::as_str).unwrap_or("");
        for (field, plural) in [("configMapRef", "configmaps"), ("secretRef", "secrets")] {
            let Some(r) = from.get(field) else { continue };
            let name = r.get("name").and_then(Value::as_str).unwrap_or("");
            match lookup(plural, name) {
                Some(obj) => {
                    for (k, v) in object_entries(plural, &obj) {
                        set(
                            &mut env,
                            format!("{prefix}{k}"),
                            String::from_utf8_lossy(&v).into_owned(),
                        );
                    }
                }
                None if r.get("optional").and_then(Value::as_bool) == Some(true) => {}
                None => return Err(format!("{} \"{name}\" not found", kind_word(plural))),
            }
        }
    }
    for e in container
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = e.get("name").and_then(Value::as_str) else {
            continue;
        };
        let value = if let Some(v) = e.get("value").and_then(Value::as_str) {
            let snapshot = env.clone();
            Some(expand(v, &|k| {
                snapshot
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
            }))
        } else if let Some(from) = e.get("valueFrom") {
            if let Some(f) = from.get("fieldRef") {
                let path = f.get("fieldPath").and_then(Value::as_str).unwrap_or("");
                Some(
                    field_ref(pod, path, addrs)
                        .ok_or_else(|| format!("unsupported fieldPath: {path}"))?,
                )
            } else if let Some(r) = from.get("configMapKeyRef") {
                key_ref(r, "configmaps", ns, lookup)?
            } else if let Some(r) = from.get("secretKeyRef") {
                key_ref(r, "secrets", ns, lookup)?
            } else if let Some(r) = from.get("resourceFieldRef") {
                let res = r.get("resource").and_then(Value::as_str).unwrap_or("");
                Some(resource_field(container, res))
            } else {
                None
            }
        } else {
            Some(String::new())
        };
        if let Some(v) = value {
            set(&mut env, name.to_string(), v);
        }
    }
    Ok(env)
}

// Without a limit Kubernetes reports the node's allocatable; kubesim's nodes have 8 CPUs and
// 32Gi, which a simulator may round to whole units.
fn resource_field(container: &Value, resource: &str) -> String {
    let (section, name) = resource.split_once('.').unwrap_or(("limits", resource));
    if let Some(v) = container
        .at(&format!("/resources/{section}/{name}"))
        .and_then(|v| {
            v.as_str()
                .map(str::to_string)
                .or_else(|| Some(v.to_string()))
        })
    {
        return v;
    }
    match name {
        "cpu" => "8".into(),
        "memory" => (32u64 << 30).to_string(),
        _ => "0".into(),
    }
}

/// The argument vector: the container's `command` (or the image's), then its `args`, with
/// `$(VAR)` references in the container's parts expanded against its environment.
pub fn command_line(
    container: &Value,
    image_command: &[String],
    env: &[(String, String)],
) -> Vec<String> {
    let lookup = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let strings = |field: &str| -> Option<Vec<String>> {
        container.get(field).and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| expand(s, &lookup))
                .collect()
        })
    };
    let mut argv = strings("command").unwrap_or_else(|| image_command.to_vec());
    argv.extend(strings("args").unwrap_or_default());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(k: &str) -> Option<String> {
        match k {
            "A" => Some("1".into()),
            "B" => Some("two".into()),
            _ => None,
        }
    }

    #[test]
    fn expansion_follows_kubernetes() {
        let cases = [
            ("$(A)", "1"),
            ("x$(A)y$(B)", "x1ytwo"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$1"),
            ("$(C)", "$(C)"),
            ("$(A", "$(A"),
            ("a$b", "a$b"),
            ("end$", "end$"),
            ("é$(B)é", "étwoé"),
            ("$é", "$é"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, &vars), want, "{input}");
        }
    }

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                            "labels": {"app": "x", "b": "y"}, "annotations": {"a/b": "c"}},
               "spec": {"nodeName": "n1", "serviceAccountName": "sa"}})
    }

    const ADDRS: PodAddrs<'static> = PodAddrs {
        pod_ip: "10.244.0.7",
        host_ip: "127.0.0.1",
    };

    #[test]
    fn field_refs_resolve() {
        let p = pod();
        let cases = [
            ("metadata.name", "p"),
            ("metadata.namespace", "ns"),
            ("metadata.uid", "u1"),
            ("metadata.labels['app']", "x"),
            ("metadata.annotations['a/b']", "c"),
            ("spec.nodeName", "n1"),
            ("spec.serviceAccountName", "sa"),
            ("status.podIP", "10.244.0.7"),
            ("status.hostIP", "127.0.0.1"),
            ("metadata.labels", "app=\"x\"\nb=\"y\""),
        ];
        for (path, want) in cases {
            assert_eq!(field_ref(&p, path, ADDRS).as_deref(), Some(want), "{path}");
        }
        assert_eq!(field_ref(&p, "spec.bogus", ADDRS), None);
    }

    fn lookup(plural: &str, name: &str) -> Option<Value> {
        match (plural, name) {
            ("configmaps", "cm") => Some(json!({"data": {"K": "cmv", "L": "l"}})),
            ("secrets", "s") => Some(json!({"data": {"PASS": crate::base64::encode(b"hunter2")}})),
            _ => None,
        }
    }

    #[test]
    fn env_resolves_in_order() {
        let c = json!({
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
        "env": [
            {"name": "A", "value": "a"},
            {"name": "B", "value": "$(A)-$(CM_K)-$(LATER)"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "PASS"}}},
            {"name": "K", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "K"}}},
            {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "K", "optional": true}}},
            {"name": "LATER", "value": "z"},
            {"name": "IMG", "value": "over"},
        ]});
        let env = resolve_env(&pod(), &c, &[("IMG".into(), "base".into())], &lookup, ADDRS)
            .expect("resolves");
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("B"), Some("a-cmv-$(LATER)"));
        assert_eq!(get("CM_L"), Some("l"));
        assert_eq!(get("POD_IP"), Some("10.244.0.7"));
        assert_eq!(get("PASS"), Some("hunter2"));
        assert_eq!(get("K"), Some("cmv"));
        assert_eq!(get("OPT"), None);
        assert_eq!(get("IMG"), Some("over"));
    }

    #[test]
    fn missing_refs_are_config_errors() {
        let c = json!({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "K"}}}]});
        assert_eq!(
            resolve_env(&pod(), &c, &[], &lookup, ADDRS),
            Err("configmap \"nope\" not found".into())
        );
        let c = json!({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "K"}}}]});
        assert_eq!(
            resolve_env(&pod(), &c, &[], &lookup, ADDRS),
            Err("couldn't find key K in Secret ns/s".into())
        );
    }

    #[test]
    fn command_line_replaces_and_appends() {
        let env = vec![("X".to_string(), "1".to_string())];
        let image = vec!["run".to_string(), "$(X)".to_string()];
        assert_eq!(command_line(&json!({}), &image, &env), vec!["run", "$(X)"]);
        assert_eq!(
            command_line(&json!({"args": ["--x=$(X)", "$$(X)"]}), &image, &env),
            vec!["run", "$(X)", "--x=1", "$(X)"]
        );
        assert_eq!(
            command_line(
                &json!({"command": ["sh", "-c"], "args": ["echo $(X)"]}),
                &image,
                &env
            ),
            vec!["sh", "-c", "echo 1"]
        );
    }
}
