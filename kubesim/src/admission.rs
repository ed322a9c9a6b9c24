//! Validation and defaulting of objects on create and update, with the field errors and defaults
//! a real API server gives for the types kubesim serves.

use serde_json::{Map, Value, json};

use crate::api_error::{ApiError, Cause, cause};
use crate::meta::At;
use crate::meta::{self, metadata_mut};
use crate::resources::{NameRule, ResourceType};

mod workloads;

/// Existence check used by admission (group, plural, namespace, name).
pub type Exists<'a> = &'a dyn Fn(&str, &str, &str, &str) -> bool;

/// Validates and defaults a new object; `exists` looks up other objects (service accounts).
pub fn admit_create(
    rt: &ResourceType,
    obj: &mut Value,
    exists: Exists<'_>,
) -> Result<(), ApiError> {
    prune_unknown_fields(rt, obj, None);
    decode_quantities(rt, obj)?;
    let name = meta::name(obj).to_string();
    let mut causes = Vec::new();
    if name.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    } else if let Some(msg) = check_name(rt.name_rule, &name) {
        causes.push(cause(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {}: {msg}", go_quoted(&name)),
        ));
    }
    validate_common(obj, &mut causes);
    validate_kind(rt, obj, &mut causes);
    if !causes.is_empty() {
        return Err(ApiError::invalid(&rt.group, &rt.kind, &name, causes));
    }
    default_kind(rt, obj, None);
    if is_core(rt, "pods") {
        let ns = meta::meta_str(obj, "namespace").to_string();
        let sa = obj
            .at("/spec/serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        if !exists("", "serviceaccounts", &ns, &sa) {
            return Err(ApiError::forbidden(format!(
                "pods \"{name}\" is forbidden: error looking up service account {ns}/{sa}: serviceaccount \"{sa}\" not found"
            )));
        }
    }
    Ok(())
}

/// Validates and defaults a replacement of `current`.
pub fn admit_update(rt: &ResourceType, obj: &mut Value, current: &Value) -> Result<(), ApiError> {
    decode_quantities(rt, obj)?;
    prune_unknown_fields(rt, obj, Some(current));
    let name = meta::name(current).to_string();
    let mut causes = Vec::new();
    validate_common(obj, &mut causes);
    validate_kind(rt, obj, &mut causes);
    if !rt.custom {
        workloads::validate_update(rt, obj, current, &mut causes);
    }
    if (is_core(rt, "configmaps") || is_core(rt, "secrets"))
        && current.get("immutable").and_then(Value::as_bool) == Some(true)
    {
        for field in ["data", "binaryData", "immutable"] {
            if current.get(field) != obj.get(field) {
                causes.push(cause(
                    "FieldValueForbidden",
                    field,
                    "Forbidden: field is immutable when `immutable` is set",
                ));
            }
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&rt.group, &rt.kind, &name, causes));
    }
    default_kind(rt, obj, Some(current));
    if is_core(rt, "pods") && pod_spec_changed_illegally(current, obj) {
        return Err(ApiError::invalid(
            "",
            "Pod",
            &name,
            vec![cause(
                "FieldValueForbidden",
                "spec",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            )],
        ));
    }
    Ok(())
}

