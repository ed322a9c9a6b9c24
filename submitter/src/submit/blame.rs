//! Whose a refusal of the API server is: which input a field the API server rejected
//! (400/422) came from, so the client is told the input to fix, the spark-submit arguments
//! (`INVALID_SPARK_SUBMIT_ARGS`) or a pod template (`INVALID_POD_TEMPLATE`); and what a 403
//! `Forbidden` was about ([`forbidden`]): the namespace's quota (retry later), the object's
//! resources (the input must change), or anything else (RBAC, Pod Security, a webhook).
//!
//! The rule, over the rejected object, the templates and the `Status` causes' field paths:
//! - Only the driver pod is built from a template; the Service, NetworkPolicy, PVCs and the
//!   spark-conf ConfigMap come from the arguments. The executor template ConfigMap carries the
//!   executor template.
//! - For the pod: without a driver template, the arguments. With one, each cause is the
//!   template's when the template holds the very value the pod has at that path. Label and
//!   annotation maps are named as a whole by the API server (`metadata.labels`), so there the
//!   entries that are invalid as labels decide: the template's when every invalid entry is the
//!   template's own. A cause is the arguments' otherwise.
//! - The template is blamed only when every cause is the template's; a rejection without causes
//!   blames the template when one was given (it is the free-form input).
//! - A refusal of the pod's resources (a LimitRange, or a quota that needs them stated) names
//!   no field: the template is blamed when it gives some container of the pod a resource
//!   request or limit the pod kept ([`resources_origin`]), else the arguments (the driver's
//!   cores, memory, their limits and overhead).
//!
//! Pure: plain JSON in, an [`Origin`] out.

use serde_json::Value;

/// The input a rejected field came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Arguments,
    Template,
}

/// Where the rejection of `object` (a built object) came from; `fields` are the `Status`
/// causes' field paths (`metadata.labels`, `spec.containers[0].image`).
pub fn origin(
    object: &Value,
    driver_template: Option<&Value>,
    executor_template: Option<&Value>,
    executor_template_config_map: bool,
    fields: &[&str],
) -> Origin {
    if executor_template_config_map && executor_template.is_some() {
        return Origin::Template;
    }
    if object.get("kind").and_then(Value::as_str) != Some("Pod") {
        return Origin::Arguments;
    }
    let Some(template) = driver_template else {
        return Origin::Arguments;
    };
    if fields.is_empty() {
        return Origin::Template;
    }
    let all_template = fields
        .iter()
        .all(|field| from_template(object, template, &pointer(field)));
    if all_template {
        Origin::Template
    } else {
        Origin::Arguments
    }
}

/// What a 403 `Forbidden` of the API server on a create was about. The API server says it only
/// in the message: admission refusals (quota, LimitRange, Pod Security, webhooks) and RBAC all
/// answer reason `Forbidden` with no causes and details naming just the object, so the message
/// after `is forbidden: ` is read, as the ResourceQuota and LimitRanger plugins write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// A ResourceQuota has no room for the object (`exceeded quota: NAME, requested: …, used:
    /// …, limited: …`), or has not counted its usage yet (`status unknown for quota: NAME`):
    /// the same request succeeds once usage goes down or the quota is raised.
    QuotaExceeded,
    /// The object's resources break a LimitRange (`maximum cpu usage per Container is 2, but
    /// limit is 4`), or lack what a quota needs stated (`failed quota: NAME: must specify
    /// limits.cpu for: …`): no retry helps until the request changes.
    Resources,
    /// Anything else: RBAC, Pod Security admission, a webhook.
    Other,
}

