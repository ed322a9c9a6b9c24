use serde_json::json;

use super::*;

fn list(v: Value) -> ResourceList {
    resource_list(Some(&v))
}

fn pod(containers: Value, phase: &str) -> Value {
    json!({"spec": {"containers": containers}, "status": {"phase": phase}})
}

#[test]
fn a_pod_uses_its_containers_requests_and_limits_until_it_ends() {
    let p = pod(
        json!([
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "0.5"}}},
        ]),
        "Running",
    );
    assert_eq!(
        to_json(&usage("", "pods", &p)),
        json!({"count/pods": "1", "pods": "1", "cpu": "1", "requests.cpu": "1",
               "memory": "1Gi", "requests.memory": "1Gi", "limits.cpu": "1"})
    );
    for phase in ["Succeeded", "Failed"] {
        let done = pod(
            json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]),
            phase,
        );
        assert_eq!(
            to_json(&usage("", "pods", &done)),
            json!({"count/pods": "1"}),
            "{phase}"
        );
    }
}

#[test]
fn init_containers_count_at_their_peak_and_sidecars_alongside() {
    let p = json!({"spec": {
        "initContainers": [
            {"name": "big-init", "resources": {"requests": {"cpu": "3"}}},
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        ],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
    }});
    let (requests, _) = pod_resources(&p);
    assert_eq!(requests["cpu"].to_string(), "3");
    let p = json!({"spec": {
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "small-init", "resources": {"requests": {"cpu": "500m"}}},
        ],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}],
    }});
    let (requests, _) = pod_resources(&p);
    assert_eq!(requests["cpu"].to_string(), "3");
}

#[test]
fn objects_count_under_their_count_name_and_core_short_name() {
    let cases = [
        ("", "configmaps", "count/configmaps", true),
        ("", "configmaps", "configmaps", true),
        ("", "secrets", "secrets", true),
        ("", "services", "services", true),
        ("", "persistentvolumeclaims", "persistentvolumeclaims", true),
        ("apps", "deployments", "count/deployments.apps", true),
        ("apps", "deployments", "deployments", false),
        ("", "pods", "requests.memory", true),
        ("", "pods", "cpu", true),
        ("", "pods", "count/pods", true),
        ("", "configmaps", "pods", false),
        ("", "events", "events", false),
    ];
    for (group, plural, resource, want) in cases {
        assert_eq!(
            handles(group, plural, resource),
            want,
            "{group}/{plural} {resource}"
        );
        if want {
            let used = usage(group, plural, &json!({}));
            assert!(
                used.contains_key(resource) || plural == "pods",
                "{plural} uses {resource}: {used:?}"
            );
        }
    }
}

#[test]
fn a_quota_on_compute_needs_every_container_to_set_it() {
    let p = pod(
        json!([
            {"name": "main", "resources": {"requests": {"cpu": "1"}}},
            {"name": "side", "resources": {}},
        ]),
        "Pending",
    );
    let restricted = |names: &[&str]| names.iter().map(|s| s.to_string()).collect();
    let cases: [(&[&str], Result<(), &str>); 4] = [
        (&["pods"], Ok(())),
        (
            &["requests.cpu"],
            Err("must specify requests.cpu for: side"),
        ),
        (
            &["limits.memory", "cpu", "pods"],
            Err("must specify cpu for: side; limits.memory for: main,side"),
        ),
        (&["count/pods"], Ok(())),
    ];
    for (names, want) in cases {
        assert_eq!(
            pod_constraints(&restricted(names), &p),
            want.map_err(str::to_string),
            "{names:?}"
        );
    }
}

#[test]
fn the_check_refuses_with_the_api_servers_text_and_counts_what_it_admits() {
    let hard = list(json!({"pods": "2", "requests.cpu": "1", "requests.memory": "1Gi"}));
    let used = list(json!({"pods": "1", "requests.cpu": "800m", "requests.memory": "512Mi"}));
    let fits = list(json!({"pods": "1", "requests.cpu": "200m", "requests.memory": "512Mi"}));
    let after = check("compute", &hard, &used, &fits).expect("fits exactly");
    assert_eq!(
        to_json(&after),
        json!({"pods": "2", "requests.cpu": "1", "requests.memory": "1Gi"})
    );
    // Only what is exceeded is named: memory still fits.
    let too_much = list(json!({"pods": "1", "requests.cpu": "500m", "requests.memory": "1Mi"}));
    assert_eq!(
        check("compute", &hard, &used, &too_much),
        Err(
            "exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=800m, \
             limited: requests.cpu=1"
                .to_string()
        )
    );
}

#[test]
fn scoped_quotas_are_not_enforced() {
    assert!(is_scope_free(&json!({"spec": {"hard": {"pods": "1"}}})));
    assert!(!is_scope_free(&json!({"spec": {"scopes": ["BestEffort"]}})));
    assert!(!is_scope_free(
        &json!({"spec": {"scopeSelector": {"matchExpressions": []}}})
    ));
}
