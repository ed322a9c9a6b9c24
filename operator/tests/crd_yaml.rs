//! The committed CRDs are the ones the code generates. When this fails after a deliberate change
//! to the types, regenerate them: `operator crd` prints all three, separated by `---`; the first
//! document is `operator/crd/sparkapplications.yaml`, the second
//! `operator/crd/scheduledsparkapplications.yaml`, the third `operator/crd/sparkconnects.yaml`
//! (the chart's `crds/` holds the same files).

use std::path::Path;

#[test]
fn committed_crd_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crd/sparkapplications.yaml");
    let committed = std::fs::read_to_string(&path).unwrap();
    let generated = operator::crd::crd_yaml().unwrap();
    assert!(
        committed == generated,
        "{} is stale; regenerate it with `cargo run -p operator -- crd > operator/crd/sparkapplications.yaml`",
        path.display()
    );
}

#[test]
fn committed_scheduled_crd_matches_the_types_and_the_charts_copy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let generated = operator::crd::scheduled_crd_yaml().unwrap();
    for path in [
        dir.join("crd/scheduledsparkapplications.yaml"),
        dir.join(
            "../charts/spark-submitter/crds/scheduledsparkapplications.sparkoperator.k8s.io.yaml",
        ),
    ] {
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(
            committed == generated,
            "{} is stale; regenerate it from `operator crd`",
            path.display()
        );
    }
}

#[test]
fn committed_connect_crd_matches_the_types_and_the_charts_copy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let generated = operator::crd::connect_crd_yaml().unwrap();
    for path in [
        dir.join("crd/sparkconnects.yaml"),
        dir.join("../charts/spark-submitter/crds/sparkconnects.sparkoperator.k8s.io.yaml"),
    ] {
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(
            committed == generated,
            "{} is stale; regenerate it from `operator crd`",
            path.display()
        );
    }
}

#[test]
fn connect_crd_is_kubeflows_v1alpha1_with_its_columns_and_schemaless_templates() {
    let crd: serde_json::Value =
        yaml_serde::from_str(&operator::crd::connect_crd_yaml().unwrap()).unwrap();
    assert_eq!(
        crd["metadata"]["name"],
        "sparkconnects.sparkoperator.k8s.io"
    );
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "sparkconn");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert_eq!(version["subresources"]["status"], serde_json::json!({}));
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["jsonPath"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            ".metadata.creationTimestamp",
            ".status.state",
            ".status.server.podName"
        ]
    );
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut required: Vec<&str> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["executor", "server", "sparkVersion"]);
    for role in ["server", "executor"] {
        let template = &spec["properties"][role]["properties"]["template"];
        assert_eq!(
            template["x-kubernetes-preserve-unknown-fields"], true,
            "{role}"
        );
    }
}

#[test]
fn crd_has_the_printer_columns_of_kubectl_get() {
    let crd: serde_json::Value = yaml_serde::from_str(&operator::crd::crd_yaml().unwrap()).unwrap();
    let version = &crd["spec"]["versions"][0];
    let columns: Vec<(&str, &str)> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["jsonPath"].as_str().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Suspend", ".spec.suspend"),
            ("Status", ".status.applicationState.state"),
            ("Attempts", ".status.executionAttempts"),
            ("Start", ".status.lastSubmissionAttemptTime"),
            ("Finish", ".status.terminationTime"),
            ("Executors", ".status.executorCounts.running"),
            ("Failed Executors", ".status.executorCounts.failed"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    );
    assert_eq!(version["name"], "v1beta2");
    assert_eq!(version["subresources"]["status"], serde_json::json!({}));
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "sparkapp");
}

#[test]
fn crd_keeps_the_template_schemaless_and_the_required_fields_of_v1beta2() {
    let crd: serde_json::Value = yaml_serde::from_str(&operator::crd::crd_yaml().unwrap()).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut required: Vec<&str> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(
        required,
        [
            "driver",
            "executor",
            "mainApplicationFile",
            "sparkVersion",
            "type"
        ]
    );
    for role in ["driver", "executor"] {
        let template = &spec["properties"][role]["properties"]["template"];
        assert_eq!(template["x-kubernetes-preserve-unknown-fields"], true);
    }
}

#[test]
fn crd_subcommand_prints_the_committed_crds() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_operator"))
        .arg("crd")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |file: &str| std::fs::read_to_string(dir.join("crd").join(file)).unwrap();
    let committed = format!(
        "{}---\n{}---\n{}",
        read("sparkapplications.yaml"),
        read("scheduledsparkapplications.yaml"),
        read("sparkconnects.yaml")
    );
    assert!(String::from_utf8(output.stdout).unwrap() == committed);
}

#[test]
fn unknown_subcommand_is_refused() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_operator"))
        .arg("run")
        .output()
        .unwrap();
    assert!(!output.status.success());
}

fn schema() -> serde_json::Value {
    let crd: serde_json::Value = yaml_serde::from_str(&operator::crd::crd_yaml().unwrap()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn the_crd_accepts_the_states_the_widely_used_operator_writes() {
    let schema = schema();
    let states = schema
        .pointer("/properties/status/properties/applicationState/properties/state/enum")
        .and_then(|v| v.as_array())
        .unwrap();
    for state in [
        "",
        "SUSPENDING",
        "SUSPENDED",
        "RESUMING",
        "NEW",
        "COMPLETED",
    ] {
        assert!(states.iter().any(|s| s == state), "{state:?}: {states:?}");
    }
}

#[test]
fn secret_and_config_map_references_may_omit_their_name_as_in_the_widely_used_operators_crd() {
    let schema = schema();
    let env =
        "/properties/spec/properties/driver/properties/env/items/properties/valueFrom/properties";
    for reference in ["secretKeyRef", "configMapKeyRef"] {
        let object = schema
            .pointer(&format!("{env}/{reference}"))
            .unwrap_or_else(|| panic!("{reference} in the schema"));
        let required: Vec<&str> = object["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(required, ["key"], "{reference}");
        assert_eq!(object["properties"]["name"]["default"], "", "{reference}");
    }
    let env_from = "/properties/spec/properties/driver/properties/envFrom/items/properties";
    for reference in ["secretRef", "configMapRef"] {
        let object = schema
            .pointer(&format!("{env_from}/{reference}"))
            .unwrap_or_else(|| panic!("{reference} in the schema"));
        assert!(object.get("required").is_none(), "{reference}: {object}");
    }
    // Such a manifest reads, with the name empty as the API server defaults it.
    let app: operator::crd::SparkApplication = serde_json::from_value(serde_json::json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "pi"},
        "spec": {"type": "Scala", "sparkVersion": "4.0.0", "mainApplicationFile": "local:///a.jar",
                 "driver": {"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"key": "k"}}}]},
                 "executor": {}},
        "status": {"applicationState": {"state": "SUSPENDED"}},
    }))
    .unwrap();
    assert_eq!(
        app.status.unwrap().app_state.state,
        operator::crd::ApplicationStateType::Suspended
    );
}