/// Quantities of built-in types are decoded into Go's `resource.Quantity`: one that is not a
/// quantity fails the decoding, as a 400, before anything else is looked at.
fn decode_quantities(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if rt.custom || !rt.group.is_empty() {
        return Ok(());
    }
    let lists: Vec<&Value> = match rt.plural.as_str() {
        "resourcequotas" => obj.at("/spec/hard").into_iter().collect(),
        "limitranges" => obj
            .at("/spec/limits")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|item| {
                [
                    "max",
                    "min",
                    "default",
                    "defaultRequest",
                    "maxLimitRequestRatio",
                ]
                .into_iter()
                .filter_map(|f| item.get(f))
            })
            .collect(),
        "pods" => ["initContainers", "containers"]
            .into_iter()
            .filter_map(|f| obj.at(&format!("/spec/{f}")).and_then(Value::as_array))
            .flatten()
            .flat_map(|c| {
                ["requests", "limits"]
                    .into_iter()
                    .filter_map(|f| c.get("resources")?.get(f))
            })
            .collect(),
        _ => Vec::new(),
    };
    let bad = lists
        .iter()
        .filter_map(|l| l.as_object())
        .flat_map(|m| m.values())
        .find_map(|v| match crate::resource_quota::quantity_of(v) {
            Some(_) => None,
            None => Some(
                v.as_str()
                    .map(submission::quantity::Quantity::parse)
                    .and_then(Result::err)
                    .unwrap_or(submission::quantity::ParseQuantityError::Format),
            ),
        });
    match bad {
        None => Ok(()),
        Some(e) => Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}",
            kind = rt.kind,
            version = rt.version
        ))),
    }
}

/// Drops the fields a built-in type does not have, as decoding into the Go type does: the API
/// server never stores them (custom resources are stored as they come). Of a replacement, only
/// what differs from `current` is walked (stored, so pruned already).
fn prune_unknown_fields(rt: &ResourceType, obj: &mut Value, current: Option<&Value>) {
    if rt.custom || !obj.is_object() {
        return;
    }
    obj["apiVersion"] = json!(rt.api_version());
    obj["kind"] = json!(rt.kind);
    match current {
        Some(stored) => crate::protobuf::prune_changed(obj, stored),
        None => {
            crate::protobuf::unknown_fields(obj, true);
        }
    }
}

fn is_core(rt: &ResourceType, plural: &str) -> bool {
    rt.group.is_empty() && rt.plural == plural
}

/// Returns why a name breaks the rule, worded as Kubernetes words it.
pub fn check_name(rule: NameRule, name: &str) -> Option<String> {
    // The character rule of one DNS label; the length limit differs (a subdomain's parts are
    // only bounded by its 253-character total, as in Kubernetes' IsDNS1123Subdomain).
    let part_ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    let label_ok = |s: &str| s.len() <= 63 && part_ok(s);
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                Some("must be no more than 253 characters".into())
            } else if !name.split('.').all(part_ok) {
                Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into())
            } else {
                None
            }
        }
        NameRule::Label => (!label_ok(name)).then(|| {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into()
        }),
        NameRule::Rfc1035Label => (!label_ok(name)
            || !name.starts_with(|c: char| c.is_ascii_lowercase()))
        .then(|| {
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".into()
        }),
        NameRule::Path => {
            (name == "." || name == ".." || name.contains('/') || name.contains('%'))
                .then(|| "may not contain '/' or '%' and may not be '.' or '..'".into())
        }
    }
}

/// Whether a label value is valid (at most 63 chars, alphanumerics with `-_.` inside).
pub fn valid_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric())
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
}

/// Whether a label or annotation key is a valid qualified name (`prefix/name`).
pub fn valid_qualified_name(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(|p| check_name(NameRule::Subdomain, p).is_none())
        && !name.is_empty()
        && valid_label_value(name)
}

fn validate_common(obj: &Value, causes: &mut Vec<Cause>) {
    for (k, v) in meta::labels(obj) {
        if !valid_qualified_name(k) {
            causes.push(cause(
                "FieldValueInvalid",
                "metadata.labels",
                format!("Invalid value: {}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", go_quoted(k)),
            ));
        }
        match v.as_str() {
            Some(s) if valid_label_value(s) => {}
            _ => causes.push(cause(
                "FieldValueInvalid",
                "metadata.labels",
                format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, and must be no more than 63 characters"),
            )),
        }
    }
    if let Some(a) = obj.at("/metadata/annotations").and_then(Value::as_object) {
        for (k, v) in a {
            if !valid_qualified_name(k) || !v.is_string() {
                causes.push(cause(
                    "FieldValueInvalid",
                    "metadata.annotations",
                    format!("Invalid value: {}: annotation keys must be qualified names with string values", go_quoted(k)),
                ));
            }
        }
    }
}