/// What the 403 whose `Status` message is `message` was about; see [`Forbidden`].
pub fn forbidden(message: &str) -> Forbidden {
    // `pods "x" is forbidden: …`, `pods is forbidden: …` or `forbidden: …`; resource and name
    // hold no spaces, so the first `forbidden: ` ends the prefix.
    let why = message
        .split_once("forbidden: ")
        .map_or(message, |(_, why)| why)
        .to_ascii_lowercase();
    // Several LimitRange violations come as one aggregate: `[a, b]`.
    let first = why.trim_start_matches('[');
    if first.starts_with("exceeded quota: ") || first.starts_with("status unknown for quota: ") {
        Forbidden::QuotaExceeded
    } else if first.starts_with("failed quota: ")
        || ((first.starts_with("maximum ") || first.starts_with("minimum "))
            && first.contains(" usage per "))
        || first.contains(" max limit to request ratio per ")
    {
        Forbidden::Resources
    } else {
        Forbidden::Other
    }
}

/// Where the resources of `object` that a LimitRange or a quota refused came from (see the
/// module docs): the template when it gives a container of the pod a resource value the pod
/// kept, else the arguments.
pub fn resources_origin(object: &Value, driver_template: Option<&Value>) -> Origin {
    if object.get("kind").and_then(Value::as_str) != Some("Pod") {
        return Origin::Arguments;
    }
    let Some(template) = driver_template else {
        return Origin::Arguments;
    };
    let template = template.get("template").unwrap_or(template);
    let containers = |pod: &Value| -> Vec<Value> {
        ["containers", "initContainers"]
            .iter()
            .filter_map(|list| pod.get("spec")?.get(list)?.as_array().cloned())
            .flatten()
            .collect()
    };
    let built = containers(object);
    let kept = containers(template).into_iter().any(|given| {
        let name = given.get("name").and_then(Value::as_str);
        let Some(built) = built
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == name)
        else {
            return false;
        };
        ["requests", "limits"].iter().any(|kind| {
            let values = |c: &Value| c.get("resources")?.get(kind)?.as_object().cloned();
            let (Some(given), Some(built)) = (values(&given), values(built)) else {
                return false;
            };
            given
                .iter()
                .any(|(resource, value)| built.get(resource) == Some(value))
        })
    });
    if kept {
        Origin::Template
    } else {
        Origin::Arguments
    }
}

/// Whether the value at `path` in the pod is the template's.
fn from_template(pod: &Value, template: &Value, path: &[String]) -> bool {
    let at = |value: &Value| {
        path.iter()
            .try_fold(value, |value, step| match value {
                Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => value.get(step),
            })
            .cloned()
    };
    let template = template.get("template").unwrap_or(template);
    if let Some(origin) = container_from_template(pod, template, path) {
        return origin;
    }
    let (Some(built), Some(given)) = (at(pod), at(template)) else {
        return false;
    };
    if matches!(
        path.last().map(String::as_str),
        Some("labels" | "annotations")
    ) {
        let (Some(built), Some(given)) = (built.as_object(), given.as_object()) else {
            return false;
        };
        let invalid: Vec<_> = built
            .iter()
            .filter(|(key, value)| {
                !valid_label_key(key) || !value.as_str().is_some_and(valid_label_value)
            })
            .collect();
        return !invalid.is_empty()
            && invalid
                .iter()
                .all(|(key, value)| given.get(key.as_str()) == Some(value));
    }
    built == given
}

/// For a path into a container (`spec.containers[1].image`), whether the value is the template's:
/// the built pod orders its containers as Spark does (the driver container first), so the
/// template's container is found by name, not by index; a value both lack (`Required value`)
/// is the template's when the container is the template's own. `None`: not a container path, or
/// no template container of that name.
fn container_from_template(pod: &Value, template: &Value, path: &[String]) -> Option<bool> {
    let [spec, list, index, rest @ ..] = path else {
        return None;
    };
    if spec != "spec" || !matches!(list.as_str(), "containers" | "initContainers") {
        return None;
    }
    let built = pod
        .get("spec")?
        .get(list)?
        .get(index.parse::<usize>().ok()?)?;
    let name = built.get("name").and_then(Value::as_str);
    let given = template
        .get("spec")
        .and_then(|spec| spec.get(list))
        .and_then(Value::as_array)
        .and_then(|containers| {
            containers
                .iter()
                .find(|c| c.get("name").and_then(Value::as_str) == name)
        });
    // Not there by name (e.g. an unnamed template container Spark made the driver's): compare
    // by position as for any other path.
    let given = given?;
    fn at<'v>(value: &'v Value, rest: &[String]) -> Option<&'v Value> {
        rest.iter().try_fold(value, |value, step| match value {
            Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => value.get(step),
        })
    }
    Some(at(built, rest) == at(given, rest))
}

