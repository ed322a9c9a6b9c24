use serde_json::json;

use super::*;

fn range(items: Value) -> Value {
    json!({"metadata": {"name": "limits"}, "spec": {"limits": items}})
}

#[test]
fn a_stored_container_item_gets_its_defaults_from_max_then_default_then_min() {
    let mut lr = range(json!([
        {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
        {"type": "Pod", "max": {"cpu": "4"}},
    ]));
    default_limit_range(&mut lr);
    assert_eq!(lr["spec"]["limits"][0]["default"], json!({"cpu": "2"}));
    assert_eq!(
        lr["spec"]["limits"][0]["defaultRequest"],
        json!({"cpu": "2", "memory": "64Mi"})
    );
    assert!(lr["spec"]["limits"][1].get("default").is_none());
}

#[test]
fn defaults_fill_only_what_a_container_leaves_unset_and_are_noted() {
    let ranges = [range(json!([{"type": "Container",
        "default": {"cpu": "1", "memory": "512Mi"},
        "defaultRequest": {"cpu": "250m", "memory": "256Mi"}}]))];
    let mut pod = json!({"metadata": {"name": "p"}, "spec": {
        "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}],
        "containers": [{"name": "main", "resources": {"requests": {"memory": "128Mi"}}}],
    }});
    apply_defaults(&mut pod, &ranges);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}})
    );
    assert_eq!(
        pod["metadata"]["annotations"][ANNOTATION],
        "LimitRanger plugin set: cpu request for container main; cpu, memory limit for container main"
    );
}

#[test]
fn min_and_max_are_enforced_with_the_plugins_texts() {
    let ranges = [range(json!([
        {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
        {"type": "Pod", "max": {"memory": "1Gi"}},
    ]))];
    let container = |resources: Value| json!({"spec": {"containers": [{"name": "main", "resources": resources}]}});
    let cases = [
        (
            json!({"requests": {"memory": "64Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}),
            Ok(()),
        ),
        (
            json!({"requests": {"memory": "64Mi"}, "limits": {"cpu": "4", "memory": "1Gi"}}),
            Err("maximum cpu usage per Container is 2, but limit is 4"),
        ),
        (
            json!({"requests": {"memory": "64Mi"}, "limits": {"memory": "1Gi"}}),
            Err("maximum cpu usage per Container is 2.  No limit is specified"),
        ),
        (
            json!({"requests": {"memory": "32Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
            Err("minimum memory usage per Container is 64Mi, but request is 32Mi"),
        ),
        (
            json!({"requests": {"memory": "64Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}}),
            Err("maximum memory usage per Pod is 1Gi, but limit is 2Gi"),
        ),
        (
            json!({"limits": {"cpu": "3"}}),
            Err(
                "[minimum memory usage per Container is 64Mi.  No request is specified, \
                 maximum cpu usage per Container is 2, but limit is 3, \
                 maximum memory usage per Pod is 1Gi.  No limit is specified]",
            ),
        ),
    ];
    for (resources, want) in cases {
        assert_eq!(
            validate(&container(resources.clone()), &ranges),
            want.map_err(str::to_string),
            "{resources}"
        );
    }
}