fn validate_kind(rt: &ResourceType, obj: &Value, causes: &mut Vec<Cause>) {
    if rt.custom {
        return;
    }
    workloads::validate(rt, obj, causes);
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => validate_pod(obj, causes),
        ("", "services") => validate_service(obj, causes),
        ("", "configmaps") => {
            for field in ["data", "binaryData"] {
                if let Some(d) = obj.get(field).and_then(Value::as_object) {
                    for (k, v) in d {
                        let key_ok = !k.is_empty()
                            && k.len() <= 253
                            && k.bytes().all(|b| {
                                b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
                            });
                        if !key_ok {
                            causes.push(cause("FieldValueInvalid", format!("{field}[{k}]"), format!("Invalid value: {}: a valid config key must consist of alphanumeric characters, '-', '_' or '.'", go_quoted(k))));
                        }
                        if !v.is_string() {
                            causes.push(cause(
                                "FieldValueInvalid",
                                format!("{field}[{k}]"),
                                "Invalid value: must be a string",
                            ));
                        }
                    }
                }
            }
        }
        ("apiextensions.k8s.io", "customresourcedefinitions")
            if crate::resources::from_crd(obj).is_none() =>
        {
            causes.push(cause(
                "FieldValueRequired",
                "spec",
                "Required value: group, names.plural, names.kind and versions are required",
            ));
        }
        _ => {}
    }
}

fn validate_pod(obj: &Value, causes: &mut Vec<Cause>) {
    let spec = obj.get("spec");
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers {
        None => causes.push(cause(
            "FieldValueRequired",
            "spec.containers",
            "Required value",
        )),
        Some(c) if c.is_empty() => causes.push(cause(
            "FieldValueRequired",
            "spec.containers",
            "Required value",
        )),
        Some(_) => {}
    }
    let volumes: Vec<&str> = spec
        .and_then(|s| s.get("volumes"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        if volumes[..i].contains(v) {
            causes.push(cause(
                "FieldValueDuplicate",
                format!("spec.volumes[{i}].name"),
                format!("Duplicate value: \"{v}\""),
            ));
        }
    }
    let mut names: Vec<String> = Vec::new();
    for field in ["initContainers", "containers"] {
        let Some(list) = spec.and_then(|s| s.get(field)).and_then(Value::as_array) else {
            continue;
        };
        for (i, c) in list.iter().enumerate() {
            let path = format!("spec.{field}[{i}]");
            match c.get("name").and_then(Value::as_str) {
                None | Some("") => causes.push(cause(
                    "FieldValueRequired",
                    format!("{path}.name"),
                    "Required value",
                )),
                Some(n) => {
                    if check_name(NameRule::Label, n).is_some() {
                        causes.push(cause("FieldValueInvalid", format!("{path}.name"), format!("Invalid value: {}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'", go_quoted(n))));
                    }
                    if names.iter().any(|x| x == n) {
                        causes.push(cause(
                            "FieldValueDuplicate",
                            format!("{path}.name"),
                            format!("Duplicate value: \"{n}\""),
                        ));
                    }
                    names.push(n.to_string());
                }
            }
            if c.get("image")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                causes.push(cause(
                    "FieldValueRequired",
                    format!("{path}.image"),
                    "Required value",
                ));
            }
            if let Some(mounts) = c.get("volumeMounts").and_then(Value::as_array) {
                for (j, m) in mounts.iter().enumerate() {
                    let vn = m.get("name").and_then(Value::as_str).unwrap_or("");
                    if !volumes.contains(&vn) {
                        causes.push(cause(
                            "FieldValueNotFound",
                            format!("{path}.volumeMounts[{j}].name"),
                            format!("Not found: \"{vn}\""),
                        ));
                    }
                    if m.get("mountPath")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        causes.push(cause(
                            "FieldValueRequired",
                            format!("{path}.volumeMounts[{j}].mountPath"),
                            "Required value",
                        ));
                    }
                }
            }
            if let Some(env) = c.get("env").and_then(Value::as_array) {
                for (j, e) in env.iter().enumerate() {
                    if e.get("name")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        causes.push(cause(
                            "FieldValueRequired",
                            format!("{path}.env[{j}].name"),
                            "Required value",
                        ));
                    }
                }
            }
        }
    }
    if let Some(p) = spec
        .and_then(|s| s.get("restartPolicy"))
        .and_then(Value::as_str)
        && !matches!(p, "Always" | "OnFailure" | "Never")
    {
        causes.push(cause(
            "FieldValueNotSupported",
            "spec.restartPolicy",
            format!(
                "Unsupported value: \"{p}\": supported values: \"Always\", \"OnFailure\", \"Never\""
            ),
        ));
    }
}