/// `spec.containers[0].image` as path steps: `spec`, `containers`, `0`, `image`.
fn pointer(field: &str) -> Vec<String> {
    field
        .split('.')
        .flat_map(|part| part.split(['[', ']']))
        .filter(|step| !step.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A label value: at most 63 characters, alphanumerics with `-_.` inside, or empty.
fn valid_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric())
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
}

/// A label key: an optional DNS subdomain prefix and `/`, then a non-empty name.
fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let subdomain = |prefix: &str| {
        prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && part.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    };
    prefix.is_none_or(subdomain) && !name.is_empty() && valid_label_value(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_container_is_found_by_name_wherever_the_pod_puts_it() {
        let template = json!({"spec": {"containers": [
            {"name": "spark-kubernetes-driver"},
            {"name": "sidecar"},
            {"name": "Bad_Name", "image": "x"},
        ]}});
        let pod = json!({"kind": "Pod", "spec": {"containers": [
            {"name": "sidecar"},
            {"name": "Bad_Name", "image": "x"},
            {"name": "spark-kubernetes-driver", "image": "spark:4"},
        ]}});
        let blame = |field: &str| origin(&pod, Some(&template), None, false, &[field]);
        assert_eq!(blame("spec.containers[0].image"), Origin::Template);
        assert_eq!(blame("spec.containers[1].name"), Origin::Template);
        // The driver container's image comes from the arguments.
        assert_eq!(blame("spec.containers[2].image"), Origin::Arguments);
    }

    fn pod(labels: Value) -> Value {
        json!({"kind": "Pod", "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "spark-kubernetes-driver", "image": "spark:4"}]}})
    }

    /// (case, object, driver template, is the executor template ConfigMap, cause fields, blamed)
    type Case<'a> = (
        &'a str,
        &'a Value,
        Option<&'a Value>,
        bool,
        &'a [&'a str],
        Origin,
    );

    #[test]
    fn blame_table() {
        let labels = json!({"spark-role": "driver", "team": "bad value!"});
        let template_with_bad = json!({"metadata": {"labels": {"team": "bad value!"}}});
        let template_other = json!({"metadata": {"labels": {"owner": "x"}}});
        let template_image = json!({"spec": {"containers": [{"image": "spark:4"}]}});
        let service = json!({"kind": "Service"});
        let cases: [Case; 8] = [
            (
                "no template",
                &pod(labels.clone()),
                None,
                false,
                &["metadata.labels"],
                Origin::Arguments,
            ),
            (
                "bad label from the template",
                &pod(labels.clone()),
                Some(&template_with_bad),
                false,
                &["metadata.labels"],
                Origin::Template,
            ),
            (
                "bad label from a --conf beside template labels",
                &pod(labels.clone()),
                Some(&template_other),
                false,
                &["metadata.labels"],
                Origin::Arguments,
            ),
            (
                "image the template set",
                &pod(labels.clone()),
                Some(&template_image),
                false,
                &["spec.containers[0].image"],
                Origin::Template,
            ),
            (
                "image the template did not set",
                &pod(labels.clone()),
                Some(&template_other),
                false,
                &["spec.containers[0].image"],
                Origin::Arguments,
            ),
            (
                "no causes with a template",
                &pod(labels.clone()),
                Some(&template_other),
                false,
                &[],
                Origin::Template,
            ),
            (
                "a Service",
                &service,
                Some(&template_other),
                false,
                &["metadata.name"],
                Origin::Arguments,
            ),
            (
                "the executor template ConfigMap",
                &json!({"kind": "ConfigMap"}),
                None,
                true,
                &["data"],
                Origin::Arguments,
            ),
        ];
        for (name, object, template, executor_cm, fields, expected) in cases {
            assert_eq!(
                origin(object, template, None, executor_cm, fields),
                expected,
                "{name}"
            );
        }
        let executor = json!({"spec": {}});
        assert_eq!(
            origin(
                &json!({"kind": "ConfigMap"}),
                None,
                Some(&executor),
                true,
                &["data"]
            ),
            Origin::Template
        );
    }

    #[test]
    fn forbidden_messages_are_told_apart() {
        let cases = [
            (
                r#"pods "d" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=1, limited: pods=1"#,
                Forbidden::QuotaExceeded,
            ),
            (
                r#"configmaps "c" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"#,
                Forbidden::QuotaExceeded,
            ),
            (
                "pods is forbidden: status unknown for quota: compute, resources: pods",
                Forbidden::QuotaExceeded,
            ),
            (
                r#"pods "d" is forbidden: failed quota: compute: must specify limits.cpu for: spark-kubernetes-driver"#,
                Forbidden::Resources,
            ),
            (
                r#"pods "d" is forbidden: maximum cpu usage per Container is 1, but limit is 2"#,
                Forbidden::Resources,
            ),
            (
                r#"pods "d" is forbidden: [Maximum cpu usage per Container is 1, but limit is 2., Minimum memory usage per Pod is 1Gi.  No request is specified.]"#,
                Forbidden::Resources,
            ),
            (
                r#"pods "d" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000."#,
                Forbidden::Resources,
            ),
            (
                r#"pods is forbidden: User "system:serviceaccount:x:y" cannot create resource "pods" in API group "" in the namespace "z""#,
                Forbidden::Other,
            ),
            (
                r#"pods "d" is forbidden: violates PodSecurity "restricted:latest": privileged"#,
                Forbidden::Other,
            ),
            // A quota's name in another position is not a quota refusal.
            (
                r#"pods "exceeded-quota" is forbidden: violates PodSecurity "baseline:latest""#,
                Forbidden::Other,
            ),
        ];
        for (message, expected) in cases {
            assert_eq!(forbidden(message), expected, "{message}");
        }
    }

    #[test]
    fn refused_resources_are_the_templates_only_when_it_set_some_the_pod_kept() {
        let pod = json!({"kind": "Pod", "spec": {"containers": [
            {"name": "spark-kubernetes-driver",
             "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}},
            {"name": "sidecar", "resources": {"limits": {"cpu": "4"}}},
        ]}});
        let sidecar = json!({"spec": {"containers": [
            {"name": "sidecar", "resources": {"limits": {"cpu": "4"}}},
        ]}});
        // Spark replaced the template's driver cpu request with the conf's.
        let overridden = json!({"spec": {"containers": [
            {"name": "spark-kubernetes-driver", "resources": {"requests": {"cpu": "3"}}},
        ]}});
        let no_resources = json!({"spec": {"containers": [{"name": "sidecar"}]}});
        let cases: [(Option<&Value>, Origin); 4] = [
            (None, Origin::Arguments),
            (Some(&sidecar), Origin::Template),
            (Some(&overridden), Origin::Arguments),
            (Some(&no_resources), Origin::Arguments),
        ];
        for (template, expected) in cases {
            assert_eq!(resources_origin(&pod, template), expected, "{template:?}");
        }
        assert_eq!(
            resources_origin(&json!({"kind": "PersistentVolumeClaim"}), Some(&sidecar)),
            Origin::Arguments
        );
    }

    #[test]
    fn label_rules_follow_kubernetes() {
        for (key, ok) in [
            ("team", true),
            ("a.b/c", true),
            ("A/b", false),
            ("/x", false),
            ("x/", false),
        ] {
            assert_eq!(valid_label_key(key), ok, "{key}");
        }
        for (value, ok) in [("", true), ("a-b_c.d", true), ("-a", false), ("a b", false)] {
            assert_eq!(valid_label_value(value), ok, "{value}");
        }
        assert!(!valid_label_value(&"x".repeat(64)));
    }
}