fn validate_service(obj: &Value, causes: &mut Vec<Cause>) {
    let spec = obj.get("spec");
    let headless = spec
        .and_then(|s| s.get("clusterIP"))
        .and_then(Value::as_str)
        == Some("None");
    let ports = spec.and_then(|s| s.get("ports")).and_then(Value::as_array);
    if !headless && ports.is_none_or(Vec::is_empty) {
        causes.push(cause("FieldValueRequired", "spec.ports", "Required value"));
    }
    for (i, p) in ports.into_iter().flatten().enumerate() {
        match p.get("port").and_then(Value::as_i64) {
            Some(1..=65535) => {}
            _ => causes.push(cause(
                "FieldValueInvalid",
                format!("spec.ports[{i}].port"),
                "Invalid value: must be between 1 and 65535, inclusive",
            )),
        }
    }
}

fn default_kind(rt: &ResourceType, obj: &mut Value, current: Option<&Value>) {
    if rt.custom {
        return;
    }
    workloads::default(rt, obj);
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => default_pod(obj),
        ("", "services") => default_service(obj, current),
        ("", "secrets") => default_secret(obj),
        ("", "limitranges") => crate::limit_range::default_limit_range(obj),
        ("", "namespaces") => {
            let name = meta::name(obj).to_string();
            let labels = metadata_mut(obj)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
            if current.is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
            }
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let names = obj.at("/spec/names").cloned().unwrap_or(json!({}));
            let now = meta::now_rfc3339();
            obj["status"] = json!({
                "acceptedNames": names,
                "storedVersions": obj.at("/spec/versions").and_then(Value::as_array)
                    .map(|a| a.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                        .filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>()).unwrap_or_default(),
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
                ],
            });
        }
        _ => {}
    }
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key.to_string()).or_insert(value);
}

fn default_pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    default_pod_spec(spec);
    if obj.get("status").is_none_or(|s| !s.is_object()) {
        obj["status"] = pending_status(obj);
    }
}

/// The status a pod without one is given.
fn pending_status(pod: &Value) -> Value {
    json!({"phase": "Pending", "qosClass": qos_class(pod)})
}

/// What [`admit_update`] makes of the `status` of a write to a pod's status subresource, the
/// rest of the pod being `current`'s (the API server's pod status strategy resets it): the
/// status pruned of unknown fields, or the default status when it is not an object.
///
/// The rest of `admit_update` reads the metadata and spec alone, and on a stored pod's it
/// answers as it did when they were stored: every write that stores a pod's spec or labels
/// passes admission and stores the defaulted spec (defaulting a defaulted spec changes
/// nothing), and the writes that skip admission (deletion) change only finalizers and
/// deletion fields, which admission does not read. So it is not run again; the store's tests
/// and, in debug builds, every pod status write compare this against `admit_update`.
pub fn admit_pod_status(
    rt: &ResourceType,
    status: Option<Value>,
    current: &Value,
) -> Option<Value> {
    let mut status = status;
    if let Some(s) = status.as_mut() {
        let (api_version, stored) = (rt.api_version(), current.get("status"));
        let known =
            crate::protobuf::prune_changed_field(&api_version, &rt.kind, "status", s, stored);
        if !known {
            status = None;
        }
    }
    // Without a spec, defaulting stops before the status (as `default_pod` does).
    if current.get("spec").is_some() && status.as_ref().is_none_or(|s| !s.is_object()) {
        status = Some(pending_status(current));
    }
    status
}

/// The defaults of a pod spec (also of the pod templates of Deployments and ReplicaSets).
fn default_pod_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    set_default(spec, "priority", json!(0));
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    let sa = spec
        .get("serviceAccountName")
        .or_else(|| spec.get("serviceAccount"))
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(sa));
    spec.insert("serviceAccount".into(), json!(sa));
    for field in ["initContainers", "containers"] {
        if let Some(list) = spec.get_mut(field).and_then(Value::as_array_mut) {
            for c in list.iter_mut().filter_map(Value::as_object_mut) {
                let image = c.get("image").and_then(Value::as_str).unwrap_or("");
                let latest = image
                    .rsplit('/')
                    .next()
                    .is_some_and(|last| !last.contains(':') || last.ends_with(":latest"));
                set_default(
                    c,
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                set_default(c, "resources", json!({}));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
    if let Some(vols) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in vols.iter_mut().filter_map(Value::as_object_mut) {
            for src in ["configMap", "secret"] {
                if let Some(s) = v.get_mut(src).and_then(Value::as_object_mut) {
                    set_default(s, "defaultMode", json!(420));
                }
            }
        }
    }
}

/// The pod's QoS class from its containers' requests and limits.
pub(crate) fn qos_class(pod: &Value) -> &'static str {
    let containers = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let req = c.at("/resources/requests").and_then(Value::as_object);
        let lim = c.at("/resources/limits").and_then(Value::as_object);
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for res in ["cpu", "memory"] {
            let l = lim.and_then(|l| l.get(res));
            let r = req.and_then(|r| r.get(res)).or(l);
            if l.is_none() || r != l {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

fn default_service(obj: &mut Value, current: Option<&Value>) {
    let name = meta::name(obj).to_string();
    let ns = meta::meta_str(obj, "namespace").to_string();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    set_default(spec, "ipFamilies", json!(["IPv4"]));
    set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    let ip = current
        .and_then(|c| c.at("/spec/clusterIP"))
        .cloned()
        .or_else(|| spec.get("clusterIP").cloned())
        .unwrap_or_else(|| json!(cluster_ip_for(&ns, &name)));
    spec.insert("clusterIP".into(), ip.clone());
    spec.insert("clusterIPs".into(), json!([ip]));
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                set_default(p, "targetPort", port);
            }
        }
    }
    if obj.get("status").is_none() {
        obj["status"] = json!({"loadBalancer": {}});
    }
}

// A stable address per name inside the Service network (the store moves a taken one on).
fn cluster_ip_for(ns: &str, name: &str) -> String {
    crate::net::addr::service_ip(ns, name, &|_| false)
        .map(|ip| ip.to_string())
        .unwrap_or_default()
}

fn default_secret(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    set_default(map, "type", json!("Opaque"));
    if let Some(Value::Object(sd)) = map.remove("stringData") {
        let data = map.entry("data").or_insert_with(|| json!({}));
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                if let Some(s) = v.as_str() {
                    d.insert(k, json!(crate::base64::encode(s.as_bytes())));
                }
            }
        }
    }
}

fn pod_spec_changed_illegally(current: &Value, proposed: &Value) -> bool {
    let node_changed = {
        let cur = current
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new = proposed
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        !cur.is_empty() && cur != new
    };
    // A missing spec reads as an empty one.
    let empty = serde_json::Map::new();
    let same = match (
        current.get("spec").map(Value::as_object),
        proposed.get("spec").map(Value::as_object),
    ) {
        (Some(Some(a)), Some(Some(b))) => same_mutable_spec(a, b),
        (Some(Some(a)), None) | (None, Some(Some(a))) => same_mutable_spec(a, &empty),
        (None, None) => true,
        _ => current.get("spec") == proposed.get("spec"),
    };
    node_changed || !same
}

/// Whether two pod specs are equal but for the fields an update may change (the deadline,
/// tolerations, grace period, the node binding and container images). Compared in place
/// rather than on stripped copies: every pod status write passes here.
fn same_mutable_spec(
    a: &serde_json::Map<String, Value>,
    b: &serde_json::Map<String, Value>,
) -> bool {
    const MUTABLE: [&str; 4] = [
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
        "nodeName",
    ];
    let fixed = |m: &'_ serde_json::Map<String, Value>| {
        m.keys().filter(|k| !MUTABLE.contains(&k.as_str())).count()
    };
    fixed(a) == fixed(b)
        && a.iter()
            .filter(|(k, _)| !MUTABLE.contains(&k.as_str()))
            .all(|(k, av)| match (k.as_str(), b.get(k)) {
                (_, None) => false,
                ("containers" | "initContainers", Some(bv)) => {
                    match (av.as_array(), bv.as_array()) {
                        (Some(x), Some(y)) => {
                            x.len() == y.len() && x.iter().zip(y).all(|(c, d)| same_but_image(c, d))
                        }
                        _ => av == bv,
                    }
                }
                (_, Some(bv)) => av == bv,
            })
}

/// Whether two containers are equal but for their image.
fn same_but_image(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let others = |m: &'_ serde_json::Map<String, Value>| m.keys().filter(|k| *k != "image").count();
    others(a) == others(b)
        && a.iter()
            .filter(|(k, _)| *k != "image")
            .all(|(k, v)| b.get(k) == Some(v))
}

/// A value in a validation message, quoted as the API server quotes it (Go's `%q`): a key with a
/// backslash or a control character reads back as the key the client sent.
fn go_quoted(value: &str) -> String {
    Value::String(value.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_dns_rules() {
        assert!(check_name(NameRule::Subdomain, "spark-pi.driver").is_none());
        assert!(check_name(NameRule::Subdomain, "Bad_Name").is_some());
        assert!(check_name(NameRule::Rfc1035Label, "1svc").is_some());
        assert!(check_name(NameRule::Label, "a.b").is_some());
        assert!(check_name(NameRule::Subdomain, &"a".repeat(254)).is_some());
        // Spark's pod name for a 100-character app name: long, but a valid subdomain.
        assert!(check_name(NameRule::Subdomain, &"a".repeat(121)).is_none());
        assert!(check_name(NameRule::Label, &"a".repeat(64)).is_some());
    }

    #[test]
    fn an_invalid_key_is_quoted_as_the_api_server_quotes_it() {
        // A backslash in a key the client wrote: the message must name that key, not `ti<CR>`.
        let mut causes = Vec::new();
        validate_common(
            &json!({"metadata": {"labels": {"ti\\r": "batch"}}}),
            &mut causes,
        );
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].message.starts_with(r#"Invalid value: "ti\\r": "#),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn label_values_longer_than_63_are_invalid() {
        assert!(valid_label_value(&"a".repeat(63)));
        assert!(!valid_label_value(&"a".repeat(64)));
        assert!(!valid_label_value("-a"));
        assert!(valid_label_value(""));
    }

    #[test]
    fn pod_gets_defaults_and_qos() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        default_pod(&mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(pod["status"]["qosClass"], "Guaranteed");
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
    }
}
